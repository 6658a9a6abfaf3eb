"""Notebook 10's experiments: the Hopper GEMM ladder (TMA + wgmma, rung by rung) beside cuBLAS, the
instruction ceilings it is measured against, its ablations and its pitfalls.

The kernels live in ``kernels/hopper_gemm.cu`` and build for ``sm_90a`` only. They compute
C = A·Bᵀ with A (M×K) and B (N×K) both K-major: torch.nn.Linear's layout, and the one cuBLAS is
asked for here too (``torch.mm(a, b.t())``), so the comparison is the same problem.
"""
from __future__ import annotations

import functools
import textwrap

from course_lib.core import cuda, runtime
from course_lib.core.cuda import defines_to_options
from course_lib.core.hardware import detect, spec
from course_lib.core.runtime import REPO_ROOT
from course_lib.core.timing import benchmark, benchmark_interleaved
from course_lib.launch.hopper_gemm import (
    ALIGN_SLACK,
    ARCH,
    FAMILY,
    HOPPER_CC,
    RUNG_KERNELS,
    RUNGS,
    SWEEP_RUNGS,
    SWEEP_SPLITS,
    Plan,
    dispatch,
    hg_macros,
    kernel_function,
    launch_entry,
    nan_output,
    operands,
    predicted_seconds,
    release_before_wait_launch,
    require_hopper,
    run,
    run_plan,
    rung,
    seconds_per_tile_k_block,
    sm_count,
    smem_bytes,
    stuck_slot_launch,
    sweep_plans,
)
from course_lib.launch.library import mm_kernels
from course_lib.launch.operands import (
    bf16_bits_to_float32,
    bf16_tolerance,
    bf16_tolerance_rel,
)
from course_lib.measure import experiments, profiler
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import beside_reference, check_close, experiment, launch_record, require_passed
from course_lib.measure.sanitizer import sanitizer_summary
from course_lib.measure.target import Target
from course_lib.models import occupancy, roofline


def shape_label(m: int, n: int, k: int) -> str:
    return f"{m}×{n}×{k}"


def gemm_work(m: int, n: int, k: int) -> tuple[float, float]:
    """(FLOPs, compulsory bytes) of a bf16 M×N×K product: the roofline model's, as every case records them."""

    return roofline.gemm_flop(m, n, k), roofline.gemm_compulsory_bytes(m, n, k, 2)


# --------------------------------------------------------------------------- experiments

def _timed_beside_cublas(variants: dict[str, tuple], a, b, ta, tb, ref, samples: int):
    """Each variant (kernel, defines, shared bytes at least) run once and checked against cuBLAS's
    result ``ref``, then all timed call by call in turn with cuBLAS: (cuBLAS's timing,
    {name: (timing, check)})."""
    import torch

    m, n = a.shape[0], b.shape[0]
    outs, checks = {}, {}
    for name, (kernel, defines, smem) in variants.items():
        outs[name] = nan_output(m, n)
        run(kernel, a, b, outs[name], defines, smem_bytes_at_least=smem)
        checks[name] = check_close(bf16_bits_to_float32(outs[name]), ref, "cuBLAS bf16 (torch.mm)", bf16_tolerance_rel())
    calls = [lambda: torch.mm(ta, tb.t())] + [
        lambda v=v, name=name: run(v[0], a, b, outs[name], v[1], smem_bytes_at_least=v[2]) for name, v in variants.items()]
    t_lib, *times = benchmark_interleaved(calls, samples, references=[0])
    return t_lib, {name: (t, checks[name]) for name, t in zip(variants, times)}


LADDER_SHAPES = [[2048, 2048, 2048], [4096, 4096, 4096], [8192, 8192, 8192], [2048, 2048, 16384]]


@experiment("hopper.ladder",
            "The rungs of the Hopper GEMM beside cuBLAS bf16 (torch.mm(a, b.t()), the same K-major "
            "problem), each checked against cuBLAS, all timed call by call in turn in one run.",
            record_runs=3, shapes=LADDER_SHAPES, samples=30)
def ladder(shapes: list[list[int]], samples: int) -> list[Case]:
    import torch

    require_hopper(detect().compute_capability)
    cases = []
    for m, n, k in shapes:
        a, b, ta, tb = operands(m, n, k, 11)
        lib = torch.mm(ta, tb.t())
        ref = _cupy(lib.float())
        t_lib, timed = _timed_beside_cublas({r.kernel: (r.kernel, {}, 0) for r in RUNGS}, a, b, ta, tb, ref, samples)
        (flop, nbytes), label = gemm_work(m, n, k), shape_label(m, n, k)
        exact = torch.mm(ta.double(), tb.double().t())
        cases.append(require_passed(Case(
            f"cuBLAS bf16, {label}", {"shapes": [m, n, k]}, "cublas bf16 (torch.mm(a, b.t()))", t_lib,
            flop, nbytes, check_close(ref, _cupy(exact), "float64 matmul of the same bf16 inputs", bf16_tolerance_rel()),
            extra={"kernels": mm_kernels(ta, tb.t())})))
        for r in RUNGS:
            t, check = timed[r.kernel]
            cases.append(require_passed(Case(
                f"{r.kernel}, {label}", {"shapes": [m, n, k], "kernel": r.kernel}, f"{FAMILY}.{r.kernel}",
                t, flop, nbytes, check, launch_entry(r, m, n),
                extra={"defines": hg_macros(), "timing": "interleaved call by call with cuBLAS and the other rungs"})))
        del a, b, ta, tb, lib, ref, timed, exact
    return cases


