"""The roofline: two lower bounds on time, and what they say about attainable FLOP/s.

    t >= max(F / C_peak, Q / B_peak)        P <= min(C_peak, B_peak * I)     I = F / Q

Pure functions, SI units in the names (flop, bytes, seconds, per_s). Nothing
here needs a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass

from course_lib.core.hardware import BYTES_PER_ELEMENT, GpuSpec
from course_lib.core.validate import non_negatives, positives


def arithmetic_intensity(flop: float, bytes_moved: float) -> float:
    """Useful FLOPs per byte moved through the chosen memory boundary."""
    non_negatives(flop=flop)
    positives(bytes_moved=bytes_moved)
    return flop / bytes_moved


def ridge_point(peak_flop_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """The intensity where the memory roof meets the compute roof, in FLOP/byte."""
    positives(peak_flop_per_s=peak_flop_per_s, bandwidth_bytes_per_s=bandwidth_bytes_per_s)
    return peak_flop_per_s / bandwidth_bytes_per_s


def attainable_flop_per_s(intensity: float, peak_flop_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """min(C_peak, B_peak * I): the highest rate the two roofs allow."""
    non_negatives(intensity=intensity)
    positives(peak_flop_per_s=peak_flop_per_s, bandwidth_bytes_per_s=bandwidth_bytes_per_s)
    return min(peak_flop_per_s, bandwidth_bytes_per_s * intensity)


@dataclass(frozen=True)
class RooflineBound:
    flop: float
    bytes_moved: float
    compute_seconds: float
    memory_seconds: float

    @property
    def seconds(self) -> float:
        """The lower bound on time, assuming compute and movement overlap perfectly."""
        return max(self.compute_seconds, self.memory_seconds)

    @property
    def binding_roof(self) -> str:
        return "compute" if self.compute_seconds >= self.memory_seconds else "memory"

    @property
    def intensity(self) -> float:
        return self.flop / self.bytes_moved


def time_lower_bound(flop: float, bytes_moved: float, peak_flop_per_s: float,
                     bandwidth_bytes_per_s: float) -> RooflineBound:
    non_negatives(flop=flop)
    positives(bytes_moved=bytes_moved, peak_flop_per_s=peak_flop_per_s,
              bandwidth_bytes_per_s=bandwidth_bytes_per_s)
    return RooflineBound(flop, bytes_moved, flop / peak_flop_per_s, bytes_moved / bandwidth_bytes_per_s)


def gemm_flop(m: int, n: int, k: int) -> float:
    """2·M·N·K: one multiply and one add per term of each output's dot product."""
    for name, v in (("M", m), ("N", n), ("K", k)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a whole number of at least 1, got {v!r}")
    return 2.0 * m * n * k


def gemm_compulsory_bytes(m: int, n: int, k: int, bytes_a: float, bytes_b: float | None = None,
                          bytes_c: float | None = None) -> float:
    """Each operand read once and C written once: b_A·M·K + b_B·K·N + b_C·M·N."""
    gemm_flop(m, n, k)
    bytes_b = bytes_a if bytes_b is None else bytes_b
    bytes_c = bytes_a if bytes_c is None else bytes_c
    positives(bytes_a=bytes_a, bytes_b=bytes_b, bytes_c=bytes_c)
    return bytes_a * m * k + bytes_b * k * n + bytes_c * m * n


def gemm_intensity(m: int, n: int, k: int, bytes_per_element: float) -> float:
    """Compulsory-byte intensity of C[M,N] = A[M,K] @ B[K,N] with one dtype throughout."""
    return gemm_flop(m, n, k) / gemm_compulsory_bytes(m, n, k, bytes_per_element)


def square_gemm_crossover_n(peak_flop_per_s: float, bandwidth_bytes_per_s: float,
                            bytes_per_element: float) -> float:
    """The N where 2N³/C equals 3N²b/B, i.e. N = 3·b·C / (2·B): below it, memory binds."""
    positives(bytes_per_element=bytes_per_element)
    return 3.0 * bytes_per_element * ridge_point(peak_flop_per_s, bandwidth_bytes_per_s) / 2.0


@dataclass(frozen=True)
class SquareGemmEstimate:
    """The calculator's answer for one square GEMM on one GPU in one dtype."""

    n: int
    dtype: str
    gpu: str
    peak_flop_per_s: float
    bandwidth_bytes_per_s: float
    bound: RooflineBound
    ridge: float
    crossover_n: float

    @property
    def attainable_flop_per_s(self) -> float:
        return self.bound.flop / self.bound.seconds


def square_gemm(n: int, dtype: str, gpu: GpuSpec) -> SquareGemmEstimate:
    """Time to compute 2N³ FLOPs at the dtype's peak vs time to move three N×N matrices."""
    if dtype not in BYTES_PER_ELEMENT:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(BYTES_PER_ELEMENT)}")
    peak = gpu.peak(dtype)
    b = BYTES_PER_ELEMENT[dtype]
    bw = gpu.hbm_bandwidth_bytes_per_s
    flop = gemm_flop(n, n, n)
    return SquareGemmEstimate(
        n=n, dtype=dtype, gpu=gpu.name, peak_flop_per_s=peak, bandwidth_bytes_per_s=bw,
        bound=time_lower_bound(flop, gemm_compulsory_bytes(n, n, n, b), peak, bw),
        ridge=ridge_point(peak, bw), crossover_n=square_gemm_crossover_n(peak, bw, b))


def ridge_table(gpus: list[GpuSpec]) -> list[dict]:
    """Ridge point per GPU and dtype, FLOP/byte against each GPU's HBM bandwidth."""
    return [{"gpu": g.name, **{d: ridge_point(g.peak_flop_per_s[d], g.hbm_bandwidth_bytes_per_s)
                               for d in g.dtypes}} for g in gpus]
