"""Claims of 09_async_pipelines' prose (see course_lib.measure.claims): each is checked against the record
and against the live run committed with the notebook."""
import re
from statistics import median

from course_lib.core.hardware import gpu_spec
from course_lib.exercises.kernel import catalog
from course_lib.labs import async_pipelines as lab
from course_lib.measure.claims import Analytic, Given, Measured
from course_lib.models import pipeline

LAT, STREAM, GEMM = "pipeline.latency", "pipeline.streaming", "pipeline.gemm_stages"
TIMELINE, FENCE = "pipeline.timeline", "pipeline.proxy_fence"
TILE = 16 * 1024   # a streaming tile
H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"   # belongs_to: the GPU whose figure the words state


# --------------------------------------------------------------------------- pointer chasing

def chase_ns(r, kernel: str, footprint: int) -> float:
    return lab.latency_ns(r, kernel, footprint)


def chase_range(kernel: str, lo: int, hi: int):
    """(lowest, highest) ns per load of ``kernel`` over the footprints from ``lo`` to ``hi`` bytes."""
    def q(r):
        ns = [chase_ns(r, kernel, c.params["footprint_bytes"]) for c in r.cases
              if c.params["kernel"] == kernel and lo <= c.params["footprint_bytes"] <= hi]
        return min(ns), max(ns)
    return q


L1_RANGE = chase_range("chase_l1", 0, 128 << 10)
L2_RANGE = chase_range("chase_l2", 512 << 10, 16 << 20)
HBM_RANGE = chase_range("chase_l2", 64 << 20, 1 << 30)


def hbm_ns(r) -> float:
    return lab.memory_levels(r)["HBM"]


def littles_bytes(lat, stream) -> float:
    """Little's law per SM, as the notebook's cell computes it (lab.littles_law): HBM latency x best
    streaming bandwidth / SMs, in bytes."""
    return lab.littles_law(lat, stream)["bytes in flight per SM (Little's law)"]


def littles_kib(lat, stream) -> float:
    return littles_bytes(lat, stream) / 1024


def littles_threads(lat, stream) -> float:
    return lab.littles_law(lat, stream)["as float4 loads of resident threads"]


def littles_tiles(lat, stream) -> float:
    return lab.littles_law(lat, stream)["as 16 KiB tiles"]


# --------------------------------------------------------------------------- streaming

def stream_case(r, kernel: str, blocks: int, stages):
    return next(c for c in r.cases if c.params == {"kernel": kernel, "blocks_per_sm": blocks, "stages": stages})


def copy_bw(r) -> float:
    return next(c for c in r.cases if c.params["kernel"] == "copy_vec4").bandwidth_bytes_per_s


def of_copy(kernel: str, blocks: int, stages):
    return lambda r: stream_case(r, kernel, blocks, stages).bandwidth_bytes_per_s / copy_bw(r)


def best_stream_bw(r) -> float:
    """The best streaming bandwidth, the B of Little's law in the notebook's cell (littles_law)."""
    return max(c.bandwidth_bytes_per_s for c in r.cases if c.params["kernel"] != "copy_vec4")


def at_16_kib_tb_s(r):
    """(lowest, highest) TB/s of the variants whose 'bytes in flight/SM' column says 16 KiB."""
    bw = [c.bandwidth_bytes_per_s / 1e12 for c in r.cases
          if c.params["kernel"] != "copy_vec4" and lab.bytes_in_flight(c) == TILE]
    return min(bw), max(bw)


def extremes_at_16_kib(r) -> float:
    """1 when, among the variants with 16 KiB in flight per SM, the one-stage TMA loop (one block) is
    the slowest and the synchronous kernel at four blocks the fastest."""
    cs = [c for c in r.cases if c.params["kernel"] != "copy_vec4" and lab.bytes_in_flight(c) == TILE]
    lo, hi = (f(cs, key=lambda c: c.bandwidth_bytes_per_s).params for f in (min, max))
    return float(lo == {"kernel": "stream_bulk", "blocks_per_sm": 1, "stages": 1}
                 and hi == {"kernel": "stream_sync", "blocks_per_sm": 4, "stages": None})


def spread_at_16_kib(r) -> float:
    lo, hi = at_16_kib_tb_s(r)
    return hi / lo


def implied_ns(blocks: int):
    """The 'latency it implies' column of the synchronous kernel: SMs x bytes in flight / bandwidth."""
    def q(r):
        c = stream_case(r, "stream_sync", blocks, None)
        return gpu_spec(r.gpu).sm_count * lab.bytes_in_flight(c) / c.bandwidth_bytes_per_s * 1e9
    return q


