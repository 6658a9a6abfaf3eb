"""Notebook 07's experiments: tile and wave quantization of the course's bf16 GEMM beside cuBLAS.

* ``waves.n_sweep``: M = K fixed, N swept in fine steps; the course's kernel (one fixed 128x128
  tile, so the wave model applies exactly) and cuBLAS, called in turn, with the kernel cuBLAS chose.
* ``waves.m_sweep``: N = K fixed, M from thin (decode-like) to square.
* ``waves.remedies``: shapes with a bad tail, and what removes it: a narrower tile, split-K, and a
  persistent grid sized to divide the tile count.

The kernel variants are the tuned ``bf16_gemm_mma`` compiled with other macros, from ``gemm_bf16``'s table:
``SCHEDULED`` (``TC_SCHEDULED=1``) adds persistent grids and split-K; ``NARROW`` (``TC_BN=64, TC_WN=32``)
is a 128x64 tile.
"""
from __future__ import annotations

import numpy as np

from course_lib.core import cuda
from course_lib.core.hardware import detect
from course_lib.core.timing import benchmark_interleaved
from course_lib.launch.gemm_bf16 import (
    KERNEL,
    NARROW,
    PLAIN,
    SCHEDULED,
    Variant,
    bf16_geometry,
    bf16_operands,
    require_bf16_mma,
    resident_blocks,
    run_variant,
    tile_shape,
    variant_name,
)
from course_lib.launch.library import mm_kernels
from course_lib.launch.operands import (
    bf16_bits_to_float32,
    bf16_tolerance_rel,
    torch_view,
)
from course_lib.measure import profiler
from course_lib.measure.conditions import flagged
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import (
    beside_reference,
    beside_reference_figure,
    check_close,
    experiment,
    launch_record,
    require_passed,
)
from course_lib.measure.target import Target
from course_lib.models import waves


def _check(c_bits, ref, label: str) -> dict:
    return check_close(bf16_bits_to_float32(c_bits), ref, label, bf16_tolerance_rel())


def _model_extra(m: int, n: int, k: int, sms: int, resident: int, variant: Variant = PLAIN, split_k: int = 1,
                 grid_blocks: int | None = None) -> dict:
    bm, bn = tile_shape(variant)
    q = waves.quantize(m, n, bm, bn, sms, resident, split_k)
    return {"tile": [bm, bn], "split_k": split_k, "tiles": q.grid.tiles, "blocks": q.schedule.blocks,
            "resident_blocks_per_sm": resident, "slots": q.schedule.slots, "waves": q.schedule.waves,
            "last_wave_fill": q.schedule.last_wave_fill, "useful_fraction": q.useful_fraction,
            "tile_edge_efficiency": q.grid.tile_edge_efficiency, "grid_blocks": grid_blocks or q.schedule.blocks,
            "shape": [m, n, k]}


def _pair_cases(shapes: list[tuple[int, int, int]], samples: int, sweep_key: str) -> list[Case]:
    """The course's kernel and cuBLAS at each shape, timed call by call in turn, with cuBLAS's kernel."""
    import cupy
    import torch

    info = detect()
    require_bf16_mma(info.compute_capability)
    resident = resident_blocks(info.name)
    cases = []
    for m, n, k in shapes:
        a, b, c = bf16_operands(m, n, k, 7)
        ta, tb = torch_view(a), torch_view(b)
        lib = torch.mm(ta, tb)
        ref_c = cupy.asarray(torch.mm(ta.double(), tb.double()))
        run_variant(a, b, c)
        check = _check(c, ref_c, "float64 matmul of the same bf16 inputs")
        lib_check = check_close(cupy.asarray(lib.float()), ref_c, "float64 matmul of the same bf16 inputs",
                                bf16_tolerance_rel())
        t_lib, t_course = benchmark_interleaved([lambda: torch.mm(ta, tb), lambda: run_variant(a, b, c)], samples,
                                                 references=[0])
        flop, nbytes = 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n)
        params = {sweep_key: {"n_sweep": n, "m_sweep": m}[sweep_key]}
        grid, block, smem = bf16_geometry(m, n)
        res = PLAIN.family().resources[KERNEL]
        cases.append(require_passed(Case(
            f"cuBLAS {m}x{n}x{k}", params | {"kernel": "cublas"}, "cublas bf16 (torch.mm)", t_lib,
            flop, nbytes, lib_check, extra={"cublas_kernels": mm_kernels(ta, tb), "shape": [m, n, k]})))
        cases.append(require_passed(Case(
            f"course {m}x{n}x{k}", params | {"kernel": "course"}, variant_name(PLAIN), t_course,
            flop, nbytes, check, launch_record(grid, block, res, smem),
            extra=_model_extra(m, n, k, info.sm_count, resident))))
    return cases


