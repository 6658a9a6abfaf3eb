"""Notebook 09's experiments: how long a load takes, and what keeps enough loads in flight.

* ``pipeline.latency``: one thread chasing pointers through footprints from 16 KiB to 1 GiB, with
  L1-cached and L2-only loads: the latency of each memory level.
* ``pipeline.streaming``: the same sum of squares over 1 GiB with synchronous loads at 1 to 8 blocks
  per SM, and with cp.async and with TMA bulk copies of 16 KiB tiles at 1 to 12 stages on one block per SM; the
  course's copy kernel in the same run; Nsight Compute's achieved occupancy and instruction counts.
* ``pipeline.gemm_stages``: the course's bf16 GEMM at 4096³ with 1 to 6 stages, cp.async and TMA.
* ``pipeline.timeline``: a warp-specialized kernel (a producer warp, four consumer warps, full and
  empty mbarriers) with its copies and math timestamped on its first blocks, at 1, 2 and 4 stages,
  beside the same kernel untraced (the instrumentation's cost).
* ``pipeline.proxy_fence``: TMA refills of shared memory that the block has just read, with and
  without ``fence.proxy.async``, counted over many runs.
"""
from __future__ import annotations

import numpy as np

from course_lib.core import cuda
from course_lib.core.hardware import gpu_spec
from course_lib.core.timing import benchmark, benchmark_interleaved
from course_lib.figures.plots import PALETTE
from course_lib.launch.elementwise import geometry as elementwise_launch
from course_lib.launch.gemm_bf16 import (
    BF16,
    KERNEL,
    NO_PROXY_FENCE,
    PROXY_FENCE,
    bf16_geometry,
    run_bf16,
    runnable_engines,
    with_stages,
)
from course_lib.launch.library import mm_kernels
from course_lib.launch.operands import (
    bf16_bits_to_float32,
    bf16_tolerance_rel,
    random_operand,
    to_bf16_bits,
    torch_view,
)
from course_lib.launch.pipeline import (
    BULK_MIN_CC,
    EVENTS,
    FAMILY,
    RACE_KERNELS,
    RACE_WORDS,
    SPEC_TILE_BYTES,
    SPEC_WARPS,
    SYNC_BYTES_PER_THREAD,
    THREADS,
    TILE_BYTES,
    TRACE_TILES,
    chase_chain,
    chase_check,
    chase_hops,
    device,
    family,
    require_bulk_copies,
    run_chase,
    run_fence_gemm,
    run_race,
    run_specialized,
    run_stream,
    specialized_reference,
    stream_smem,
    sum_squares_check,
)
from course_lib.measure import profiler
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import (
    beside_reference,
    beside_reference_figure,
    check_close,
    experiment,
    launch_record,
    require_passed,
)
from course_lib.measure.sanitizer import racecheck_both
from course_lib.measure.target import Target
from course_lib.models import occupancy, pipeline

# --------------------------------------------------------------------------- pointer chasing


@experiment("pipeline.latency",
            "Pointer chasing: one thread's dependent loads through footprints from 16 KiB to 1 GiB, "
            "L1-cached (ld.global.ca) and L2-only (ld.global.cg).",
            l1_footprints=[16 << 10, 64 << 10, 128 << 10, 512 << 10, 4 << 20],
            l2_footprints=[512 << 10, 2 << 20, 8 << 20, 16 << 20, 24 << 20, 48 << 20, 64 << 20, 256 << 20, 1 << 30],
            samples=20)
def latency(l1_footprints: list[int], l2_footprints: list[int], samples: int) -> list[Case]:
    import cupy

    l2 = device().l2_bytes
    cases = []
    for kernel, footprints in (("chase_l1", l1_footprints), ("chase_l2", l2_footprints)):
        for fp in footprints:
            chain, order = chase_chain(fp, seed=fp % 997)
            hops = chase_hops(fp, l2)
            check = chase_check(kernel, chain, order, hops)
            cursor = cupy.zeros(1, dtype=cupy.uint32)
            t = benchmark(lambda: run_chase(kernel, chain, hops, cursor), samples)
            cases.append(require_passed(Case(
                f"{kernel}, {fp} B", {"kernel": kernel, "footprint_bytes": fp}, f"{FAMILY}.{kernel}",
                t, 0.0, float(hops * 4), check,
                launch_record((1,), (1,), cuda.resources(FAMILY, kernel)),
                extra={"hops": hops, "latency_ns": t.median_s / hops * 1e9})))
    return cases


def latency_ns(result, kernel: str, footprint_bytes: int) -> float:
    c = next(c for c in result.cases if c.params == {"kernel": kernel, "footprint_bytes": footprint_bytes})
    return c.median_s / c.extra["hops"] * 1e9


# --------------------------------------------------------------------------- streaming

