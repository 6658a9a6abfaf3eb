"""Claims of 02_threads_warps' prose (see course_lib.measure.claims): each is checked against the record
and against the live run committed with the notebook."""
from collections import Counter

from course_lib.core import cuda, hardware
from course_lib.exercises.kernel import catalog
from course_lib.measure.claims import Analytic, Measured
from course_lib.models import launch_geometry as lg
from course_lib.models import occupancy as occ

ORDER, DIV = "warps.block_order", "warps.divergence"
BAND_GAP_US = 1.0   # blocks of one wave start within ~1 µs; waves are ~4–5 µs apart (each block spins 5 µs)


def waves() -> dict:
    """The wave model of the block-order launch on the H200 (as lab.launch_waves computes it)."""
    spec = hardware.spec("h200")
    grid = lg.tile_grid(1000, 1000, 16, 16)
    res = cuda.resources("warps", "tile_owner_order", cuda.arch_for("warps", "sm_90"))
    per_sm = occ.residency(occ.budget(spec), 256, res.registers, res.static_smem_bytes).resident_blocks
    slots = per_sm * spec.sm_count
    n = -(-grid.blocks // slots)
    return {"blocks": grid.blocks, "slots": slots, "waves": n, "last_fill": (grid.blocks - (n - 1) * slots) / slots}


def bands(result, run: int = 0) -> list[int]:
    """The blocks in each band of start times of one launch: sorted starts split where they pause."""
    start = sorted(result.cases[0].extra["runs"][run]["start_ns"])
    sizes, n = [], 1
    for a, b in zip(start, start[1:]):
        if (b - a) / 1e3 > BAND_GAP_US:
            sizes.append(n)
            n = 0
        n += 1
    return sizes + [n]


def most_started_within(result, window_ns: float) -> int:
    """The most blocks that started on one SM within ``window_ns`` of one another, over the launches."""
    best = 0
    for launch in result.cases[0].extra["runs"]:
        per_sm: dict = {}
        for t, sm in zip(launch["start_ns"], launch["smid"]):
            per_sm.setdefault(sm, []).append(t)
        for starts in per_sm.values():
            starts.sort()
            j = 0
            for i, t in enumerate(starts):
                while t - starts[j] >= window_ns:
                    j += 1
                best = max(best, i - j + 1)
    return best


def first_band(result):
    """Over the launches: the fewest and most blocks an SM started in the first band, how many SMs started one,
    the latest start of the first band and the earliest of the second (µs after the launch's first start)."""
    fewest, most, sms, last, next_ = 10 ** 9, 0, 10 ** 9, 0.0, 10 ** 9
    for run, launch in enumerate(result.cases[0].extra["runs"]):
        start, smid = launch["start_ns"], launch["smid"]
        order = sorted(range(len(start)), key=start.__getitem__)
        first = order[:bands(result, run)[0]]
        per_sm = Counter(smid[i] for i in first)
        t0 = start[order[0]]
        fewest, most, sms = min(fewest, min(per_sm.values())), max(most, max(per_sm.values())), min(sms, len(per_sm))
        last = max(last, (start[first[-1]] - t0) / 1e3)
        next_ = min(next_, (start[order[len(first)]] - t0) / 1e3)
    return fewest, most, sms, last, next_


def max_blocks_per_sm(result, run: int = 0) -> int:
    smid = result.cases[0].extra["runs"][run]["smid"]
    return max(smid.count(s) for s in set(smid))


def ticket_order_correlation(result, run: int = 0) -> float:
    """Pearson correlation of ticket with program id: 1 would be strict program-id order."""
    t = result.cases[0].extra["runs"][run]["ticket"]
    n = len(t)
    mp, mt = (n - 1) / 2, sum(t) / n
    cov = sum((p - mp) * (x - mt) for p, x in enumerate(t))
    sp = sum((p - mp) ** 2 for p in range(n)) ** 0.5
    st = sum((x - mt) ** 2 for x in t) ** 0.5
    return cov / (sp * st)


def differ_between_launches(result) -> float:
    a, b = (r["ticket"] for r in result.cases[0].extra["runs"][:2])
    return sum(x != y for x, y in zip(a, b)) / len(a)


def times_one_path(result, mode: str) -> float:
    return result.case(mode).median_s / result.case("one path for every lane").median_s


def ncu_against_model(result) -> tuple[float, float]:
    """The largest relative gap, over the modes, between ncu and the model: instructions × one path
    against the count of paths, threads per instruction against 32 × lane efficiency."""
    base = result.case("one path for every lane").extra["ncu"]["smsp__inst_executed.sum"]
    inst = max(abs(c.extra["ncu"]["smsp__inst_executed.sum"] / base / c.extra["predicted_factor"] - 1)
               for c in result.cases)
    lanes = max(abs(c.extra["ncu"]["smsp__thread_inst_executed_per_inst_executed.ratio"]
                    / (32 * c.extra["predicted_lane_efficiency"]) - 1) for c in result.cases)
    return inst, lanes


SPLIT = ["2 paths, split inside each warp", "4 paths, split inside each warp", "2 paths chosen by random data"]

CLAIMS = [
    Analytic("The wave model (notebook 07 builds it) predicts four here: 3,969 blocks over 1,056 slots (8 blocks of "
             "256 threads per SM × 132 SMs), the last about 76% full",
             lambda: (waves()["waves"], waves()["blocks"], waves()["slots"], waves()["last_fill"]),
             [(4, 4), (3969, 3969), (1056, 1056), (0.75, 0.77)]),
    Measured("Count the bands of start times: there are four", ORDER, lambda r: len(bands(r)), (4, 4)),
    Measured("The SMs take a first wave of 1,056 blocks, one per slot, almost at once", ORDER,
             lambda r: bands(r)[0], (1050, 1062)),
    Measured("the second and third bands hold more blocks than the first, and so the last holds less than the "
             "model's 76% of a wave", ORDER,
             lambda r: (min(bands(r)[1:3]) / bands(r)[0], bands(r)[-1] / waves()["slots"]),
             [(1.0, 2.0), (0.0, 0.75)], unit="×"),
    Measured("the busiest SMs ran more than 32 blocks", ORDER, max_blocks_per_sm, (33, 64)),
    # a block started at t is resident until t + spin_ns at least (its thread 0 spins that long after stamping t)
    Measured("in the first band every SM starts exactly 8, and no block starts between about 0.9 and 5.8 µs", ORDER,
             first_band, [(8, 8), (8, 8), (132, 132), (0.7, 0.95), (5.7, 5.95)], unit=" µs"),
    Measured("On the busiest SMs as many as a dozen blocks started within 2 µs of one another, while the thread 0 "
             "of each spins for 5 µs after its start", ORDER,
             lambda r: (most_started_within(r, 2000), r.cases[0].extra["spin_ns"] / 1e3), [(10, 13), (5, 5)],
             unit=" µs"),
    Analytic("Even ten blocks of 8 warps would be 80 warps, and an SM of compute capability 9.0 holds at most 64",
             lambda: (10 * 256 // 32, occ.budget("h200").max_warps_per_sm), [(80, 80), (64, 64)]),
    Measured("Low program ids do come early, because the hardware hands out blocks roughly in order of their index, "
             "but only roughly", ORDER, ticket_order_correlation, (0.9, 0.999)),
    Measured("its last column shows that another launch of the same kernel scrambles them differently", ORDER,
             differ_between_launches, (0.5, 1.0), unit="%"),

    Measured("when whole warps skip, their issue slots go to other warps and the time halves", DIV,
             lambda r: times_one_path(r, "half the warps skip the work"), (0.45, 0.56), unit="×"),
    Measured("every warp still issues the whole chain, for 16 lanes instead of 32, and nothing is saved", DIV,
             lambda r: times_one_path(r, "half the lanes of every warp skip the work"), (0.97, 1.03), unit="×"),
    Analytic("with random inputs nearly every warp holds both paths",
             lambda: lg.divergence_factor("2 paths chosen by random data"), (1.99, 2.0)),
    # the divided modes land a little under their count of paths
    Measured("so it dilutes the ratio slightly", DIV,
             lambda r: tuple(times_one_path(r, m) / r.case(m).extra["predicted_factor"] for m in SPLIT),
             [(0.95, 0.999)] * 3, unit="×"),
    Measured("The instruction counts follow the model's count of paths per warp, and the active threads per "
             "instruction follow its lane efficiency", DIV, ncu_against_model, [(0, 0.03), (0, 0.03)], unit="%"),
    Analytic("a kernel that takes more than 1.25 times the reference's time",
             lambda: catalog.SCALE.max_slowdown,
             (1.25, 1.25), unit="times"),
]