def sync_knee_bytes(r) -> float:
    """The fewest bytes in flight at which the synchronous kernel reaches 95% of its best bandwidth."""
    sync = [c for c in r.cases if c.params["kernel"] == "stream_sync"]
    best = max(c.bandwidth_bytes_per_s for c in sync)
    return min(lab.bytes_in_flight(c) for c in sync if c.bandwidth_bytes_per_s >= 0.95 * best)


def knee_over_littles(lat, stream) -> float:
    """The synchronous kernel's knee over the bytes in flight Little's law predicts with the idle latency."""
    return sync_knee_bytes(stream) / littles_bytes(lat, stream)


def cp_two_over_one(r) -> float:
    return stream_case(r, "stream_cp_async", 1, 2).bandwidth_bytes_per_s / \
        stream_case(r, "stream_cp_async", 1, 1).bandwidth_bytes_per_s


def plateau_of_copy(r):
    """(lowest, highest) share of the copy's bandwidth of one block per SM on the plateau: cp.async from
    four stages, the TMA from three."""
    shares = [c.bandwidth_bytes_per_s / copy_bw(r) for c in r.cases if c.params.get("blocks_per_sm") == 1 and (
        (c.params["kernel"] == "stream_cp_async" and c.params["stages"] >= 4)
        or (c.params["kernel"] == "stream_bulk" and c.params["stages"] >= 3))]
    return min(shares), max(shares)


def both_reach_plateau(r) -> float:
    """The slower of 64 synchronous warps and 8 warps of three-stage TMA or four-stage cp.async, over
    the best streaming bandwidth."""
    picks = [stream_case(r, "stream_sync", 8, None), stream_case(r, "stream_cp_async", 1, 4),
             stream_case(r, "stream_bulk", 1, 3)]
    return min(c.bandwidth_bytes_per_s for c in picks) / best_stream_bw(r)


def warps_per_sm(r, kernel: str, blocks: int, stages) -> int:
    return stream_case(r, kernel, blocks, stages).extra["resident_warps_per_sm"]


def plateau_warps(r):
    """(warps per SM of the synchronous kernel at 8 blocks; fewest and most of the one-block cp.async and TMA
    loops with three or four stages)."""
    pipelined = [warps_per_sm(r, kernel, 1, stages) for kernel in ("stream_cp_async", "stream_bulk") for stages in (3, 4)]
    return warps_per_sm(r, "stream_sync", 8, None), min(pipelined), max(pipelined)


ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"


def ncu(r, kernel: str, blocks: int, stages):
    return stream_case(r, kernel, blocks, stages).extra["ncu"]


def achieved(kernel: str, blocks: int, stages):
    return lambda r: ncu(r, kernel, blocks, stages)[ACHIEVED] / 100


def achieved_over_model(r):
    """(lowest, highest) ncu's achieved occupancy over the occupancy model's, over the profiled variants; and the
    synchronous kernel's achieved occupancy at 8 blocks per SM, where the model gives it every warp slot."""
    ratios = [c.extra["ncu"][ACHIEVED] / 100 / c.extra["model_occupancy"] for c in r.cases if "ncu" in c.extra]
    return min(ratios), max(ratios), achieved("stream_sync", 8, None)(r)


def pipelined_achieved(r):
    """(lowest, highest) achieved occupancy of the profiled pipelined variants."""
    occ = [c.extra["ncu"][ACHIEVED] / 100 for c in r.cases
           if "ncu" in c.extra and c.params["kernel"] != "stream_sync"]
    return min(occ), max(occ)


def pipelined_vs_sync8(r) -> float:
    """The slowest profiled pipelined variant's bandwidth over the synchronous kernel's at 8 blocks."""
    bw = [c.bandwidth_bytes_per_s for c in r.cases if "ncu" in c.extra and c.params["kernel"] != "stream_sync"]
    return min(bw) / stream_case(r, "stream_sync", 8, None).bandwidth_bytes_per_s


def instructions_per_byte(kernel: str):
    def q(r):
        m = ncu(r, kernel, 1, 4)
        return m["smsp__inst_executed.sum"] / m["dram__bytes_read.sum"]
    return q


# --------------------------------------------------------------------------- the GEMM's stages

def gemm_case(r, copies: str, stages: int, blocks: int):
    return next(c for c in r.cases if c.params == {"stages": stages, "copies": copies, "blocks_per_sm": blocks})


def gemm_us(copies: str, stages: int, blocks: int):
    return lambda r: gemm_case(r, copies, stages, blocks).median_s * 1e6


