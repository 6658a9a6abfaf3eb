"""Library baselines launched through PyTorch: cuBLAS matmuls in every dtype, each checked against a
float64 product. They are cases like the course's kernels, measured in the same run."""
from __future__ import annotations

from course_lib.core.hardware import BYTES_PER_ELEMENT, detect
from course_lib.core.timing import benchmark, host_timed
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import check_close, require_passed
from course_lib.measure.profiler import kernels_launched

MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")


def torch_matmul(dtype: str, m: int, n: int, k: int, batch: int | None = None):
    """(callable, result-getter, reference) for a cuBLAS matmul through PyTorch in ``dtype``."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    gen = torch.Generator(device="cuda").manual_seed(0)
    shape_a = (batch, m, k) if batch else (m, k)
    shape_b = (batch, k, n) if batch else (k, n)
    a32 = torch.rand(shape_a, device="cuda", generator=gen) - 0.5
    b32 = torch.rand(shape_b, device="cuda", generator=gen) - 0.5
    if dtype == "fp8":
        if batch:
            raise ValueError("batched fp8 is not measured")
        a8 = a32.to(torch.float8_e4m3fn)
        b8 = b32.t().contiguous().to(torch.float8_e4m3fn).t()   # column-major B, as cuBLASLt wants
        one = torch.ones((), device="cuda")
        fn = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        ref = a8.double() @ b8.double()
        return fn, ref
    tdt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a, b = a32.to(tdt), b32.to(tdt)
    mm = torch.bmm if batch else torch.mm
    return (lambda: mm(a, b)), mm(a.double(), b.double())


def mm_kernels(a, b) -> list[str]:
    """The CUDA kernels one ``torch.mm(a, b)`` launches, as the PyTorch profiler names them: which of
    cuBLAS's GEMMs a figure is held against."""
    import torch

    return kernels_launched(lambda: torch.mm(a, b))


MATMUL_RTOL = {"fp32": 1e-5, "tf32": 2e-3, "fp16": 2e-3, "bf16": 1e-2, "fp8": 1e-2}


def matmul_case(label: str, dtype: str, m: int, n: int, k: int, samples: int, batch: int | None = None,
                 repeat: int = 1, params: dict | None = None) -> Case:
    import cupy
    import torch

    fn, ref = torch_matmul(dtype, m, n, k, batch)
    got = fn()
    check = check_close(cupy.asarray(got.double()), cupy.asarray(ref), "float64 matmul (cuBLAS)",
                         MATMUL_RTOL[dtype] * max(1.0, k / 1024))
    t = benchmark(fn, samples, repeat=repeat, reference=True)
    # What the host needs to dispatch one call: a call whose GPU time is shorter is launch-bound
    # when it is issued one at a time.
    host = host_timed(fn, samples)
    nb = batch or 1
    b_in = BYTES_PER_ELEMENT[dtype]
    b_out = 2.0 if dtype == "fp8" else b_in
    kernel = {"fp8": "cublasLt fp8 (torch._scaled_mm)"}.get(dtype, f"cublas {dtype} (torch.{'bmm' if batch else 'mm'})")
    launched = kernels_launched(fn)   # before TF32 is switched off again: with it off, tf32's fn runs an FFMA SGEMM
    torch.backends.cuda.matmul.allow_tf32 = False
    return require_passed(Case(
        label, params or {"dtype": dtype, "n": n}, kernel, t, nb * 2.0 * m * n * k,
        nb * (b_in * (m * k + k * n) + b_out * m * n), check,
        extra={"repeat": repeat, "tf32": dtype == "tf32", "shape": [nb, m, n, k],
               "host_dispatch_median_s": host.median_s, "kernels": launched}))


def supported_dtypes(dtypes: list[str]) -> list[str]:
    cc = float(detect().compute_capability)
    floor = {"fp32": 0, "tf32": 8.0, "fp16": 7.0, "bf16": 8.0, "fp8": 8.9}
    return [d for d in dtypes if cc >= floor.get(d, 99)]