def _cupy(t):
    import cupy

    return cupy.asarray(t)


# A broad set beside the ladder's four: square sizes that are not multiples of the 128x256 tile or of
# the SM count's waves, K from 256 to 16k, and skinny, thin-M and thin-N products.
SHAPE_SWEEP = [[2304, 2304, 2304], [3000, 3000, 3000], [3072, 3072, 3072], [5120, 5120, 5120], [6144, 6144, 6144],
               [4096, 4096, 1024], [4096, 4096, 16384], [16384, 16384, 1024], [8192, 1024, 8192], [1024, 8192, 8192],
               [1000, 3000, 256], [512, 4096, 4096], [128, 4096, 4096], [4096, 128, 4096]]


@experiment("hopper.shapes",
            "Rungs 2, 3, 5 and 7 and split-K (rung 3's block over 2, 4 or 8 slices of K) beside cuBLAS bf16 at "
            "fourteen shapes off the ladder (non-multiples of the tile, K from 256 to 16k, skinny and thin), "
            "each checked against cuBLAS, timed call by call in turn.",
            shapes=SHAPE_SWEEP, rungs=list(SWEEP_RUNGS), splits=list(SWEEP_SPLITS), samples=20)
def shapes(shapes: list[list[int]], rungs: list[int], splits: list[int], samples: int) -> list[Case]:
    import torch

    require_hopper(detect().compute_capability)
    cases = []
    for m, n, k in shapes:
        a, b, ta, tb = operands(m, n, k, 61)
        ref = _cupy(torch.mm(ta, tb.t()).float())
        plans = sweep_plans(k, rungs, splits)
        outs, checks = [nan_output(m, n) for _ in plans], []
        for plan, c in zip(plans, outs):
            run_plan(plan, a, b, c)
            checks.append(check_close(bf16_bits_to_float32(c), ref, "cuBLAS bf16 (torch.mm)", bf16_tolerance_rel()))
        calls = [lambda: torch.mm(ta, tb.t())] + [  # noqa: F821 (see the del)
            lambda p=p, c=c: run_plan(p, a, b, c) for p, c in zip(plans, outs)]  # noqa: F821 (see the del)
        t_lib, *times = benchmark_interleaved(calls, samples, references=[0])
        (flop, nbytes), label = gemm_work(m, n, k), shape_label(m, n, k)
        cases.append(require_passed(Case(
            f"cuBLAS bf16, {label}", {"shapes": [m, n, k]}, "cublas bf16 (torch.mm(a, b.t()))", t_lib, flop, nbytes,
            check_close(ref, ref, "itself (the reference of the plans)", 0.0), extra={"kernels": mm_kernels(ta, tb.t())})))
        for plan, t, check in zip(plans, times, checks):
            launch = (launch_entry(rung(plan.kernel), m, n) if plan.splits == 1 else None)
            cases.append(require_passed(Case(
                f"{plan.label}, {label}", {"shapes": [m, n, k], "kernel": plan.kernel, "splits": plan.splits},
                f"{FAMILY}.{plan.kernel}", t, flop, nbytes, check, launch,
                extra={"timing": "interleaved call by call with cuBLAS and the other plans; split-K's time "
                                 "includes the kernel that sums its partial products"})))
        del a, b, ta, tb, ref, outs   # after every call of the closures over them (ruff's F821 cannot tell)
    return cases


# Shapes that are not multiples of any tile (or smaller than one), a K tail, a K of one slice, and
# one with more K slices than slots, so that every slot is reused.
EDGE_SHAPES = [[1, 8, 8], [1, 1, 64], [127, 129, 72], [129, 257, 200], [333, 1000, 520], [1000, 333, 1032],
               [256, 512, 512], [515, 1027, 264]]


@experiment("hopper.edges",
            "Every rung at shapes that are not multiples of its tile, a K tail and single elements, "
            "checked against a float64 product of the same bf16 inputs.",
            shapes=EDGE_SHAPES, samples=20)
def edges(shapes: list[list[int]], samples: int) -> list[Case]:
    import cupy

    require_hopper(detect().compute_capability)
    cases = []
    for m, n, k in shapes:
        a, b, _, _ = operands(m, n, k, 21)
        exact = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64).T
        for r in RUNGS:
            c = nan_output(m, n)
            run(r, a, b, c)
            check = check_close(bf16_bits_to_float32(c), exact, "float64 matmul of the bf16 inputs", bf16_tolerance_rel())
            t = benchmark(lambda: run(r, a, b, c), samples, warmup=1)
            cases.append(require_passed(Case(
                f"{r.kernel}, {shape_label(m, n, k)}", {"shapes": [m, n, k], "kernel": r.kernel}, f"{FAMILY}.{r.kernel}",
                t, *gemm_work(m, n, k), check, launch_entry(r, m, n))))
    return cases


CEILING_SHAPES = [64, 128, 256]