def best_speedup_one_block(r):
    """(cp.async, TMA): one stage's time over the fastest stage count's, one block per SM."""
    out = []
    for copies in ("cp.async", "tma"):
        cs = [c for c in r.cases if c.params["copies"] == copies and c.params["blocks_per_sm"] == 1]
        out.append(gemm_case(r, copies, 1, 1).median_s / min(c.median_s for c in cs))
    return tuple(out)


def tma_worst_model_error(r) -> float:
    """The largest |measured / predicted - 1| of the TMA kernel at one block per SM, 2-6 stages."""
    predicted = lab.gemm_model(r, "tma")["predicted µs"]
    return max(abs(gemm_case(r, "tma", s, 1).median_s * 1e6 / predicted[s] - 1) for s in predicted if s > 1)


def cp_two_stage_over_model(r) -> float:
    return gemm_case(r, "cp.async", 2, 1).median_s * 1e6 / lab.gemm_model(r, "cp.async")["predicted µs"][2] - 1


def load_latency_us(r) -> float:
    return lab.gemm_model(r, "tma")["load latency per K tile L (µs)"]


def gemm_ncu(r, copies: str, stages: int):
    return gemm_case(r, copies, stages, 1).extra["ncu"]


def instructions_ratio(r):
    """cp.async's ncu instruction count over the TMA's, at two and at four stages."""
    return tuple(gemm_ncu(r, "cp.async", s)["smsp__inst_executed.sum"] / gemm_ncu(r, "tma", s)["smsp__inst_executed.sum"]
                 for s in (2, 4))


TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
LONG_SB = "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct"


def tensor_busy_two_stages(r):
    return gemm_ncu(r, "cp.async", 2)[TENSOR] / 100, gemm_ncu(r, "tma", 2)[TENSOR] / 100


def tensor_gap_four_stages(r) -> float:
    """The tensor pipe's busy share, TMA minus cp.async, at four stages (percentage points)."""
    return abs(gemm_ncu(r, "tma", 4)[TENSOR] - gemm_ncu(r, "cp.async", 4)[TENSOR])


def two_blocks_one_stage_speedup(r):
    """(cp.async, TMA): one stage at one block per SM over one stage at two."""
    return tuple(gemm_case(r, e, 1, 1).median_s / gemm_case(r, e, 1, 2).median_s for e in ("cp.async", "tma"))


def fastest_tma_two_blocks_us(r):
    return gemm_case(r, "tma", 2, 2).median_s * 1e6, gemm_case(r, "tma", 3, 2).median_s * 1e6


def fastest_is_tma_two_blocks(r) -> float:
    """1 when the fastest GEMM variant is the TMA at two blocks per SM with two or three stages."""
    best = min((c for c in r.cases if c.params["copies"] != "cublas"), key=lambda c: c.median_s)
    return float(best.params["copies"] == "tma" and best.params["blocks_per_sm"] == 2 and best.params["stages"] in (2, 3))


def cublas_us(r) -> float:
    return r.case("cuBLAS bf16").median_s * 1e6


def four_one_block_over_three_two(r) -> float:
    """The faster four-stage variant at one block over the faster three-stage one at two blocks."""
    four = min(gemm_case(r, e, 4, 1).median_s for e in ("cp.async", "tma"))
    three = min(gemm_case(r, e, 3, 2).median_s for e in ("cp.async", "tma"))
    return four / three


# --------------------------------------------------------------------------- the timeline

def plan(r, name: str, traced: bool):
    return next(c for c in r.cases if c.params["plan"] == name and c.params["traced"] == traced)


def overlap_range(*plans: str):
    """(lowest, highest) share of copy time under math, over the traced blocks of ``plans``."""
    def q(r):
        fr = [pipeline.overlap_fraction(list(zip(b["issue"], b["land"])), list(zip(b["math start"], b["math end"])))
              for p in plans for b in plan(r, p, True).extra["blocks"]]
        return min(fr), max(fr)
    return q


def unhidden_range(r):
    lo, hi = overlap_range("2 stages", "4 stages", "8 stages")(r)
    return 1 - hi, 1 - lo


def traced_median_us(what: str, name: str):
    """The median copy latency ('copy') or math time ('math') of one plan's traced blocks, in µs."""
    def q(r):
        spans = []
        for b in plan(r, name, True).extra["blocks"]:
            ends = ("issue", "land") if what == "copy" else ("math start", "math end")
            spans += [e - s for s, e in zip(b[ends[0]], b[ends[1]])]
        return median(spans) / 1e3
    return q


