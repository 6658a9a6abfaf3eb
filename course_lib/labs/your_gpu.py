"""Notebook 00: the machine card's measured ceilings, and one kernel timed six ways.

Experiments: ``machine.copy_bandwidth`` (CuPy's copy against the course's copy and vector add),
``machine.matmul_peak`` (cuBLAS per dtype), ``timing.measuring_correctly`` (host timers, events,
a held GPU, many calls per event pair, a CUDA graph, and the cold first call).
"""
from __future__ import annotations

import tempfile
import time

from course_lib.core import cuda
from course_lib.core.timing import benchmark, benchmark_graph, host_timed
from course_lib.launch.elementwise import geometry as elementwise_launch
from course_lib.launch.library import MATMUL_DTYPES, matmul_case, supported_dtypes
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import check_close, experiment, kernel_launch_record, require_passed

# --------------------------------------------------------------------------- machine ceilings

@experiment("machine.copy_bandwidth",
            "Device-to-device copy: CuPy's cudaMemcpy against the course's copy and vector-add kernels.",
            n_bytes=1 << 30, samples=30)
def copy_bandwidth(n_bytes: int, samples: int) -> list[Case]:
    import cupy

    n = n_bytes // 4
    a = cupy.random.random(n, dtype=cupy.float32)
    b = cupy.random.random(n, dtype=cupy.float32)
    out = cupy.empty_like(a)
    cases = []

    def memcpy():
        out.data.copy_from_device_async(a.data, a.nbytes)

    memcpy()
    cases.append(Case("CuPy device-to-device copy", {"n_bytes": n_bytes}, "cudaMemcpyAsync (CuPy)",
                      benchmark(memcpy, samples, flush_l2=True, reference=True), 0, 2 * a.nbytes,
                      check_close(out, a, "source array", 0.0)))
    for kernel, inputs, ref, ops in (
        ("copy", (a,), a, 0), ("copy_vec4", (a,), a, 0),
        ("vector_add", (a, b), None, 1), ("vector_add_vec4", (a, b), None, 1),
    ):
        grid, block = elementwise_launch(kernel, n)
        fn = cuda.kernel("elementwise", kernel)
        args = (out, *inputs, cupy.int64(n))
        out.fill(0)
        fn(grid, block, args)
        reference = ref if ref is not None else a + b
        check = check_close(out, reference, "CuPy elementwise" if ref is None else "source array", 0.0)
        t = benchmark(lambda: fn(grid, block, args), samples, flush_l2=True)
        cases.append(require_passed(Case(
            f"course {kernel}", {"n_bytes": n_bytes}, f"elementwise.{kernel}", t,
            ops * n, (len(inputs) + 1) * a.nbytes, check, kernel_launch_record(grid, block, "elementwise", kernel))))
    return cases


@experiment("machine.matmul_peak",
            "Library (cuBLAS via PyTorch) matmul throughput per dtype at one large square size.",
            n=8192, dtypes=list(MATMUL_DTYPES), samples=25)
def matmul_peak(n: int, dtypes: list[str], samples: int) -> list[Case]:
    bad = set(dtypes) - set(MATMUL_DTYPES)
    if bad:
        raise ValueError(f"unknown dtypes {sorted(bad)}; choose from {MATMUL_DTYPES}")
    return [matmul_case(f"cuBLAS {d} {n}³", d, n, n, n, samples) for d in supported_dtypes(dtypes)]


# --------------------------------------------------------------------------- notebook 00: measuring

@experiment("timing.measuring_correctly",
            "One kernel timed six ways: host timer without and with synchronize, CUDA events on an idle "
            "and on a held GPU, many calls per event pair, a CUDA graph; and the first call with compilation.",
            sizes=[1 << 12, 1 << 24], samples=100, calls_per_sample=100, cold_samples=20)
