"""Notebook 01: operations from a vector add to large matmuls, each a point under the measured roofs
(``roofline.measured``)."""
from __future__ import annotations

from course_lib.core import cuda
from course_lib.core.timing import benchmark
from course_lib.launch.elementwise import geometry as elementwise_launch
from course_lib.launch.library import matmul_case, supported_dtypes
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import check_close, experiment, kernel_launch_record, require_passed
from course_lib.measure.profiler import kernels_launched

# --------------------------------------------------------------------------- notebook 01: measured roofline

@experiment("roofline.measured",
            "Operations from vector add to large matmuls, each a point under the measured roofs.",
            matmul_sizes=[64, 128, 256, 512, 1024, 2048, 4096, 8192], matvec_sizes=[4096, 8192],
            matmul_dtypes=["fp32", "bf16"], vector_add_n=1 << 26, samples=25)
def measured_roofline(matmul_sizes: list[int], matvec_sizes: list[int], matmul_dtypes: list[str],
                      vector_add_n: int, samples: int) -> list[Case]:
    import cupy
    import torch

    cases = []
    matmul_dtypes = supported_dtypes(matmul_dtypes)   # e.g. no bf16 tensor cores on a T4
    n = vector_add_n
    a = cupy.random.random(n, dtype=cupy.float32)
    b = cupy.random.random(n, dtype=cupy.float32)
    out = cupy.empty_like(a)
    grid, block = elementwise_launch("vector_add_vec4", n)
    fn = cuda.kernel("elementwise", "vector_add_vec4")
    args = (out, a, b, cupy.int64(n))
    fn(grid, block, args)
    check = check_close(out, a + b, "CuPy elementwise", 0.0)
    t = benchmark(lambda: fn(grid, block, args), samples, flush_l2=True)
    cases.append(require_passed(Case(
        f"vector add, n={n}", {"op": "vector add", "vector_add_n": n}, "elementwise.vector_add_vec4",
        t, n, 12 * n, check, kernel_launch_record(grid, block, "elementwise", "vector_add_vec4"))))
    torch.backends.cuda.matmul.allow_tf32 = False
    for nv in matvec_sizes:
        gen = torch.Generator(device="cuda").manual_seed(1)
        m = torch.rand((nv, nv), device="cuda", generator=gen) - 0.5
        v = torch.rand(nv, device="cuda", generator=gen) - 0.5
        got = torch.mv(m, v)
        check = check_close(cupy.asarray(got.double()), cupy.asarray(torch.mv(m.double(), v.double())),
                             "float64 matrix-vector", 1e-5)
        t = benchmark(lambda: torch.mv(m, v), samples, repeat=20, reference=True)
        cases.append(require_passed(Case(
            f"matrix-vector fp32, n={nv}", {"op": "matvec", "matvec_sizes": nv}, "cublas sgemv (torch.mv)",
            t, 2.0 * nv * nv, 4.0 * (nv * nv + 2 * nv), check,
            extra={"repeat": 20, "kernels": kernels_launched(lambda: torch.mv(m, v))})))
    for dtype in matmul_dtypes:
        for s in matmul_sizes:
            repeat = 20 if s <= 1024 else 1
            cases.append(matmul_case(f"matmul {dtype}, n={s}", dtype, s, s, s, samples, repeat=repeat,
                                      params={"op": "matmul", "matmul_dtypes": dtype, "matmul_sizes": s}))
        cases.append(matmul_case(f"matmul {dtype}, n=64, one call at a time", dtype, 64, 64, 64, samples,
                                  params={"op": "matmul, unqueued", "matmul_dtypes": dtype, "matmul_sizes": 64}))
        cases.append(matmul_case(f"1,024 matmuls {dtype} n=64, batched", dtype, 64, 64, 64, samples, batch=1024,
                                  repeat=20, params={"op": "batched matmul", "matmul_dtypes": dtype}))
    return cases
