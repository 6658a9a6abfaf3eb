"""Notebook 06's experiments: the fp32 GEMM ladder and the bf16 ``mma.sync`` kernel, each beside cuBLAS,
and what Nsight Compute measures in each rung (``gemm.profile``).

Kernels live in ``kernels/gemm_fp32.cu`` and ``kernels/gemm_bf16.cu``; this module
knows their launch geometry (read from each file's macro defaults, so a
``-D`` option used while tuning cannot drift from what the launch assumes),
runs them on CuPy arrays, checks them against references and times them. The
cuBLAS baselines go through PyTorch in the same run, on the same data.
"""
from __future__ import annotations

import math
import subprocess

from course_lib.core import build_view, cuda
from course_lib.core.cuda import defines_to_options, macro_defaults
from course_lib.core.hardware import detect, spec
from course_lib.core.timing import benchmark, benchmark_interleaved
from course_lib.launch.gemm_bf16 import (
    BF16,
    BF16_MIN_CC,
    COPY_ENGINES,
    bf16_function,
    bf16_geometry,
    require_bf16_mma,
    run_bf16,
    runnable_engines,
)
from course_lib.launch.gemm_fp32 import FP32, LADDER, LADDER_KERNELS, Step, fp32_geometry, run_fp32
from course_lib.launch.library import matmul_case, mm_kernels
from course_lib.launch.operands import (
    bf16_bits_to_float32,
    bf16_tolerance_rel,
    fp32_tolerance,
    random_operand,
    to_bf16_bits,
    torch_view,
)
from course_lib.measure import profiler
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import (
    beside_reference,
    beside_reference_figure,
    check_close,
    experiment,
    kernel_launch_record,
    require_passed,
)
from course_lib.measure.target import Target
from course_lib.models import occupancy, tiling


def _one_call_s(fn) -> float:
    """One call timed with CUDA events: only to decide whether a full measurement fits the budget."""
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) * 1e-3


# --------------------------------------------------------------------------- experiments

@experiment("gemm.fp32_ladder",
            "Square fp32 GEMMs: the eight kernels of the ladder beside cuBLAS fp32 (TF32 off), same run.",
            sizes=[1024, 2048, 4096, 8192], kernels=list(LADDER_KERNELS), samples=25, case_budget_s=3.0)
def fp32_ladder(sizes: list[int], kernels: list[str], samples: int, case_budget_s: float) -> list[Case]:
    import cupy
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    warmup = 2
    cases, last = [], {}
    for n in sorted(sizes):
        a, b = random_operand((n, n), 1), random_operand((n, n), 2)
        c = cupy.empty((n, n), dtype=cupy.float32)
        ta, tb = torch_view(a), torch_view(b)
        ref = cupy.asarray(torch.mm(ta.double(), tb.double()))
        tol = fp32_tolerance(n)
        check = check_close(cupy.asarray(torch.mm(ta, tb)), ref, "float64 matmul (cuBLAS dgemm)", tol)
        t = benchmark(lambda: torch.mm(ta, tb), samples, warmup=warmup, reference=True)  # noqa: F821 (see the del)
        skipped = []
        for kernel in kernels:
            fn = cuda.kernel(FP32, kernel)
            if kernel in last:   # predict from the last size (time ~ n^3) before spending the budget
                n0, t0 = last[kernel]
                if t0 * (n / n0) ** 3 * (samples + warmup) > case_budget_s:
                    skipped.append(kernel)
                    continue
            c.fill(float("nan"))
            run_fp32(kernel, a, b, c, fn)
            kcheck = check_close(c, ref, "float64 matmul (cuBLAS dgemm)", tol)
            once = _one_call_s(lambda: run_fp32(kernel, a, b, c, fn))  # noqa: F821 (see the del)
            last[kernel] = (n, once)
            if once * (samples + warmup) > case_budget_s:
                skipped.append(kernel)
                continue
            timing = benchmark(lambda: run_fp32(kernel, a, b, c, fn),  # noqa: F821 (see the del)
                               samples, warmup=warmup)
            last[kernel] = (n, timing.median_s)
            grid, block = fp32_geometry(kernel, n, n)
            cases.append(require_passed(Case(
                f"{kernel}, n={n}", {"sizes": n, "kernels": kernel}, f"{FP32}.{kernel}", timing,
                2.0 * n ** 3, 4.0 * 3 * n * n, kcheck, kernel_launch_record(grid, block, FP32, kernel))))
        cases.append(require_passed(Case(
            f"cuBLAS fp32, n={n}", {"sizes": n}, "cublas sgemm (torch.mm, TF32 off)", t,
            2.0 * n ** 3, 4.0 * 3 * n * n, check,
            extra={"kernels": mm_kernels(ta, tb), "not_measured": skipped,
                   "why_not_measured": f"predicted {samples + warmup} calls > {case_budget_s} s budget per case"})))
        del a, b, c, ta, tb, ref   # after every call of the closures over them (ruff's F821 cannot tell)
    return cases


