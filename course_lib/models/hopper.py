"""Notebook 10's models, pure (no GPU): wgmma's shared-memory descriptor, the TMA's 128-byte swizzle,
the register budget that setmaxnreg redistributes, and Blackwell's tensor memory on paper.

The descriptor and swizzle here are the Python twins of ``smem_desc`` in ``kernels/hopper_gemm.cu``
(tests hold them equal to what the kernel computes)."""
from __future__ import annotations

from dataclasses import dataclass

SWIZZLE_MODES = {"none": 0, "128B": 1, "64B": 2, "32B": 3}   # bits 62-63 of a wgmma descriptor
SWIZZLE_ROW_BYTES = 128      # the 128-byte swizzle works on rows of 128 bytes...
SWIZZLE_PERIOD_ROWS = 8      # ...in groups of 8 rows (1,024 bytes), 16-byte chunks permuted within a row
CHUNK_BYTES = 16
REGISTER_FILE = 65536        # 32-bit registers per SM on Hopper (and Ampere, Blackwell)
WARPGROUP = 128
SETMAXNREG_RANGE = (24, 256)


def _field(value: int, bits: int, name: str) -> int:
    if value < 0 or value % 16 or (value >> 4) >= 1 << bits:
        raise ValueError(f"{name} = {value}: must be a multiple of 16 below {16 << bits} bytes")
    return value >> 4


def smem_descriptor(address: int, stride_bytes: int = 1024, leading_bytes: int = 16, swizzle: str = "128B") -> int:
    """The 64-bit wgmma matrix descriptor of a K-major tile at shared-memory byte ``address``:
    start address / 16 in bits 0-13, leading byte offset / 16 in 16-29, stride byte offset / 16 in
    32-45 (from one 8-row group to the next), the swizzle mode in 62-63."""
    if swizzle not in SWIZZLE_MODES:
        raise ValueError(f"swizzle {swizzle!r}: one of {', '.join(SWIZZLE_MODES)}")
    if not 0 <= address < 1 << 18 or address % 16:
        raise ValueError(f"address {address}: a wgmma tile starts 16-byte aligned, below 256 KiB")
    return (_field(address & 0x3FFF0, 14, "address") | _field(leading_bytes, 14, "leading byte offset") << 16
            | _field(stride_bytes, 14, "stride byte offset") << 32 | SWIZZLE_MODES[swizzle] << 62)


def decode_descriptor(desc: int) -> dict:
    """A descriptor's fields, in bytes (the inverse of ``smem_descriptor``)."""
    if not 0 <= desc < 1 << 64:
        raise ValueError(f"{desc} is not a 64-bit value")
    mode = {v: k for k, v in SWIZZLE_MODES.items()}[desc >> 62]
    return {"start address": (desc & 0x3FFF) << 4, "leading byte offset": ((desc >> 16) & 0x3FFF) << 4,
            "stride byte offset": ((desc >> 32) & 0x3FFF) << 4, "base offset": (desc >> 49) & 0x7, "swizzle": mode}


def swizzled_chunk(row: int, chunk: int) -> int:
    """Where the 128-byte swizzle puts 16-byte chunk ``chunk`` (0-7) of a tile's row ``row``."""
    if not 0 <= chunk < SWIZZLE_ROW_BYTES // CHUNK_BYTES or row < 0:
        raise ValueError(f"chunk {chunk} of row {row}: a 128-byte row has chunks 0-7")
    return chunk ^ (row % SWIZZLE_PERIOD_ROWS)