def max_bytes_in_flight(kernel: str, blocks_per_sm: int, stages: int | None) -> int:
    """The most bytes one SM can have on their way while a block waits for its next tile, read from
    each kernel's loop in ``pipeline.cu``:

    * ``stream_sync``: a float4 per resident thread;
    * ``stream_cp_async``: it waits for tile j before it issues tile j + S - 1, so tiles j to
      j + S - 2 are outstanding: S - 1 tiles (one for a one-stage loop);
    * ``stream_bulk`` (and any TMA ring that refills a slot as soon as it is read): tile j + S - 1
      was issued when slot (j - 1) % S was released, so tiles j to j + S - 1 are outstanding: S tiles.
    """
    if kernel == "stream_sync":
        return blocks_per_sm * THREADS * SYNC_BYTES_PER_THREAD
    if kernel == "stream_bulk":
        return blocks_per_sm * stages * TILE_BYTES
    return blocks_per_sm * max(1, stages - 1) * TILE_BYTES


def bytes_in_flight(case) -> int:
    """``max_bytes_in_flight`` of a recorded streaming case, from its parameters. Computed here rather
    than read from the case's ``extra``: records made before the count was corrected store S - 1
    tiles for ``stream_bulk``."""
    p = case.params
    return max_bytes_in_flight(p["kernel"], p["blocks_per_sm"], p["stages"])


def stream_variants(sync_blocks: list[int], stages: list[int], async_blocks: list[int], compute_capability) -> list[dict]:
    """The variants this GPU can run: cp.async needs compute capability 8.0+, bulk copies 9.0+."""
    cc = float(compute_capability)
    out = [{"kernel": "stream_sync", "blocks_per_sm": b, "stages": None} for b in sync_blocks]
    kernels = ("stream_cp_async",) * (cc >= 8.0) + ("stream_bulk",) * (cc >= BULK_MIN_CC)
    for kernel in kernels:
        out += [{"kernel": kernel, "blocks_per_sm": b, "stages": s} for b in async_blocks for s in stages
                if b * s * TILE_BYTES <= 200 * 1024]
    return out


def profile_streaming(elements: int, variants: list[dict]) -> None:
    """Each variant launched once, in order: what ncu profiles for ``pipeline.streaming``."""
    import cupy

    sms = device().sm_count
    x = cupy.ones(elements, dtype=cupy.float32)
    partial = cupy.empty(8 * sms, dtype=cupy.float32)
    for v in variants:
        run_stream(v["kernel"], x, partial, v["blocks_per_sm"] * sms, v["stages"] or 1)
    cupy.cuda.Device().synchronize()


STREAM_METRICS = ["sm__warps_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed.sum",
                  "dram__bytes_read.sum", "gpu__time_duration.sum"]


@experiment("pipeline.streaming",
            "A sum of squares over 1 GiB: synchronous loads at 1-8 blocks per SM against cp.async and TMA bulk "
            "copies of 16 KiB tiles at 1-12 stages on one (and two) blocks per SM; the copy kernel in the same run.",
            elements=1 << 28, sync_blocks=[1, 2, 3, 4, 6, 8], stages=[1, 2, 3, 4, 6, 8, 12],
            async_blocks=[1, 2], samples=20,
            profiled=[["stream_sync", 8, None], ["stream_sync", 2, None], ["stream_cp_async", 1, 4],
                      ["stream_bulk", 1, 4], ["stream_cp_async", 1, 8], ["stream_bulk", 1, 8]])
def streaming(elements: int, sync_blocks: list[int], stages: list[int], async_blocks: list[int], samples: int,
              profiled: list[list]) -> list[Case]:
    import cupy

    info = device()
    sms = info.sm_count
    x = cupy.random.default_rng(5).random(elements, dtype=cupy.float32)
    want = float((x.astype(cupy.float64) ** 2).sum())
    out = cupy.empty_like(x)
    partial = cupy.empty(max(sync_blocks + async_blocks) * sms, dtype=cupy.float32)
    variants = stream_variants(sync_blocks, stages, async_blocks, info.compute_capability)
    copy_fn = cuda.kernel("elementwise", "copy_vec4")
    copy_grid, copy_block = elementwise_launch("copy_vec4", elements)
    calls, checks = [lambda: copy_fn(copy_grid, copy_block, (out, x, np.int64(elements)))], []
    for v in variants:
        def call(v=v):
            return run_stream(v["kernel"], x, partial[:v["blocks_per_sm"] * sms], v["blocks_per_sm"] * sms,
                              v["stages"] or 1)
        partial.fill(np.nan)
        call()
        checks.append(sum_squares_check(partial[:v["blocks_per_sm"] * sms], want))
        calls.append(call)
    out.fill(np.nan)
    calls[0]()
    copy_check = check_close(out, x, "source array", 0.0)
    times = benchmark_interleaved(calls, samples)
    nbytes = 4.0 * elements
    cases = [require_passed(Case("copy (course copy_vec4)", {"kernel": "copy_vec4"}, "elementwise.copy_vec4",
                                 times[0], 0.0, 2 * nbytes, copy_check,
                                 launch_record(copy_grid, copy_block, cuda.resources("elementwise", "copy_vec4"))))]
    bud = occupancy.budget_from_device(info)
    for v, check, t in zip(variants, checks, times[1:]):
        kernel, b, s = v["kernel"], v["blocks_per_sm"], v["stages"]
        res = family(s).resources[kernel]
        smem = stream_smem(kernel, s or 1)
        resident = occupancy.residency(bud, THREADS, res.registers, smem + res.static_smem_bytes)
        if resident.resident_blocks < b:
            raise AssertionError(f"{kernel} at {b} blocks per SM: only {resident.resident_blocks} fit")
        name = f"{kernel}, {b} block{'s' * (b > 1)}/SM" + (f", {s} stage{'s' * (s > 1)}" if s else "")
        cases.append(require_passed(Case(
            name, dict(v), f"{FAMILY}.{kernel}", t, 2.0 * elements, nbytes, check,
            launch_record((b * sms,), (THREADS,), res, smem),
            extra={"resident_warps_per_sm": b * THREADS // 32, "model_occupancy": b * THREADS / bud.max_threads_per_sm,
                   "max_bytes_in_flight_per_sm": max_bytes_in_flight(kernel, b, s)})))
    wanted = [w for w in ({"kernel": k, "blocks_per_sm": b, "stages": s} for k, b, s in profiled) if w in variants]
    targets = [next(c for c in cases if c.params == w) for w in wanted]
    profiler.attach_profiles(targets, Target(profile_streaming, (elements, wanted)), STREAM_METRICS, r"^stream_", [w["kernel"] for w in wanted])
    return cases