@experiment("gemm.bf16_mma",
            "Square bf16 GEMMs: the mma.sync tensor-core kernel, its tiles copied by cp.async and (sm_90+) "
            "by the TMA, beside cuBLAS bf16 (torch.mm); the three timed call by call in turn.",
            sizes=[2048, 4096, 8192], samples=30)
def bf16_mma(sizes: list[int], samples: int) -> list[Case]:
    import cupy
    import torch

    cc = detect().compute_capability
    require_bf16_mma(cc)
    fn = bf16_function()
    cases = []
    for n in sorted(sizes):
        engines = runnable_engines(cc, n, n)
        a, b = to_bf16_bits(random_operand((n, n), 3)), to_bf16_bits(random_operand((n, n), 4))
        c = cupy.empty((n, n), dtype=cupy.uint16)
        ta, tb = torch_view(a), torch_view(b)
        lib = torch.mm(ta, tb)
        exact = torch.mm(ta.double(), tb.double())
        lib_err = float((lib.double() - exact).abs().max())
        ref = cupy.asarray(lib.float())
        checks = {}
        for engine in engines:
            c.fill(0xFFFF)   # NaN bits: an unwritten output fails the check
            run_bf16(a, b, c, fn, copies=engine)
            got = bf16_bits_to_float32(c)
            err64 = float(cupy.abs(got.astype(cupy.float64) - cupy.asarray(exact)).max())
            checks[engine] = (check_close(got, ref, "cuBLAS bf16 (torch.mm)", bf16_tolerance_rel()), err64)
        calls = [lambda: torch.mm(ta, tb)]  # noqa: F821 (see the del)
        calls += [lambda e=e: run_bf16(a, b, c, fn, copies=e) for e in engines]  # noqa: F821 (see the del)
        # Each timed call is held (timing.benchmark_interleaved): no host-side launch time (torch's
        # dispatch, the tensor-map lookup) is timed.
        t_lib, *t_engines = benchmark_interleaved(calls, samples, references=[0])
        grid, block, smem = bf16_geometry(n, n)
        flop, nbytes = 2.0 * n ** 3, 2.0 * 3 * n * n
        cases.append(require_passed(Case(
            f"cuBLAS bf16, n={n}", {"sizes": n}, "cublas bf16 (torch.mm)", t_lib, flop, nbytes,
            check_close(ref, exact, "float64 matmul of the same bf16 inputs", bf16_tolerance_rel()),
            extra={"max_abs_err_vs_float64": lib_err, "kernels": mm_kernels(ta, tb)})))
        for engine, t in zip(engines, t_engines):
            check, err64 = checks[engine]
            cases.append(require_passed(Case(
                f"bf16_gemm_mma ({engine}), n={n}", {"sizes": n, "copies": engine}, f"{BF16}.bf16_gemm_mma",
                t, flop, nbytes, check, kernel_launch_record(grid, block, BF16, "bf16_gemm_mma", smem),
                extra={"max_abs_err_vs_float64": err64, "defines": macro_defaults(BF16), "copies": engine,
                       "timing": "interleaved call by call with cuBLAS and the other copy engine"})))
        del a, b, c, ta, tb, lib, exact   # after every call of the closures over them (ruff's F821 cannot tell)
    return cases