def untraced_us(name: str):
    return lambda r: plan(r, name, False).median_s * 1e6


def handover_us(r):
    """Per tile, from two slots on: the untraced time over the tiles per block, less the median math."""
    out = []
    for name in ("2 stages", "4 stages", "8 stages"):
        c = plan(r, name, False)
        out.append(c.median_s * 1e6 / c.extra["tiles_per_block"] - traced_median_us("math", name)(r))
    return tuple(out)


def tracing_cost_range(r):
    costs = [plan(r, p, True).median_s / plan(r, p, False).median_s - 1
             for p in dict.fromkeys(c.params["plan"] for c in r.cases)]
    return min(costs), max(costs)


def untraced_steps(r):
    """Untraced: 1 stage over serial, and 2 stages over 1 stage (both below 1 when the steps are there)."""
    t = {p: plan(r, p, False).median_s for p in ("serial", "1 stage", "2 stages")}
    return t["1 stage"] / t["serial"], t["2 stages"] / t["1 stage"]


# --------------------------------------------------------------------------- the proxy fence

def race_shares(kernel: str):
    """(lowest, highest) share of wrong values without the fence over the launches of ``kernel``."""
    def q(r):
        s = [c.extra["without the fence"]["wrong_values"] / c.extra["without the fence"]["values"]
             for c in r.cases if c.params.get("kernel") == kernel]
        return min(s), max(s)
    return q


def race_cases(r):
    return [c for c in r.cases if c.params.get("kernel", "").startswith("proxy_")]


def race_wrong_with_fence(r) -> float:
    return sum(c.extra["with the fence"]["wrong_values"] for c in race_cases(r))


def race_values_checked(r) -> float:
    return sum(c.extra["with the fence"]["values"] for c in race_cases(r))


def unfenced_wrong_run_share(kinds: tuple[str, ...]):
    """Wrong runs over runs without the fence, over the cases of the kernels named."""
    def q(r):
        cs = [c for c in r.cases if c.params.get("kernel") in kinds]
        return sum(c.extra["without the fence"]["wrong_runs"] for c in cs) / sum(c.extra["without the fence"]["runs"] for c in cs)
    return q


def fenced_wrong_runs(kinds: tuple[str, ...]):
    return lambda r: sum(c.extra["with the fence"]["wrong_runs"] for c in r.cases if c.params.get("kernel") in kinds)


def gemm_error_over_tolerance(r):
    """The unfenced GEMM's worst error over its tolerance, at n = 4096 and n = 8192."""
    out = []
    for n in (4096, 8192):
        o = next(c for c in r.cases if c.params.get("n") == n).extra["without the fence"]
        out.append(o["worst_abs_err"] / o["tolerance"])
    return tuple(out)


def stream_cases(r):
    return [c for c in r.cases if c.params.get("kernel") == "stream_bulk"]


def stream_tolerance_over_error(r) -> float:
    o = stream_cases(r)[0].extra["without the fence"]
    return o["tolerance"] / o["worst_abs_err"]


def stream_same_error(r) -> float:
    """The streaming kernel's worst error without the fence over its worst error with it (1: the same)."""
    return max(c.extra["without the fence"]["worst_abs_err"] / c.extra["with the fence"]["worst_abs_err"]
               for c in stream_cases(r))


RACES = ("proxy_store_race", "proxy_refill_race")
GEMMS = ("bf16_gemm_mma",)


def racecheck_verdicts(r) -> list[dict]:
    """compute-sanitizer's racecheck on one launch of each small race kernel and of the GEMM, with the fence and
    without: each its summary (``lines``, or ``unavailable`` where it could not run)."""
    return [v for c in r.cases if c.params.get("kernel") in RACES + GEMMS and "racecheck" in c.extra
            for v in c.extra["racecheck"].values()]


def racecheck_hazards(r):
    """(launches racecheck judged, how many of them it did not call clean: a hazard, or no summary)."""
    verdicts = racecheck_verdicts(r)
    clean = sum(any("RACECHECK SUMMARY: 0 hazards" in ln for ln in v.get("lines", [])) for v in verdicts)
    return len(verdicts), len(verdicts) - clean


def wrong_under_racecheck(r) -> float:
    """How many of the unfenced launches under racecheck came out wrong: a small kernel prints
    ``n=(wrong values, values checked)``, the GEMM ``... max error E (tolerance T)``."""
    wrong = 0
    for c in r.cases:
        if "racecheck" not in c.extra or c.params.get("kernel") not in RACES + GEMMS:
            continue
        lines = c.extra["racecheck"]["without the fence"]["lines"]
        if c.params["kernel"] in RACES:
            wrong += int(next(ln for ln in lines if ln.startswith("n=("))[3:].split(",")[0])
        else:
            err, tol = re.search(r"max error (\S+) \(tolerance (\S+)\)", " ".join(lines)).groups()
            wrong += float(err) > float(tol)
    return wrong

