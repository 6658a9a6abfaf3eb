"""Claims of 11_failure_lab's prose (see course_lib.measure.claims).

The capstone's figures come from ``failures.mystery``, which the notebook runs (live or replayed), so
they are Measured and checked against the record and against the live run committed with the notebook.

The catalogue's evidence rows and the reconciliation table replay the H200's records in every run,
live or not (``lab_failures.evidence_rows``, ``reconciliation.table``): the notebook never measures
them, so a live run has no result of their experiments to check. Their figures are Recorded claims,
checked against every recorded run of the experiments they name."""
from course_lib.core import hardware
from course_lib.exercises.kernel import catalog
from course_lib.labs import failure_lab as lab_failures
from course_lib.measure.claims import Analytic, Given, Measured, Recorded
from course_lib.models import estimator, failures

MYSTERY = "failures.mystery"
SHAPE = "16384×1024"


# --------------------------------------------------------------------------- the catalogue

def family_size(family: str) -> int:
    return sum(f.family == family for f in failures.FAILURES)


def catalogued(number: int) -> failures.Failure:
    return next(f for f in failures.FAILURES if f.number == number)


def evidence_ratio(result, number: int) -> float:
    """The "× the time for the same work" of catalogue row ``number`` (lab_failures.evidence), from ``result``,
    a run of the experiment the row cites."""
    f = catalogued(number)
    if result.experiment != f.record:
        raise LookupError(f"catalogue row {number} cites {f.record}, not {result.experiment}")
    return result.case(f.case).median_s / result.case(f.contrast).median_s


# The reconciliation table's rows, as reconciliation.rows builds them: each row's experiment and case, the peak
# its bound takes, and the case whose bytes the bound counts where that is not the row's own (08's: the fused plan's).
RECONCILED = [
    ("timing.measuring_correctly", "host timer, no synchronize, n=16777216", "fp32", None),
    ("roofline.measured", "vector add, n=67108864", "fp32", None),
    ("occupancy.register_spill", "--maxrregcount=32", "fp32", None),
    ("coalescing.strided_copy", "stride 16", "fp32", None),
    ("transpose.ladder", "naive (no shared memory)", "fp32", None),
    ("transpose.ladder", "padded tile 64×65", "fp32", None),
    ("banks.probe", "4 B row", "fp32", None),
    ("gemm.fp32_ladder", "sgemm_warptile_db_16x8, n=4096", "fp32", None),
    ("gemm.bf16_mma", "bf16_gemm_mma (tma), n=4096", "bf16", None),
    ("waves.n_sweep", "course 4096x4288x4096", "bf16", None),
    ("fusion.chains", "k=8: course, 8 kernels", "fp32", "k=8: course, one fused kernel"),
    ("pipeline.streaming", "stream_sync, 1 block/SM", "fp32", None),
    ("hopper.profile", "hgemm_5_persistent, 4096×4096×4096", "bf16", None),
]
RECONCILED_EXPERIMENTS = tuple(dict.fromkeys(e for e, *_ in RECONCILED))


def residuals_s(*results) -> list[float]:
    """Each reconciliation row's recorded median minus its lower bound (the larger of FLOPs at the datasheet peak
    and bytes at the datasheet HBM bandwidth), from one result of each of RECONCILED_EXPERIMENTS, in order."""
    by_name = dict(zip(RECONCILED_EXPERIMENTS, results))
    out = []
    for experiment, name, dtype, bytes_of in RECONCILED:
        r = by_name[experiment]
        spec, c = hardware.spec(r.gpu), r.case(name)
        nbytes = r.case(bytes_of).bytes if bytes_of else c.bytes
        bound = max(c.flop / spec.peak(dtype) if c.flop else 0.0, nbytes / spec.hbm_bandwidth_bytes_per_s)
        out.append(c.median_s - bound)
    return out


def wave_row_extra_wave(r) -> float:
    """Notebook 07's row: 4096 x 4288 (five waves, the last 12% full) over 4096 x 4224 (four full ones)."""
    return r.case("course 4096x4288x4096").median_s / r.case("course 4096x4224x4096").median_s - 1


# --------------------------------------------------------------------------- the mystery

def case(r, label: str):
    return r.case(f"{label}, {SHAPE}")


def copy(r):
    return case(r, "copy (course copy_vec4)")


