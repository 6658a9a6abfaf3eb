"""Named experiments: the same code runs live and is what the recorder records.

``run(name, **params)`` measures now on a GPU (live) or returns the recorded
result for the same experiment and parameters (replay). Either way the result
carries its provenance, and every figure and table says it.
"""
from __future__ import annotations

import datetime as _dt
import functools
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from . import evidence, runtime, session
from .evidence import Case, Check, NotRecorded

@dataclass(frozen=True)
class Experiment:
    name: str
    defaults: dict
    body: Callable[..., list[Case]]
    summary: str


REGISTRY: dict[str, Experiment] = {}


def experiment(name: str, summary: str, **defaults):
    def register(fn):
        REGISTRY[name] = Experiment(name, defaults, fn, summary)
        return fn
    return register


@dataclass
class Result:
    experiment: str
    mode: str                # "live" or "recorded"
    machine: dict
    recorded_at: str
    params: dict
    cases: list[Case]
    # Live on a GPU other than the one the course was recorded on: that GPU's record of the same
    # experiment, which the row builders marked ``beside_reference`` show beside the learner's rows.
    reference: "Result | None" = field(default=None, repr=False, compare=False)

    @property
    def gpu(self) -> str:
        return self.machine["gpu"]

    @property
    def provenance(self) -> str:
        """The label every table and figure built on this result carries."""
        if self.mode == "live":
            label = f"measured on {self.gpu}, {session.utc_label(self.recorded_at)}"
            if self.reference is not None:
                label += f", beside the {self.reference.gpu}'s record ({self.reference.recorded_at[:10]})"
            return label
        return f"recorded on {self.gpu}, {self.recorded_at[:10]}"

    def case(self, name: str) -> Case:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(f"{self.experiment} has no case {name!r}; it has: {', '.join(c.name for c in self.cases)}")

    def to_record(self, command: str) -> dict:
        return {"experiment": self.experiment, "status": "recorded", "recorded_at": self.recorded_at,
                "command": command, "machine": self.machine, "params": self.params,
                "cases": [evidence.case_to_json(c) for c in self.cases]}


def all_experiments() -> dict[str, Experiment]:
    """Every registered experiment: those here and those of each ``course_lib/lab_*.py`` module."""
    import importlib
    import pkgutil

    from . import __path__ as package_path

    for mod in pkgutil.iter_modules(package_path):
        if mod.name.startswith("lab_"):
            importlib.import_module(f"{__package__}.{mod.name}")
    return REGISTRY