# --------------------------------------------------------------------------- the GEMM's stages

def one_block_smem(info) -> int:
    """Dynamic shared memory that lets only one block of the GEMM onto an SM, whatever its stages."""
    return info.smem_per_sm_bytes // 2 + 1024


GEMM_METRICS = ["smsp__inst_executed.sum", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
                "smsp__warp_issue_stalled_barrier_per_warp_active.pct", "lts__t_bytes.sum", "gpu__time_duration.sum"]


def profile_gemm_stages(n: int, wanted: list[dict]) -> None:
    """Each wanted GEMM variant launched once, in order: what ncu profiles for ``pipeline.gemm_stages``."""
    import cupy

    info = device()
    a, b = to_bf16_bits(random_operand((n, n), 11)), to_bf16_bits(random_operand((n, n), 12))
    c = cupy.empty((n, n), dtype=cupy.uint16)
    for w in wanted:
        with_stages(w["stages"]).run(a, b, c, w["copies"],
                                     smem_bytes=one_block_smem(info) if w["blocks_per_sm"] == 1 else None)
    cupy.cuda.Device().synchronize()


@experiment("pipeline.gemm_stages",
            "The course's bf16 GEMM at 1-6 stages, cp.async and TMA copies, as many blocks per SM as fit and "
            "held to one; checked against cuBLAS, timed call by call with it; ncu's instruction counts and stalls "
            "for both engines at two stages, one block per SM.",
            n=4096, stages=[1, 2, 3, 4, 5, 6], samples=20,
            profiled=[[2, "cp.async", 1], [2, "tma", 1], [4, "cp.async", 1], [4, "tma", 1]])