def ceiling_flop(kind: str, n: int, blocks: int, threads: int, iters: int) -> float:
    """FLOPs one ceiling launch does: per wgmma 2·64·N·16, four per iteration per warpgroup; per
    mma.sync 2·16·8·16, eight per iteration per warp."""
    if kind == "mma.sync":
        return 2.0 * 16 * 8 * 16 * 8 * iters * blocks * threads / 32
    return 2.0 * 64 * n * 16 * 4 * iters * blocks * threads / 128


def ceiling_sum(kind: str, n: int, iters: int) -> float:
    """What each thread of a ceiling kernel writes: every k16 step adds -16 to each accumulator;
    a wgmma thread holds N/2 of them (four steps per iteration), an mma.sync thread 32 (one step)."""
    if kind == "mma.sync":
        return -16.0 * iters * 32
    return -16.0 * 4 * iters * n / 2


@experiment("hopper.ceilings",
            "Instruction ceilings with no memory traffic: wgmma m64nNk16 for N = 64, 128, 256 with A read "
            "from shared memory and from registers, and notebook 06's mma.sync m16n8k16 from registers.",
            shapes=CEILING_SHAPES, warpgroups=2, iters=4096, mma_blocks_per_sm=2, samples=25)
def ceilings(shapes: list[int], warpgroups: int, iters: int, mma_blocks_per_sm: int, samples: int) -> list[Case]:
    import cupy
    import numpy as np

    require_hopper(detect().compute_capability)
    sms = sm_count()
    out = cupy.zeros(sms * 1024, dtype=cupy.float32)
    cases = []
    for n in shapes:
        for a_from in ("shared", "registers"):
            defines = {"HG_CEIL_N": n, "HG_CEIL_REGA": int(a_from == "registers")}
            fn = kernel_function("wgmma_ceiling", defines_to_options(defines))
            smem = ALIGN_SLACK + (64 + n) * 128
            fn.max_dynamic_shared_size_bytes = max(fn.max_dynamic_shared_size_bytes, smem)
            threads = 128 * warpgroups
            call = functools.partial(fn, (sms,), (threads,), (out, np.int32(iters)), shared_mem=smem)
            out.fill(float("nan"))
            call()
            check = check_close(out[:sms * threads], cupy.full(1, ceiling_sum("wgmma", n, iters)),
                                "the sum the operands give exactly", 0.0)
            t = benchmark(call, samples, warmup=2)
            res = cuda.compile_family(FAMILY, ARCH, defines_to_options(defines)).resources["wgmma_ceiling"]
            cases.append(require_passed(Case(
                f"wgmma m64n{n}k16, A from {a_from}", {"shapes": n, "a_from": a_from}, f"{FAMILY}.wgmma_ceiling",
                t, ceiling_flop("wgmma", n, sms, threads, iters), 0.0, check,
                launch_record((sms,), (threads,), res, smem), extra={"defines": defines})))
    fn = kernel_function("mma_sync_ceiling")
    blocks, threads = sms * mma_blocks_per_sm, 256
    call = functools.partial(fn, (blocks,), (threads,), (out, np.int32(iters)))
    out.fill(float("nan"))
    call()
    check = check_close(out[:blocks * threads], cupy.full(1, ceiling_sum("mma.sync", 0, iters)),
                        "the sum the operands give exactly", 0.0)
    t = benchmark(call, samples, warmup=2)
    cases.append(require_passed(Case(
        "mma.sync m16n8k16, registers", {"shapes": "mma.sync"}, f"{FAMILY}.mma_sync_ceiling", t,
        ceiling_flop("mma.sync", 0, blocks, threads, iters), 0.0, check,
        launch_record((blocks,), (threads,), cuda.compile_family(FAMILY, ARCH).resources["mma_sync_ceiling"]))))
    return cases


# Each is a rung with one thing changed: (kernel, defines, shared bytes to launch with at least), and
# the variant it is compared with (None: the same kernel as built).
ABLATIONS = {
    "rung 5 as built": ("hgemm_5_persistent", {}, 0, None),
    "every consumer thread arrives on empty": ("hgemm_5_persistent", {"HG_ELECTED_ARRIVE": 0}, 0, None),
    "no setmaxnreg": ("hgemm_5_persistent", {"HG_SETMAXNREG": 0}, 0, None),
    "row-by-row tile order (HG_GROUP_M 1)": ("hgemm_5_persistent", {"HG_GROUP_M": 1}, 0, None),
    "3 slots instead of 4": ("hgemm_5_persistent", {"HG_STAGES": 3}, 0, None),
    "clusters of 2 with multicast (rung 6)": ("hgemm_6_cluster", {}, 0, "rung 5 as built"),
    "rung 6 with 3 slots": ("hgemm_6_cluster", {"HG_STAGES": 3}, 0, "clusters of 2 with multicast (rung 6)"),
    "rung 6 freeing the other block's slot with .release.cluster": (
        "hgemm_6_cluster", {"HG_REMOTE_RELEASE_CLUSTER": 1}, 0, "clusters of 2 with multicast (rung 6)"),
    "rung 5 with one wgmma group in flight": ("hgemm_5_persistent", {"HG_INFLIGHT": 1}, 0, None),
    "stmatrix + TMA store epilogue (rung 7)": ("hgemm_7_tma_store", {}, 0, "clusters of 2 with multicast (rung 6)"),
    "rung 7 with one wgmma group in flight": ("hgemm_7_tma_store", {"HG_INFLIGHT": 1}, 0,
                                              "stmatrix + TMA store epilogue (rung 7)"),
    "rung 4 as built": ("hgemm_4_wide", {}, 0, None),
    "rung 4 without setmaxnreg": ("hgemm_4_wide", {"HG_SETMAXNREG": 0}, 0, None),
    "rung 2 as built (3 slots, two blocks per SM)": ("hgemm_2_ring", {}, 0, None),
    "rung 2 with 4 slots (one block per SM)": ("hgemm_2_ring", {"HG_RING_STAGES": 4}, 0, None),
    "rung 2 with 2 slots (three blocks per SM)": ("hgemm_2_ring", {"HG_RING_STAGES": 2}, 0, None),
    "rung 1 as built (three blocks per SM)": ("hgemm_1_tma_wgmma", {}, 0, None),
    "rung 1 held to one block per SM": ("hgemm_1_tma_wgmma", {}, 120 * 1024, None),
}