WAVE_METRICS = ["launch__waves_per_multiprocessor", "launch__occupancy_limit_registers",
                "launch__occupancy_limit_shared_mem", "launch__grid_size"]


def profile_launches(m: int, k: int, ns: list[int]) -> None:
    """One launch of the course's kernel per N, in order: what ncu profiles for ``waves.n_sweep``."""
    import cupy

    for n in ns:
        a, b, c = bf16_operands(m, n, k, 7)
        run_variant(a, b, c)
    cupy.cuda.Device().synchronize()


@experiment("waves.n_sweep",
            "The course's bf16 GEMM (fixed 128x128 tile) and cuBLAS, N swept finely at M = K fixed: the sawtooth.",
            record_runs=3, m=4096, k=4096, n_first=1024, n_last=4608, n_step=64, samples=20,
            profiled_ns=[1024, 1088, 2112, 2176, 3136, 3200, 4224, 4288])
def n_sweep(m: int, k: int, n_first: int, n_last: int, n_step: int, samples: int, profiled_ns: list[int]) -> list[Case]:
    cases = _pair_cases([(m, n, k) for n in range(n_first, n_last + 1, n_step)], samples, "n_sweep")
    chosen = [c for c in cases if c.params["kernel"] == "course" and c.params["n_sweep"] in profiled_ns]
    profiler.attach_profiles(chosen, Target(profile_launches, (m, k, [c.params['n_sweep'] for c in chosen])), WAVE_METRICS, f"^{KERNEL}$", [KERNEL] * len(chosen))
    return cases


@beside_reference
def ncu_wave_rows(result) -> list[dict]:
    """ncu's waves per SM for the profiled shapes beside the model's (blocks / slots)."""
    return [{"N": c.params["n_sweep"], "blocks": c.extra["blocks"], "slots (analytic)": c.extra["slots"],
             "waves (analytic, blocks / slots)": c.extra["blocks"] / c.extra["slots"],
             "launch__waves_per_multiprocessor (ncu)": c.extra["ncu"]["launch__waves_per_multiprocessor"],
             "waves run (analytic, rounded up)": c.extra["waves"]}
            for c in result.cases if "ncu" in c.extra]


@experiment("waves.m_sweep",
            "The same two GEMMs with M swept from thin (decode, small batches) to square, N = K fixed.",
            n=4096, k=4096, ms=[16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048], samples=20)
def m_sweep(n: int, k: int, ms: list[int], samples: int) -> list[Case]:
    return _pair_cases([(m, n, k) for m in ms], samples, "m_sweep")


REMEDY_SHAPES = {
    # a second wave of 24 blocks on 264 slots with 128x128 tiles; 128x64 tiles make 576 blocks on 396
    "tile": (4096, 1152, 4096),
    # 36 tiles for 264 slots, and a long K to split
    "split_k": (768, 768, 16384),
    # 270 tiles: the full grid runs 264, then 6 alone; 135 persistent blocks run 2 each
    "persistent": (2304, 1920, 4096),
}


PLACEMENT_SPIN_NS = 200_000   # each probe block stays this long, so every block of the grid is resident at once