# The bf16 kernel's paths: K or N not a multiple of 8 (element-wise copies, plain loop); aligned with
# edge blocks and a partial last K tile (zero-filled copies, pipelined loop); aligned interior blocks
# over more tiles than stages (unchecked copies, slots reused).
EDGE_SHAPES = [[1, 1, 1], [127, 129, 65], [333, 1000, 77], [1000, 333, 1025], [515, 1027, 258], [256, 384, 512],
               [520, 264, 200]]


@experiment("gemm.edges",
            "Every GEMM kernel on square and non-square shapes that are not multiples of its tile, "
            "checked against float64.",
            shapes=EDGE_SHAPES, samples=20)
def edges(shapes: list[list[int]], samples: int) -> list[Case]:
    import cupy

    cases = []
    cc = detect().compute_capability
    bf16_ok = float(cc) >= BF16_MIN_CC
    for m, n, k in shapes:
        a, b = random_operand((m, k), 5), random_operand((k, n), 6)
        ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
        c = cupy.empty((m, n), dtype=cupy.float32)
        for kernel in LADDER_KERNELS:
            fn = cuda.kernel(FP32, kernel)
            c.fill(float("nan"))
            run_fp32(kernel, a, b, c, fn)
            check = check_close(c, ref, "float64 matmul", fp32_tolerance(k))
            t = benchmark(lambda: run_fp32(kernel, a, b, c, fn), samples, warmup=1)
            grid, block = fp32_geometry(kernel, m, n)
            cases.append(require_passed(Case(
                f"{kernel}, {m}x{n}x{k}", {"shapes": [m, n, k], "kernel": kernel}, f"{FP32}.{kernel}",
                t, 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n), check,
                kernel_launch_record(grid, block, FP32, kernel))))
        if bf16_ok:
            fn = bf16_function()
            ab, bb = to_bf16_bits(a), to_bf16_bits(b)
            exact = bf16_bits_to_float32(ab).astype(cupy.float64) @ bf16_bits_to_float32(bb).astype(cupy.float64)
            cb = cupy.full((m, n), 0xFFFF, dtype=cupy.uint16)   # NaN bits: an unwritten output fails the check
            for engine in runnable_engines(cc, k, n):
                cb.fill(0xFFFF)
                run_bf16(ab, bb, cb, fn, copies=engine)
                check = check_close(bf16_bits_to_float32(cb), exact, "float64 matmul of the bf16 inputs",
                                     bf16_tolerance_rel())
                t = benchmark(lambda: run_bf16(ab, bb, cb, fn, copies=engine), samples, warmup=1)
                grid, block, smem = bf16_geometry(m, n)
                name = f"bf16_gemm_mma ({engine})"
                cases.append(require_passed(Case(
                    f"{name}, {m}x{n}x{k}", {"shapes": [m, n, k], "kernel": name},
                    f"{BF16}.bf16_gemm_mma", t, 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n),
                    check, kernel_launch_record(grid, block, BF16, "bf16_gemm_mma", smem), extra={"copies": engine})))
    return cases


# --------------------------------------------------------------------------- notebook helpers

BF16_STEP = Step(10, "bf16 mma.sync", "bf16_gemm_mma", "tensor cores: mma.sync m16n8k16, ldmatrix, cp.async",
                 "", "", (128, 128, 64), 128, (64, 64), 3)


def step_model_rows() -> list[dict]:
    """Per rung, from the tiling model alone (analytic): tile, threads, reuse at each level."""

    rows = []
    for st in (*LADDER, BF16_STEP):
        bm, bn, bk = st.block
        b = 2.0 if st is BF16_STEP else 4.0
        tm, tn = st.thread_tile
        rows.append({
            "step": f"{st.number} {st.label}", "tile B_M×B_N×B_K": f"{bm}×{bn}×{bk}" if bk else f"{bm}×{bn} (no staging)",
            "threads": st.threads, "outputs/thread": tm * tn // (32 if st is BF16_STEP else 1),
            "stages": st.stages,
            "L2 stage intensity": tiling.stage_intensity(bm, bn, b) if bk else None,
            "register-tile intensity": tiling.register_tile_intensity(tm, tn, b),
            "staging KiB": tiling.staging_bytes(bm, bn, bk, b, st.stages) / 1024 if bk else 0.0})
    return rows