def is_control(variant: str) -> bool:
    """A variant that changes no design choice, only the launch (shared memory asked for and left unused,
    so that fewer blocks fit on an SM): a control for a reading, not an option a kernel writer has."""
    return ABLATIONS[variant][2] > 0


def ablation_base(variant: str) -> str:
    """The variant an ablation is measured against: the one named, or its kernel as built."""
    kernel, _, _, base = ABLATIONS[variant]
    return base or next(v for v, spec in ABLATIONS.items() if spec[:3] == (kernel, {}, 0))


@experiment("hopper.ablations",
            "One design choice changed at a time: elected arrival, setmaxnreg, grouped order, slots and one "
            "wgmma group in flight in rung 5; the cluster, its slots and its remote release in rung 6; the "
            "TMA-store epilogue (rung 7) and one group in flight there; setmaxnreg in rung 4; slots (so "
            "blocks per SM) in rung 2; rung 1 held to one block per SM; beside cuBLAS bf16, timed call by "
            "call in turn in one run.",
            shapes=[[4096, 4096, 4096], [8192, 8192, 8192]], variants=list(ABLATIONS), samples=30)
def ablations(shapes: list[list[int]], variants: list[str], samples: int) -> list[Case]:
    import torch

    require_hopper(detect().compute_capability)
    cases = []
    for m, n, k in shapes:
        a, b, ta, tb = operands(m, n, k, 31)
        ref = _cupy(torch.mm(ta, tb.t()).float())
        t_lib, timed = _timed_beside_cublas({v: ABLATIONS[v][:3] for v in variants}, a, b, ta, tb, ref, samples)
        (flop, nbytes), label = gemm_work(m, n, k), shape_label(m, n, k)
        cases.append(require_passed(Case(
            f"cuBLAS bf16, {label}", {"shapes": [m, n, k]}, "cublas bf16 (torch.mm(a, b.t()))", t_lib,
            flop, nbytes, check_close(ref, ref, "itself (the reference of the variants)", 0.0),
            extra={"kernels": mm_kernels(ta, tb.t())})))
        for name in variants:
            kernel, defines, smem, _ = ABLATIONS[name]
            t, check = timed[name]
            launch = launch_entry(rung(kernel), m, n, defines)
            launch["dynamic_smem_bytes"] = max(launch["dynamic_smem_bytes"], smem)
            cases.append(require_passed(Case(
                f"{name}, {label}", {"shapes": [m, n, k], "variant": name}, f"{FAMILY}.{kernel}", t,
                flop, nbytes, check, launch, extra={"defines": defines})))
        del a, b, ta, tb, ref, timed
    return cases


# --------------------------------------------------------------------------- sanitizer smoke launches


# --------------------------------------------------------------------------- profiles and pitfalls

STALL_REASONS = ("gmma", "barrier", "long_scoreboard", "wait", "sleeping", "math_pipe_throttle", "mio_throttle",
                 "lg_throttle", "short_scoreboard", "dispatch_stall", "no_instruction", "branch_resolving",
                 "membar", "not_selected", "selected", "misc")
TENSOR_PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
PROFILE_METRICS = [TENSOR_PIPE, "sm__inst_executed_pipe_tensor_op_gmma.sum", "sm__inst_executed_pipe_tensor_op_hmma.sum",
                   "sm__warps_active.avg.pct_of_peak_sustained_active", "dram__bytes_read.sum", "lts__t_bytes.sum",
                   *(f"smsp__warp_issue_stalled_{r}_per_warp_active.pct" for r in STALL_REASONS)]


# cuBLAS's Hopper GEMMs are named nvjet_* (cuBLAS 12.8 on) or *xmma*/*gemm* (before).
CUBLAS_AND_RUNGS = r"hgemm_|nvjet|gemm|xmma"


def profile_launches(m: int, n: int, k: int) -> None:
    """Each rung once, then cuBLAS once, on the same operands: what ncu profiles."""
    import cupy
    import torch

    a, b, ta, tb = operands(m, n, k, 51)
    for r in RUNGS:
        run(r, a, b, nan_output(m, n))
    torch.mm(ta, tb.t())
    cupy.cuda.Device().synchronize()


@experiment("hopper.profile",
            "Nsight Compute on each rung and on cuBLAS at one shape: tensor-pipe utilisation, wgmma "
            "instructions, DRAM and L2 bytes, and the share of warps stalled for each reason.",
            shape=[4096, 4096, 4096], samples=20)