def _lookup(name: str) -> Experiment:
    if name not in all_experiments():
        raise KeyError(f"no experiment {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def _normalise(value):
    return list(value) if isinstance(value, tuple) else value


def resolve_params(name: str, **params) -> dict:
    exp = _lookup(name)
    unknown = set(params) - set(exp.defaults)
    if unknown:
        raise TypeError(f"{name} takes {', '.join(exp.defaults) or 'no parameters'}; got {', '.join(sorted(unknown))}")
    return {k: _normalise(params.get(k, v)) for k, v in exp.defaults.items()}


def run(name: str, **params) -> Result:
    """Measure ``name`` now (live) or replay its record (no GPU)."""
    resolved = resolve_params(name, **params)
    if runtime.mode() == "live":
        return run_live(name, resolved)
    return replay(name, resolved)


def machine_manifest() -> dict:
    from .hardware import detect, slug

    env = session.environment()
    info = detect()
    return {"gpu": info.name, "slug": slug(info.name), "compute_capability": info.compute_capability,
            "sm_count": info.sm_count, "l2_bytes": info.l2_bytes,
            "smem_per_sm_bytes": info.smem_per_sm_bytes, "total_memory_bytes": info.total_memory_bytes,
            "driver": env.driver, "cuda_runtime": env.cuda_runtime, "nvrtc": env.nvrtc,
            "cupy": env.cupy, "torch": env.torch, "clocks_mhz": env.clocks_mhz}


def run_live(name: str, resolved: dict) -> Result:
    from . import progress

    exp = _lookup(name)
    machine = machine_manifest()
    before = session.gpu_state()
    with progress.measuring(f"{name} on {machine['gpu']}"):
        cases = exp.body(**resolved)
    # The clock and power at both ends: a run that throttled, or ran far below the maximum clock, shows it.
    machine["gpu_state"] = {"before": before, "after": session.gpu_state()}
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return Result(name, "live", machine, now, resolved, cases, reference_for(name, resolved, machine["slug"]))


def reference_for(name: str, resolved: dict, live_slug: str) -> Result | None:
    """The record of ``name`` on the course's reference GPU (``runtime.replay_gpu()``), to show beside
    a live run on another GPU; None on the reference GPU itself, or where nothing matching was recorded."""
    if live_slug == runtime.replay_gpu():
        return None
    try:
        return replay(name, resolved)
    except NotRecorded:
        return None


def beside_reference(rows_fn: Callable[..., list[dict]]) -> Callable[..., list[dict]]:
    """For a row builder whose first argument is a Result: live on another GPU, each of the learner's
    rows is followed by the reference GPU's recorded row in the same place (a "GPU" column says which),
    so a workshop on an L4 sees its numbers beside the H200's. Otherwise the rows are unchanged."""
    @functools.wraps(rows_fn)
    def with_reference(result, *args, **kwargs):
        rows = rows_fn(result, *args, **kwargs)
        ref = getattr(result, "reference", None)
        if ref is None:
            return rows
        ref_rows = rows_fn(ref, *args, **kwargs)
        mine = [{"GPU": result.gpu, **r} for r in rows]
        theirs = [{"GPU": f"{ref.gpu} (recorded)", **r} for r in ref_rows]
        if len(mine) != len(theirs):   # different variants ran (an older GPU skips some): one block each
            return mine + theirs
        return [row for pair in zip(mine, theirs) for row in pair]
    return with_reference


def beside_reference_figure(figure_fn: Callable[..., object]) -> Callable[..., object]:
    """For a figure builder whose first argument is a Result: live on another GPU it also draws the
    reference GPU's record (its title says "recorded on ..."), after the learner's figure, so the
    notebook shows both. Returns the learner's figure."""
    @functools.wraps(figure_fn)
    def with_reference(result, *args, **kwargs):
        fig = figure_fn(result, *args, **kwargs)
        if getattr(result, "reference", None) is not None:
            figure_fn(result.reference, *args, **kwargs)
        return fig
    return with_reference


def replay(name: str, resolved: dict, gpu_slug: str | None = None) -> Result:
    gpu_slug = gpu_slug or runtime.replay_gpu()
    record = evidence.load(gpu_slug, name)
    recorded = record.get("params", {})
    cases = [evidence.case_from_json(c) for c in record["cases"]]
    for key, want in resolved.items():
        have = recorded.get(key)
        if want == have:
            continue
        if isinstance(want, list) and isinstance(have, list) and set(map(repr, want)) <= set(map(repr, have)):
            cases = [c for c in cases if key not in c.params or c.params[key] in want]
            continue
        raise NotRecorded(
            f"{name} with {key}={want!r} was never measured on {record['machine']['gpu']} "
            f"(recorded: {key}={have!r}). Use a recorded value, or run it on a GPU to measure it.")
    return Result(name, "recorded", record["machine"], record["recorded_at"], resolved, cases)


# --------------------------------------------------------------------------- helpers for bodies

def check_close(got, ref, reference: str, rtol: float, atol: float = 0.0) -> dict:
    """Max |got - ref| against a tolerance scaled to the reference's magnitude."""
    import cupy

    got = cupy.asarray(got, dtype=cupy.float64)
    ref = cupy.asarray(ref, dtype=cupy.float64)
    err = float(cupy.abs(got - ref).max())
    tol = rtol * float(cupy.abs(ref).max()) + atol
    return Check(reference, err, tol).to_json()


def require_passed(case: Case) -> Case:
    if not case.check["passed"]:
        raise AssertionError(f"{case.name}: result differs from {case.check['reference']} "
                             f"(max abs err {case.check['max_abs_err']:.3g} > {case.check['tolerance']:.3g})")
    return case


def launch_record(grid, block, resources, dynamic_smem_bytes: int = 0) -> dict:
    """A case's ``launch`` entry: geometry, and what the compiler gave the kernel."""
    return {"grid": list(grid), "block": list(block), "dynamic_smem_bytes": dynamic_smem_bytes,
            "registers": resources.registers, "static_smem_bytes": resources.static_smem_bytes,
            "spill_store_bytes": resources.spill_store_bytes}


def kernel_launch_record(grid, block, family: str, kernel: str, dynamic_smem_bytes: int = 0) -> dict:
    """``launch_record`` for a course kernel, its resources from NVRTC for the current GPU."""
    from . import cuda

    return launch_record(grid, block, cuda.resources(family, kernel), dynamic_smem_bytes)


def elementwise_launch(kernel: str, n: int) -> tuple[tuple[int], tuple[int]]:
    """The grid each elementwise kernel's header asks for."""
    block = 256
    per_thread = 4 if kernel.endswith("_vec4") else 1
    return ((n // per_thread + block - 1) // block,), (block,)


# --------------------------------------------------------------------------- machine ceilings

@experiment("machine.copy_bandwidth",
            "Device-to-device copy: CuPy's cudaMemcpy against the course's copy and vector-add kernels.",
            n_bytes=1 << 30, samples=30)
def copy_bandwidth(n_bytes: int, samples: int) -> list[Case]:
    import cupy

    from . import cuda
    from .timing import benchmark

    n = n_bytes // 4
    a = cupy.random.random(n, dtype=cupy.float32)
    b = cupy.random.random(n, dtype=cupy.float32)
    out = cupy.empty_like(a)
    cases = []

    def memcpy():
        out.data.copy_from_device_async(a.data, a.nbytes)

    memcpy()
    cases.append(Case("CuPy device-to-device copy", {"n_bytes": n_bytes}, "cudaMemcpyAsync (CuPy)",
                      list(benchmark(memcpy, samples, flush_l2=True).samples_s), 0, 2 * a.nbytes,
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
            f"course {kernel}", {"n_bytes": n_bytes}, f"elementwise.{kernel}", list(t.samples_s),
            ops * n, (len(inputs) + 1) * a.nbytes, check, kernel_launch_record(grid, block, "elementwise", kernel))))
    return cases


MATMUL_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")


def _torch_matmul(dtype: str, m: int, n: int, k: int, batch: int | None = None):
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


_MATMUL_RTOL = {"fp32": 1e-5, "tf32": 2e-3, "fp16": 2e-3, "bf16": 1e-2, "fp8": 1e-2}


def _matmul_case(label: str, dtype: str, m: int, n: int, k: int, samples: int, batch: int | None = None,
                 repeat: int = 1, params: dict | None = None) -> Case:
    import cupy
    import torch

    from .hardware import BYTES_PER_ELEMENT
    from .timing import benchmark, host_timed

    fn, ref = _torch_matmul(dtype, m, n, k, batch)
    got = fn()
    check = check_close(cupy.asarray(got.double()), cupy.asarray(ref), "float64 matmul (cuBLAS)",
                         _MATMUL_RTOL[dtype] * max(1.0, k / 1024))
    t = benchmark(fn, samples, repeat=repeat)
    # What the host needs to dispatch one call: a call whose GPU time is shorter is launch-bound
    # when it is issued one at a time.
    host = host_timed(fn, samples)
    nb = batch or 1
    b_in = BYTES_PER_ELEMENT[dtype]
    b_out = 2.0 if dtype == "fp8" else b_in
    kernel = {"fp8": "cublasLt fp8 (torch._scaled_mm)"}.get(dtype, f"cublas {dtype} (torch.{'bmm' if batch else 'mm'})")
    torch.backends.cuda.matmul.allow_tf32 = False
    return require_passed(Case(
        label, params or {"dtype": dtype, "n": n}, kernel, list(t.samples_s), nb * 2.0 * m * n * k,
        nb * (b_in * (m * k + k * n) + b_out * m * n), check,
        extra={"repeat": repeat, "tf32": dtype == "tf32", "shape": [nb, m, n, k],
               "host_dispatch_median_s": host.median_s}))


def _supported_dtypes(dtypes: list[str]) -> list[str]:
    from .hardware import detect

    cc = float(detect().compute_capability)
    floor = {"fp32": 0, "tf32": 8.0, "fp16": 7.0, "bf16": 8.0, "fp8": 8.9}
    return [d for d in dtypes if cc >= floor.get(d, 99)]


@experiment("machine.matmul_peak",
            "Library (cuBLAS via PyTorch) matmul throughput per dtype at one large square size.",
            n=8192, dtypes=list(MATMUL_DTYPES), samples=25)
def matmul_peak(n: int, dtypes: list[str], samples: int) -> list[Case]:
    bad = set(dtypes) - set(MATMUL_DTYPES)
    if bad:
        raise ValueError(f"unknown dtypes {sorted(bad)}; choose from {MATMUL_DTYPES}")
    return [_matmul_case(f"cuBLAS {d} {n}³", d, n, n, n, samples) for d in _supported_dtypes(dtypes)]


# --------------------------------------------------------------------------- notebook 00: measuring

@experiment("timing.measuring_correctly",
            "One kernel timed six ways: host timer without and with synchronize, CUDA events on an idle "
            "and on a held GPU, many calls per event pair, a CUDA graph; and the first call with compilation.",
            sizes=[1 << 12, 1 << 24], samples=100, calls_per_sample=100, cold_samples=20)
def measuring_correctly(sizes: list[int], samples: int, calls_per_sample: int, cold_samples: int) -> list[Case]:
    import cupy

    from . import cuda
    from .timing import benchmark, benchmark_graph, host_timed

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
            cases.append(require_passed(Case(f"{label}, n={n}", {"sizes": n}, samples_s=list(t.samples_s),
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


# --------------------------------------------------------------------------- notebook 01: measured roofline

@experiment("roofline.measured",
            "Operations from vector add to large matmuls, each a point under the measured roofs.",
            matmul_sizes=[64, 128, 256, 512, 1024, 2048, 4096, 8192], matvec_sizes=[4096, 8192],
            matmul_dtypes=["fp32", "bf16"], vector_add_n=1 << 26, samples=25)
def measured_roofline(matmul_sizes: list[int], matvec_sizes: list[int], matmul_dtypes: list[str],
                      vector_add_n: int, samples: int) -> list[Case]:
    import cupy
    import torch

    from . import cuda
    from .timing import benchmark

    cases = []
    matmul_dtypes = _supported_dtypes(matmul_dtypes)   # e.g. no bf16 tensor cores on a T4
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
        list(t.samples_s), n, 12 * n, check, kernel_launch_record(grid, block, "elementwise", "vector_add_vec4"))))
    torch.backends.cuda.matmul.allow_tf32 = False
    for nv in matvec_sizes:
        gen = torch.Generator(device="cuda").manual_seed(1)
        m = torch.rand((nv, nv), device="cuda", generator=gen) - 0.5
        v = torch.rand(nv, device="cuda", generator=gen) - 0.5
        got = torch.mv(m, v)
        check = check_close(cupy.asarray(got.double()), cupy.asarray(torch.mv(m.double(), v.double())),
                             "float64 matrix-vector", 1e-5)
        t = benchmark(lambda: torch.mv(m, v), samples, repeat=20)
        cases.append(require_passed(Case(
            f"matrix-vector fp32, n={nv}", {"op": "matvec", "matvec_sizes": nv}, "cublas sgemv (torch.mv)",
            list(t.samples_s), 2.0 * nv * nv, 4.0 * (nv * nv + 2 * nv), check, extra={"repeat": 20})))
    for dtype in matmul_dtypes:
        for s in matmul_sizes:
            repeat = 20 if s <= 1024 else 1
            cases.append(_matmul_case(f"matmul {dtype}, n={s}", dtype, s, s, s, samples, repeat=repeat,
                                      params={"op": "matmul", "matmul_dtypes": dtype, "matmul_sizes": s}))
        cases.append(_matmul_case(f"matmul {dtype}, n=64, one call at a time", dtype, 64, 64, 64, samples,
                                  params={"op": "matmul, unqueued", "matmul_dtypes": dtype, "matmul_sizes": 64}))
        cases.append(_matmul_case(f"1,024 matmuls {dtype} n=64, batched", dtype, 64, 64, 64, samples, batch=1024,
                                  repeat=20, params={"op": "batched matmul", "matmul_dtypes": dtype}))
    return cases
