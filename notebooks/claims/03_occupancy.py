"""Claims of 03_occupancy's prose (see course_lib.measure.claims): each is checked against the record
and against the live run committed with the notebook."""
from course_lib.core import hardware
from course_lib.measure import claims
from course_lib.measure.claims import Analytic, Measured
from course_lib.models import occupancy as occ

shared = claims.load_module("_shared")

SWEEP, ILP, SPILL, LATENCY = "occupancy.smem_sweep", "occupancy.ilp", "occupancy.register_spill", "pipeline.latency"
HBM_CHASE = {"l1_footprints": [], "l2_footprints": [1 << 30]}   # the notebook's run: notebook 09's 1 GiB chase
KIB = 1024
# Little's law multiplies a latency (pipeline.latency) by a bandwidth (occupancy.smem_sweep's copy), two
# experiments of the same run: such a claim names both, and its quantity takes one result of each.
LITTLE = (SWEEP, LATENCY)


def hbm_latency_ns(result) -> float:
    """The pointer chase through the largest footprint, far beyond the L2 (as the notebook's cell)."""
    c = max((c for c in result.cases if c.params["kernel"] == "chase_l2"), key=lambda c: c.params["footprint_bytes"])
    return c.median_s / c.extra["hops"] * 1e9


def read_tb_per_s(result) -> float:
    """A copy's bandwidth counts reads and writes; only the loads wait for their data."""
    return shared.copy_tb_per_s(result) / 2


def in_flight_bytes(sweep, latency) -> float:
    """B · L across the GPU: the copy's read bandwidth times the idle HBM latency of the same run."""
    return read_tb_per_s(sweep) * 1e12 * hbm_latency_ns(latency) * 1e-9


def loaded_latency(ilp, latency):
    """Little's law inverted for the one-load copy at full residency: (its share of warp slots occupied, the MB in
    flight at 8 KiB a SM times that share, its read TB/s, the latency that implies in ns, that over the idle chase)."""
    c = ilp_case(ilp, 1, 8)
    share = ncu(c, ACHIEVED) / ncu(c, THEORETICAL)
    in_flight = c.extra["bytes_in_flight_per_sm"] * sms(ilp) * share
    reads = c.bandwidth_bytes_per_s / 2
    ns = in_flight / reads * 1e9
    return share, in_flight / 1e6, reads / 1e12, ns, ns / hbm_latency_ns(latency)


def sms(result) -> int:
    return hardware.spec(result.gpu).sm_count


def ncu(c, metric: str) -> float:
    return c.extra["ncu"][metric]


ACHIEVED, THEORETICAL = "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct"


def copies(result):
    return [c for c in result.cases if "ncu" in c.extra and c.name != shared.COPY_CASE]


def model_residency(result, c) -> occ.Residency:
    la = c.launch
    return occ.residency(occ.budget(result.gpu), la["block"][0], la["registers"],
                         la["static_smem_bytes"] + la["dynamic_smem_bytes"])


def theoretical_gap(result) -> float:
    """The largest gap between ncu's theoretical occupancy and the model's, in percentage points."""
    return max(abs(ncu(c, THEORETICAL) - 100 * c.extra["occupancy"]) for c in copies(result))


def achieved_over_theoretical(result) -> list[float]:
    return [ncu(c, ACHIEVED) / ncu(c, THEORETICAL) for c in copies(result)]


def ilp_case(result, ilp: int, blocks: int):
    return next(c for c in result.cases if c.params.get("ilp") == ilp and c.params.get("resident_blocks") == blocks)


def of_copy(result, c) -> float:
    return c.bandwidth_bytes_per_s / shared.copy_bandwidth(result)


def equal_bytes_ratio(result) -> float:
    """At equal nominal bytes in flight per SM, the bandwidth of each case with more loads per thread over the
    one with fewer; the largest such ratio (below 1: more loads per thread always sit lower)."""
    cases = [c for c in result.cases if "ilp" in c.params]
    out = []
    for a in cases:
        for b in cases:
            if a.extra["bytes_in_flight_per_sm"] == b.extra["bytes_in_flight_per_sm"] and a.extra["ilp"] > b.extra["ilp"]:
                out.append(a.bandwidth_bytes_per_s / b.bandwidth_bytes_per_s)
    return max(out)


def sweep_monotone(result) -> float:
    """The largest bandwidth ratio of a lower-occupancy point over a higher-occupancy one (below 1: the
    bandwidth falls with occupancy)."""
    cases = [c for c in result.cases if "smem_kib" in c.params]
    return max(lo.bandwidth_bytes_per_s / hi.bandwidth_bytes_per_s
               for lo in cases for hi in cases if lo.extra["occupancy"] < hi.extra["occupancy"])