def of_copy(label: str):
    """A kernel's bandwidth as a fraction of the copy's in the same run (the table's "% of copy")."""
    return lambda r: case(r, label).bandwidth_bytes_per_s / copy(r).bandwidth_bytes_per_s


def ncu(r, label: str, metric: str) -> float:
    return case(r, label).extra["ncu"][metric]


def sm_busy(label: str):
    return lambda r: ncu(r, label, "sm__cycles_active.avg") / ncu(r, label, "sm__cycles_active.max")


def sectors_per_request(label: str):
    return lambda r: (ncu(r, label, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
                      / ncu(r, label, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"))


def local_sectors(label: str):
    return lambda r: (ncu(r, label, "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum")
                      + ncu(r, label, "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"))


def dram(r, label: str, which: str = "both") -> float:
    read, write = ncu(r, label, "dram__bytes_read.sum"), ncu(r, label, "dram__bytes_write.sum")
    return {"read": read, "write": write, "both": read + write}[which]


def local_row_costs(r):
    """The variant that keeps the row in a local array against the plain fix: time, and DRAM bytes."""
    return (case(r, lab_failures.LOCAL_ROW).median_s / case(r, lab_failures.SCALAR_FIX).median_s,
            dram(r, lab_failures.LOCAL_ROW) / dram(r, lab_failures.SCALAR_FIX))


def overrun(r, which: str) -> dict:
    return case(r, lab_failures.NO_GUARD).extra[which]


def memcheck_reads_first(r) -> float:
    """1 when memcheck's first report, for the mystery and for the unguarded fix, is an invalid read."""
    return float(all(case(r, label).extra["memcheck"]["lines"][0].startswith("========= Invalid __global__ read")
                     for label in (lab_failures.AS_GIVEN, lab_failures.NO_GUARD)))


def racecheck(r) -> tuple:
    """Racecheck's hazards without the barrier and with it, and the no-barrier run's reference check
    (1 when its max error is not 0: the check failed)."""
    runs = case(r, lab_failures.SOLUTION).extra["racecheck of notebook 05's transpose"]
    hazards = {k: " ".join(v["lines"]) for k, v in runs.items()}
    return (float("1 hazard displayed (1 error" in hazards["no barrier"]),
            float("0 hazards displayed" in hazards["solution"]),
            float("max error 0" not in hazards["no barrier"]))


FIX, ONE_PASS = lab_failures.SOLUTION, "course rmsnorm_one_pass"
WARP_PER_ROW = (lab_failures.LOCAL_ROW, lab_failures.NO_GUARD, lab_failures.SCALAR_FIX, lab_failures.SOLUTION)


def warps_active_of_fixes(r):
    """(lowest, highest) warps-active share of the kernels with one warp per row."""
    w = [ncu(r, label, "sm__warps_active.avg.pct_of_peak_sustained_active") / 100 for label in WARP_PER_ROW]
    return min(w), max(w)


def mapping_fix(r):
    """The mystery's median and the one-warp-per-row variant that keeps the local array (µs), and their ratio."""
    a, b = case(r, lab_failures.AS_GIVEN).median_s, case(r, lab_failures.LOCAL_ROW).median_s
    return a * 1e6, b * 1e6, a / b


def padded_transpose(copy_run, transpose_run):
    """The padded 64×65 transpose: its bytes at the best copy's rate (µs), the datasheet-to-copy gap and its
    residual over the HBM datasheet bound (µs), and its share of the copy's bandwidth."""
    c = transpose_run.case("padded tile 64×65")
    cp = copy_run.case("course copy_vec4")
    copy_bw = cp.bytes / cp.median_s
    bound = c.bytes / hardware.spec(transpose_run.gpu).hbm_bandwidth_bytes_per_s
    at_copy = c.bytes / copy_bw
    return at_copy * 1e6, (at_copy - bound) * 1e6, (c.median_s - bound) * 1e6, c.bytes / c.median_s / copy_bw


def extra_mb(r) -> float:
    return (dram(r, FIX) - dram(r, ONE_PASS)) / 1e6


def extra_in_reads(r) -> float:
    return (dram(r, FIX, "read") - dram(r, ONE_PASS, "read")) / (dram(r, FIX) - dram(r, ONE_PASS))


def extra_bytes_time_over_gap(r) -> float:
    """The fix's extra DRAM bytes at the copy's bandwidth, over the time between the two kernels."""
    extra_s = (dram(r, FIX) - dram(r, ONE_PASS)) / copy(r).bandwidth_bytes_per_s
    return extra_s / (case(r, FIX).median_s - case(r, ONE_PASS).median_s)


def below_compulsory(r):
    """DRAM bytes over the compulsory ones (input and output once: the copy's bytes) for the one-pass
    kernel and the copy, and their writes over the output's bytes."""
    compulsory = copy(r).bytes
    return (dram(r, ONE_PASS) / compulsory, dram(r, "copy (course copy_vec4)") / compulsory,
            max(dram(r, ONE_PASS, "write"), dram(r, "copy (course copy_vec4)", "write")) / (compulsory / 2))


CLAIMS = [
    Given("108 SMs, 300 TFLOP/s, 1.5 TB/s",
          "the estimator's illustrative machine (estimator.FIXTURE: sm_count, peak_flop_per_s, level_bandwidth), "
          "not a real GPU"),
    Analytic("Thirty-two of them are tied to a case this course recorded", lambda: len(failures.demonstrated()),
             (32, 32)),
    Analytic("wherever there is one (24 of them)",
             lambda: sum(f.contrast is not None for f in failures.demonstrated()), (24, 24)),
    Recorded("(a persistent grid that ran slower)", catalogued(4).record, lambda r: evidence_ratio(r, 4), (1.05, 2),
             unit="×"),
    Analytic("Three have no replayed case of their own here", lambda: len(failures.undemonstrated_rows()), (3, 3)),
    Recorded("at the copy kernel's measured rate its bytes take about 126 µs, so the gap is about 14 µs of a residual "
             "of about 30 µs", ("machine.copy_bandwidth", "transpose.ladder"), padded_transpose,
             [(124, 129), (12, 17), (28, 33), (0, 1)], unit=" µs"),
    Recorded("it runs at 89% of the copy's bandwidth", ("machine.copy_bandwidth", "transpose.ladder"),
             lambda cp, tr: padded_transpose(cp, tr)[3], (0.875, 0.905), unit="%"),
    Recorded("Two residuals are negative", RECONCILED_EXPERIMENTS, lambda *run: sum(t < 0 for t in residuals_s(*run)),
             (2, 2)),
    Recorded("the extra, nearly empty wave made it about 11% slower than the shape just below it", "waves.n_sweep",
             wave_row_extra_wave, (0.09, 0.13), unit="%"),
    Analytic("The largest family, 14 of the 35, is measurement mistakes",
             lambda: (family_size("roofline and measurement"), len(failures.FAILURES),
                      max(family_size(f) for f in failures.FAMILIES)), [(14, 14), (35, 35), (14, 14)]),
    Analytic("at least 20 raw samples and a passed check against a reference",
             lambda: float(estimator.reconcile(estimator.estimate(estimator.FIXTURE), estimator.Observation(
                 "measured", samples_s=(0.0031,) * 20, check_passed=True))["status"] == "measured"), (1, 1)),

    # The capstone.
    Measured("the host-timer row claims several times the copy's bandwidth", MYSTERY,
             of_copy("the mystery as given, host timer without synchronize"), (2, 10), unit="×"),
    Measured("the kernel runs at under a tenth of the copy's bandwidth", MYSTERY, of_copy(lab_failures.AS_GIVEN),
             (0.05, 0.1), unit="%"),
    Measured("while doing well under one FLOP per byte", MYSTERY,
             lambda r: case(r, lab_failures.AS_GIVEN).flop / case(r, lab_failures.AS_GIVEN).bytes, (0.2, 0.7)),
    Measured("the SM-busy ratio is about one half", MYSTERY, sm_busy(lab_failures.AS_GIVEN), (0.4, 0.55)),
    Analytic("on a GPU that holds 132 × 2,048 = 270,336 resident threads: 6% of what it can run at once",
             lambda: (132 * 2048, 16384 / (132 * 2048)), [(270336, 270336), (0.055, 0.065)], unit="%"),
    Measured("against 74–84% for every kernel with one warp per row", MYSTERY, warps_active_of_fixes,
             [(0.735, 0.80), (0.80, 0.845)], unit="%"),
    Measured("made the kernel about five times faster on both GPUs the course has run it on", MYSTERY,
             lambda r: mapping_fix(r)[2], (4.5, 6.0), unit="×"),
    Measured("on the H200 it took the time from about 431–441 to about 76–78 µs, 5.5–5.8× faster", MYSTERY,
             mapping_fix, [(430, 441.5), (75.5, 78.5), (5.45, 5.8)], unit=" µs", belongs_to="NVIDIA H200"),
    Measured("on an H100 about 5.2× faster", MYSTERY, lambda r: mapping_fix(r)[2], (5.0, 5.4), unit="×",
             belongs_to="NVIDIA H100 80GB HBM3"),
    Analytic("Idle SMs can account for at most 132 / 64 ≈ 2.1× of that", lambda: 132 / 64, (2.05, 2.1), unit="×"),
    Measured("One warp per row makes 2,048 blocks, and the SM-busy ratio goes to about 1", MYSTERY,
             lambda r: (ncu(r, FIX, "launch__grid_size"), sm_busy(FIX)(r)), [(2048, 2048), (0.9, 1.0)]),
    Measured("reads about 12% of the peak for the mystery", MYSTERY,
             lambda r: ncu(r, lab_failures.AS_GIVEN, "sm__warps_active.avg.pct_of_peak_sustained_active") / 100,
             (0.10, 0.15), unit="%"),
    Measured("The counter's 16.5 is the average of those loads", MYSTERY, sectors_per_request(lab_failures.AS_GIVEN),
             (16.45, 16.55)),
    Measured("With one warp per row the loads take 4 sectors each", MYSTERY,
             sectors_per_request(lab_failures.SCALAR_FIX), (4, 4)),
    Measured("16-byte loads keep that and move 512 bytes per instruction (16 sectors)", MYSTERY,
             sectors_per_request(FIX), (15.9, 16.1)),
    Measured("ncu counts millions of local sectors", MYSTERY, local_sectors(lab_failures.AS_GIVEN), (1e6, 1e7)),
    Measured("still lives in local memory pays for them in time and in DRAM bytes", MYSTERY, local_row_costs, [(1.1, 2), (1.1, 2)],
             unit="×"),
    Measured("at 4,097 rows (a multiple plus one) it writes past the end of the output", MYSTERY,
             lambda r: (overrun(r, "rows a multiple of the block")["written_past_the_end"],
                        overrun(r, "rows not a multiple of the block")["written_past_the_end"]),
             [(0, 0), (1, 1e9)]),
    Measured("every in-range row was right", MYSTERY,
             lambda r: sum(overrun(r, w)["wrong_outputs"] for w in ("rows a multiple of the block",
                                                                     "rows not a multiple of the block")), (0, 0)),
    Measured("it reports the invalid reads first", MYSTERY, memcheck_reads_first, (1, 1)),
    Measured("Racecheck reports the hazard without the barrier and none with it; the reference check failed here too",
             MYSTERY, racecheck, [(1, 1), (1, 1), (1, 1)]),
    Measured("The reference solution runs at about three quarters of the copy's bandwidth", MYSTERY, of_copy(FIX),
             (0.7, 0.8), unit="%"),
    Measured("the course's one-pass RMSNorm from notebook 08 at about nine tenths", MYSTERY, of_copy(ONE_PASS),
             (0.85, 0.95), unit="%"),
    Measured("the fix moves tens of megabytes more than the one-pass kernel", MYSTERY, extra_mb, (10, 99), unit=" MB"),
    Measured("(about 30 MB on the H200), most of it in reads", MYSTERY,
             lambda r: (extra_mb(r), extra_in_reads(r)), [(25, 35), (0.6, 1.0)], belongs_to="NVIDIA H200"),
    Measured("most of it in reads", MYSTERY, extra_in_reads, (0.6, 1.0), unit="%"),
    Measured("those bytes at the copy's bandwidth take about as long as the gap between the two kernels", MYSTERY,
             extra_bytes_time_over_gap, (0.8, 1.2), unit="×"),
    Measured("DRAM bytes sit below the compulsory 134 MB because their DRAM writes do", MYSTERY, below_compulsory,
             [(0.5, 0.99), (0.5, 0.99), (0.3, 0.9)], unit="×"),
    Measured("A kernel correct at 16,384 rows wrote past its output at 4,097.", MYSTERY,
             lambda r: overrun(r, "rows not a multiple of the block")["written_past_the_end"], (1, 1e9)),
    Analytic("more than 1.25 times the reference's time is not passed", lambda: catalog.MYSTERY.max_slowdown,
             (1.25, 1.25), unit="times"),
]
