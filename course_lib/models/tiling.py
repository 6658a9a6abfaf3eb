"""GEMM tiling model: what a tile choice costs and buys, before any kernel runs.

A block owns a B_M x B_N tile of C and walks the reduction dimension B_K at a
time. Per stage it stages B_K·(B_M + B_N) input elements in shared memory and
does 2·B_M·B_N·B_K FLOPs, so its intensity against L2 (each block loads its stages
from L2; HBM sees fewer bytes when L2 serves neighbouring blocks the same tiles)
is 2·B_M·B_N / (b·(B_M + B_N)). Inside the block each thread keeps T_M x T_N
outputs in registers and reads T_M + T_N values from shared memory per k: that
ratio, 2·T_M·T_N / (b·(T_M + T_N)), is its intensity against shared memory.
Pure functions, no GPU: every number here is analytic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from course_lib.core.hardware import BYTES_PER_ELEMENT, KIB, GpuSpec
from course_lib.core.validate import positives
from course_lib.models import occupancy

ACCUMULATOR_BYTES = 4            # fp32 accumulators, whatever the input dtype
WARP = 32
MAX_THREADS_PER_BLOCK = 1024
MAX_REGISTERS_PER_THREAD = 255
# Registers a thread needs besides its accumulators and fragments (addresses, indices, loop
# state): a rough allowance for the estimate; the compiler's report is the real number.
REGISTER_OVERHEAD_ESTIMATE = 32
TILE_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")


def _bytes_per_element(dtype: str) -> float:
    if dtype not in TILE_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(TILE_DTYPES)}")
    return BYTES_PER_ELEMENT[dtype]


# --------------------------------------------------------------------------- one stage

def stage_flop(block_m: int, block_n: int, block_k: int) -> int:
    """FLOPs of one reduction stage of a B_M x B_N tile (a multiply-add counts 2)."""
    positives(block_m=block_m, block_n=block_n, block_k=block_k)
    return 2 * block_m * block_n * block_k


def stage_bytes(block_m: int, block_n: int, block_k: int, bytes_per_element: float) -> float:
    """Input bytes one stage brings in: a B_M x B_K slice of A and a B_K x B_N slice of B."""
    positives(block_m=block_m, block_n=block_n, block_k=block_k, bytes_per_element=bytes_per_element)
    return bytes_per_element * block_k * (block_m + block_n)


def stage_intensity(block_m: int, block_n: int, bytes_per_element: float) -> float:
    """FLOP per input byte of a stage: 2·B_M·B_N / (b·(B_M + B_N)); B_K cancels."""
    positives(block_m=block_m, block_n=block_n, bytes_per_element=bytes_per_element)
    return 2 * block_m * block_n / (bytes_per_element * (block_m + block_n))


def staging_bytes(block_m: int, block_n: int, block_k: int, bytes_per_element: float, stages: int) -> float:
    """Shared memory for `stages` buffered stages of A and B slices."""
    positives(stages=stages)
    return stages * stage_bytes(block_m, block_n, block_k, bytes_per_element)


def accumulator_bytes(block_m: int, block_n: int, bytes_per_accumulator: int = ACCUMULATOR_BYTES) -> int:
    """The block's output tile in fp32: it lives spread over the threads' registers."""
    positives(block_m=block_m, block_n=block_n)
    return block_m * block_n * bytes_per_accumulator


def thread_tile_shape(outputs_per_thread: int) -> tuple[int, int]:
    """The most nearly square T_M x T_N (T_M >= T_N) with T_M·T_N = outputs per thread."""
    positives(outputs_per_thread=outputs_per_thread)
    if int(outputs_per_thread) != outputs_per_thread:
        raise ValueError(f"outputs per thread must be a whole number; got {outputs_per_thread}")
    n = int(math.isqrt(outputs_per_thread))
    while outputs_per_thread % n:
        n -= 1
    return outputs_per_thread // n, n


def register_tile_intensity(thread_m: int, thread_n: int, bytes_per_element: float) -> float:
    """FLOP per shared-memory byte a thread reads: 2·T_M·T_N / (b·(T_M + T_N))."""
    positives(thread_m=thread_m, thread_n=thread_n, bytes_per_element=bytes_per_element)
    return 2 * thread_m * thread_n / (bytes_per_element * (thread_m + thread_n))



# --------------------------------------------------------------------------- the whole tile

@dataclass(frozen=True)
class TileEstimate:
    """Everything the tile calculator shows for one choice of tile on one GPU."""

    gpu: str
    dtype: str
    block_m: int
    block_n: int
    block_k: int
    stages: int
    threads: int
    outputs_per_thread: int
    thread_tile: tuple[int, int]
    stage_flop: int
    stage_bytes: float
    l2_intensity: float
    smem_intensity: float
    staging_bytes: float
    accumulator_bytes: int
    accumulator_registers_per_thread: int
    registers_per_thread: int
    registers_estimated: bool
    residency: occupancy.Residency | None
    problems: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return not self.problems


def estimate_registers(outputs_per_thread: int, thread_tile: tuple[int, int], bytes_per_element: float) -> int:
    """Accumulators + one k-slice of A and B fragments + an allowance: a first guess, not ptxas."""
    fragments = math.ceil(sum(thread_tile) * bytes_per_element / 4)
    return outputs_per_thread + fragments + REGISTER_OVERHEAD_ESTIMATE


def tile_estimate(block_m: int, block_n: int, block_k: int, stages: int, dtype: str, threads: int,
                  outputs_per_thread: int, gpu: GpuSpec, registers_per_thread: int | None = None) -> TileEstimate:
    """The tile calculator's model. Nonsense input raises ValueError; a tile that is well formed
    but does not fit the GPU comes back with ``fits`` False and the reasons in ``problems``."""
    for name, v in (("B_M", block_m), ("B_N", block_n), ("B_K", block_k), ("stages", stages),
                    ("threads per block", threads), ("outputs per thread", outputs_per_thread)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a whole number of at least 1; got {v!r}")
    b = _bytes_per_element(dtype)
    if threads * outputs_per_thread != block_m * block_n:
        raise ValueError(
            f"{threads} threads x {outputs_per_thread} outputs = {threads * outputs_per_thread:,} outputs, "
            f"but a {block_m}x{block_n} tile has {block_m * block_n:,}: every output needs exactly one owner")
    tm, tn = thread_tile_shape(outputs_per_thread)
    estimated = registers_per_thread is None
    regs = estimate_registers(outputs_per_thread, (tm, tn), b) if estimated else registers_per_thread
    if not estimated and (not isinstance(regs, int) or regs < 1):
        raise ValueError(f"registers per thread must be a whole number of at least 1; got {regs!r}")
    smem = staging_bytes(block_m, block_n, block_k, b, stages)
    problems = []
    if dtype not in gpu.dtypes:
        problems.append(f"{gpu.name} (compute capability {gpu.compute_capability}) has no {dtype} arithmetic on its "
                        f"datasheet (it lists {', '.join(gpu.dtypes)}): a {dtype} tile cannot run there")
    if threads > MAX_THREADS_PER_BLOCK:
        problems.append(f"{threads} threads per block is over the limit of {MAX_THREADS_PER_BLOCK}")
    if threads % WARP:
        problems.append(f"{threads} threads is not a whole number of warps ({WARP}); the last warp runs part-empty")
    if regs > MAX_REGISTERS_PER_THREAD:
        problems.append(f"{regs} registers per thread is over the limit of {MAX_REGISTERS_PER_THREAD}: "
                        f"the {outputs_per_thread} fp32 accumulators alone need {outputs_per_thread}; "
                        "the compiler would spill to local memory")
    if smem > gpu.max_smem_per_block_bytes:
        problems.append(f"{smem / KIB:,.1f} KiB of staging is over {gpu.name}'s "
                        f"{gpu.max_smem_per_block_bytes / KIB:,.0f} KiB of shared memory per block")
    residency = None
    if not problems:
        try:
            residency = occupancy.residency(occupancy.budget(gpu), threads, regs, int(math.ceil(smem)))
        except ValueError as exc:
            problems.append(f"not even one block fits on an SM: {exc}")
        else:
            if residency.resident_blocks < 1:
                problems.append(f"not even one block fits on an SM: {residency.limiter} is exhausted")
    return TileEstimate(
        gpu=gpu.name, dtype=dtype, block_m=block_m, block_n=block_n, block_k=block_k, stages=stages,
        threads=threads, outputs_per_thread=outputs_per_thread, thread_tile=(tm, tn),
        stage_flop=stage_flop(block_m, block_n, block_k), stage_bytes=stage_bytes(block_m, block_n, block_k, b),
        l2_intensity=stage_intensity(block_m, block_n, b), smem_intensity=register_tile_intensity(tm, tn, b),
        staging_bytes=smem, accumulator_bytes=accumulator_bytes(block_m, block_n),
        accumulator_registers_per_thread=outputs_per_thread, registers_per_thread=regs,
        registers_estimated=estimated, residency=residency, problems=problems)