def placement(grid_blocks: int, threads: int, smem_bytes: int) -> dict:
    """Where the block scheduler puts a grid of ``grid_blocks`` blocks with this footprint, measured:
    notebook 02's ``tile_owner_order`` probe, launched with the same threads and dynamic shared memory
    (so as many fit per SM as of the GEMM), records each block's SM and start time. Blocks that
    start after the first ones finish did not fit in the first round."""
    import cupy

    fn = cuda.kernel("warps", "tile_owner_order")
    if fn.max_dynamic_shared_size_bytes < smem_bytes:
        fn.max_dynamic_shared_size_bytes = smem_bytes
    owner = cupy.full((1, 1), -1, dtype=cupy.int32)
    ticket, smid = cupy.empty(grid_blocks, dtype=cupy.int32), cupy.empty(grid_blocks, dtype=cupy.int32)
    start, counter = cupy.empty(grid_blocks, dtype=cupy.uint64), cupy.zeros(1, dtype=cupy.uint32)
    one = np.int32(1)
    fn((grid_blocks,), (threads,), (owner, ticket, smid, start, counter, one, one, one, one,
                                    np.int32(PLACEMENT_SPIN_NS)), shared_mem=smem_bytes)
    sm, t0 = smid.get(), start.get()
    first = (t0 - t0.min()) < PLACEMENT_SPIN_NS // 2
    per_sm = np.bincount(sm[first])
    return {"blocks": grid_blocks, "sms_used": int((per_sm > 0).sum()), "sms_with_two": int((per_sm >= 2).sum()),
            "most_on_one_sm": int(per_sm.max()), "started_later": int((~first).sum()),
            "probe": "warps.tile_owner_order", "probe_smem_bytes": smem_bytes}


@experiment("waves.remedies",
            "Shapes with a bad tail, and what removes it: a narrower tile, split-K, a persistent grid.",
            split_ks=[2, 3, 4, 6, 7], persistent_grids=[270, 264, 135, 132, 90], samples=30)
def remedies(split_ks: list[int], persistent_grids: list[int], samples: int) -> list[Case]:
    import cupy
    import torch

    info = detect()
    require_bf16_mma(info.compute_capability)
    sms = info.sm_count
    cases = []
    for remedy, (m, n, k) in REMEDY_SHAPES.items():
        a, b, c = bf16_operands(m, n, k, 11)
        ta, tb = torch_view(a), torch_view(b)
        ref = cupy.asarray(torch.mm(ta.double(), tb.double()))
        work = cupy.empty(max(split_ks) * m * n, dtype=cupy.float32) if remedy == "split_k" else None
        variants = [("course 128x128, one tile per block", PLAIN, {})]
        if remedy == "tile":
            variants.append(("course 128x64, one tile per block", NARROW, {}))
        if remedy == "split_k":
            variants += [(f"course 128x128, split-K {s}", SCHEDULED, {"split_k": s, "workspace": work})
                         for s in split_ks]
        if remedy == "persistent":
            variants += [(f"course 128x128, persistent grid of {g}", SCHEDULED, {"grid_blocks": g})
                         for g in persistent_grids]
        calls, checks = [lambda: torch.mm(ta, tb)], []
        for _, variant, kw in variants:
            c.fill(0xFFFF)   # NaN bits: an unwritten output fails the check
            run_variant(a, b, c, variant, **kw)
            checks.append(_check(c, ref, "float64 matmul of the same bf16 inputs"))
            calls.append(lambda v=variant, kw=kw: run_variant(a, b, c, v, **kw))
        t_lib, *times = benchmark_interleaved(calls, samples, references=[0])
        flop, nbytes = 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n)
        lib = torch.mm(ta, tb)
        cases.append(require_passed(Case(
            f"{remedy}: cuBLAS", {"remedy": remedy, "variant": "cublas"}, "cublas bf16 (torch.mm)",
            t_lib, flop, nbytes,
            check_close(cupy.asarray(lib.float()), ref, "float64 matmul of the same bf16 inputs", bf16_tolerance_rel()),
            extra={"cublas_kernels": mm_kernels(ta, tb), "shape": [m, n, k]})))
        for (label, variant, kw), t, check in zip(variants, times, checks):
            split = kw.get("split_k", 1)
            grid, block, smem = bf16_geometry(m, n, variant.defines)
            res = variant.family().resources[KERNEL]
            resident = resident_blocks(info.name, variant)
            extra = _model_extra(m, n, k, sms, resident, variant, split, kw.get("grid_blocks"))
            # Split-K's extra traffic: every slice writes its fp32 partials, the reduction reads them back.
            extra["partial_bytes"] = 2 * 4.0 * split * m * n if split > 1 else 0.0
            if remedy == "persistent":
                extra["placement"] = placement(extra["grid_blocks"], block[0], smem)
            cases.append(require_passed(Case(
                f"{remedy}: {label}", {"remedy": remedy, "variant": label}, variant_name(variant),
                t, flop, nbytes + extra["partial_bytes"], check,
                launch_record((extra["grid_blocks"] if "grid_blocks" in kw else grid[0], split), block, res, smem),
                extra=extra)))
    return cases