def step_source(kernel: str, arch: str | None = None) -> str:
    """A rung's source for the notebook: the kernel, and for the thin double-buffer wrappers the template too;
    the bf16 kernel as 06 builds it (its other notebooks' branches folded away, ``build_view``)."""
    family = BF16 if kernel == "bf16_gemm_mma" else FP32
    text = cuda.describe(family, kernel, arch)
    if kernel == "bf16_gemm_mma":   # the entry point only picks an instantiation of the body
        src = cuda.source(BF16)
        start = src.index("// The kernel body, compiled three ways")
        end = src.rindex("#endif", start, src.index("// Launch: block (TC_THREADS"))
        # 06's build only: 07's split-K and persistent grids and 08's fused epilogue are folded away
        text = build_view.fold_build(src[start:end].rstrip() + "\n\n" + text, cuda.macros(BF16))
    if kernel.startswith("sgemm_warptile_db"):
        src = cuda.source(FP32)
        start = src.index("// Steps 8 and 9")
        end = src.index("// Step 8: step 7's tile")
        text = src[start:end].rstrip() + "\n\n" + text
    return text


def rung_diff(kernel: str) -> str:
    """What a rung of the fp32 ladder changes: a unified diff of its source against the rung before."""
    import difflib

    i = LADDER_KERNELS.index(kernel)
    if i == 0:
        raise ValueError(f"{kernel} is the first rung: there is nothing before it to compare with")
    before, after = (cuda.kernel_source(FP32, k).splitlines() for k in LADDER_KERNELS[i - 1:i + 1])
    return "\n".join(difflib.unified_diff(before, after, LADDER_KERNELS[i - 1], kernel, lineterm="", n=1))


def _target_budget(gpu_name: str | None = None):
    try:
        return occupancy.budget(spec(gpu_name)) if gpu_name else occupancy.budget_from_device(detect())
    except KeyError:
        return occupancy.budget_from_device(detect())


def resources_rows(gpu_name: str, arch: str | None = None) -> list[dict]:
    """Per rung: registers, shared memory and spills from the compiler (NVRTC), residency from the model."""

    arch = arch or cuda.target_arch()
    budget = _target_budget(gpu_name)
    rows = []
    for st in (*LADDER, BF16_STEP):
        family = BF16 if st is BF16_STEP else FP32
        r = cuda.resources(family, st.kernel, arch)
        threads = st.threads if st is BF16_STEP else math.prod(fp32_geometry(st.kernel, 1, 1)[1])
        dyn = bf16_geometry(1, 1)[2] if st is BF16_STEP else 0
        res = occupancy.residency(budget, threads, r.registers, r.static_smem_bytes + dyn)
        rows.append({"step": f"{st.number} {st.label}", "kernel": st.kernel, "threads": threads,
                     "registers": r.registers, "shared KiB": (r.static_smem_bytes + dyn) / 1024,
                     "spilled bytes": r.spill_store_bytes, "blocks/SM": res.resident_blocks,
                     "limited by": res.limiter, "occupancy %": 100 * res.occupancy})
    return rows


def _cublas(result, n):
    return next(c for c in result.cases if c.kernel.startswith("cublas") and c.params["sizes"] == n)


@beside_reference
def ladder_rows(result) -> list[dict]:
    """Rung x size: GFLOP/s and % of the same run's cuBLAS; cells never measured say so."""
    sizes = sorted({c.params["sizes"] for c in result.cases})
    by = {(c.params.get("kernels"), c.params["sizes"]): c for c in result.cases}
    rows = []
    for st in LADDER:
        row = {"step": f"{st.number} {st.label}"}
        for n in sizes:
            c, ref = by.get((st.kernel, n)), _cublas(result, n)
            row[f"GFLOP/s n={n}"] = c.flop_per_s / 1e9 if c else "not measured"
            row[f"% cuBLAS n={n}"] = 100 * c.flop_per_s / ref.flop_per_s if c else "—"
        rows.append(row)
    rows.append({"step": "cuBLAS fp32 (TF32 off)", **{k: v for n in sizes for k, v in (
        (f"GFLOP/s n={n}", _cublas(result, n).flop_per_s / 1e9), (f"% cuBLAS n={n}", 100.0))}})
    return rows