def profile(shape: list[int], samples: int) -> list[Case]:
    import torch

    require_hopper(detect().compute_capability)
    m, n, k = shape
    a, b, ta, tb = operands(m, n, k, 51)
    ref = _cupy(torch.mm(ta, tb.t()).float())
    t_lib, timed = _timed_beside_cublas({r.kernel: (r.kernel, {}, 0) for r in RUNGS}, a, b, ta, tb, ref, samples)
    (flop, nbytes), label = gemm_work(m, n, k), shape_label(m, n, k)
    cases = [Case(f"cuBLAS bf16, {label}", {"kernel": "cublas"}, "cublas bf16 (torch.mm(a, b.t()))",
                  t_lib, flop, nbytes, check_close(ref, ref, "itself (the rungs' reference)", 0.0),
                  extra={"kernels": mm_kernels(ta, tb.t())})]
    for r in RUNGS:
        t, check = timed[r.kernel]
        cases.append(require_passed(Case(
            f"{r.kernel}, {label}", {"kernel": r.kernel}, f"{FAMILY}.{r.kernel}", t, flop, nbytes,
            check, launch_entry(r, m, n))))
    try:
        profiles = profiler.ncu_metrics(Target(profile_launches, (m, n, k)), PROFILE_METRICS, CUBLAS_AND_RUNGS)
        ours = [p for p in profiles if p.function.startswith("hgemm_")]
        theirs = [p for p in profiles if not p.function.startswith("hgemm_")]
        if [p.function for p in ours] != RUNG_KERNELS:
            raise profiler.ProfilerUnavailable(f"ncu profiled {[p.function for p in profiles]}")
        command, version = profiler.command_line(PROFILE_METRICS, CUBLAS_AND_RUNGS), profiler.ncu_version()
        for c, p in zip(cases, [theirs[-1] if theirs else None, *ours]):
            if p is None:   # cuBLAS's kernel has a name the filter did not expect
                c.extra["ncu_unavailable"] = f"no profiled kernel besides the rungs: {[q.function for q in profiles]}"
                continue
            c.extra.update(ncu={mt: p.metrics.get(mt) for mt in PROFILE_METRICS}, ncu_command=command,
                           ncu_version=version, ncu_kernel=p.function)
    except profiler.ProfilerUnavailable as exc:
        for c in cases:
            c.extra["ncu_unavailable"] = str(exc)
    return cases


def _wrong_outputs(kernel: str, defines: dict, a, b, exact, trials: int) -> dict:
    """Run a faulty variant `trials` times: in how many runs, and in how many outputs at most, it is wrong."""
    import cupy

    tol = bf16_tolerance(exact)
    wrong_runs, worst = 0, 0
    for _ in range(trials):
        c = nan_output(*exact.shape)
        run(kernel, a, b, c, defines)
        bad = int((~(cupy.abs(bf16_bits_to_float32(c) - exact) <= tol)).sum())
        wrong_runs += bad > 0
        worst = max(worst, bad)
    return {"kernel": kernel, "defines": defines, "trials": trials, "wrong_runs": wrong_runs,
            "most_wrong_outputs": worst, "outputs": int(exact.size)}


def _compile_message(arch: str, options: tuple[str, ...]) -> str:
    try:
        cuda.compile_source(cuda.source(FAMILY), arch, f"{FAMILY}.cu", options, use_cache=False)
    except cuda.CompileError as exc:
        return str(exc)
    return "compiled without error"


def _driver_message() -> str:
    """What the driver says when asked to load a cubin built for another architecture (sm_100a)."""
    cubin, _ = cuda.compile_source('extern "C" __global__ void k(float* x) { x[0] = 1.f; }', "sm_100a", "k.cu",
                                   use_cache=False)
    try:
        cuda.load_cubin(cubin).get_function("k")
    except Exception as exc:  # noqa: BLE001  (the point is the driver's words)
        return f"{type(exc).__name__}: {exc}"
    return "loaded (unexpected)"


def _wrong_byte_count(timeout_s: int = 120) -> dict:
    """Rung 5 told to expect 16 bytes more per slot than the TMA brings: no slot ever fills. Run in a
    child process (a trap ends the CUDA context it happens in): how long until the launch fails, and
    what CUDA says."""
    import subprocess
    import sys
    import time

    script = Target(stuck_slot_launch).script()
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO_ROOT)}
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"hung": f"no answer within {timeout_s} s"}
    said = [ln for ln in proc.stdout.splitlines() if ln.startswith("after ")]
    return {"child_seconds": round(time.perf_counter() - start, 2), "returncode": proc.returncode,
            "error": said[0] if said else (proc.stderr.strip().splitlines() or ["(nothing)"])[-1]}


