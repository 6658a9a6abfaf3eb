"""Claims of 07_waves's prose (see course_lib.measure.claims): each is checked against the record
and against the live run committed with the notebook.

cuBLAS's steps are read through its kernels' names (``nvjet_..._<along N>x<along M>_...``): the tile each
run picked, counted in waves of one tile per SM (132 SMs on the H100 SXM and the H200). Its smaller
wiggles move between runs; the prose builds only on steps every run shows, under both protocols, with
ranges that span both. The H100 run of 2026-12-07 picked the same tiles at the steps as the H200's runs
but stepped by more at 2112, 3136 and 4288 (its 192 x 192 kernel slower there than at the next N):
those figures are each GPU's (``belongs_to``)."""
import re
import statistics

from course_lib.labs import waves as lab_waves
from course_lib.core.timing import PROTOCOL_TOLERANCE
from course_lib.measure.claims import Analytic, Given, Measured
from course_lib.models import waves

N_SWEEP, M_SWEEP, REMEDIES = "waves.n_sweep", "waves.m_sweep", "waves.remedies"
M = K = 4096          # waves.n_sweep's fixed M and K, and waves.m_sweep's N and K
SMS = 132             # the H100 SXM's and the H200's
H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
SWITCHES = (1088, 2112, 3136, 4288)   # where our kernel adds a wave and cuBLAS moves to 192 x 192


# --------------------------------------------------------------------------- waves.n_sweep

def course_s(r, n: int) -> float:
    return r.case(f"course {M}x{n}x{K}").median_s


def cublas_s(r, n: int) -> float:
    return r.case(f"cuBLAS {M}x{n}x{K}").median_s