def not_measured(result) -> list[str]:
    """Sentences naming every (rung, size) the run left out, and why."""
    out = []
    for c in result.cases:
        if c.kernel.startswith("cublas") and c.extra.get("not_measured"):
            out.append(f"n={c.params['sizes']}: {', '.join(c.extra['not_measured'])} not measured "
                       f"({c.extra.get('why_not_measured', '')})")
    return out


@beside_reference_figure
def ladder_figure(result):
    """The ladder: GFLOP/s per rung, one line per size, cuBLAS as a dashed line per size."""
    import matplotlib.pyplot as plt

    sizes = sorted({c.params["sizes"] for c in result.cases})
    by = {(c.params.get("kernels"), c.params["sizes"]): c for c in result.cases}
    fig, ax = plt.subplots(figsize=(9, 5))
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2"]
    for n, colour in zip(sizes, colours):
        pts = [(st.number, by[(st.kernel, n)].flop_per_s / 1e9) for st in LADDER if (st.kernel, n) in by]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=colour, label=f"n = {n}")
        ax.axhline(_cublas(result, n).flop_per_s / 1e9, color=colour, ls="--", lw=1, alpha=0.7)
    ax.set_yscale("log")
    ax.set_xticks([st.number for st in LADDER])
    ax.set_xticklabels([f"{st.number}. {st.label}" for st in LADDER], fontsize=8, rotation=25, ha="right")
    ax.set_ylabel("GFLOP/s (log scale)")
    ax.plot([], [], ls="--", color="grey", lw=1, label="cuBLAS fp32, TF32 off (dashed, colour = n)")
    ax.set_xlabel("step of the ladder")
    ax.set_title(f"fp32 GEMM ladder, square n×n×n: {result.provenance}", fontsize=10)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


@beside_reference
def bf16_rows(result) -> list[dict]:
    """Per size: cuBLAS, and the mma.sync kernel with each copy engine that was measured."""
    sizes = sorted({c.params["sizes"] for c in result.cases})
    rows = []
    for n in sizes:
        lib = result.case(f"cuBLAS bf16, n={n}")
        row = {"n": n, "cuBLAS TFLOP/s": lib.flop_per_s / 1e12}
        for engine in COPY_ENGINES:
            mine = [c for c in result.cases if c.params["sizes"] == n and c.params.get("copies") == engine]
            if mine:
                row[f"{engine} TFLOP/s"] = mine[0].flop_per_s / 1e12
                row[f"{engine} % of cuBLAS"] = 100 * mine[0].flop_per_s / lib.flop_per_s
                row[f"{engine} max |err| / tol"] = mine[0].check["max_abs_err"] / mine[0].check["tolerance"]
        rows.append(row)
    return rows


@beside_reference
def edges_rows(result) -> list[dict]:
    """Kernel x shape: error over tolerance (passed when <= 1)."""
    shapes = []
    for c in result.cases:
        if c.params["shapes"] not in shapes:
            shapes.append(c.params["shapes"])
    rows = []
    bf16_names = sorted({c.params["kernel"] for c in result.cases if c.params["kernel"].startswith("bf16")})
    for kernel in [*LADDER_KERNELS, *bf16_names]:
        cs = {tuple(c.params["shapes"]): c for c in result.cases if c.params["kernel"] == kernel}
        if not cs:
            continue
        row = {"kernel": kernel}
        for m, n, k in shapes:
            c = cs.get((m, n, k))
            row[f"{m}×{n}×{k}"] = (f"{c.check['max_abs_err'] / c.check['tolerance']:.2g} ✔" if c and c.check["passed"]
                                   else "✘" if c else "—")
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- the profile of every rung (ncu)

STALLS = ("long_scoreboard", "barrier", "mio_throttle", "short_scoreboard", "math_pipe_throttle", "wait",
          "not_selected", "lg_throttle")
STALL_WORDS = {"long_scoreboard": "waiting for a global load", "barrier": "waiting at a barrier",
               "mio_throttle": "shared-memory queue full", "short_scoreboard": "waiting for a shared load",
               "math_pipe_throttle": "math pipe busy", "wait": "fixed instruction latency",
               "not_selected": "ready, another warp issued", "lg_throttle": "global-memory queue full"}