# --------------------------------------------------------------------------- analysis for the notebook

def sweep_series(result, key: str) -> dict[str, list]:
    """x values, the two kernels' medians, and the model's waves and useful fraction per shape."""
    course = [c for c in result.cases if c.params.get("kernel") == "course"]
    lib = {c.params[key]: c for c in result.cases if c.params.get("kernel") == "cublas"}
    xs = [c.params[key] for c in course]
    return {"x": xs, "course_s": [c.median_s for c in course], "cublas_s": [lib[x].median_s for x in xs],
            "waves": [c.extra["waves"] for c in course], "useful": [c.extra["useful_fraction"] for c in course],
            "fill": [c.extra["last_wave_fill"] for c in course], "flop": [c.flop for c in course],
            "sm_rounds": [sm_rounds_of(c.extra) for c in course],
            "resident": [c.extra["resident_blocks_per_sm"] for c in course],
            "cublas_kernels": [[k for k in lib[x].extra["cublas_kernels"] if not k.startswith("Memset")]
                               for x in xs],
            # a reference flagged by the recorder (protocols disagreed, moved between runs) or power-limited
            "cublas_flagged": [flagged(lib[x]) for x in xs]}


def seconds_per_wave(series: dict, min_fill: float = 0.85) -> float:
    """A wave's time, fitted on the shapes whose last wave is (nearly) full: median of time / waves."""
    full = [t / w for t, w, f in zip(series["course_s"], series["waves"], series["fill"]) if f >= min_fill]
    if not full:
        raise ValueError(f"no shape in the sweep has a last wave at least {min_fill:.0%} full to fit on")
    return float(np.median(full))


def observed_steps(series: dict, seconds_per_wave_: float, fraction: float = 0.3) -> list[int]:
    """The x values at which the measured time jumps by more than ``fraction`` of a wave."""
    t, x = series["course_s"], series["x"]
    return [x[i] for i in range(1, len(x)) if t[i] - t[i - 1] > fraction * seconds_per_wave_]


def model_ratios(series: dict, seconds_per_wave_: float) -> dict[str, tuple[float, float]]:
    """Measured time over each model's staircase, (lowest, highest) over the sweep: the wave model
    (waves × a wave) and the SM-round model (SM rounds × a wave ÷ resident blocks per SM)."""
    t = series["course_s"]
    wave = [ti / (w * seconds_per_wave_) for ti, w in zip(t, series["waves"])]
    rounds = [ti / (r * seconds_per_wave_ / k) for ti, r, k in zip(t, series["sm_rounds"], series["resident"])]
    return {"wave model": (min(wave), max(wave)), "SM-round model": (min(rounds), max(rounds))}


def cliff_table(series: dict, seconds_per_wave_: float) -> list[dict]:
    """Each step the model predicts (the wave count rises) against the measured steps: found within
    one sweep step, or missed."""
    x, w = series["x"], series["waves"]
    seen = observed_steps(series, seconds_per_wave_)
    rows = []
    for i in range(1, len(x)):
        if w[i] > w[i - 1]:
            near = [s for s in seen if abs(x.index(s) - i) <= 1]
            rows.append({"predicted at": x[i], "waves": f"{w[i - 1]} → {w[i]}",
                         "measured step at": near[0] if near else None,
                         "found": "yes" if near else "missed"})
    return rows