def knee(result) -> tuple[float, float]:
    """(the least fraction of the copy among the points with at least 32 KiB per SM in flight, the least among
    those with 16 KiB)."""
    cases = [c for c in result.cases if "ilp" in c.params]
    return (min(of_copy(result, c) for c in cases if c.extra["bytes_in_flight_per_sm"] >= 32 * KIB),
            min(of_copy(result, c) for c in cases if c.extra["bytes_in_flight_per_sm"] == 16 * KIB))


SENS = occ.sensitivity_table()
SENS_A100 = occ.sensitivity_table(occ.budget("a100-sxm"))


def spill_states(result) -> tuple:
    """Warps active, eligible and issued per scheduler per cycle: the build as compiled against the capped ones."""
    base, *capped = result.cases
    m = lambda c, k: ncu(c, f"smsp__{k}.avg.per_cycle_active")   # noqa: E731
    return (min(m(c, "warps_active") for c in capped) / m(base, "warps_active"),
            max(m(c, "warps_eligible") for c in capped) / m(base, "warps_eligible"),
            max(m(c, "issue_active") for c in capped) / m(base, "issue_active"))


CLAIMS = [
    Measured("Notebook 09's pointer chase times a load from HBM with the memory system idle: about 340 ns",
             LATENCY, hbm_latency_ns, (330, 355), params=HBM_CHASE, unit=" ns"),

    Analytic("it still allows three blocks", lambda: (SENS[3]["shared ceiling"], SENS[3]["resident blocks"]),
             [(3, 3), (3, 3)]),
    Analytic("nothing here says the 50% configuration is faster than the 37.5% one",
             lambda: (SENS[1]["occupancy %"] / 100, SENS[0]["occupancy %"] / 100), [(0.5, 0.5), (0.375, 0.375)],
             unit="%"),
    # first order: ⌊164 KiB / 32 KiB⌋ = 5; with the 1 KiB reservation per block: 4
    Analytic("On the A100 the 1 KiB reservation alone turns the 32 KiB row's shared-memory ceiling from 5 into 4",
             lambda: (164 // 32, SENS_A100[1]["shared ceiling"]), [(5, 5), (4, 4)]),

    Measured("Occupancy falls in steps (a few KiB more shared memory changes nothing until a block no longer fits), "
             "and the bandwidth of this copy falls with it", SWEEP, sweep_monotone, (0, 0.99), unit="×"),
    Measured("With half of the SM's warp slots filled, eight independent loads per thread move more bytes per second "
             "than one load per thread with every slot filled; with a quarter of the slots, they still do", ILP,
             lambda r: (ilp_case(r, 8, 4).bandwidth_bytes_per_s / ilp_case(r, 1, 8).bandwidth_bytes_per_s,
                        ilp_case(r, 8, 2).bandwidth_bytes_per_s / ilp_case(r, 1, 8).bandwidth_bytes_per_s),
             [(1.05, 3), (1.05, 3)], unit="×"),

    Measured("the copy's read half, about 2.1 TB/s", SWEEP, read_tb_per_s, (2.0, 2.2), unit=" TB/s", belongs_to="NVIDIA H200"),
    Measured("B · L ≈ 0.7 MB in flight across the GPU, about 5 KiB per SM of its 132", LITTLE,
             lambda sweep, lat: (in_flight_bytes(sweep, lat) / 1e6, in_flight_bytes(sweep, lat) / sms(sweep) / KIB,
                                 sms(sweep)),
             [(0.65, 0.78), (4.5, 5.8), (132, 132)], belongs_to="NVIDIA H200"),
    Measured("One 4-byte load per thread at full residency (2,048 threads) keeps 8 KiB per SM, more than that, and "
             "yet that point reaches only about 60–65% of the copy", ILP,
             lambda r: (ilp_case(r, 1, 8).extra["bytes_in_flight_per_sm"] / KIB, of_copy(r, ilp_case(r, 1, 8))),
             [(8, 8), (0.58, 0.67)], unit="%", belongs_to="NVIDIA H200"),
    Measured("only from about 32 KiB per SM do all the points reach 90% of the copy", ILP, knee,
             [(0.9, 1.05), (0.0, 0.9)], unit="%"),
    # 32 KiB against this run's B · L per SM (the sweep's copy and the chase)
    Measured("times the 72% of warp slots occupied, is about 0.77 MB in flight, and over its 1.3 TB/s of reads that is "
             "580–600 ns, some 1.7 times the idle chase", (ILP, LATENCY), loaded_latency,
             [(0.70, 0.74), (0.74, 0.80), (1.28, 1.34), (578, 605), (1.65, 1.75)], belongs_to="NVIDIA H200"),
    Measured("about six times the idle prediction", (ILP, *LITTLE),
             lambda ilp, sweep, lat: 32 * KIB / (in_flight_bytes(sweep, lat) / sms(ilp)), (5, 7), unit="×", belongs_to="NVIDIA H200"),
    Measured("the one-load copy at full residency keeps only about 70% of the SM's warp slots occupied on average, "
             "not 100%", ILP, lambda r: ncu(ilp_case(r, 1, 8), ACHIEVED) / 100, (0.65, 0.76), unit="%"),

    Measured("at equal nominal bytes in flight the points with more loads per thread sit somewhat lower", ILP,
             equal_bytes_ratio, (0.75, 0.99), unit="×", belongs_to="NVIDIA H200"),
    Measured("at 8 KiB per SM, about 2.1–2.2 TB/s with eight loads a thread against 2.6 TB/s with one", ILP,
             lambda r: (ilp_case(r, 8, 1).bandwidth_bytes_per_s / 1e12, ilp_case(r, 1, 8).bandwidth_bytes_per_s / 1e12,
                        ilp_case(r, 8, 1).extra["bytes_in_flight_per_sm"] / KIB, ilp_case(r, 1, 8).extra["bytes_in_flight_per_sm"] / KIB),
             [(2.05, 2.2), (2.55, 2.68), (8, 8), (8, 8)], unit=" TB/s", belongs_to="NVIDIA H200"),
    Measured("it is higher with eight loads a thread (about 89% of the theoretical) than with one (about 72%)", ILP,
             lambda r: (ncu(ilp_case(r, 8, 1), ACHIEVED) / ncu(ilp_case(r, 8, 1), THEORETICAL),
                        ncu(ilp_case(r, 1, 8), ACHIEVED) / ncu(ilp_case(r, 1, 8), THEORETICAL)),
             [(0.87, 0.9), (0.7, 0.73)], unit="%"),
    Measured("the profiler (below) finds fewer warps active than the theoretical occupancy in every case", ILP,
             lambda r: max(achieved_over_theoretical(r)), (0, 0.99), unit="×"),
    Measured("The cap buys occupancy and pays for it in local-memory traffic", SPILL,
             lambda r: min(c.median_s for c in r.cases[1:]) / r.cases[0].median_s, (1.5, 100), unit="×"),
    Measured("the build as compiled, with the fewest warps, is the fastest", SPILL,
             lambda r: (min(c.median_s for c in r.cases[1:]) / r.cases[0].median_s,
                        min(c.extra["occupancy"] for c in r.cases[1:]) / r.cases[0].extra["occupancy"]),
             [(1.01, 100), (1.01, 10)], unit="×"),

    *[Measured("ncu's theoretical occupancy equals the model's in every row", e, theoretical_gap, (0, 0.5),
               unit=" points") for e in (SWEEP, ILP, SPILL)],
    Measured("for the copies with 8 registers per thread ncu's register ceiling is half the model's", ILP,
             lambda r: tuple(ncu(c, "launch__occupancy_limit_registers") / model_residency(r, c).limit_registers
                             for c in copies(r) if c.launch["registers"] == 8) or (0.0,),
             [(0.5, 0.5)] * 4),
    *[Measured("Achieved occupancy is below the theoretical one everywhere", e,
               lambda r: max(achieved_over_theoretical(r)), (0, 0.99), unit="×") for e in (SWEEP, ILP, SPILL)],
    Measured("down to about 70% of it for the one-load copies", SWEEP, lambda r: min(achieved_over_theoretical(r)),
             (0.65, 0.76), unit="%"),
    Measured("In the copies, eligible and issued warps per cycle are tiny at every occupancy", ILP,
             lambda r: (max(ncu(c, "smsp__warps_eligible.avg.per_cycle_active") for c in copies(r)),
                        max(ncu(c, "smsp__issue_active.avg.per_cycle_active") for c in copies(r))),
             [(0, 0.5), (0, 0.3)]),
    Measured("the capped builds have more warps active but fewer eligible and far fewer issuing", SPILL, spill_states,
             [(1.05, 10), (0, 0.5), (0, 0.5)], unit="×"),

    Analytic("eight 256-thread blocks (100% occupancy)",
             lambda: occ.residency(occ.budget("h200"), 256, 32).occupancy, (1.0, 1.0), unit="%"),
]