METRICS = ["gpu__time_duration.sum",
           "sm__warps_active.avg.pct_of_peak_sustained_active",
           "smsp__issue_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
           "lts__t_bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           *(f"smsp__warp_issue_stalled_{s}_per_warp_active.pct" for s in STALLS)]
NO_GROUPING = {"TC_GROUP_M": 1}   # block rows taken one after another: each row of blocks streams all of B


def _variants(n: int, kernels: list[str], bf16: list[list]) -> list[dict]:
    return [{"kernel": k, "n": n} for k in kernels] + [
        {"kernel": "bf16_gemm_mma", "copies": c, "grouped": bool(g), "n": size} for c, g, size in bf16]


def _function(v: dict):
    if v["kernel"] != "bf16_gemm_mma":
        return cuda.kernel(FP32, v["kernel"])
    return cuda.compile_family(BF16, None, defines_to_options(None if v["grouped"] else NO_GROUPING)).function(
        "bf16_gemm_mma")


class _Operands(dict):
    """A, B (fp32 and bf16 bits) and the outputs for each size, made once."""

    def __missing__(self, n: int):
        import cupy

        a, b = random_operand((n, n), 31), random_operand((n, n), 32)
        self[n] = (a, b, to_bf16_bits(a), to_bf16_bits(b), cupy.empty((n, n), dtype=cupy.float32),
                   cupy.empty((n, n), dtype=cupy.uint16))
        return self[n]


def _launch(v: dict, fn, operands: _Operands) -> None:
    a, b, a16, b16, c32, c16 = operands[v["n"]]
    if v["kernel"] == "bf16_gemm_mma":
        run_bf16(a16, b16, c16, fn, None if v["grouped"] else NO_GROUPING, v["copies"])
    else:
        run_fp32(v["kernel"], a, b, c32, fn)


def profile_launches(variants: list[dict]) -> None:
    """Each variant launched once, in order: what ncu profiles for ``gemm.profile``."""
    import cupy

    operands = _Operands()
    for v in variants:
        _launch(v, _function(v), operands)
    cupy.cuda.Device().synchronize()


@experiment("gemm.profile",
            "Every rung of the fp32 ladder and the bf16 mma.sync kernel (cp.async, TMA, and the TMA without the "
            "grouped tile order, at two sizes; compute capability 8.0+): checked, timed, then profiled once each "
            "by Nsight Compute.",
            n=4096, kernels=[s.kernel for s in LADDER],
            bf16=[["cp.async", 1, 4096], ["tma", 1, 4096], ["tma", 0, 4096], ["tma", 1, 8192], ["tma", 0, 8192]],
            samples=20)
def profile(n: int, kernels: list[str], bf16: list[list], samples: int) -> list[Case]:
    import cupy
    import torch

    info = detect()
    bf16_runs = float(info.compute_capability) >= BF16_MIN_CC   # below it the fp32 rungs are profiled alone
    variants = [v for v in _variants(n, kernels, bf16) if v["kernel"] != "bf16_gemm_mma"
                or (bf16_runs and v["copies"] in runnable_engines(info.compute_capability, v["n"], v["n"]))]
    operands = _Operands()
    torch.backends.cuda.matmul.allow_tf32 = False
    cases, refs = [], {}
    for v in variants:
        fn, size = _function(v), v["n"]
        bf = v["kernel"] == "bf16_gemm_mma"
        a, b, a16, b16, c32, c16 = operands[size]
        if (size, bf) not in refs:
            refs[size, bf] = cupy.asarray(torch.mm(torch_view(a16), torch_view(b16)).float() if bf
                                          else torch.mm(torch_view(a).double(), torch_view(b).double()))
        (c16 if bf else c32).fill(0xFFFF if bf else float("nan"))
        _launch(v, fn, operands)
        check = (check_close(bf16_bits_to_float32(c16), refs[size, bf], "cuBLAS bf16 (torch.mm)", bf16_tolerance_rel())
                 if bf else check_close(c32, refs[size, bf], "float64 matmul (cuBLAS dgemm)", fp32_tolerance(size)))
        t = benchmark(lambda: _launch(v, fn, operands), samples, warmup=1)
        if bf:
            grid, block, smem = bf16_geometry(size, size, None if v["grouped"] else NO_GROUPING)
            launch = kernel_launch_record(grid, block, BF16, "bf16_gemm_mma", smem)
            label = f"bf16_gemm_mma ({v['copies']}{', tiles in row order' if not v['grouped'] else ''})"
            bytes_per = 2
        else:
            grid, block = fp32_geometry(v["kernel"], size, size)
            launch, label, bytes_per = kernel_launch_record(grid, block, FP32, v["kernel"]), v["kernel"], 4
        cases.append(require_passed(Case(
            f"{label}, n={size}", v, f"{BF16 if bf else FP32}.{v['kernel']}", t, 2.0 * size ** 3,
            3.0 * bytes_per * size * size, check, launch, extra={"element_bytes": bytes_per, "n": size})))
    profiler.attach_profiles(cases, Target(profile_launches, (variants,)), METRICS, "^(sgemm_.*|bf16_gemm_mma)$",
                             [v["kernel"] for v in variants], timeout_s=480)
    return cases


def profile_cublas(dtypes: list[str], n: int) -> None:
    """What runs under ncu for ``gemm.cublas_profile``: one cuBLAS product per dtype (TF32 off), after its
    operands (filled on the GPU; no float64 reference, which ncu would replay too)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    for dtype in dtypes:
        tdt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        a, b = (torch.rand((n, n), device="cuda", dtype=tdt) for _ in range(2))
        torch.mm(a, b)
    torch.cuda.synchronize()


@experiment("gemm.cublas_profile",
            "cuBLAS's own fp32 (TF32 off) and bf16 GEMMs at n x n x n, timed, then profiled by Nsight Compute with "
            "the ladder's metrics: what the library's kernel does that the ladder's top rungs do not.",
            n=4096, dtypes=["fp32", "bf16"], samples=20)
def cublas_profile(n: int, dtypes: list[str], samples: int) -> list[Case]:
    cases = [matmul_case(f"cuBLAS {d}, n={n}", d, n, n, n, samples, params={"dtype": d, "n": n}) for d in dtypes]
    try:
        # every kernel of the child (the operands' fills too): each product's GEMM is picked by the name the
        # PyTorch profiler gave it in the timed run
        profiles = profiler.ncu_metrics(Target(profile_cublas, (dtypes, n)), METRICS, timeout_s=300)
    except (profiler.ProfilerUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        for c in cases:
            c.extra["ncu_unavailable"] = str(exc)
        return cases
    for c in cases:
        launched = [p for p in profiles if any(p.function == k or p.function in k for k in c.extra["kernels"])]
        # the product's main kernel: one with gemm in its name where cuBLAS launched more than one (a split-K reduce)
        gemm = [p for p in launched if "gemm" in p.function.lower()] or launched
        if gemm:
            c.extra.update(ncu=gemm[-1].metrics, ncu_kernel=gemm[-1].function,
                           ncu_command=profiler.command_line(METRICS), ncu_version=profiler.ncu_version())
        else:
            c.extra["ncu_unavailable"] = (f"none of the profiled kernels ({sorted({p.function for p in profiles})}) "
                                          f"is the one the product launched ({c.extra['kernels']})")
    return cases


def _tile(case: Case) -> tuple[int, int]:
    """The block tile (B_M, B_N) a case's kernel loads from L2 (B_K 0 rungs: one output per thread)."""
    if case.params["kernel"] == "bf16_gemm_mma":
        d = macro_defaults(BF16)
        return d["TC_BM"], d["TC_BN"]
    step = next(s for s in LADDER if s.kernel == case.params["kernel"])
    return step.block[:2] if step.block[2] else (1, 1)


def model_l2_bytes(case: Case) -> float:
    """Analytic: the bytes a grid's blocks load from L2 when each reads its own tiles of A and B once
    per K step and nothing is reused across blocks: M·N·K·b·(1/B_N + 1/B_M) (rungs without staging:
    every multiply-add loads both operands, 2·M·N·K·b), plus C written once."""
    n, b = case.extra["n"], case.extra["element_bytes"]
    bm, bn = _tile(case)
    return n ** 3 * b * (1 / bn + 1 / bm) + n * n * b


def _label(case: Case) -> str:
    if case.kernel.startswith("cublas"):
        return f"{case.name} ({case.extra.get('ncu_kernel', '?')})"
    if case.params["kernel"] != "bf16_gemm_mma":
        step = next(s for s in LADDER if s.kernel == case.params["kernel"])
        return f"{step.number} {step.label}"
    return case.name.replace("bf16_gemm_mma", "bf16 mma.sync")


def _stall_share(m: dict, stall: str) -> float:
    """The share of warp cycles (%) a launch's warps spent stalled for ``stall`` (0 if ncu gave none)."""
    return m[f"smsp__warp_issue_stalled_{stall}_per_warp_active.pct"] or 0.0


def _ranked_stalls(m: dict) -> list[str]:
    return sorted(STALLS, key=lambda s: -_stall_share(m, s))


def _conflict_share(m: dict) -> float | None:
    """Bank-conflict wavefronts over all shared wavefronts, or None for a launch with none."""
    wavefronts = m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]
    return m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] / wavefronts if wavefronts else None