CLAIMS = [
    # the model's inputs
    Given("For a load that lands 2 µs after it is issued and 0.5 µs of math per tile", "inputs of the example"),
    Analytic("the stages to cover it", lambda: pipeline.stages_to_cover(2e-6, 0.5e-6), (5, 5)),

    # pointer chasing
    Measured("20–24 ns while the buffer fits in L1 (up to 128 KiB here)", LAT, L1_RANGE, [(19.5, 21.5), (22.5, 25)],
             unit=" ns"),
    Measured("about 145 ns from L2 (up to 16 MiB)", LAT, L2_RANGE, [(140, 150), (140, 150)], unit=" ns"),
    Measured("330–355 ns from HBM (64 MiB to 1 GiB, over the runs made;", LAT, HBM_RANGE, [(325, 352), (335, 360)],
             unit=" ns"),
    Measured("On the H200, 24 MiB still reads 146 ns", LAT, lambda r: chase_ns(r, "chase_l2", 24 << 20), (143, 149),
             unit=" ns", belongs_to=H200),
    Measured("at 48 MiB, under the 60 MiB of L2 that the device reports, it is already 260–270 ns", LAT,
             lambda r: chase_ns(r, "chase_l2", 48 << 20), (255, 275), unit=" ns", belongs_to=H200),
    Measured("under the 60 MiB of L2 that the device reports", LAT, lambda r: r.machine["l2_bytes"] / 2 ** 20,
             (60, 60), unit=" MiB", belongs_to=H200),
    Measured("while the device reports 60 MiB", LAT, lambda r: r.machine["l2_bytes"] / 2 ** 20,
             (60, 60), unit=" MiB", belongs_to=H200),
    Measured("an H100, whose device reports 50 MiB, reads about 152 ns at 24 MiB and 277 ns at 48 MiB", LAT,
             lambda r: (r.machine["l2_bytes"] / 2 ** 20, chase_ns(r, "chase_l2", 24 << 20), chase_ns(r, "chase_l2", 48 << 20)),
             [(50, 50), (149, 155), (270, 285)], unit=" ns", belongs_to=H100),
    Given("for the H200 the table carries 50 MiB, the Hopper whitepaper's figure for the H100 SXM5",
          "course_lib.core.hardware's H200 entry: l2_bytes = 50 MiB, from the Hopper whitepaper"),

    # Little's law: B x L / SMs from the latency and the streaming run, paired as the notebook's cell pairs them.
    Measured("On the H200 that is about 12 KiB per SM", (LAT, STREAM), littles_kib, (11, 12.6), unit=" KiB",
             belongs_to=H200),
    Measured("on an H100, with less bandwidth behind about the same latency, about 8 KiB", (LAT, STREAM), littles_kib,
             (7.5, 8.9), unit=" KiB", belongs_to=H100),
    Measured("on an H100, with less bandwidth behind about the same latency", (LAT, STREAM),
             lambda lat, s: (hbm_ns(lat), best_stream_bw(s) / 1e12), [(330, 360), (3.0, 3.4)], belongs_to=H100),
    Measured("needs about 750 resident threads per SM on the H200", (LAT, STREAM), littles_threads, (700, 800),
             belongs_to=H200),
    Measured("(about 540 on an H100)", (LAT, STREAM), littles_threads, (510, 570), belongs_to=H100),
    Measured("On either GPU that is less than one 16 KiB tile", (LAT, STREAM), littles_tiles, (0.3, 1.0)),

    # streaming
    Measured("on the H200 from about 2.1 to 3.7 TB/s, a 1.7–1.8× spread", STREAM, at_16_kib_tb_s,
             [(2.0, 2.2), (3.6, 3.8)], unit=" TB/s", belongs_to=H200),
    Measured("on the H200 from about 2.1 to 3.7 TB/s, a 1.7–1.8× spread", STREAM, spread_at_16_kib, (1.65, 1.85),
             unit="×", belongs_to=H200),
    Measured("on an H100, whose four synchronous blocks already come within a few percent of the copy, from about "
             "2.1 to 3.0 TB/s, 1.4×", STREAM,
             lambda r: (of_copy("stream_sync", 4, None)(r), *at_16_kib_tb_s(r), spread_at_16_kib(r)),
             [(0.94, 1.0), (2.0, 2.2), (2.9, 3.1), (1.35, 1.45)], belongs_to=H100),
    Measured("loop is 1.2–1.3 times as fast as the one-stage TMA loop (on an H100 and an H200)", STREAM,
             lambda r: of_copy("stream_cp_async", 1, 1)(r) / of_copy("stream_bulk", 1, 1)(r), (1.15, 1.35), unit="×"),
    Measured("while at 16 KiB per SM the loops ranged 1.4–1.8× apart on an H100 and an H200", STREAM, spread_at_16_kib,
             (1.35, 1.85), unit="×"),
    Measured("from the one-stage TMA loop to four blocks of synchronous loads", STREAM, extremes_at_16_kib, (1, 1)),
    Measured("is 430–455 ns at one block on an H100 and an H200", STREAM, implied_ns(1), (425, 460), unit=" ns"),
    Measured("to about 580 ns at four blocks on the H200", STREAM, implied_ns(4), (565, 595), unit=" ns",
             belongs_to=H200),
    Measured("and 730 ns on an H100", STREAM, implied_ns(4), (715, 745), unit=" ns", belongs_to=H100),
    Measured("the synchronous kernel's knee comes at two to three times the bytes it predicts: 24–32 KiB per SM",
             STREAM, sync_knee_bytes, (24 * 1024, 32 * 1024), unit=" B"),
    Measured("the synchronous kernel's knee comes at two to three times the bytes it predicts", (LAT, STREAM),
             knee_over_littles, (1.9, 3.1), unit="×"),
    Measured("not 8 (an H100)", (LAT, STREAM), littles_kib, (7.5, 8.9), unit=" KiB", belongs_to=H100),
    Measured("or 12 (the H200)", (LAT, STREAM), littles_kib, (11, 12.6), unit=" KiB", belongs_to=H200),
    Measured("loop runs like the one-stage loop (within a few percent)", STREAM,
             cp_two_over_one, (0.95, 1.06), unit="×"),
    Measured("reaches 95–98% of the copy's bandwidth on the H200", STREAM,
             of_copy("stream_cp_async", 1, 3), (0.945, 0.985), unit="%", belongs_to=H200),
    Measured("and 102% on an H100, which needs fewer bytes in flight", STREAM,
             of_copy("stream_cp_async", 1, 3), (1.015, 1.025), unit="%", belongs_to=H100),
    Measured("from four stages it is on the plateau, 102–107% of the copy", STREAM, plateau_of_copy,
             [(1.015, 1.075), (1.015, 1.075)], unit="%"),
    Measured("a read-only stream runs a few percent above the course's copy kernel", STREAM, plateau_of_copy,
             [(1.01, 1.10), (1.01, 1.10)], unit="%"),
    Measured("The TMA, with its extra tile in flight, is on the plateau from three stages", STREAM,
             of_copy("stream_bulk", 1, 3), (1.02, 1.08), unit="%"),

    # occupancy
    Measured("The occupancy model (notebook 03) and ncu's achieved occupancy agree", STREAM, achieved_over_model,
             [(0.95, 1.005), (0.95, 1.005), (0.9, 1.0)], unit="%"),
    Measured("The synchronous kernel needs 6 to 8 blocks per SM on the H200", STREAM,
             lambda r: (of_copy("stream_sync", 4, None)(r), of_copy("stream_sync", 6, None)(r),
                        of_copy("stream_sync", 8, None)(r)), [(0.8, 0.92), (0.97, 1.05), (0.99, 1.06)], unit="%",
             belongs_to=H200),
    Measured("and 4 to 6 on an H100", STREAM,
             lambda r: (of_copy("stream_sync", 3, None)(r), of_copy("stream_sync", 4, None)(r),
                        of_copy("stream_sync", 6, None)(r)), [(0.8, 0.92), (0.94, 1.0), (0.99, 1.06)], unit="%",
             belongs_to=H100),
    Measured("to reach the bandwidth that the pipelined kernels reach at 12.5%", STREAM, pipelined_achieved,
             [(0.12, 0.13), (0.12, 0.13)], unit="%"),
    Measured("to reach the bandwidth that the pipelined kernels reach at 12.5%", STREAM, pipelined_vs_sync8,
             (0.98, 1.1), unit="×"),
    Measured("Yet ncu counts more instructions per byte for",
             STREAM, lambda r: (instructions_per_byte("stream_bulk")(r), instructions_per_byte("stream_cp_async")(r)),
             [(0.0625, 0.0635), (0.0465, 0.0475)]),

    # the GEMM's stages
    Measured("the GEMM runs about 1.7× faster with either copy path", GEMM, best_speedup_one_block,
             [(1.6, 1.75), (1.6, 1.75)], unit="×"),
    Measured("about 0.5 µs per 32 KiB tile", GEMM, load_latency_us, (0.45, 0.55), unit=" µs"),
    Measured("The TMA matches it at every stage count", GEMM, tma_worst_model_error, (0, 0.02), unit="%"),
    Measured("kernel at two stages is slower than predicted, by about 17%", GEMM,
             cp_two_stage_over_model, (0.15, 0.19), unit="%"),
    Measured("issues about a fifth more instructions than the TMA at both stage counts", GEMM,
             instructions_ratio, [(1.15, 1.25), (1.15, 1.25)], unit="×"),
    Measured("while from three stages, a tile to spare, the two paths run within a few percent of each other", GEMM,
             lambda r: tuple(gemm_case(r, "cp.async", s, 1).median_s / gemm_case(r, "tma", s, 1).median_s
                             for s in (3, 4, 5, 6)), [(0.97, 1.05)] * 4, unit="×"),
    Measured("though at four stages they cost it little", GEMM,
             lambda r: (gemm_case(r, "cp.async", 4, 1).median_s / gemm_case(r, "tma", 4, 1).median_s,
                        tensor_gap_four_stages(r)), [(0.97, 1.05), (0, 2)]),
    Measured("(tensor pipe about 48% busy against 57%)", GEMM, tensor_busy_two_stages, [(0.46, 0.50), (0.55, 0.59)], unit="%"),
    Measured("At a steady latency one would do, since c exceeds L above",
             GEMM, lambda r: lab.gemm_model(r, "cp.async")["math per K tile c (µs)"]
             / lab.gemm_model(r, "cp.async")["load latency per K tile L (µs)"], (1.05, 3), unit="×"),
    Measured("a one-stage GEMM is already 1.8× faster than at one block", GEMM, two_blocks_one_stage_speedup,
             [(1.75, 1.85), (1.75, 1.85)], unit="×"),
    Measured("ran at 294–300 µs in every run", GEMM, fastest_tma_two_blocks_us, [(293, 300.5), (293, 300.5)], unit=" µs"),
    Measured("The fastest kernel here (two or three TMA stages, two blocks)", GEMM, fastest_is_tma_two_blocks, (1, 1)),
    Measured("cuBLAS took 177–182 µs over the record and the live runs, its two timing protocols agreeing", GEMM,
             lambda r: (cublas_us(r), float(r.case("cuBLAS bf16").extra["second_protocol"]["agree"])),
             [(176.5, 182.5), (1, 1)], unit=" µs"),
    Measured("4 stages at one block are slower than 3 stages at two", GEMM, four_one_block_over_three_two,
             (1.01, 2), unit="×"),

    # the timeline
    Measured("about 7% of the copy time has math running beside it", TIMELINE, overlap_range("serial"),
             [(0.05, 0.085), (0.05, 0.085)], unit="%"),
    Measured("a tile costs a copy (0.7–0.8 µs on an H100 and an H200) plus its math (about 0.6 µs)", TIMELINE,
             lambda r: (traced_median_us("copy", "serial")(r), traced_median_us("math", "serial")(r)),
             [(0.65, 0.85), (0.55, 0.65)], unit=" µs"),
    Measured("Releasing the slot before the math already overlaps 40–47%", TIMELINE, overlap_range("1 stage"),
             [(0.395, 0.475), (0.395, 0.475)], unit="%"),
    Measured("about 80% of the copy time runs under math", TIMELINE,
             overlap_range("2 stages", "4 stages", "8 stages"), [(0.77, 0.83), (0.77, 0.83)], unit="%"),
    Measured("the kernel takes about 50 µs instead of about 90", TIMELINE,
             lambda r: (*(untraced_us(p)(r) for p in ("2 stages", "4 stages", "8 stages")), untraced_us("serial")(r)),
             [(47, 53)] * 3 + [(85, 95)], unit=" µs"),
    Measured("each tile adds its math plus about 0.2 µs of waiting and handing over", TIMELINE, handover_us,
             [(0.12, 0.28)] * 3, unit=" µs"),
    Measured("The remaining 20% or so of copy time", TIMELINE, unhidden_range, [(0.16, 0.24), (0.16, 0.24)], unit="%"),
    Measured("The instrumentation costs 2–9% of the untraced time", TIMELINE, tracing_cost_range,
             [(0.015, 0.095), (0.015, 0.095)], unit="%"),
    Measured("the untraced times show the same steps from plan to plan", TIMELINE, untraced_steps,
             [(0.5, 0.9), (0.5, 0.9)], unit="×"),

    # the proxy fence
    Measured("Without the fence both small kernels were wrong in every run", FENCE, unfenced_wrong_run_share(RACES),
             (1, 1), unit="%"),
    Measured("About a fifth to a third of the stored words were stale", FENCE, race_shares("proxy_store_race"),
             [(0.18, 0.25), (0.28, 0.36)], unit="%"),
    Measured("1–11% of the thread-rounds on the H200", FENCE, race_shares("proxy_refill_race"),
             [(0.01, 0.02), (0.09, 0.115)], unit="%", belongs_to=H200),
    Measured("(1–14% on an H100) read part of the next round's tile", FENCE, race_shares("proxy_refill_race"),
             [(0.01, 0.02), (0.135, 0.145)], unit="%", belongs_to=H100),
    Measured("With the fence, not one value in billions was wrong", FENCE,
             lambda r: (race_wrong_with_fence(r), race_values_checked(r)), [(0, 0), (1e9, 1e11)]),
    Measured("The GEMM without the fence was wrong in every run at 4096 and 8192", FENCE,
             unfenced_wrong_run_share(GEMMS), (1, 1), unit="%"),
    Measured("by errors seven to eleven times the tolerance", FENCE, gemm_error_over_tolerance,
             [(9.5, 11.5), (6.5, 8)], unit="×"),
    Measured("with it, it was never wrong", FENCE, fenced_wrong_runs(GEMMS), (0, 0)),
    Measured("The streaming kernel passed its check every time without the fence", FENCE,
             lambda r: sum(c.extra["without the fence"]["wrong_runs"] for c in stream_cases(r)), (0, 0)),
    Measured("is about 100,000 times the error seen", FENCE, stream_tolerance_over_error, (5e4, 2e5), unit="×"),
    Measured("its worst error was the same with the fence and without it, to the last digit", FENCE,
             stream_same_error, (1, 1), unit="×"),
    Measured("Racecheck reported no hazard in any of them", FENCE, racecheck_hazards,
             [(2 * len(RACES + GEMMS),) * 2, (0, 0)]),
    Measured("under it the unfenced launches, smaller, also came out right", FENCE, wrong_under_racecheck, (0, 0)),
    Given("gives up after 2 s and traps", "the kernels' timeout, PL_WAIT_NS in pipeline.cu"),

    # exercise 1: the reader's inputs
    Given("A tile takes 1.8 µs from issue to landing and 0.4 µs of math", "inputs of exercise 1"),
    Given("Then try 0.6 µs of math", "an input of exercise 1"),

    # takeaways
    Measured("20–24 ns from L1", LAT, L1_RANGE, [(19.5, 21.5), (22.5, 25)], unit=" ns"),
    Measured("about 145 ns from L2 and 330–355 ns from HBM on an H100 and an H200, idle", LAT,
             lambda r: (*L2_RANGE(r), *HBM_RANGE(r)), [(140, 150), (140, 150), (325, 352), (335, 360)], unit=" ns"),
    Measured("The synchronous kernel needs two to three times the bytes in flight that Little's law predicts",
             (LAT, STREAM), knee_over_littles, (1.9, 3.1), unit="×"),
    Measured("64 warps of synchronous loads and 8 warps with three or four stages of asynchronous copies both reach "
             "the plateau", STREAM, both_reach_plateau, (0.95, 1.0), unit="%"),
    Measured("64 warps of synchronous loads and 8 warps with three or four stages of asynchronous copies", STREAM,
             plateau_warps, [(64, 64), (8, 8), (8, 8)]),
    Measured("(two blocks of two or three TMA stages)", GEMM, fastest_is_tma_two_blocks, (1, 1)),
    Measured("about 7% of copy time under math in the serial loop", TIMELINE, overlap_range("serial"),
             [(0.05, 0.085), (0.05, 0.085)], unit="%"),
    Measured("about 80% with two or more stages", TIMELINE, overlap_range("2 stages", "4 stages", "8 stages"),
             [(0.77, 0.83), (0.77, 0.83)], unit="%"),
    Measured("Leaving it out broke every large GEMM and every run of both small race kernels", FENCE,
             unfenced_wrong_run_share(RACES + GEMMS), (1, 1), unit="%"),
    Analytic("holding it to 1.25× the reference solution's time", lambda: catalog.ASYNC_PIPELINE.max_slowdown,
             (1.25, 1.25), unit="×"),
]
