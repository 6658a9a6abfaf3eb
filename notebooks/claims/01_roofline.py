"""Claims of 01_roofline's prose (see course_lib.measure.claims): each is checked against the record
and against the live run committed with the notebook."""
from course_lib.core import hardware
from course_lib.measure.ceilings import MeasuredCeilings, roofline_points
from course_lib.measure import claims
from course_lib.measure.claims import Analytic, Given, Measured
from course_lib.models import roofline

shared = claims.load_module("_shared")

ROOFLINE, COPY, MATMUL = "roofline.measured", "machine.copy_bandwidth", "machine.matmul_peak"
# A "% of roof" needs the ceilings, which are other experiments of the same run: such a claim names all
# three, and its quantity takes one result of each, in this order.
UNDER_ROOFS = (ROOFLINE, COPY, MATMUL)


def matmul_peak_tflop(result, dtype: str) -> float:
    return next(c.flop_per_s for c in result.cases if c.params["dtype"] == dtype) / 1e12


def ceilings(copy, matmul) -> MeasuredCeilings:
    """The run's ceilings, as ceilings.measured_ceilings builds them from its two experiments."""
    return MeasuredCeilings(copy.gpu, copy.provenance, shared.copy_bandwidth(copy),
                            {c.params["dtype"]: c.flop_per_s for c in matmul.cases}, None, copy.machine, matmul.machine)


def point(measured, copy, matmul, name: str) -> dict:
    """Case ``name``'s row of the measured table (ceilings.roofline_points, as the notebook builds it)."""
    return next(p for p in roofline_points(measured, ceilings(copy, matmul)) if p["label"] == name)


def of_roof(measured, copy, matmul, name: str) -> float:
    """The `% of roof` column of the measured table, as a fraction."""
    return point(measured, copy, matmul, name)["% of roof"] / 100


def roof_tflop(measured, copy, matmul, name: str) -> float:
    return point(measured, copy, matmul, name)["roof TFLOP/s"]


def median_us(result, name: str) -> float:
    return result.case(name).median_s * 1e6


N64 = ["matmul fp32, n=64", "matmul fp32, n=64, one call at a time", "matmul bf16, n=64",
       "matmul bf16, n=64, one call at a time"]
LARGE = [f"matmul {d}, n={n}" for d in ("fp32", "bf16") for n in (2048, 4096, 8192)]

# --------------------------------------------------------------------------- the models
B200, H100, H200 = (hardware.spec(k) for k in ("b200", "h100-sxm", "h200"))


def ridge(gpu, dtype: str = "bf16") -> float:
    return roofline.ridge_point(gpu.peak(dtype), gpu.hbm_bandwidth_bytes_per_s)


def crossover(gpu, dtype: str, b: int) -> float:
    """N = 3·b·C / (2·B), where 2N³/C = 3N²b/B."""
    return 3 * b * gpu.peak(dtype) / (2 * gpu.hbm_bandwidth_bytes_per_s)


ROUND_B200 = roofline.ridge_point(2e15, 8e12)