def gemm_stages(n: int, stages: list[int], samples: int, profiled: list[list]) -> list[Case]:
    import cupy
    import torch

    info = device()
    bud = occupancy.budget_from_device(info)
    a, b = to_bf16_bits(random_operand((n, n), 11)), to_bf16_bits(random_operand((n, n), 12))
    c = cupy.empty((n, n), dtype=cupy.uint16)
    ta, tb = torch_view(a), torch_view(b)
    ref = cupy.asarray(torch.mm(ta, tb).float())
    engines = runnable_engines(info.compute_capability, n, n)
    variants, calls, checks = [], [lambda: torch.mm(ta, tb)], []
    for s in stages:
        variant = with_stages(s)
        fn, res = variant.function(), variant.family().resources[KERNEL]
        grid, block, smem = bf16_geometry(n, n, variant.defines)
        natural = occupancy.residency(bud, block[0], res.registers, smem + res.static_smem_bytes).resident_blocks
        for held in sorted({natural, 1}, reverse=True):
            request = smem if held == natural else one_block_smem(info)
            for engine in engines:
                def call(fn=fn, d=variant.defines, e=engine, r=request):
                    return run_bf16(a, b, c, fn, d, e, smem_bytes=r)
                c.fill(0xFFFF)
                call()
                checks.append(check_close(bf16_bits_to_float32(c), ref, "cuBLAS bf16 (torch.mm)", bf16_tolerance_rel()))
                variants.append((s, engine, held, request, res, grid, block))
                calls.append(call)
    times = benchmark_interleaved(calls, samples, references=[0])
    flop, nbytes = 2.0 * n ** 3, 6.0 * n * n
    cases = [Case("cuBLAS bf16", {"stages": None, "copies": "cublas", "blocks_per_sm": None},
                  "cublas bf16 (torch.mm)", times[0], flop, nbytes,
                  check_close(ref, ref, "itself (the reference)", 0.0),
                  extra={"kernels": mm_kernels(ta, tb)})]
    for (s, engine, held, request, res, grid, block), check, t in zip(variants, checks, times[1:]):
        cases.append(require_passed(Case(
            f"bf16_gemm_mma ({engine}), {s} stage{'s' * (s > 1)}, {held} block{'s' * (held > 1)}/SM",
            {"stages": s, "copies": engine, "blocks_per_sm": held}, f"{BF16}.{KERNEL}", t,
            flop, nbytes, check, launch_record(grid, block, res, request),
            extra={"k_tiles": -(-n // 64), "output_tiles": grid[0], "stage_bytes": (128 * 64 + 64 * 128) * 2})))

    wanted = [w for w in ({"stages": s, "copies": e, "blocks_per_sm": b} for s, e, b in profiled)
              if any(c.params == w for c in cases)]
    targets = [next(c for c in cases if c.params == w) for w in wanted]
    profiler.attach_profiles(targets, Target(profile_gemm_stages, (n, wanted)), GEMM_METRICS, f"^{KERNEL}$", [KERNEL] * len(wanted))
    return cases


@beside_reference
def gemm_profile_rows(result) -> list[dict]:
    """The profiled GEMM variants: instructions issued per KiB staged into shared memory (ncu's count over
    the tiles' bytes, analytic), the tensor pipe's busy share and two stall shares."""
    rows = []
    for c in result.cases:
        m = c.extra.get("ncu")
        if not m:
            continue
        staged = c.extra["k_tiles"] * c.extra["output_tiles"] * c.extra["stage_bytes"]
        rows.append({"copies": c.params["copies"], "stages": c.params["stages"], "blocks/SM": c.params["blocks_per_sm"],
                     "µs (timed)": c.median_s * 1e6,
                     "instructions (ncu)": m["smsp__inst_executed.sum"],
                     "instructions per KiB staged": m["smsp__inst_executed.sum"] / (staged / 1024),
                     "tensor pipe busy (ncu)": f"{m['sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active']:.1f}%",
                     "stalled on loads (long scoreboard)": f"{m['smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct']:.1f}%",
                     "stalled at barriers": f"{m['smsp__warp_issue_stalled_barrier_per_warp_active.pct']:.1f}%"})
    return rows


# --------------------------------------------------------------------------- the timeline


def trace_intervals(trace_row, header_row) -> dict:
    """One traced block's events in ns since its first issue: clock64 stamps converted with the
    block's own clock rate (its globaltimer and clock64 at start and end)."""
    t = np.asarray(trace_row, dtype=np.float64).reshape(-1, len(EVENTS))
    smid, gt0, clk0, gt1, clk1 = (int(v) for v in header_row)
    ns_per_clock = (gt1 - gt0) / (clk1 - clk0)
    ns = (t - t[0, 0]) * ns_per_clock
    return {"smid": smid, "ns_per_clock": ns_per_clock, "start_ns": float(gt0),
            **{e: [round(float(v), 1) for v in ns[:, i]] for i, e in enumerate(EVENTS)}}


SERIAL = "serial"


@experiment("pipeline.timeline",
            "A warp-specialized kernel's copies and math, timestamped per tile on its first blocks: the serial "
            "loop (one slot, released after the math), then 1, 2, 4 and 8 slots released before it; each "
            "beside the same kernel untraced (the instrumentation's cost).",
            stages=[1, 2, 4, 8], work=16, traced_blocks=4, samples=20)
def timeline(stages: list[int], work: int, traced_blocks: int, samples: int) -> list[Case]:
    import cupy

    info = device()
    require_bulk_copies(info.compute_capability)
    sms = info.sm_count
    elements = sms * TRACE_TILES * SPEC_TILE_BYTES // 4     # every tile of every block traced
    x = cupy.random.default_rng(8).random(elements, dtype=cupy.float32)
    want = specialized_reference(x, work)
    partial = cupy.empty(sms, dtype=cupy.float32)
    trace = cupy.zeros(traced_blocks * TRACE_TILES * len(EVENTS), dtype=cupy.uint64)
    header = cupy.zeros(traced_blocks * 5, dtype=cupy.uint64)
    plans, checks = [], []
    for s, late in [(1, True)] + [(s, False) for s in stages]:
        for traced in (False, True):
            def call(s=s, tr=traced, late=late):
                return run_specialized(x, partial, s, work, trace if tr else None, header if tr else None,
                                       traced_blocks, release_after_math=late)
            partial.fill(np.nan)
            call()
            checks.append(sum_squares_check(partial, want))
            plans.append((s, late, traced, call))
    times = benchmark_interleaved([p[3] for p in plans], samples)
    cases = []
    for (s, late, traced, call), check, t in zip(plans, checks, times):
        extra = {"work": work, "tiles_per_block": TRACE_TILES, "tile_bytes": SPEC_TILE_BYTES,
                 "release": "after the math" if late else "before the math"}
        if traced:
            trace.fill(0)
            call()
            rows, heads = trace.get().reshape(traced_blocks, -1), header.get().reshape(traced_blocks, 5)
            extra["blocks"] = [trace_intervals(r, h) for r, h in zip(rows, heads)]
        res = family(s, traced).resources["stream_specialized"]
        label = SERIAL if late else f"{s} stage{'s' * (s > 1)}"
        cases.append(require_passed(Case(
            f"specialized, {label}" + (", traced" if traced else ""),
            {"plan": label, "stages": s, "traced": traced}, f"{FAMILY}.stream_specialized", t,
            2.0 * work * elements, 4.0 * elements, check,
            launch_record((sms,), (32 * (SPEC_WARPS + int(traced)),), res, s * SPEC_TILE_BYTES), extra=extra)))
    return cases


# --------------------------------------------------------------------------- the proxy fence

@experiment("pipeline.proxy_fence",
            "TMA refills of slots the block has just read, with and without fence.proxy.async: wrong results "
            "counted over many runs, in the streaming kernel and in the bf16 GEMM.",
            stream_elements=1 << 24, stream_stages=[2, 4], gemm_sizes=[4096, 8192], runs=50, gemm_runs=20,
            sanitized_n=512, race_launches=[[256, 4], [512, 2]], race_rounds=256, race_runs=20)
def proxy_fence(stream_elements: int, stream_stages: list[int], gemm_sizes: list[int], runs: int,
                gemm_runs: int, sanitized_n: int, race_launches: list[list[int]], race_rounds: int,
                race_runs: int) -> list[Case]:
    import cupy
    import torch

    info = device()
    require_bulk_copies(info.compute_capability)
    sms = info.sm_count
    cases = race_cases(race_launches, race_rounds, race_runs)
    x = cupy.random.default_rng(13).random(stream_elements, dtype=cupy.float32)
    want = float((x.astype(cupy.float64) ** 2).sum())
    partial = cupy.empty(sms, dtype=cupy.float32)
    for s in stream_stages:
        outcomes = {}
        for fence in (True, False):
            checks = []
            for _ in range(runs):
                partial.fill(np.nan)
                run_stream("stream_bulk", x, partial, sms, s, fence)
                checks.append(sum_squares_check(partial, want))
            outcomes[fence] = _outcome(checks)
        t = benchmark(lambda: run_stream("stream_bulk", x, partial, sms, s, True), 20)
        cases.append(_fence_case(f"stream_bulk, {s} stages", {"kernel": "stream_bulk", "stages": s},
                                 f"{FAMILY}.stream_bulk", t, 2.0 * stream_elements, 4.0 * stream_elements, outcomes))
    for n in gemm_sizes:
        a, b = to_bf16_bits(random_operand((n, n), 21)), to_bf16_bits(random_operand((n, n), 22))
        c = cupy.empty((n, n), dtype=cupy.uint16)
        ref = cupy.asarray(torch.mm(torch_view(a), torch_view(b)).float())
        outcomes = {}
        for fence in (True, False):
            variant = PROXY_FENCE if fence else NO_PROXY_FENCE
            checks = []
            for _ in range(gemm_runs):
                c.fill(0xFFFF)
                variant.run(a, b, c, "tma")
                checks.append(check_close(bf16_bits_to_float32(c), ref, "cuBLAS bf16 (torch.mm)", bf16_tolerance_rel()))
            outcomes[fence] = _outcome(checks)
        fn = PROXY_FENCE.function()
        t = benchmark(lambda: run_bf16(a, b, c, fn, PROXY_FENCE.defines, "tma"), 20)
        case = _fence_case(f"bf16_gemm_mma (tma), n={n}", {"kernel": "bf16_gemm_mma", "n": n}, f"{BF16}.bf16_gemm_mma",
                           t, 2.0 * n ** 3, 6.0 * n * n, outcomes)
        if n == min(gemm_sizes):
            case.extra["racecheck"] = racecheck_both(
                lambda fence: Target(run_fence_gemm, (sanitized_n, fence)))
        cases.append(case)
    return cases


def race_cases(launches: list[list[int]], rounds: int, runs: int) -> list[Case]:
    """Each small race kernel at each (threads, blocks per SM), ``runs`` launches with the fence and
    without: the wrong values counted; the fenced kernel's time; racecheck on one small launch of each
    kernel, with the fence and without (the first launch shape only)."""

    sms = device().sm_count
    cases = []
    for kernel in RACE_KERNELS:
        for threads, per_sm in launches:
            blocks = per_sm * sms
            outcomes = {}
            for fence in (True, False):
                counts = [run_race(kernel, threads, blocks, rounds, fence) for _ in range(runs)]
                outcomes[fence] = {"runs": runs, "wrong_runs": sum(w > 0 for w, _ in counts),
                                   "wrong_values": sum(w for w, _ in counts), "values": sum(n for _, n in counts),
                                   "worst_abs_err": None, "tolerance": 0.0,
                                   "reference": "the value each round wrote or loaded (exact)"}
            t = benchmark(lambda: run_race(kernel, threads, blocks, rounds, True), 20)
            moved = 4.0 * RACE_WORDS * rounds * blocks
            case = _fence_case(f"{kernel}, {threads} threads x {blocks} blocks, {rounds} rounds",
                               {"kernel": kernel, "threads": threads, "blocks_per_sm": per_sm},
                               f"{FAMILY}.{kernel}", t, 0.0, moved, outcomes)
            case.extra["timed"] = "the kernel with the fence, with the host's allocation and check"
            if [threads, per_sm] == launches[0]:
                case.extra["racecheck"] = racecheck_both(
                    lambda fence: Target(run_race, (kernel, threads, sms, 8, fence), print_prefix="n="))
            cases.append(case)
    return cases


def _outcome(checks: list[dict]) -> dict:
    """How many of a variant's runs gave a wrong result, and the worst error seen."""
    errs = [c["max_abs_err"] for c in checks]
    return {"runs": len(checks), "wrong_runs": sum(not c["passed"] for c in checks),
            "worst_abs_err": max(e if e == e else float("inf") for e in errs), "tolerance": checks[0]["tolerance"],
            "reference": checks[0]["reference"]}


def _fence_case(name, params, kernel, timing, flop, nbytes, outcomes) -> Case:
    """The fenced kernel's time and check (the one to trust); both variants' run counts in ``extra``."""
    ok = outcomes[True]
    check = {"reference": ok["reference"], "max_abs_err": ok["worst_abs_err"], "tolerance": ok["tolerance"],
             "passed": ok["wrong_runs"] == 0}
    return Case(name, params, kernel, timing, flop, nbytes, check,
                extra={"with the fence": outcomes[True], "without the fence": outcomes[False],
                       "timed": "the kernel with the fence"})


# --------------------------------------------------------------------------- smoke


# --------------------------------------------------------------------------- analysis for the notebook

@beside_reference
def latency_rows(result) -> list[dict]:
    """Per chase: the footprint, the loads it used, nanoseconds per dependent load."""
    return [{"loads": c.params["kernel"].replace("chase_l1", "ld.global.ca (L1 and L2)")
             .replace("chase_l2", "ld.global.cg (L2 only)"), "footprint": _fmt_bytes(c.params["footprint_bytes"]),
             "hops per launch": c.extra["hops"], "ns per load": c.median_s / c.extra["hops"] * 1e9}
            for c in result.cases]


def _fmt_bytes(b: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= size:
            return f"{b / size:g} {unit}"
    return f"{b:g} B"


def memory_levels(result) -> dict[str, float]:
    """Latency (ns) of each level: L1 at the smallest footprint, L2 at the smallest L2-only one,
    HBM at the largest footprint (far beyond the L2)."""
    l1 = [c for c in result.cases if c.params["kernel"] == "chase_l1"]
    l2 = [c for c in result.cases if c.params["kernel"] == "chase_l2"]
    ns = lambda c: c.median_s / c.extra["hops"] * 1e9   # noqa: E731
    key = lambda c: c.params["footprint_bytes"]          # noqa: E731
    return {"L1": ns(min(l1, key=key)), "L2": ns(min(l2, key=key)), "HBM": ns(max(l2, key=key))}


@beside_reference_figure
def latency_figure(result):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for kernel, label in (("chase_l1", "ld.global.ca"), ("chase_l2", "ld.global.cg")):
        cs = sorted((c for c in result.cases if c.params["kernel"] == kernel), key=lambda c: c.params["footprint_bytes"])
        ax.plot([c.params["footprint_bytes"] for c in cs], [c.median_s / c.extra["hops"] * 1e9 for c in cs], "o-",
                label=label)
    l2 = gpu_spec(result.gpu).l2_bytes
    if l2:
        ax.axvline(l2, color="grey", ls=":", label=f"L2 size in the course's spec table ({_fmt_bytes(l2)})")
    reported = (getattr(result, "machine", None) or {}).get("l2_bytes")
    if reported and reported != l2:
        ax.axvline(reported, color="black", ls="--", lw=1, label=f"L2 size the device reports ({_fmt_bytes(reported)})")
    ax.set(xscale="log", xlabel="footprint (bytes)", ylabel="ns per dependent load",
           title=f"Load latency by footprint ({result.provenance})")
    ax.legend(fontsize=8)
    return fig


def littles_law(latency_result, streaming_result) -> dict:
    """Bytes in flight per SM that the measured streaming bandwidth needs at the measured HBM latency."""

    hbm_ns = memory_levels(latency_result)["HBM"]
    best = max((c for c in streaming_result.cases if c.params["kernel"] != "copy_vec4"),
               key=lambda c: c.bandwidth_bytes_per_s)
    g = gpu_spec(streaming_result.gpu)
    need = pipeline.bytes_in_flight_per_sm(g, hbm_ns * 1e-9, best.bandwidth_bytes_per_s)
    return {"HBM latency (ns, pointer chase)": hbm_ns, "best streaming bandwidth (GB/s)": best.bandwidth_bytes_per_s / 1e9,
            "SMs": g.sm_count, "bytes in flight per SM (Little's law)": need,
            "as 16 KiB tiles": need / TILE_BYTES, "as float4 loads of resident threads": need / SYNC_BYTES_PER_THREAD}


def streaming_rows(result, latency_ns: float) -> list[dict]:
    """Each streaming variant: bytes in flight, warps, bandwidth, and Little's law's prediction with
    the unloaded latency, min(datasheet bandwidth, SMs x bytes in flight / latency)."""

    g = gpu_spec(result.gpu)
    copy = next(c for c in result.cases if c.params["kernel"] == "copy_vec4")
    rows = []
    for c in result.cases:
        if c.params["kernel"] == "copy_vec4":
            continue
        inflight = bytes_in_flight(c)
        model = min(g.hbm_bandwidth_bytes_per_s, g.sm_count * inflight / (latency_ns * 1e-9))
        rows.append({"kernel": c.params["kernel"], "blocks/SM": c.params["blocks_per_sm"],
                     "stages": c.params["stages"] or "-", "warps/SM": c.extra["resident_warps_per_sm"],
                     "bytes in flight/SM": inflight, "GB/s": c.bandwidth_bytes_per_s / 1e9,
                     "% of copy": 100 * c.bandwidth_bytes_per_s / copy.bandwidth_bytes_per_s,
                     "Little's law GB/s": model / 1e9,
                     "latency it implies (ns)": g.sm_count * inflight / c.bandwidth_bytes_per_s * 1e9})
    return rows


def streaming_figure(result, latency_ns: float):
    import matplotlib.pyplot as plt

    g = gpu_spec(result.gpu)
    rows = streaming_rows(result, latency_ns)
    fig, ax = plt.subplots(figsize=(7.5, 4))
    styles = {"stream_sync": ("o", "synchronous loads, 1-8 blocks/SM"), "stream_cp_async": ("s", "cp.async stages"),
              "stream_bulk": ("^", "TMA bulk-copy stages")}
    for kernel, (marker, label) in styles.items():
        for b, fill in ((1, True), (2, False)):
            rs = [r for r in rows if r["kernel"] == kernel and (kernel == "stream_sync" or r["blocks/SM"] == b)]
            if rs and (kernel != "stream_sync" or b == 1):
                ax.plot([r["bytes in flight/SM"] / 1024 for r in rs], [r["GB/s"] for r in rs], marker, ls="",
                        mfc=None if fill else "none",
                        label=label + ("" if kernel == "stream_sync" else f", {b} block{'s' * (b > 1)}/SM"))
    xs = sorted({r["bytes in flight/SM"] for r in rows})
    ax.plot([x / 1024 for x in xs], [r for r in (min(g.hbm_bandwidth_bytes_per_s, g.sm_count * x / (latency_ns * 1e-9)) / 1e9
                                               for x in xs)], "k--", lw=1,
            label=f"Little's law at the unloaded latency ({latency_ns:.0f} ns)")
    ax.set(xscale="log", xlabel="bytes in flight per SM (KiB, the most the code allows while it waits)", ylabel="GB/s",
           title=f"Bandwidth against bytes in flight ({result.provenance})")
    ax.legend(fontsize=7)
    return fig


@beside_reference
def occupancy_rows(result) -> list[dict]:
    """The profiled variants: warps the occupancy model allows, ncu's achieved occupancy, bandwidth,
    and instructions issued per byte read from DRAM."""
    rows = []
    for c in result.cases:
        if "ncu" not in c.extra:
            continue
        m = c.extra["ncu"]
        rows.append({"kernel": c.params["kernel"], "blocks/SM": c.params["blocks_per_sm"],
                     "stages": c.params["stages"] or "-", "occupancy (model)": f"{100 * c.extra['model_occupancy']:.1f}%",
                     "achieved occupancy (ncu)": f"{m['sm__warps_active.avg.pct_of_peak_sustained_active']:.1f}%",
                     "GB/s": c.bandwidth_bytes_per_s / 1e9,
                     "instructions per byte (ncu)": m["smsp__inst_executed.sum"] / m["dram__bytes_read.sum"]})
    return rows


def gemm_model(result, copies: str) -> dict:
    """The one-block-per-SM sweep as one pipeline per SM: c (math per K tile) fitted on the fastest
    stage count, L (a tile's load latency) on the one-stage loop, t(S) = waves·k·max(c, (L + c)/S)."""

    cs = {c.params["stages"]: c for c in result.cases
          if c.params["copies"] == copies and c.params["blocks_per_sm"] == 1}
    any_c = next(iter(cs.values()))
    waves = -(-any_c.extra["output_tiles"] // gpu_spec(result.gpu).sm_count)
    beats = waves * any_c.extra["k_tiles"]
    c_s = min(c.median_s for c in cs.values()) / beats
    L_s = cs[1].median_s / beats - c_s
    return {"waves": waves, "k tiles": any_c.extra["k_tiles"], "math per K tile c (µs)": c_s * 1e6,
            "load latency per K tile L (µs)": L_s * 1e6,
            "predicted µs": {s: beats * (L_s + c_s if s == 1 else max(c_s, (L_s + c_s) / s)) * 1e6 for s in sorted(cs)}}


@beside_reference
def gemm_rows(result) -> list[dict]:
    """Every variant: time, TFLOP/s, % of cuBLAS (same run), speedup over one stage at the same
    residency and copy engine, and the one-block model's prediction."""
    cublas = next(c for c in result.cases if c.params["copies"] == "cublas")
    models = {e: gemm_model(result, e) for e in {c.params["copies"] for c in result.cases} - {"cublas"}}
    rows = []
    for c in result.cases:
        p = c.params
        if p["copies"] == "cublas":
            continue
        one = next(o for o in result.cases if o.params == {**p, "stages": 1})
        rows.append({"copies": p["copies"], "blocks/SM": p["blocks_per_sm"], "stages": p["stages"],
                     "µs": c.median_s * 1e6, "TFLOP/s": c.flop / c.median_s / 1e12,
                     "% of cuBLAS": 100 * cublas.median_s / c.median_s,
                     "speedup over 1 stage": one.median_s / c.median_s,
                     "model µs (1 block/SM)": (models[p["copies"]]["predicted µs"][p["stages"]]
                                               if p["blocks_per_sm"] == 1 else "-")})
    return rows


@beside_reference
def timeline_rows(result) -> list[dict]:
    """Per plan: the untraced time, the traced one (the instrumentation's cost), and from the trace
    of the first block the median copy latency and math time and the overlap fraction."""
    from statistics import median

    by = {(c.params["plan"], c.params["traced"]): c for c in result.cases}
    rows = []
    for plan in dict.fromkeys(c.params["plan"] for c in result.cases):
        plain, traced = by[(plan, False)], by[(plan, True)]
        fractions, lat, math_ns = [], [], []
        for b in traced.extra["blocks"]:
            copies, maths = list(zip(b["issue"], b["land"])), list(zip(b["math start"], b["math end"]))
            fractions.append(pipeline.overlap_fraction(copies, maths))
            lat += [e - s for s, e in copies]
            math_ns += [e - s for s, e in maths]
        rows.append({"plan": plan, "µs": plain.median_s * 1e6, "traced µs": traced.median_s * 1e6,
                     "tracing cost": f"{100 * (traced.median_s / plain.median_s - 1):+.1f}%",
                     "copy issue → land (ns, median)": median(lat), "math per tile (ns, median)": median(math_ns),
                     "overlap (copy time under math)": _percent_range(fractions),
                     "blocks traced (SM ids)": ", ".join(str(b["smid"]) for b in traced.extra["blocks"])})
    return rows


def _percent_range(fractions: list[float]) -> str:
    lo, hi = (f"{100 * f:.0f}" for f in (min(fractions), max(fractions)))
    return f"{lo}%" if lo == hi else f"{lo}-{hi}%"


@beside_reference_figure
def timeline_figure(result, plans: tuple[str, ...] = (SERIAL, "4 stages"), tiles: int = 12):
    """The first ``tiles`` tiles of the first traced block of each plan: copies (issue → land) and math."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(plans), 1, figsize=(8, 1.6 * len(plans) + 0.6), sharex=True)
    for ax, plan in zip(np.atleast_1d(axes), plans):
        c = next(c for c in result.cases if c.params["plan"] == plan and c.params["traced"])
        b = c.extra["blocks"][0]
        for j in range(min(tiles, len(b["issue"]))):
            colour = PALETTE[j % len(PALETTE)]
            lane = j % 4
            ax.barh(1 + lane * 0.18, (b["land"][j] - b["issue"][j]) / 1e3, left=b["issue"][j] / 1e3, height=0.16,
                    color=colour)
            ax.barh(0, (b["math end"][j] - b["math start"][j]) / 1e3, left=b["math start"][j] / 1e3, height=0.6,
                    color=colour)
        ax.set(yticks=[0, 1.27], yticklabels=["math", "copies"], title=f"{plan} (SM {b['smid']})")
    np.atleast_1d(axes)[-1].set_xlabel(f"µs since the block's first copy ({result.provenance})")
    fig.tight_layout()
    return fig


@beside_reference
def proxy_rows(result) -> list[dict]:
    rows = []
    for c in result.cases:
        for variant in ("with the fence", "without the fence"):
            o = c.extra[variant]
            rows.append({"kernel": c.name, "variant": variant, "runs": o["runs"], "wrong runs": o["wrong_runs"],
                         "wrong values": (f"{o['wrong_values']:,} of {o['values']:,}" if "values" in o else "—"),
                         "worst error": "—" if o["worst_abs_err"] is None else o["worst_abs_err"],
                         "tolerance": o["tolerance"]})
    return rows


def racecheck_lines(result) -> dict[str, dict[str, list[str]]]:
    """What compute-sanitizer's racecheck said of each kernel it ran, with and without the fence."""
    return {c.name: {k: v.get("lines", [v.get("unavailable", "")]) for k, v in c.extra["racecheck"].items()}
            for c in result.cases if "racecheck" in c.extra}