def swizzled_offset(row: int, col: int, element_bytes: int = 2) -> int:
    """Byte offset of element (row, col) of a K-major tile whose rows are 128 bytes, as the TMA
    writes it with the 128-byte swizzle."""
    byte = col * element_bytes
    if not 0 <= byte < SWIZZLE_ROW_BYTES:
        raise ValueError(f"column {col}: a 128-byte row holds {SWIZZLE_ROW_BYTES // element_bytes} elements")
    return row * SWIZZLE_ROW_BYTES + swizzled_chunk(row, byte // CHUNK_BYTES) * CHUNK_BYTES + byte % CHUNK_BYTES


def accumulator_registers(rows: int, cols: int, threads: int = WARPGROUP) -> int:
    """fp32 accumulator registers per thread when ``threads`` hold a rows x cols tile."""
    if rows * cols % threads:
        raise ValueError(f"a {rows}x{cols} tile does not split evenly over {threads} threads")
    return rows * cols // threads


@dataclass(frozen=True)
class RegisterPlan:
    producer_regs: int
    consumer_regs: int
    producer_warpgroups: int
    consumer_warpgroups: int

    @property
    def total(self) -> int:
        return WARPGROUP * (self.producer_regs * self.producer_warpgroups + self.consumer_regs * self.consumer_warpgroups)

    @property
    def threads(self) -> int:
        return WARPGROUP * (self.producer_warpgroups + self.consumer_warpgroups)

    @property
    def pool(self) -> int:
        """The registers the block holds from launch: setmaxnreg.inc only takes what .dec gave back."""
        return self.launch_regs * self.threads

    @property
    def fits(self) -> bool:
        return self.total <= self.pool

    @property
    def launch_regs(self) -> int:
        """What every thread gets at launch (before setmaxnreg): the file shared evenly, in steps of 8."""
        return min(255, REGISTER_FILE // self.threads // 8 * 8)


def register_plan(producer_regs: int, consumer_regs: int, consumer_warpgroups: int = 2,
                  producer_warpgroups: int = 1) -> RegisterPlan:
    """setmaxnreg's arithmetic: a count per warpgroup role, each a multiple of 8 in 24-256."""
    lo, hi = SETMAXNREG_RANGE
    for name, v in (("producer", producer_regs), ("consumer", consumer_regs)):
        if not lo <= v <= hi or v % 8:
            raise ValueError(f"{name} registers {v}: setmaxnreg takes a multiple of 8 from {lo} to {hi}")
    return RegisterPlan(producer_regs, consumer_regs, producer_warpgroups, consumer_warpgroups)


# --------------------------------------------------------------------------- Blackwell, on paper

TMEM_LANES = 128            # tensor memory per SM: 128 lanes ...
TMEM_COLUMNS = 512          # ... of 512 columns of 32 bits: 256 KiB
TMEM_BYTES = TMEM_LANES * TMEM_COLUMNS * 4


def tmem_accumulators(block_m: int, block_n: int) -> int:
    """How many fp32 accumulator tiles of block_m x block_n one SM's tensor memory holds (a tile of
    128 rows takes block_n columns of all 128 lanes; of 64 rows, half the lanes)."""
    if block_m not in (64, 128) or not 8 <= block_n <= 256 or block_n % 8:
        raise ValueError(f"{block_m}x{block_n}: one SM's tcgen05.mma tile has M = 64 or 128 and N = 8-256 in steps of 8")
    per_tile = block_n if block_m == 128 else block_n / 2
    return int(TMEM_COLUMNS // per_tile)


def accumulator_share_of_registers(block_m: int, block_n: int) -> float:
    """The share of an SM's register file a block_m x block_n fp32 accumulator takes on Hopper."""
    return block_m * block_n / REGISTER_FILE


# Each mechanism of notebook 10 and what takes its place on Blackwell (sm_100a).
BLACKWELL_SUCCESSORS = (
    ("wgmma.mma_async: four warps issue, accumulators in their registers",
     "tcgen05.mma: one thread issues, accumulators in tensor memory (TMEM)"),
    ("wgmma.commit_group / wait_group: the issuing warps wait",
     "tcgen05.commit: the MMA's completion arrives on an mbarrier any warp can wait on"),
    ("setmaxnreg: registers moved to the consumers to hold 128 accumulators each",
     "not needed for accumulators; epilogue warps copy TMEM to registers with tcgen05.ld"),
    ("TMA + mbarriers (full/empty ring, expect-tx)",
     "the same TMA and mbarriers"),
    ("clusters of 2 with TMA multicast (rung 6)",
     "the same, plus the 2-CTA MMA (cta_group::2): two SMs compute one 256-row tile together"),
    ("persistent grid with a fixed grouped tile order",
     "cluster launch control: a running block asks the hardware for the next tile to take"),
    ("epilogue from registers to global memory",
     "TMEM → registers (tcgen05.ld) → shared memory → TMA store"),
)