def sm_round_steps(series: dict, result) -> list[int]:
    """Where the count of *SM rounds* rises: blocks / SMs, rounded up. With two resident blocks per SM
    a block alone on its SM finishes sooner than two sharing one, so time can step every SM count of
    blocks, twice per wave of slots. The second model the sweep is compared with."""
    course = [c for c in result.cases if c.params.get("kernel") == "course"]
    rounds = [-(-c.extra["blocks"] // (c.extra["slots"] // c.extra["resident_blocks_per_sm"])) for c in course]
    x = series["x"]
    return [x[i] for i in range(1, len(x)) if rounds[i] > rounds[i - 1]]


def step_table(series: dict, result, seconds_per_wave_: float) -> list[dict]:
    """Every measured step, and which model predicts it: the wave model (slots) or the SM-round model."""
    seen = observed_steps(series, seconds_per_wave_)
    x, w = series["x"], series["waves"]
    by_wave = {x[i] for i in range(1, len(x)) if w[i] > w[i - 1]}
    by_round = set(sm_round_steps(series, result))
    near = lambda s, pts: any(abs(x.index(s) - x.index(p)) <= 1 for p in pts)  # noqa: E731
    return [{"measured step at N": s, "µs before → after": f"{series['course_s'][x.index(s) - 1] * 1e6:.0f} → "
             f"{series['course_s'][x.index(s)] * 1e6:.0f}", "wave model (analytic)": "yes" if near(s, by_wave) else "no",
             "SM-round model (analytic)": "yes" if near(s, by_round) else "no"} for s in seen]


def sm_rounds_of(extra: dict) -> int:
    """The SM-round model's count for one recorded variant (its ``extra``): blocks ÷ SMs rounded up,
    or for a persistent grid the most tiles any SM runs (``waves.persistent_sm_rounds``)."""
    sms = extra["slots"] // extra["resident_blocks_per_sm"]
    if extra["grid_blocks"] != extra["blocks"]:
        return waves.persistent_sm_rounds(extra["tiles"] * extra["split_k"], extra["grid_blocks"], sms)
    return -(-extra["blocks"] // sms)


def sm_round_useful(extra: dict) -> float:
    """The SM-round model's useful fraction of one recorded variant: tile-edge × blocks / (rounds × SMs)."""
    sms = extra["slots"] // extra["resident_blocks_per_sm"]
    return extra["tile_edge_efficiency"] * extra["blocks"] / (sm_rounds_of(extra) * sms)


@beside_reference
def remedy_rows(result) -> list[dict]:
    """Each remedy against the one-tile-per-block baseline at its shape, with the share of the
    tail's waste it recovers. The waste is the baseline's time times its idle fraction per the SM-round
    model (blocks ÷ SMs, rounded up), the model that predicts this kernel's measured steps; the slot
    model's useful fraction is shown beside it."""
    rows = []
    for remedy in REMEDY_SHAPES:
        cs = [c for c in result.cases if c.params["remedy"] == remedy]
        base = next(c for c in cs if c.params["variant"] == "course 128x128, one tile per block")
        lib = next(c for c in cs if c.params["variant"] == "cublas")
        waste = base.median_s * (1.0 - sm_round_useful(base.extra))
        for c in cs:
            e = c.extra
            rows.append({"shape": "x".join(map(str, lib.extra["shape"])), "variant": c.params["variant"],
                         "median µs": c.median_s * 1e6, "TFLOP/s": c.flop_per_s / 1e12,
                         "% of cuBLAS": 100 * lib.median_s / c.median_s,
                         "blocks (analytic)": e.get("blocks"), "waves (analytic)": e.get("waves"),
                         "useful (analytic)": e.get("useful_fraction"),
                         "SM rounds (analytic)": sm_rounds_of(e) if "tiles" in e else None,
                         "useful, SM rounds (analytic)": sm_round_useful(e) if "tiles" in e else None,
                         "SMs used (measured)": e["placement"]["sms_used"] if "placement" in e else None,
                         "SMs with two (measured)": e["placement"]["sms_with_two"] if "placement" in e else None,
                         "tail waste recovered": ((base.median_s - c.median_s) / waste
                                                  if c is not base and "tiles" in e else None)})
    return rows


def grid_comparison(result, fewer: int = 90, all_sms: int = 132) -> str:
    """Two persistent grids at the persistent remedy's shape, as a sentence: their rounds (the wave
    model), the SMs each used (measured) and their medians with the spread of the samples."""
    import statistics

    def case(g):
        return next(c for c in result.cases if c.params["remedy"] == "persistent"
                    and c.params["variant"] == f"course 128x128, persistent grid of {g}")

    a, b = case(fewer), case(all_sms)
    tiles = a.extra["tiles"]

    def part(c, g):
        q = statistics.quantiles([t * 1e6 for t in c.samples_s], n=4)
        return (f"{g} blocks on {c.extra['placement']['sms_used']} SMs, {-(-tiles // g)} rounds: "
                f"median {c.median_s * 1e6:.1f} µs (middle half {q[0]:.1f}–{q[2]:.1f})")

    diff = 100 * (b.median_s - a.median_s) / b.median_s
    verdict = (f"the {fewer}-block grid was {diff:.1f}% faster" if diff > 0 else
               f"the {fewer}-block grid was {-diff:.1f}% slower")
    return f"{tiles} tiles. {part(a, fewer)}; {part(b, all_sms)}. In this run {verdict}."


# --------------------------------------------------------------------------- smoke launches (sanitizer)


@beside_reference_figure
def sweep_figure(result, key: str = "n_sweep"):
    """Time and TFLOP/s against the swept size: both kernels, and the wave model's prediction."""
    import matplotlib.pyplot as plt

    s = sweep_series(result, key)
    per_wave = seconds_per_wave(s)
    x = s["x"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.4), sharex=True)
    top.plot(x, [t * 1e6 for t in s["course_s"]], "o-", ms=3, label="course bf16_gemm_mma (128×128 tile)")
    top.plot(x, [t * 1e6 for t in s["cublas_s"]], "s-", ms=3, label="cuBLAS bf16")
    top.step(x, [w * per_wave * 1e6 for w in s["waves"]], where="mid", color="grey", ls="--",
             label=f"waves × {per_wave * 1e6:.0f} µs (analytic, fitted on full waves)")
    top.step(x, [r * per_wave / k * 1e6 for r, k in zip(s["sm_rounds"], s["resident"])], where="mid",
             color="black", ls=":", label="SM rounds × the same wave ÷ blocks per SM (analytic)")
    top.set_ylabel("median time (µs)")
    top.legend(fontsize=8)
    bottom.plot(x, [f / t / 1e12 for f, t in zip(s["flop"], s["course_s"])], "o-", ms=3, label="course")
    bottom.plot(x, [f / t / 1e12 for f, t in zip(s["flop"], s["cublas_s"])], "s-", ms=3, label="cuBLAS")
    marked = [(xi, f / t / 1e12) for xi, f, t, bad in zip(x, s["flop"], s["cublas_s"], s["cublas_flagged"]) if bad]
    if marked:
        bottom.scatter(*zip(*marked), s=60, facecolors="none", edgecolors="red", zorder=3,
                       label="cuBLAS flagged (protocols or runs disagree, or power-limited)")
    bottom.set_ylabel("TFLOP/s")
    bottom.set_xlabel({"n_sweep": "N", "m_sweep": "M"}[key])
    bottom.legend(fontsize=8)
    m, n, k = (result.params.get(v) for v in ("m", "n", "k"))
    fixed = f"M = {m}, K = {k}" if key == "n_sweep" else f"N = {n}, K = {k}"
    top.set_title(f"{fixed}: {result.provenance}", fontsize=10)
    fig.tight_layout()
    return fig


@beside_reference
def cublas_switch_rows(result, key: str = "n_sweep") -> list[dict]:
    """The shapes at which cuBLAS changes kernel: its tile, from the kernel's name, beside its time."""
    s = sweep_series(result, key)
    rows, last = [], None
    for x, names, t in zip(s["x"], s["cublas_kernels"], s["cublas_s"]):
        name = " + ".join(n.split("(")[0].split("<")[0] for n in names)
        if name != last:
            rows.append({key.split("_")[0].upper(): x, "cuBLAS kernel (PyTorch profiler)": name,
                         "median µs": t * 1e6})
            last = name
    return rows