def _sass_summary(options: tuple[str, ...] = ()) -> dict:
    """Instruction counts in rung 5's SASS (cuobjdump, where it is installed): the tensor-core ops,
    the register hand-over, and local-memory traffic (spills)."""
    import re
    import shutil
    import subprocess
    import tempfile

    exe = shutil.which("cuobjdump")
    if not exe:
        return {"unavailable": "cuobjdump is not on PATH"}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cuda.compile_family(FAMILY, ARCH, options).cubin)
        f.flush()
        sass = subprocess.run([exe, "-sass", "-fun", "hgemm_5_persistent", f.name], capture_output=True,
                              text=True, timeout=120).stdout
    ops = re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", sass, re.M)
    count = lambda *names: sum(1 for o in ops if o in names)  # noqa: E731
    return {"instructions": len(ops), "HGMMA": count("HGMMA"), "USETMAXREG": count("USETMAXREG"),
            "local loads LDL": count("LDL"), "local stores STL": count("STL"),
            "SYNCS (mbarrier)": sum(1 for o in ops if o.startswith("SYNCS")), "UTMALDG (TMA)": count("UTMALDG")}


@experiment("hopper.pitfalls",
            "Rung 5 as built (timed and checked), and what goes wrong without its safeguards: a slot freed "
            "before its wgmmas finish, descriptors that ignore the TMA's swizzle, a build for sm_90 instead "
            "of sm_90a, a register cap below the accumulators, a byte count that never completes (the "
            "bounded wait traps), and the SASS of the working build.",
            shape=[4096, 4096, 4096], trials=10, samples=20)
def pitfalls(shape: list[int], trials: int, samples: int) -> list[Case]:
    import cupy

    require_hopper(detect().compute_capability)
    m, n, k = shape
    a, b, _, _ = operands(m, n, k, 61)
    exact = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64).T
    r = rung("hgemm_5_persistent")
    c = nan_output(m, n)
    run(r, a, b, c)
    check = check_close(bf16_bits_to_float32(c), exact, "float64 matmul of the bf16 inputs", bf16_tolerance_rel())
    t = benchmark(lambda: run(r, a, b, c), samples, warmup=2)
    extra = {
        "release_before_wait": _wrong_outputs(r.kernel, {"HG_RELEASE_BEFORE_WAIT": 1}, a, b, exact, trials),
        "descriptor_without_swizzle": _wrong_outputs(r.kernel, {"HG_SWIZZLE_DESC": 0}, a, b, exact, trials),
        "build_for_sm_90": _compile_message("sm_90", ()),
        "register_cap_below_accumulators": _compile_message(ARCH, ("-DHG_MIN_BLOCKS_NARROW=2",)),
        "driver_loading_sm_100a": _driver_message(),
        "sass": _sass_summary(),
        "wrong_byte_count": _wrong_byte_count(),
        "racecheck_release_before_wait": sanitizer_summary(Target(release_before_wait_launch)),
    }
    return [require_passed(Case(f"{r.kernel}, {shape_label(m, n, k)}", {"kernel": r.kernel}, f"{FAMILY}.{r.kernel}",
                                t, *gemm_work(m, n, k), check,
                                launch_entry(r, m, n), extra=extra))]


# --------------------------------------------------------------------------- notebook helpers

def rung_diff(number: int) -> str:
    """Rung ``number``'s kernel as a unified diff of rung ``number - 1``'s (rung 1: its whole source)."""
    import difflib

    this = cuda.kernel_source(FAMILY, rung(number).kernel)
    if number == 1:
        return this
    before = cuda.kernel_source(FAMILY, rung(number - 1).kernel)
    return "".join(difflib.unified_diff(before.splitlines(True), this.splitlines(True),
                                        rung(number - 1).kernel, rung(number).kernel, n=1))


