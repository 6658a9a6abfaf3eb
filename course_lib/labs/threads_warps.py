"""Notebook 02: who owns which output tile, in what order blocks start, and divergence measured.

Experiments:

* ``warps.block_order``: every block of a tiled launch writes its program id over the tile it
  owns (edge tiles masked) and records when, and on which SM, it started. The owner map is
  checked against ``launch_geometry.owner_of``; the start order is the picture.
* ``warps.divergence``: the same per-thread work with its paths spread across whole warps or
  across the lanes of each warp; measured time against ``launch_geometry.divergence_factor``,
  with Nsight Compute's instructions and active threads per instruction where it can run.

The launches are ``course_lib.launch.warps``'s. The analysis helpers at the bottom need no GPU.
"""
from __future__ import annotations

from course_lib.core import cuda
from course_lib.core.hardware import detect, gpu_spec
from course_lib.core.timing import benchmark
from course_lib.launch import warps
from course_lib.launch.warps import MODE_LABELS
from course_lib.measure import profiler
from course_lib.measure.evidence import Case, Check
from course_lib.measure.experiments import (
    beside_reference,
    beside_reference_figure,
    check_close,
    experiment,
    kernel_launch_record,
    require_passed,
)
from course_lib.measure.target import Target
from course_lib.models import launch_geometry as lg
from course_lib.models import occupancy as occ

DIVERGENCE_METRICS = ["smsp__inst_executed.sum", "smsp__thread_inst_executed_per_inst_executed.ratio",
                      "sm__warps_active.avg.pct_of_peak_sustained_active"]


# --------------------------------------------------------------------------- warps.block_order

@experiment("warps.block_order",
            "Blocks own output tiles (edges masked) and record the order, time and SM they start on.",
            m=1000, n=1000, block_m=16, block_n=16, spin_ns=5000, launches=2, samples=25)
def block_order(m: int, n: int, block_m: int, block_n: int, spin_ns: int, launches: int,
                samples: int) -> list[Case]:
    grid, b, g, blk, run = warps.block_order_launch(m, n, block_m, block_n, spin_ns)
    runs, bad = [], 0
    ref = warps.owner_reference(grid)
    for _ in range(launches):
        b["owner"].fill(-1)
        run()
        tickets = b["ticket"].get()
        start = b["start"].get()
        bad += int((b["owner"] != ref).sum())
        bad += int((sorted(tickets.tolist()) != list(range(grid.blocks))))
        runs.append({"ticket": tickets.tolist(), "smid": b["smid"].get().tolist(),
                     "start_ns": (start - start.min()).astype("int64").tolist()})
    check = Check("owner map = launch_geometry.owner_of, tickets a permutation of 0..blocks-1",
                  float(bad), 0.0).to_json()
    t = benchmark(run, samples)
    info = detect()
    name = f"{grid.blocks} blocks ({grid.tiles_m}×{grid.tiles_n}) of {block_m}×{block_n} tiles, {m}×{n} output"
    return [require_passed(Case(
        name, {"m": m, "n": n, "block_m": block_m, "block_n": block_n}, "warps.tile_owner_order",
        t, 0, 4.0 * m * n, check, kernel_launch_record(g, blk, "warps", "tile_owner_order"),
        extra={"grid": [grid.tiles_m, grid.tiles_n], "sm_count": info.sm_count, "spin_ns": spin_ns,
               "runs": runs}))]


# --------------------------------------------------------------------------- warps.divergence

@experiment("warps.divergence",
            "The same dependent-FMA work per thread, its paths split across warps or across the lanes of a warp.",
            n=1 << 20, iters=4096, modes=MODE_LABELS, samples=25)
def divergence(n: int, iters: int, modes: list[str], samples: int) -> list[Case]:
    x, out, grid, block, launches = warps.divergence_launches(n, iters, modes)
    refs = warps.divergence_reference(x, iters)
    cases = []
    for label, mode, run, _ in launches:
        paths = warps.path_map(mode, x)
        ref = warps.divergence_expected(paths, x, refs)
        out.fill(float("nan"))
        run()
        check = check_close(out, ref, "float64 reference (CuPy), same path per thread", 0.0, atol=5e-4)
        t = benchmark(run, samples)
        working = int((paths >= 0).sum())
        cases.append(require_passed(Case(
            label, {"modes": label}, "warps.divergence", t, 2.0 * iters * working, 8.0 * n,
            check, kernel_launch_record(grid, block, "warps", "divergence"),
            extra={"mode": mode.mode, "iters": iters, "threads_working": working,
                   "predicted_factor": lg.divergence_factor(mode),
                   "predicted_lane_efficiency": lg.lane_efficiency(mode)})))
    profiler.attach_profiles(cases, Target(warps.profile_divergence, (n, iters, modes)), DIVERGENCE_METRICS,
                             "^divergence$", ["divergence"] * len(cases))
    return cases


# --------------------------------------------------------------------------- analysis (no GPU)

def _divergence_rows(result) -> list[dict]:
    """Measured time relative to one-path-for-all against the predicted factor, per mode."""
    base = result.case("one path for every lane").median_s
    rows = []
    for c in result.cases:
        ncu = c.extra.get("ncu") or {}
        rows.append({"mode": c.name, "median µs": c.median_s * 1e6,
                     "measured × (vs one path)": c.median_s / base,
                     "predicted ×": c.extra["predicted_factor"],
                     "measured / predicted": c.median_s / base / c.extra["predicted_factor"]
                     if c.extra["predicted_factor"] else None,
                     "lanes busy per instruction (model)": 32 * c.extra["predicted_lane_efficiency"],
                     "ncu threads per instruction": ncu.get("smsp__thread_inst_executed_per_inst_executed.ratio")})
    return rows