@beside_reference
def stall_rows(result) -> list[dict]:
    """Per kernel: time, achieved occupancy, issue and pipe activity, and the two largest stall reasons."""
    rows = []
    for c in result.cases:
        m = c.extra.get("ncu")
        if not m:
            continue
        pct = lambda key: f"{m[key]:.0f}%"  # noqa: E731
        row = {"kernel": _label(c), "µs (ncu)": m["gpu__time_duration.sum"] / 1e3,
               "achieved occupancy": pct("sm__warps_active.avg.pct_of_peak_sustained_active"),
               "issue slots busy": pct("smsp__issue_active.avg.pct_of_peak_sustained_active"),
               "FMA pipe": pct("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
               "tensor pipe": pct("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")}
        for rank, s in zip(("top stall", "second stall"), _ranked_stalls(m)[:2]):
            row[rank] = f"{STALL_WORDS[s]} ({s}, {_stall_share(m, s):.0f}%)"
        rows.append(row)
    return rows


@beside_reference
def memory_rows(result) -> list[dict]:
    """Per kernel: shared-memory wavefronts and conflicts, L2 bytes against the tile model, DRAM bytes
    against the compulsory 3·n²·b (each input read once, C written once)."""
    rows = []
    for c in result.cases:
        m = c.extra.get("ncu")
        if not m:
            continue
        n, b = c.extra["n"], c.extra["element_bytes"]
        conflicts = _conflict_share(m)
        dram = m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]
        rows.append({"kernel": _label(c),
                     "shared wavefronts (M)": m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] / 1e6,
                     "of them bank conflicts": "—" if conflicts is None else f"{100 * conflicts:.0f}%",
                     "L2 GB (ncu)": m["lts__t_bytes.sum"] / 1e9,
                     "L2 GB, tile model (analytic)": model_l2_bytes(c) / 1e9,
                     "DRAM GB (ncu)": dram / 1e9,
                     "DRAM ÷ compulsory 3n²b": dram / (3.0 * b * n * n)})
    return rows


def _evidence(m: dict) -> str:
    top = _ranked_stalls(m)[0]
    conflicts = _conflict_share(m) or 0.0
    return (f"top stall: {STALL_WORDS[top]} ({_stall_share(m, top):.0f}%); "
            f"FMA pipe {m['sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active']:.0f}%; "
            f"issue slots {m['smsp__issue_active.avg.pct_of_peak_sustained_active']:.0f}%; "
            f"bank conflicts {100 * conflicts:.0f}% of shared wavefronts")


@beside_reference
def limit_rows(result) -> list[dict]:
    """The ladder's sentence per rung (what limits it, what the next rung changes) beside the
    profiler's numbers for that rung; a rung the run did not profile says so."""
    rows = []
    for st in LADDER:
        c = next((c for c in result.cases if c.params["kernel"] == st.kernel and c.extra.get("ncu")), None)
        rows.append({"step": f"{st.number} {st.label}", "what limits it": st.limit,
                     "what ncu measured": _evidence(c.extra["ncu"]) if c else "not profiled in this run",
                     "what the next step changes": st.next_change})
    return rows