def measuring_correctly(sizes: list[int], samples: int, calls_per_sample: int, cold_samples: int) -> list[Case]:
    import cupy

    cases = []
    many = calls_per_sample
    for n in sizes:
        a = cupy.random.random(n, dtype=cupy.float32)
        b = cupy.random.random(n, dtype=cupy.float32)
        out = cupy.empty_like(a)
        grid, block = elementwise_launch("vector_add", n)
        fn = cuda.kernel("elementwise", "vector_add")
        args = (out, a, b, cupy.int64(n))
        fn(grid, block, args)
        check = check_close(out, a + b, "CuPy elementwise", 0.0)
        launch = kernel_launch_record(grid, block, "elementwise", "vector_add")
        common = dict(kernel="elementwise.vector_add", flop=n, bytes=12 * n, check=check, launch=launch)
        call = lambda: fn(grid, block, args)  # noqa: E731
        for label, timer, t in (
            ("host timer, no synchronize", "host perf_counter, no synchronize", host_timed(call, samples)),
            ("host timer + synchronize", "host perf_counter + stream synchronize",
             host_timed(call, samples, synchronize=True)),
            ("CUDA events, idle GPU", "cuda-events, GPU idle at the start event",
             benchmark(call, samples, hold=False)),
            ("CUDA events, GPU held", "cuda-events, GPU held busy before the start event",
             benchmark(call, samples)),
            (f"{many} calls per event pair", f"cuda-events around {many} back-to-back calls, GPU idle at start; "
             "per call", benchmark(call, samples, repeat=many, hold=False)),
            (f"CUDA graph of {many} calls", f"cuda-events around one replay of a {many}-call CUDA graph, "
             "GPU held; per call", benchmark_graph(call, many, samples)),
        ):
            cases.append(require_passed(Case(f"{label}, n={n}", {"sizes": n}, samples_s=t,
                                              timer=timer, **common)))
    # The first call of a kernel pays for compiling it: NVRTC, then loading the module.
    n = sizes[-1]
    a = cupy.random.random(n, dtype=cupy.float32)
    b = cupy.random.random(n, dtype=cupy.float32)
    out = cupy.empty_like(a)
    src = cuda.source("elementwise")
    arch = cuda.device_arch()
    cold = []
    for i in range(cold_samples):
        t0 = time.perf_counter()
        # A unique comment defeats every compile cache, so each sample compiles for real.
        cubin, _ = cuda.compile_source(src + f"\n// cold sample {i} {time.time_ns()}\n", arch, use_cache=False)
        with tempfile.NamedTemporaryFile(suffix=".cubin") as tmp:
            tmp.write(cubin)
            tmp.flush()
            f = cupy.RawModule(path=tmp.name).get_function("vector_add")
            f(*elementwise_launch("vector_add", n), (out, a, b, cupy.int64(n)))
            cupy.cuda.get_current_stream().synchronize()
        cold.append(time.perf_counter() - t0)
    check = check_close(out, a + b, "CuPy elementwise", 0.0)
    cases.append(require_passed(Case(
        f"first call (compile + load + launch), n={n}", {"sizes": n}, "elementwise.vector_add", cold, n, 12 * n,
        check, timer="host perf_counter around NVRTC compile, module load, launch and synchronize")))
    return cases


# --------------------------------------------------------------------------- analysis for the notebook (no GPU)

HOST_METHODS = ("CUDA events, GPU held", "CUDA events, idle GPU", "host timer + synchronize")


def host_side_figures(result, small: int = 4096, big: int = 16777216) -> str:
    """The figures of ``timing.measuring_correctly`` that depend on the host's CPU as much as on the GPU (a launch's
    cost, what the launch adds to each method), from this run: the prose teaches their order, this gives their size."""
    def us(method: str, n: int) -> float:
        return result.case(f"{method}, n={n}").median_s * 1e6

    graph = us("CUDA graph of 100 calls", big)
    added = {m: us(m, big) - graph for m in HOST_METHODS}
    return (f"This run ({result.provenance}): the host timer without a synchronize reports "
            f"{us('host timer, no synchronize', small):.1f} µs at n = {small:,} and "
            f"{us('host timer, no synchronize', big):.1f} µs at n = {big:,}. At n = {big:,}, against the graph's "
            f"{graph:.1f} µs: " + ", ".join(f"{m} +{added[m]:.1f} µs ({100 * added[m] / graph:+.0f}%)" for m in HOST_METHODS)
            + f"; the 100-call pair +{us('100 calls per event pair', big) - graph:.1f} µs.")