def cublas_blocks_s(r, n: int) -> float:
    """cuBLAS's median by the second protocol (blocks of back-to-back calls)."""
    xs = sorted(r.case(f"cuBLAS {M}x{n}x{K}").extra["second_protocol"]["samples_s"])
    return xs[len(xs) // 2]


def both_protocols_rise(n_before: int, n_after: int):
    """cuBLAS's rise at ``n_after`` back to back, then held."""
    return lambda r: (rise(cublas_blocks_s, n_before, n_after)(r), rise(cublas_s, n_before, n_after)(r))


def previous_n(r, n: int) -> int:
    """The sweep's point before ``n``."""
    xs = series(r)[0]["x"]
    return xs[xs.index(n) - 1]


def rise(time_s, n_before: int, n_after: int):
    """How much longer a kernel takes at ``n_after`` than at the sweep's previous point, as a fraction."""
    return lambda r: time_s(r, n_after) / time_s(r, n_before) - 1


def series(r):
    s = lab_waves.sweep_series(r, "n_sweep")
    return s, lab_waves.seconds_per_wave(s)


def steps_beyond_prediction(r) -> float:
    """Measured steps minus the wave model's predicted ones (more than zero: "more steps than that")."""
    s, per_wave = series(r)
    return len(lab_waves.step_table(s, r, per_wave)) - len(lab_waves.cliff_table(s, per_wave))


def predicted_steps_found_at_same_n(r) -> float:
    """The share of the wave model's steps measured at exactly the predicted N."""
    s, per_wave = series(r)
    rows = lab_waves.cliff_table(s, per_wave)
    return sum(row["measured step at"] == row["predicted at"] for row in rows) / len(rows)


def steps_the_sm_round_model_predicts(r) -> float:
    s, per_wave = series(r)
    rows = lab_waves.step_table(s, r, per_wave)
    return sum(row["SM-round model (analytic)"] == "yes" for row in rows) / len(rows)


def worst_overshoot(r) -> float:
    """Measured time over the staircase (waves x the fitted wave) at each N where a wave is added:
    the largest of them. Below 1: the staircase overshoots every shape just past a cliff."""
    s, per_wave = series(r)
    x, w, t = s["x"], s["waves"], s["course_s"]
    return max(t[i] / (w[i] * per_wave) for i in range(1, len(x)) if w[i] > w[i - 1])


def steps_at_a_cublas_switch(r) -> float:
    """The share of our kernel's measured steps at which cuBLAS also changes kernel."""
    s, per_wave = series(r)
    switches = {row["N"] for row in lab_waves.cublas_switch_rows(r)}
    steps = lab_waves.observed_steps(s, per_wave)
    return sum(n in switches for n in steps) / len(steps)


def tile_from_name(names) -> tuple[int, int]:
    """cuBLAS's tile from its nvjet kernel's name: (along N, along M); the first number runs along our N
    (cuBLAS is column-major, so its m is our N)."""
    for name in names:
        found = re.search(r"_(\d+)x(\d+)_\d+x\d+_", name) if name.startswith("nvjet") else None
        if found:
            return int(found.group(1)), int(found.group(2))
    raise LookupError(f"no nvjet tile in {names}")


def cublas_tile(r, n: int) -> tuple[int, int]:
    return tile_from_name(r.case(f"cuBLAS {M}x{n}x{K}").extra["cublas_kernels"])


def cublas_waves(r, n: int) -> int:
    """cuBLAS's waves at N = n: its tiles over the SMs, one tile per SM at a time, rounded up."""
    along_n, along_m = cublas_tile(r, n)
    return waves.schedule(waves.tile_grid(M, n, along_m, along_n).tiles, SMS, 1).waves


def cublas_model(r, n: int) -> float:
    """The wave model's cuBLAS time at N = n, in units of one wave of 256 x 128 tiles: waves x tile area."""
    along_n, along_m = cublas_tile(r, n)
    return cublas_waves(r, n) * along_n * along_m / (256 * 128)


def cublas_model_rise(r, n: int) -> float:
    return cublas_model(r, n) / cublas_model(r, previous_n(r, n)) - 1


def model_step(n: int, tile_before: tuple, waves_before: int, tile_after: tuple, waves_after: int):
    """(1 when the run's names show those tiles and the model those waves, the model's rise at n)."""
    def quantity(r):
        p = previous_n(r, n)
        shown = (cublas_tile(r, p), cublas_waves(r, p), cublas_tile(r, n), cublas_waves(r, n))
        return float(shown == (tile_before, waves_before, tile_after, waves_after)), cublas_model_rise(r, n)
    return quantity


def per_wave_units(r) -> dict:
    """cuBLAS's held time at each N over its model time (waves x tile area), as a fraction of the sweep's median."""
    xs = series(r)[0]["x"]
    units = {n: cublas_s(r, n) / cublas_model(r, n) for n in xs}
    mid = statistics.median(units.values())
    return {n: u / mid for n, u in units.items()}


def worst_departure(r) -> float:
    return max(abs(u - 1) for u in per_wave_units(r).values())


def departures_beyond(r, limit: float = 0.04) -> float:
    """1 when the N at which cuBLAS's time departs from its model by more than ``limit`` are 2112, 3136 and 4288."""
    return float(sorted(n for n, u in per_wave_units(r).items() if abs(u - 1) > limit) == [2112, 3136, 4288])


def switches_to_192(r) -> float:
    """1 when cuBLAS leaves a 256 x 128 or 128 x 256 tile for 192 x 192 at each of ``SWITCHES``."""
    return float(all(cublas_tile(r, previous_n(r, n)) in ((256, 128), (128, 256)) and cublas_tile(r, n) == (192, 192)
                     for n in SWITCHES))


def slower_than_next_n(r) -> float:
    """1 when, at 2112, 3136 and 4288, cuBLAS took longer under both protocols than at the next N, 64 wider,
    with the same kernel and the same wave count."""
    ok = True
    for n in (2112, 3136, 4288):
        same = (r.case(f"cuBLAS {M}x{n}x{K}").extra["cublas_kernels"]
                == r.case(f"cuBLAS {M}x{n + 64}x{K}").extra["cublas_kernels"])
        ok &= same and cublas_waves(r, n) == cublas_waves(r, n + 64)
        ok &= all(t(r, n) > t(r, n + 64) for t in (cublas_s, cublas_blocks_s))
    return float(ok)


def no_step_at_3648(r):
    """(1 when cuBLAS keeps its kernel and its wave count at 3648, then its rise under each protocol, unsigned)."""
    p = previous_n(r, 3648)
    same = (r.case(f"cuBLAS {M}x{p}x{K}").extra["cublas_kernels"] == r.case(f"cuBLAS {M}x3648x{K}").extra["cublas_kernels"]
            and cublas_waves(r, p) == cublas_waves(r, 3648))
    return (float(same), *(abs(v) for v in both_protocols_rise(p, 3648)(r)))


def first_memset_n(r) -> float:
    """The first N at which cuBLAS's profiled kernels include a Memset; NaN if N after it lacks one."""
    ns = sorted(c.params["n_sweep"] for c in r.cases if c.params["kernel"] == "cublas")
    with_memset = [c.params["n_sweep"] for c in r.cases if c.params["kernel"] == "cublas"
                   and any(k.startswith("Memset") for k in c.extra["cublas_kernels"])]
    first = min(with_memset)
    return float(first) if sorted(with_memset) == [n for n in ns if n >= first] else float("nan")


def cublas_and_course_rise_at_1600(r, cublas_time_s=cublas_s):
    """Our kernel's step at N = 1600, and how much more cuBLAS's time (held, or ``cublas_blocks_s``) rose
    there than ours."""
    ours, theirs = rise(course_s, 1536, 1600)(r), rise(cublas_time_s, 1536, 1600)(r)
    return ours, theirs - ours


def model_ratio_ranges(r):
    """(lowest, highest) measured time over the wave model's staircase, then over the SM-round model's."""
    s, per_wave = series(r)
    m = lab_waves.model_ratios(s, per_wave)
    return (*m["wave model"], *m["SM-round model"])


def rises_at_2624(r):
    """cuBLAS's rise at N = 2624, and ours."""
    return rise(cublas_s, 2560, 2624)(r), rise(course_s, 2560, 2624)(r)


def two_waves_over_one(r) -> float:
    """4096 x 1152 (288 blocks, two waves of 264 slots) over 4096 x 1024 (256 blocks, one wave)."""
    return course_s(r, 1152) / course_s(r, 1024)


def below_staircase_at_1152(r) -> float:
    s, per_wave = series(r)
    return course_s(r, 1152) / (2 * per_wave)


# --------------------------------------------------------------------------- waves.m_sweep

def m_course_us(r, m: int) -> float:
    return r.case(f"course {m}x{M}x{K}").median_s * 1e6


def m_cublas(r, m: int):
    return r.case(f"cuBLAS {m}x{M}x{K}")


def thin_course_range_us(r):
    """The course's kernel's fastest and slowest medians from M = 16 to M = 512."""
    ts = [m_course_us(r, m) for m in (16, 32, 64, 128, 192, 256, 384, 512)]
    return min(ts), max(ts)


def cublas_thin_kernels(r) -> float:
    """1 when cuBLAS's tile is 16 or 32 rows of M tall at M = 16, 32 and 64, split-K at M = 16 and not at 64."""
    names = {m: m_cublas(r, m).extra["cublas_kernels"] for m in (16, 32, 64)}
    split = {m: any("splitK" in k for k in ks) for m, ks in names.items()}
    return float(all(tile_from_name(ks)[1] in (16, 32) for ks in names.values()) and split[16] and not split[64])


def cublas_splits_at_32(r) -> float:
    return float(any("splitK" in k for k in m_cublas(r, 32).extra["cublas_kernels"]))


# --------------------------------------------------------------------------- waves.remedies

def remedy(r, shape: str, variant: str):
    return r.case(f"{shape}: {variant}")


def recovered(r, variant: str) -> float:
    """The table's "tail waste recovered" of one variant."""
    return next(row["tail waste recovered"] for row in lab_waves.remedy_rows(r) if row["variant"] == variant)


def best_split_recovered(r) -> float:
    return max(row["tail waste recovered"] for row in lab_waves.remedy_rows(r)
               if row["variant"].startswith("course 128x128, split-K"))


def split4_over_split3(r) -> float:
    return (remedy(r, "split_k", "course 128x128, split-K 4").median_s
            / remedy(r, "split_k", "course 128x128, split-K 3").median_s - 1)


def grid(g: int) -> str:
    return f"course 128x128, persistent grid of {g}"


def grid_us(g: int):
    return lambda r: remedy(r, "persistent", grid(g)).median_s * 1e6


def doubled_sms(r, g: int) -> int:
    return remedy(r, "persistent", grid(g)).extra["placement"]["sms_with_two"]


def spread_first(r):
    """SMs holding two blocks for grids of 90 and 132 (none: one per SM), and 264 and 270 (all 132)."""
    return tuple(doubled_sms(r, g) for g in (90, 132, 264, 270))


def fewer_sms_ahead(r) -> float:
    """How much faster the 90-block grid is than the 132-block grid, as a fraction of the latter."""
    return 1 - grid_us(90)(r) / grid_us(132)(r)


def middle_halves_gap_us(r) -> float:
    """The 132-block grid's lower quartile minus the 90-block grid's upper one: above 0, no overlap."""
    q = {g: statistics.quantiles([t * 1e6 for t in remedy(r, "persistent", grid(g)).samples_s], n=4)
         for g in (90, 132)}
    return q[132][0] - q[90][2]


def persistent_best_recovered(r) -> float:
    return max(recovered(r, grid(g)) for g in (270, 264, 135, 132, 90))


def narrow_over_base(r) -> float:
    return (remedy(r, "tile", "course 128x64, one tile per block").median_s
            / remedy(r, "tile", "course 128x128, one tile per block").median_s)


def thin_course_tb_s(r) -> float:
    return r.case(f"course 16x{M}x{K}").bandwidth_bytes_per_s / 1e12


def useful(n: int) -> float:
    return waves.quantize(n, n, 128, 128, sm_count=132, resident_blocks_per_sm=1).useful_fraction


CLAIMS = [
    Analytic("the two disagreed by more than 3%", lambda: PROTOCOL_TOLERANCE, (0.03, 0.03), unit="%"),
    # The wave model's worked examples (the printed lines above them).
    Analytic("n = 4096 is 97% useful", lambda: useful(4096), (0.965, 0.975), unit="%"),
    Analytic("drops to 86%", lambda: useful(4097), (0.855, 0.865), unit="%"),
    Analytic("A 1536-wide square is worse than a 1408-wide one", lambda: useful(1536) - useful(1408), (-1, -0.01)),

    # Reconcile: the steps.
    Given("A step is a rise between neighbouring N of more than 30% of a wave's time",
          "the definition the notebook uses (lab_waves.observed_steps, fraction=0.3), an input, not a result"),
    Measured("The measurement has more steps than that", N_SWEEP, steps_beyond_prediction, (1, 100)),
    Measured("Every step the wave model predicts is in the measurement, at the same N.", N_SWEEP,
             predicted_steps_found_at_same_n, (1, 1)),
    Measured("the SM-round model, which encodes exactly that, predicts every measured step", N_SWEEP,
             steps_the_sm_round_model_predicts, (1, 1)),
    Measured("the model's staircase overshoots the shapes just past each cliff", N_SWEEP, worst_overshoot,
             (0, 0.95), unit="×"),
    Measured("Over the whole sweep the measured time is 0.81–1.08× the wave model's staircase and 0.95–1.13× the "
             "SM-round model's", N_SWEEP, model_ratio_ranges,
             [(0.805, 0.825), (1.06, 1.085), (0.95, 0.967), (1.12, 1.13)], unit="×"),

    # cuBLAS along N.
    Measured("and does so at most of the N where our kernel steps", N_SWEEP, steps_at_a_cublas_switch,
             (0.55, 1), unit="%"),
    Measured("Counted this way, cuBLAS's held time is waves × tile area × one constant, within 4%, at every N of the "
             "sweep on the H200", N_SWEEP, worst_departure, (0, 0.04), unit="%", belongs_to=H200),
    Measured("and at all but three on an H100", N_SWEEP, departures_beyond, (1, 1), belongs_to=H100),
    Measured("the names show cuBLAS leaving a 256 × 128 or 128 × 256 tile for 192 × 192, on the H100 and the H200 alike",
             N_SWEEP, switches_to_192, (1, 1)),
    Analytic("192² / (256 · 128) = 1.125 times", lambda: 192 ** 2 / (256 * 128), (1.125, 1.125), unit="×"),
    Measured("the model predicts a 12.5% step", N_SWEEP, lambda r: tuple(cublas_model_rise(r, n) for n in SWITCHES),
             [(0.124, 0.126)] * 4, unit="%"),
    Measured("On the H200 the step measured 10–15% at all four, under either protocol", N_SWEEP,
             lambda r: tuple(v for n in SWITCHES for v in both_protocols_rise(previous_n(r, n), n)(r)),
             [(0.095, 0.155)] * 8, unit="%", belongs_to=H200),
    Measured("On an H100 it measured 11–12% at 1088 but 16–27% at the other three", N_SWEEP,
             lambda r: tuple(v for n in SWITCHES for v in both_protocols_rise(previous_n(r, n), n)(r)),
             [(0.105, 0.125)] * 2 + [(0.155, 0.275)] * 6, unit="%", belongs_to=H100),
    Measured("the 192 × 192 kernel took longer than at the next N up, 64 columns wider with the same kernel and the "
             "same wave count", N_SWEEP, slower_than_next_n, (1, 1), belongs_to=H100),
    Measured("one wave of 320 × 128 tiles becomes two of 192 × 128; the model predicts 20%", N_SWEEP,
             model_step(1344, (320, 128), 1, (192, 128), 2), [(1, 1), (0.195, 0.205)], unit="%"),
    Measured("its time rose by 16–22.5%", N_SWEEP, both_protocols_rise(1280, 1344),
             [(0.155, 0.175), (0.16, 0.225)], unit="%"),
    Measured("two waves of 192 × 128 become two of 128 × 256; 33%", N_SWEEP,
             model_step(1600, (192, 128), 2, (128, 256), 2), [(1, 1), (0.33, 0.335)], unit="%"),
    Measured("by 22–31%", N_SWEEP, both_protocols_rise(1536, 1600), [(0.215, 0.245), (0.27, 0.315)], unit="%"),
    Measured("a little more than our kernel's 20% step there", N_SWEEP,
             lambda r: cublas_and_course_rise_at_1600(r, cublas_blocks_s), [(0.17, 0.23), (0.0, 0.06)], unit="%"),
    Measured("two waves of 320 × 128 become three of 128 × 256; 20%", N_SWEEP,
             model_step(2624, (320, 128), 2, (128, 256), 3), [(1, 1), (0.195, 0.205)], unit="%"),
    Measured("by 16–19%, more than our kernel's 13–14% there", N_SWEEP,
             lambda r: (rise(cublas_blocks_s, 2560, 2624)(r), *rises_at_2624(r)),
             [(0.155, 0.175), (0.175, 0.195), (0.125, 0.145)], unit="%"),
    Measured("At 3648 cuBLAS keeps its kernel and its wave count and does not step (about 1% or less)", N_SWEEP,
             no_step_at_3648, [(1, 1), (0, 0.0125), (0, 0.0125)], unit="%"),
    Measured("With its own steps at 1216 and 1344", N_SWEEP,
             lambda r: tuple(v for n in (1216, 1344) for v in both_protocols_rise(previous_n(r, n), n)(r))
             + tuple(rise(course_s, previous_n(r, n), n)(r) for n in (1216, 1344)),
             [(0.075, 0.25)] * 4 + [(-0.03, 0.03)] * 2, unit="%"),
    Measured("relative to its time its step is smaller than ours at 1088, where it keeps the wave count and ours adds one, "
             "and larger at 1600 and 2624", N_SWEEP,
             lambda r: (rise(course_s, previous_n(r, 1088), 1088)(r) - max(both_protocols_rise(previous_n(r, 1088), 1088)(r)),
                        *(min(both_protocols_rise(previous_n(r, n), n)(r)) - rise(course_s, previous_n(r, n), n)(r)
                          for n in (1600, 2624))), [(0.0, 1.0)] * 3, unit="%"),
    Measured("launched before the GEMM from N = 2624 on", N_SWEEP, first_memset_n,
             (2624, 2624)),

    # Thin shapes.
    Measured("about 50–53 µs, from M = 16 to M = 512", M_SWEEP, thin_course_range_us, [(49, 51), (52, 54)],
             unit=" µs"),
    Analytic("does 2 · 16 = 32 FLOPs per weight it reads: about 16 FLOP per byte",
             lambda: 2 * 16 * M * K / (2 * (16 * K + K * M + 16 * M)), (15.5, 16)),
    Analytic("Reading 32 MiB at the H200 datasheet's 4.8 TB/s takes about 7 µs (analytic",
             lambda: 2 * K * M / 4.8e12 * 1e6, (6.9, 7.1), unit=" µs"),
    Analytic("about 10 µs at the H100 SXM datasheet's 3.35 TB/s", lambda: 2 * K * M / 3.35e12 * 1e6, (9.9, 10.1),
             unit=" µs"),
    Measured("The course's kernel reads the same bytes at about 0.7 TB/s", M_SWEEP, thin_course_tb_s, (0.62, 0.72),
             unit=" TB/s"),
    Measured("cuBLAS takes 11–12 µs", M_SWEEP, lambda r: m_cublas(r, 16).median_s * 1e6, (10.8, 12.4), unit=" µs"),
    Measured("about 3 TB/s", M_SWEEP, lambda r: m_cublas(r, 16).bandwidth_bytes_per_s / 1e12, (2.7, 3.3),
             unit=" TB/s"),
    Measured("up to M = 512, where 128 blocks occupy 128 SMs, it stays at 50–53 µs", M_SWEEP,
             lambda r: tuple(m_course_us(r, m) for m in (16, 32, 64, 128, 192, 256, 384, 512)),
             [(49.5, 53.5)] * 8, unit=" µs"),
    Measured("takes about four and a half times as long as cuBLAS", M_SWEEP,
             lambda r: m_course_us(r, 16) / (m_cublas(r, 16).median_s * 1e6), (4.2, 4.8), unit="×"),
    Measured("At M = 16 to 64 cuBLAS switches to tiles only 16 or 32 rows of M tall", M_SWEEP, cublas_thin_kernels,
             (1, 1)),
    Measured("on the H200 it splits K at M = 32 as well", M_SWEEP, cublas_splits_at_32, (1, 1), belongs_to=H200),

    # Remove the tail.
    Analytic("the slot model counts 45% of the baseline's SM time as idle and the SM-round model 27%",
             lambda: (1 - waves.schedule(288, 132, 2).wave_efficiency, 1 - waves.schedule(288, 132, 2).sm_round_efficiency),
             [(0.45, 0.46), (0.27, 0.28)], unit="%"),
    Measured("288 blocks took about 1.5 times as long as 256", N_SWEEP, two_waves_over_one, (1.45, 1.6), unit="×"),
    Analytic("(three SM rounds against two, where the slot model counts two waves against one)",
             lambda: (waves.schedule(288, 132, 2).sm_rounds, waves.schedule(256, 132, 2).sm_rounds,
                      waves.schedule(288, 132, 2).waves, waves.schedule(256, 132, 2).waves),
             [(3, 3), (2, 2), (2, 2), (1, 1)]),
    Measured("Its time sits well below the slot model's staircase there.", N_SWEEP, below_staircase_at_1152,
             (0, 0.9), unit="×"),
    Measured("It recovers about a quarter of the waste the SM-round model counts.", REMEDIES,
             lambda r: recovered(r, "course 128x64, one tile per block"), (0.22, 0.3), unit="%"),
    Analytic("The SM-round model counts five rounds of half tiles, 2.5 tiles' time against the baseline's 3",
             lambda: (waves.schedule(576, 132, 3).sm_rounds, waves.schedule(576, 132, 3).sm_rounds / 2,
                      waves.schedule(288, 132, 2).sm_rounds), [(5, 5), (2.5, 2.5), (3, 3)]),
    Measured("and the measurement fell between that and no gain at all", REMEDIES, narrow_over_base,
             (2.5 / 3, 0.99), unit="×"),
    Analytic("2·128·64 / (2·(128 + 64)) ≈ 43 FLOP per byte staged against 64 for 128 × 128",
             lambda: (2 * 128 * 64 / (2 * (128 + 64)), 2 * 128 * 128 / (2 * (128 + 128))), [(42.5, 43.5), (64, 64)]),
    Measured("the best split recovers about nine tenths of the waste", REMEDIES, best_split_recovered,
             (0.85, 0.95), unit="%"),
    Analytic("(144 blocks fill 55% of the 264 slots, 108 blocks 41%)",
             lambda: (waves.schedule(144, 132, 2).wave_efficiency, waves.schedule(108, 132, 2).wave_efficiency),
             [(0.545, 0.555), (0.405, 0.415)], unit="%"),
    Analytic("(two rounds of K/4 against one of K/3)",
             lambda: (waves.schedule(144, 132, 2).sm_rounds, waves.schedule(108, 132, 2).sm_rounds), [(2, 2), (1, 1)]),
    Analytic("it puts split-K 4 at 1.5 times split-K 3's time",
             lambda: (waves.schedule(144, 132, 2).sm_rounds / 4) / (waves.schedule(108, 132, 2).sm_rounds / 3), (1.5, 1.5),
             unit="×"),
    Measured("Split-K 4 is 9–12% slower than split-K 3 on an H100 and an H200", REMEDIES, split4_over_split3,
             (0.085, 0.125), unit="%"),
    Analytic("although the slot model's useful fraction says it should be faster",
             lambda: (waves.quantize(768, 768, 128, 128, 132, 2, 4).useful_fraction
                      - waves.quantize(768, 768, 128, 128, 132, 2, 3).useful_fraction), (0.01, 1)),
    Analytic("its 144 blocks are more than the 132 SMs, so 12 SMs run two blocks",
             lambda: (waves.quantize(768, 768, 128, 128, 132, 2, 4).schedule.blocks - 132,
                      waves.quantize(768, 768, 128, 128, 132, 2, 3).schedule.blocks), [(12, 12), (108, 108)]),
    Analytic("(2304 × 1920, 270 tiles)", lambda: waves.tile_grid(2304, 1920, 128, 128).tiles, (270, 270)),
    Measured("up to 132 blocks go one per SM, and only the blocks past 132 double up", REMEDIES, spread_first,
             [(0, 0), (0, 0), (132, 132), (132, 132)]),
    Measured("135 blocks leave three SMs with two", REMEDIES, lambda r: doubled_sms(r, 135), (3, 3)),
    Measured("132 blocks, one per SM, need about 150 µs", REMEDIES, grid_us(132), (145, 155), unit=" µs"),
    Measured("270 blocks, two per SM, finish every tile in about 125 µs", REMEDIES,
             lambda r: remedy(r, "persistent", "course 128x128, one tile per block").median_s * 1e6, (123.5, 126.5),
             unit=" µs"),
    Analytic("three rounds for both, so the model predicts a tie", lambda: (-(-270 // 90), -(-270 // 132)),
             [(3, 3), (3, 3)]),
    Measured("the 90-block grid came out 1–2% ahead in every run so far", REMEDIES, fewer_sms_ahead,
             (0.0095, 0.0205), unit="%"),
    Measured("the two grids' middle halves of samples do not overlap", REMEDIES, middle_halves_gap_us,
             (0, 100), unit=" µs"),
    Measured("a persistent grid alone does not remove a tail", REMEDIES, persistent_best_recovered, (-1, 0),
             unit="%"),
]