def helper_source(*names: str) -> str:
    """The device helpers the rungs call (consume_tile, produce_tile, ...), as the notebook shows them."""
    import re

    text = cuda.source(FAMILY)
    out = []
    for name in names:
        m = re.search(r"\n((?://[^\n]*\n)*)(template <[^\n]*>\n)?(?:__device__|struct)[^\n]*\b" + re.escape(name) + r"\b", text)
        if not m:
            raise KeyError(f"{FAMILY}.cu has no helper {name!r}")
        start = m.start() + 1
        depth, i = 0, text.index("{", m.end())
        for j in range(i, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                out.append(text[start:j + 1].rstrip(";") + (";" if text[j + 1:j + 2] == ";" else ""))
                break
    return "\n\n".join(out)


def _by_shape(result, kernel_key: str = "kernel"):
    shapes = []
    for c in result.cases:
        if c.params.get("shapes") not in shapes:
            shapes.append(c.params.get("shapes"))
    return shapes


def _cublas(result, shape):
    return next(c for c in result.cases if c.kernel.startswith("cublas") and c.params.get("shapes") == shape)


@beside_reference
def ladder_rows(result) -> list[dict]:
    """Rung × shape: TFLOP/s and % of the same run's cuBLAS."""
    rows = []
    shapes = _by_shape(result)
    for r in RUNGS:
        row = {"rung": f"{r.number} {r.label}"}
        for shape in shapes:
            c = next(c for c in result.cases if c.params.get("kernel") == r.kernel and c.params["shapes"] == shape)
            lib = _cublas(result, shape)
            row[f"TFLOP/s {shape_label(*shape)}"] = c.flop_per_s / 1e12
            row[f"% cuBLAS {shape_label(*shape)}"] = 100 * c.flop_per_s / lib.flop_per_s
        rows.append(row)
    row = {"rung": "cuBLAS bf16"}
    for shape in shapes:
        row[f"TFLOP/s {shape_label(*shape)}"] = _cublas(result, shape).flop_per_s / 1e12
        row[f"% cuBLAS {shape_label(*shape)}"] = 100.0
    rows.append(row)
    return rows


def _plans_at(result, shape) -> dict[Plan, object]:
    return {Plan(c.params["kernel"], c.params.get("splits", 1)): c for c in result.cases
            if c.params.get("kernel") and c.params["shapes"] == shape}


def _shape_rows(shapes_result, ladder_result) -> list[dict]:
    """Per shape: each plan's % of cuBLAS in the same run, the measured best, and the plan the dispatch
    (the SM-round model calibrated on the ladder's 4096³) picks, with its % and the model's time."""
    sms = shapes_result.machine.get("sm_count", 132)
    per = seconds_per_tile_k_block(ladder_result, sm_count=sms)
    rows = []
    for shape in _by_shape(shapes_result):
        lib, mine = _cublas(shapes_result, shape), _plans_at(shapes_result, shape)
        row = {"shape": shape_label(*shape), "cuBLAS µs": lib.median_s * 1e6}
        row.update({f"{p.label} %": 100 * c.flop_per_s / lib.flop_per_s for p, c in mine.items()})
        best = max(mine, key=lambda p: mine[p].flop_per_s)
        pick = dispatch(*shape, per, list(mine), sms)
        row.update({"measured best": best.label, "dispatch picks": pick.label,
                    "pick %": 100 * mine[pick].flop_per_s / lib.flop_per_s,
                    "pick µs": mine[pick].median_s * 1e6,
                    "model µs": predicted_seconds(pick, *shape, per, sms) * 1e6})
        rows.append(row)
    return rows


shape_rows = beside_reference(_shape_rows)


def shape_summary(shapes_result, ladder_result) -> dict[str, float]:
    """Geometric mean and lowest % of cuBLAS over the sweep: of rung 7 alone, of the dispatch's picks, and
    of the measured best plan per shape."""
    import math

    rows = _shape_rows(shapes_result, ladder_result)
    plan_cols = lambda r: [v for key, v in r.items() if key.endswith(" %") and key != "pick %"]  # noqa: E731
    cols = {"rung 7": [r["rung 7 %"] for r in rows], "dispatch": [r["pick %"] for r in rows],
            "measured best": [max(plan_cols(r)) for r in rows]}
    out = {}
    for name, v in cols.items():
        out[f"{name} geomean %"] = math.exp(sum(math.log(x) for x in v) / len(v))
        out[f"{name} lowest %"] = min(v)
    return out


def best_rung_percent(result, shape: list[int]) -> tuple[str, float]:
    """The fastest rung at ``shape`` and its % of cuBLAS in the same run."""
    lib = _cublas(result, shape)
    best = max((c for c in result.cases if c.params.get("kernel") and c.params["shapes"] == shape),
               key=lambda c: c.flop_per_s)
    return best.params["kernel"], 100 * best.flop_per_s / lib.flop_per_s


def ceiling_position_rows(ladder_result, ceilings_result, shape: list[int]) -> list[dict]:
    """Each rung (and cuBLAS) at one shape against the two instruction ceilings measured alone."""
    w, m = wgmma_ceiling(ceilings_result), mma_sync_ceiling(ceilings_result)
    rows = []
    for c in ladder_result.cases:
        if c.params["shapes"] != shape:
            continue
        rows.append({"kernel": c.name.split(",")[0], "TFLOP/s": c.flop_per_s / 1e12,
                     "% of wgmma alone": 100 * c.flop_per_s / w, "× mma.sync alone": c.flop_per_s / m})
    return rows


@beside_reference
def ceiling_rows(result) -> list[dict]:
    return [{"instruction": c.name, "TFLOP/s": c.flop_per_s / 1e12, "registers": c.launch["registers"],
             "blocks × threads": f"{c.launch['grid'][0]} × {c.launch['block'][0]}"} for c in result.cases]


def wgmma_ceiling(result) -> float:
    """The best wgmma rate measured (FLOP/s): the roof the rungs are placed under."""
    return max(c.flop_per_s for c in result.cases if c.name.startswith("wgmma"))


def mma_sync_ceiling(result) -> float:
    return next(c.flop_per_s for c in result.cases if c.name.startswith("mma.sync"))


def ladder_figure(ladder_result, ceilings_result):
    """TFLOP/s per rung, one line per shape, with cuBLAS per shape (dashed) and the two instruction
    ceilings (dotted)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.8))
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
    for shape, colour in zip(_by_shape(ladder_result), colours):
        pts = [next(c for c in ladder_result.cases if c.params.get("kernel") == r.kernel and c.params["shapes"] == shape)
               for r in RUNGS]
        limited = any(c.power_limited for c in pts) or _cublas(ladder_result, shape).power_limited
        ax.plot([r.number for r in RUNGS], [c.flop_per_s / 1e12 for c in pts], "o-", color=colour,
                label=shape_label(*shape) + (" (power-limited)" if limited else ""),
                mfc="none" if limited else colour)   # hollow markers: the SM clock fell below 90% of its maximum
        ax.axhline(_cublas(ladder_result, shape).flop_per_s / 1e12, color=colour, ls="--", lw=1, alpha=0.7)
    for value, label in ((wgmma_ceiling(ceilings_result), "wgmma alone"), (mma_sync_ceiling(ceilings_result), "mma.sync alone")):
        ax.axhline(value / 1e12, color="grey", ls=":", lw=1.5)
        ax.text(0.8, value / 1e12, label, va="bottom", fontsize=8, color="grey")
    ax.set_xticks([r.number for r in RUNGS])
    ax.set_xticklabels([f"{r.number}\n" + "\n".join(textwrap.wrap(r.label, 16)) for r in RUNGS], fontsize=7)
    ax.set_xlim(0.7, len(RUNGS) + 0.3)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"Hopper GEMM ladder (dashed: cuBLAS, same shape and run; hollow: power-limited): "
                 f"{ladder_result.provenance}", fontsize=9)
    ax.grid(True, alpha=0.2)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, 0.93))
    fig.tight_layout()
    return fig


def resources_rows(gpu_name: str = "H200") -> list[dict]:
    """Per rung: threads, registers and shared memory from the compiler, resident blocks from the
    occupancy model (notebook 03)."""

    budget = occupancy.budget(spec(gpu_name))
    rows = []
    for r in RUNGS:
        res = cuda.compile_family(FAMILY, ARCH).resources[r.kernel]
        smem = smem_bytes(r)
        resident = occupancy.residency(budget, r.threads, res.registers, res.static_smem_bytes + smem)
        rows.append({"rung": f"{r.number} {r.label}", "tile": f"{r.tile[0]}×{r.tile[1]}", "threads": r.threads,
                     "registers at launch": res.registers, "spills": res.spill_store_bytes,
                     "shared KiB": smem / 1024, "blocks/SM": resident.resident_blocks, "limited by": resident.limiter})
    return rows


@beside_reference
def profile_rows(result, top: int = 3) -> list[dict]:
    """Per kernel: tensor-pipe utilisation, wgmma instructions, bytes from DRAM and L2, and the
    stall reasons that hold the most warps."""
    rows = []
    for c in result.cases:
        m = c.extra.get("ncu")
        if not m:
            continue
        stalls = sorted(((m[f"smsp__warp_issue_stalled_{s}_per_warp_active.pct"] or 0.0, s) for s in STALL_REASONS
                         if s != "selected"), reverse=True)
        rows.append({"kernel": c.name.split(",")[0], "time µs": c.median_s * 1e6,
                     "tensor pipe active %": m[TENSOR_PIPE],
                     "wgmma instructions (per warp)": m["sm__inst_executed_pipe_tensor_op_gmma.sum"],
                     "DRAM read MiB": m["dram__bytes_read.sum"] / 2 ** 20, "L2 MiB": m["lts__t_bytes.sum"] / 2 ** 20,
                     "top stalls (% of warp time)": ", ".join(f"{s} {v:.0f}" for v, s in stalls[:top])})
    return rows


def _ablation_rows(result) -> list[dict]:
    """Each variant against the build it changes (or the rung it is compared with), in the same run:
    time, and the change in %."""
    rows = []
    for shape in _by_shape(result):
        lib = _cublas(result, shape)
        cases = {c.params["variant"]: c for c in result.cases if c.params.get("variant") and c.params["shapes"] == shape}
        for name, c in cases.items():
            base = cases.get(ablation_base(name))
            rows.append({"shape": shape_label(*shape), "variant": name, "time µs": c.median_s * 1e6,
                         "TFLOP/s": c.flop_per_s / 1e12, "% cuBLAS": 100 * c.flop_per_s / lib.flop_per_s,
                         "compared with": ablation_base(name) if base is not c else "—",
                         "time change %": round(100 * (c.median_s / base.median_s - 1), 1) if base and base is not c else None})
    return rows


@beside_reference
def ablation_rows(result) -> list[dict]:
    return _ablation_rows(result)


@beside_reference
def pitfall_rows(result) -> list[dict]:
    x = result.cases[0].extra
    rows = []
    for key, what in (("release_before_wait", "slot freed before wgmma.wait_group"),
                      ("descriptor_without_swizzle", "descriptor says no swizzle, the TMA wrote 128-byte swizzled")):
        v = x[key]
        rows.append({"pitfall": what, "runs wrong": f"{v['wrong_runs']} of {v['trials']}",
                     "wrong outputs (worst run)": f"{v['most_wrong_outputs']:,} of {v['outputs']:,}"})
    return rows


@beside_reference
def edges_rows(result) -> list[dict]:
    rows = []
    for r in RUNGS:
        row = {"rung": f"{r.number} {r.label}"}
        for c in result.cases:
            if c.params["kernel"] == r.kernel:
                row[shape_label(*c.params["shapes"])] = (f"{c.check['max_abs_err'] / c.check['tolerance']:.2f} ✔"
                                                        if c.check["passed"] else "✘")
        rows.append(row)
    return rows


def measure(name: str, **params):
    """``experiments.run``, except that live on a GPU without wgmma (compute capability other than 9.0)
    the H200's record is replayed, and the notebook says so."""

    if runtime.shows_gpu_run():
        info = detect()
        if str(info.compute_capability) != HOPPER_CC:
            print(f"{info.name} (compute capability {info.compute_capability}) has no wgmma: showing the "
                  f"NVIDIA H200's record of {name} instead of measuring.")
            return experiments.replay(name, experiments.resolve_params(name, **params), "h200")
    return experiments.run(name, **params)