CLAIMS = [
    # no figure in the words: the roof must be a fair one on any GPU, near the datasheet's HBM bandwidth
    Measured("The roof is a copy", COPY, shared.copy_of_datasheet, (0.8, 1.0), unit="%"),
    Measured("The compute roof is itself an 8192³ matmul", MATMUL, lambda r: matmul_peak_tflop(r, "bf16"),
             (600, 900), unit=" TFLOP/s"),

    Analytic("why a B200 needs about 250–285 FLOPs per byte", lambda: (ROUND_B200, ridge(B200)),
             [(245, 286), (245, 286)]),
    Given("an illustrative accelerator (300 TFLOP/s, 1.5 TB/s)", "a hypothetical machine for the worked example"),
    Given("A B200 does roughly 2 PFLOP/s of dense fp16 on its tensor cores and reads HBM3e at roughly 8 TB/s",
          "round numbers of the NVIDIA HGX B200 datasheet (2.25 PFLOP/s dense fp16, 8 TB/s; hardware.SPECS['b200'])"),
    Given("the B200 in round numbers (2 PFLOP/s, 8 TB/s)", "the same round numbers as the B200 ridge section"),
    Analytic("which is 750 for the round-number B200 in fp16", lambda: roofline.square_gemm_crossover_n(2e15, 8e12, 2),
             (749.9, 750.1)),
    Analytic("about 30× below fp16 on a B200 and about 15× on the H200",
             lambda: (B200.peak("fp16") / B200.peak("fp32"), H200.peak("fp16") / H200.peak("fp32")),
             [(28, 32), (14, 16)], unit="×"),
    Analytic("about 15× smaller on a B200 and about 7× smaller on the H200",
             lambda: (crossover(B200, "fp16", 2) / crossover(B200, "fp32", 4),
                      crossover(H200, "fp16", 2) / crossover(H200, "fp32", 4)),
             [(14, 16), (7, 8)], unit="×"),
    Given("The H100's bf16 ridge, 989 TFLOP/s over 3.35 TB/s", "NVIDIA H100 SXM datasheet: dense bf16, HBM3 bandwidth"),
    Analytic("is about 295 FLOP/byte", lambda: ridge(H100), (290, 300)),
    Analytic("its ridge is lower (206)", lambda: ridge(H200), (205.5, 206.5)),
    Given("its datasheet's 2.25 PFLOP/s", "NVIDIA HGX B200 datasheet, dense fp16/bf16 per GPU (hardware.SPECS['b200'])"),
    Analytic("hence 281 rather than the round numbers' 250", lambda: (ridge(B200), ROUND_B200),
             [(280.5, 281.5), (249.5, 250.5)]),
    Analytic("the B200's is about the same as the H100's (281 against 295, 5% apart)",
             lambda: (ridge(B200), ridge(H100), 1 - ridge(B200) / ridge(H100)),
             [(280.5, 281.5), (294.5, 295.5), (0.04, 0.055)], unit=""),
    Analytic("its memory bandwidth and its bf16 peak grew by about the same factor (2.4× and 2.3×)",
             lambda: (B200.hbm_bandwidth_bytes_per_s / H100.hbm_bandwidth_bytes_per_s,
                      B200.peak("bf16") / H100.peak("bf16")),
             [(2.35, 2.45), (2.25, 2.35)], unit="×"),
    Analytic("A gap of 5% is within how far a datasheet's rounded bandwidth can move a ridge",
             lambda: 1 - ridge(B200) / ridge(H100), (0.04, 0.055), unit="%"),

    # measured, against the same run's ceilings
    Measured("at the roof or up to 2% above it", UNDER_ROOFS, lambda *run: of_roof(*run, "vector add, n=67108864"),
             (0.995, 1.02), unit="%"),
    Measured("on the H200 they reach about two thirds of it (65–71%", UNDER_ROOFS,
             lambda *run: (of_roof(*run, "matrix-vector fp32, n=4096"), of_roof(*run, "matrix-vector fp32, n=8192")),
             [(0.645, 0.715), (0.645, 0.715)], unit="%", belongs_to="NVIDIA H200"),
    Measured("the two sizes land within a few points of each other", UNDER_ROOFS,
             lambda *run: abs(of_roof(*run, "matrix-vector fp32, n=4096") - of_roof(*run, "matrix-vector fp32, n=8192")),
             (0, 0.06), unit="%"),
    # the matrix of torch.mv at n = 4096, fp32, against the L2 the H200 reports (its datasheet says 50 MB; notebook
    # 00's machine card shows both) and the H100's datasheet
    Measured("the 64 MiB matrix is about the size of the L2 (60 MiB on an H200", COPY,
             lambda r: (4096 * 4096 * 4 / 2 ** 20, r.machine["l2_bytes"] / 2 ** 20), [(64, 64), (60, 60)],
             belongs_to="NVIDIA H200"),
    Analytic("50 MiB on an H100", lambda: H100.l2_bytes / 2 ** 20, (50, 50)),
    Measured("the 64×64 matmuls below put that cost at a few microseconds", ROOFLINE,
             lambda r: (median_us(r, "matmul fp32, n=64"), median_us(r, "matmul bf16, n=64")),
             [(2, 7), (2, 7)], unit=" µs"),
    Measured("on the H200 a call takes about 23 µs at n = 4096 and about 90 µs at n = 8192", ROOFLINE,
             lambda r: (median_us(r, "matrix-vector fp32, n=4096"), median_us(r, "matrix-vector fp32, n=8192")),
             [(21.5, 25), (84, 96)], unit=" µs", belongs_to="NVIDIA H200"),
    Measured("on the H200 a call takes about 23 µs at n = 4096 and about 90 µs at n = 8192, and there the larger call "
             "reaches no larger share of the roof", UNDER_ROOFS,
             lambda *run: of_roof(*run, "matrix-vector fp32, n=8192") - of_roof(*run, "matrix-vector fp32, n=4096"),
             (-0.1, 0.03), unit="%", belongs_to="NVIDIA H200"),
    # "most of their measured peaks": the least of them, from n = 2048 up, both dtypes
    Measured("From a few thousand up, fp32 and bf16 matmuls reach most of their measured peaks", UNDER_ROOFS,
             lambda *run: min(of_roof(*run, n) for n in LARGE), (0.75, 1.1), unit="%"),
    Measured("this point lands within about 10% of 100%, above or below", UNDER_ROOFS,
             lambda *run: (of_roof(*run, "matmul fp32, n=8192"), of_roof(*run, "matmul bf16, n=8192")),
             [(0.9, 1.1), (0.9, 1.1)], unit="%"),
    Analytic("a 64³ fp32 matmul has I ≈ 10.7", lambda: roofline.gemm_intensity(64, 64, 64, 4), (10.65, 10.75)),
    Measured("says they could run at tens of TFLOP/s", UNDER_ROOFS,
             lambda *run: (roof_tflop(*run, "matmul fp32, n=64"), roof_tflop(*run, "matmul bf16, n=64")),
             [(10, 99), (10, 99)], unit=" TFLOP/s"),
    Measured("they run at 0.1–0.2 TFLOP/s", ROOFLINE, lambda r: tuple(r.case(n).flop_per_s / 1e12 for n in N64),
             [(0.08, 0.22)] * 4, unit=" TFLOP/s"),
    Measured("does 512 times the work of the one at n = 64 in about 1.4 times the time", ROOFLINE,
             lambda r: ((512 / 64) ** 3, median_us(r, "matmul bf16, n=512") / median_us(r, "matmul bf16, n=64")),
             [(512, 512), (1.2, 1.6)], unit="×"),
    Measured("The GPU finishes a 64×64 matmul in a few microseconds", ROOFLINE,
             lambda r: (median_us(r, "matmul fp32, n=64"), median_us(r, "matmul fp32, n=64, one call at a time")),
             [(2, 7), (2, 7)], unit=" µs"),
    Analytic("not its half a million FLOPs", lambda: roofline.gemm_flop(64, 64, 64), (4.5e5, 5.5e5)),
    # the host's dispatch moves with the host's load: 2.76x live, 4.79x in the record
    Measured("The host needs about 2.5 to 5 times as long to dispatch one call through PyTorch as the GPU needs to run it",
             ROOFLINE, lambda r: (r.case("matmul fp32, n=64, one call at a time").extra["host_dispatch_median_s"]
                                  / r.case("matmul fp32, n=64, one call at a time").median_s),
             (2.45, 5.1), unit="×"),
    Analytic("Modern ridges are in the hundreds of FLOPs per byte",
             lambda: tuple(ridge(g) for g in (H100, H200, B200)), [(100, 999)] * 3),
]