@beside_reference
def divergence_rows(result) -> list[dict]:
    return _divergence_rows(result)


@beside_reference
def divergence_profile_rows(result) -> list[dict]:
    base = result.case("one path for every lane").extra["ncu"]["smsp__inst_executed.sum"]
    rows = []
    for c in result.cases:
        ncu = c.extra["ncu"]
        rows.append({"mode": c.name, "warp instructions (ncu)": ncu["smsp__inst_executed.sum"],
                     "× one path (ncu)": ncu["smsp__inst_executed.sum"] / base,
                     "predicted ×": c.extra["predicted_factor"],
                     "threads per instruction (ncu)": ncu["smsp__thread_inst_executed_per_inst_executed.ratio"],
                     "threads per instruction (model)": 32 * c.extra["predicted_lane_efficiency"],
                     "achieved occupancy % (ncu)": ncu["sm__warps_active.avg.pct_of_peak_sustained_active"]})
    return rows


def block_order_summary(result, run: int = 0) -> dict:
    """How far the start order strays from program-id order, from one recorded launch."""
    c = result.cases[0]
    r = c.extra["runs"][run]
    tickets = r["ticket"]
    blocks = len(tickets)
    out_of_order = sum(1 for pid in range(1, blocks) if tickets[pid] < tickets[pid - 1])
    displaced = sum(1 for pid, t in enumerate(tickets) if t != pid)
    per_sm: dict[int, int] = {}
    for s in r["smid"]:
        per_sm[s] = per_sm.get(s, 0) + 1
    others = [c.extra["runs"][i]["ticket"] for i in range(len(c.extra["runs"])) if i != run]
    differ = [sum(1 for a, b in zip(tickets, o) if a != b) for o in others]
    return {"blocks": blocks, "ticket below that of program id − 1": out_of_order,
            "ticket ≠ program id": displaced, "SMs used": len(per_sm),
            "blocks per SM (min–max)": f"{min(per_sm.values())}–{max(per_sm.values())}",
            "launch span µs": max(r["start_ns"]) / 1e3,
            "tickets that differ from the other launches": differ}


def launch_waves(result) -> dict | None:
    """The wave model for the block-order launch on the result's GPU: slots from the occupancy model
    and the kernel's compiled resources; None for a GPU the course has no specification of."""
    import math

    c = result.cases[0]
    blocks, threads = math.prod(c.extra["grid"]), result.params["block_m"] * result.params["block_n"]
    try:
        spec = gpu_spec(result.gpu)
    except KeyError:
        return None
    res = cuda.resources("warps", "tile_owner_order", cuda.arch_for("warps", f"sm_{spec.compute_capability.replace('.', '')}"))
    per_sm = occ.residency(occ.budget(spec), threads, res.registers, res.static_smem_bytes).resident_blocks
    slots = per_sm * spec.sm_count
    n_waves = -(-blocks // slots)
    return {"blocks": blocks, "per_sm": per_sm, "sms": spec.sm_count, "slots": slots, "waves": n_waves,
            "last_fill": (blocks - (n_waves - 1) * slots) / slots}


@beside_reference_figure
def block_order_figure(result, run: int = 0):
    """Left: each block coloured by its start ticket, laid out as its output tile. Right: start time
    against program id, coloured by SM."""
    import matplotlib.pyplot as plt
    import numpy as np

    c = result.cases[0]
    gm, gn = c.extra["grid"]
    r = c.extra["runs"][run]
    tickets = np.array(r["ticket"]).reshape(gm, gn)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.6))
    im = a.imshow(tickets, cmap="viridis", interpolation="nearest")
    a.set_title("start ticket of the block owning each tile", fontsize=9)
    a.set_xlabel("tile column (pid_n)")
    a.set_ylabel("tile row (pid_m)")
    fig.colorbar(im, ax=a, label="ticket (0 = first to start)")
    start_us = np.array(r["start_ns"]) / 1e3
    b.scatter(np.arange(gm * gn), start_us, c=np.array(r["smid"]), s=3, cmap="tab20")
    b.set_xlabel("program id")
    b.set_ylabel("start time since the first block (µs)")
    b.set_title("when each block started; colour = SM", fontsize=9)
    b.grid(alpha=0.2)
    waves = launch_waves(result)
    if waves:   # what the model predicts: count the bands of start times against it
        b.set_title(f"when each block started; colour = SM\nwave model: {waves['blocks']:,} blocks on "
                    f"{waves['slots']:,} slots ({waves['per_sm']} per SM × {waves['sms']} SMs) = {waves['waves']} "
                    f"waves, the last {100 * waves['last_fill']:.0f}% full", fontsize=9)
    fig.suptitle(f"{c.name}: {result.provenance}", fontsize=10)
    fig.tight_layout()
    return fig


@beside_reference_figure
def divergence_figure(result):
    import matplotlib.pyplot as plt

    rows = _divergence_rows(result)
    fig, ax = plt.subplots(figsize=(9, 4.2))
    y = range(len(rows))
    ax.barh([i + 0.2 for i in y], [r["predicted ×"] for r in rows], height=0.4, color="#bbbbbb",
            label="predicted (distinct paths per warp)")
    ax.barh([i - 0.2 for i in y], [r["measured × (vs one path)"] for r in rows], height=0.4, color="#4c72b0",
            label="measured")
    ax.set_yticks(list(y))
    ax.set_yticklabels([r["mode"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time relative to one path for every lane (×)")
    ax.set_title(f"divergence: measured against predicted ({result.provenance})", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.2)
    fig.tight_layout()
    return fig
