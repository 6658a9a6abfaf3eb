"""Notebook 10's models, pure (no GPU): wgmma's shared-memory descriptor, the TMA's 128-byte swizzle,
the register budget that setmaxnreg redistributes, the mbarrier parity rule of the slot ring, the tile
budget behind the calculator (shared memory, registers and blocks per SM of a warp-specialized block),
and Blackwell's tensor memory on paper.

The descriptor and swizzle here are the Python twins of ``smem_desc`` in ``kernels/hopper_gemm.cu``
(tests hold them equal to what the kernel computes)."""
from __future__ import annotations

from dataclasses import dataclass

from course_lib.core.hardware import GpuSpec, spec
from course_lib.models import occupancy

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
    ("epilogue (rung 7): registers → shared memory (stmatrix) → TMA store; the warpgroup issues no wgmma "
     "while it writes the stage",
     "TMEM → registers (tcgen05.ld) → shared memory → TMA store: the first hop changes, and with two TMEM "
     "accumulators the MMAs of the next tile run while the epilogue warps drain this one"),
)


# --------------------------------------------------------------------------- mbarrier phases and parity

def ring_use(j: int, stages: int) -> tuple[int, int]:
    """Tile j of a block's ring: (its slot, how many times that slot was used before: the pass)."""
    if j < 0 or stages < 1:
        raise ValueError(f"tile {j} of a ring of {stages} slots: tiles count from 0, a ring has at least one slot")
    return j % stages, j // stages


def ring_parities(j: int, stages: int) -> tuple[int, int]:
    """(the parity the consumers wait on full[s] with, the parity the producer waits on empty[s] with) for
    tile j: pass p waits for phase p of full[s], and for phase p - 1 of empty[s] (the slot freed last time)."""
    _, p = ring_use(j, stages)
    return p & 1, (p & 1) ^ 1


def parity_wait_returns(completed_phases: int, parity: int) -> bool:
    """Whether ``mbarrier.try_wait.parity`` with ``parity`` returns at once on a barrier that has completed
    ``completed_phases`` phases (so its current phase is that number). It returns once the phase of that
    parity has completed, that is when the current phase's parity differs: a fresh barrier (current phase 0)
    lets a wait on parity 1 through, as if a phase -1 had completed. One bit only: a waiter more than one
    phase behind cannot tell phase p from phase p + 2, which the ring rules out (a slot is not refilled
    before its consumers freed it)."""
    if completed_phases < 0 or parity not in (0, 1):
        raise ValueError(f"{completed_phases} completed phases, parity {parity}: a count from 0, a parity 0 or 1")
    return (completed_phases & 1) != parity


# --------------------------------------------------------------------------- the tile budget (notebook 10's calculator)

WGMMA_M = 64                 # rows of one wgmma (m64nNk16)
WGMMA_K = 16                 # K of one bf16 wgmma
WGMMA_N = (8, 256)           # N: a multiple of 8 from 8 to 256
WGMMA_CC = "9.0"             # wgmma exists on compute capability 9.0 only (sm_90a)
BF16_BYTES = 2
SWIZZLE_ROW_ELEMENTS = SWIZZLE_ROW_BYTES // BF16_BYTES   # 64 bf16 along K per 128-byte swizzled row
ALIGN_SLACK = 1024           # the kernel's dynamic shared memory beyond its slots: room to align them to 1,024 bytes
BARRIER_BYTES_PER_SLOT = 16  # a full and an empty mbarrier, 8 bytes each
PRODUCER_REGS = 40           # the kernel's HG_PRODUCER_REGS
# What ptxas gave every wgmma kernel of the course's compile report beyond its fp32 accumulators (rung 3: 90
# for 64; rungs 4-5 built without setmaxnreg: 154 for 128; the ceilings with A from shared: 58, 90, 154 for
# 32, 64, 128). An estimate for other tiles, not a rule: the compiler decides (tests hold it to the report).
OTHER_REGISTERS = 26


def _round8(n: int) -> int:
    return -(-n // 8) * 8


@dataclass(frozen=True)
class TileBudget:
    """What one block of the warp-specialized design (rungs 3-5: one producer warpgroup, ``consumers``
    consumer warpgroups issuing m64nNk16 wgmmas from shared memory) costs on one SM."""

    gpu: str
    block_m: int
    block_n: int
    block_k: int
    stages: int
    consumers: int
    setmaxnreg: bool
    producer_regs: int
    slot_bytes: int               # one slot: A and B's K slice
    smem_per_block_bytes: int     # the kernel's dynamic shared memory: slots, their barriers, alignment slack
    accumulator_registers: int    # fp32 accumulators per consumer thread
    consumer_registers: int       # estimated need of a consumer thread: accumulators + OTHER_REGISTERS
    launch_registers: int         # per thread at launch (setmaxnreg: the even share the blocks per SM leave)
    consumer_ceiling: int         # the most a consumer thread can hold (setmaxnreg: the pool less the producer's)
    residency: occupancy.Residency
    output_stage_bytes: int = 0   # rung 7: the output tile in bf16, staged for the TMA store

    @property
    def threads(self) -> int:
        return WARPGROUP * (1 + self.consumers)

    @property
    def wgmmas_per_k16(self) -> int:
        """m64 wgmma instructions the block issues per k16 step: one per 64 rows of the tile."""
        return self.block_m // WGMMA_M

    @property
    def flop_per_slot(self) -> int:
        return 2 * self.block_m * self.block_n * self.block_k

    @property
    def l2_flop_per_byte(self) -> float:
        """FLOPs per byte the block's TMA brings from L2: 2·BM·BN·BK / ((BM + BN)·BK·2)."""
        return self.flop_per_slot / self.slot_bytes

    @property
    def smem_bytes_per_slot(self) -> int:
        """Bytes the wgmmas read from shared memory per slot: each m64 wgmma reads its 64 rows of A and all
        BN rows of B, so B is read once per 64 rows of the tile."""
        return self.wgmmas_per_k16 * (WGMMA_M + self.block_n) * self.block_k * BF16_BYTES

    @property
    def smem_flop_per_byte(self) -> float:
        return self.flop_per_slot / self.smem_bytes_per_slot


def tile_budget(gpu: GpuSpec | str, block_m: int = 128, block_n: int = 256, block_k: int = 64, stages: int = 4,
                consumers: int = 2, setmaxnreg: bool = True, producer_regs: int = PRODUCER_REGS,
                tma_store: bool = False) -> TileBudget:
    """Shared memory, registers and blocks per SM of a warp-specialized wgmma block on ``gpu`` (a spec-table
    key, name or GpuSpec). Defaults: rung 5's choice; ``tma_store`` adds rung 7's BM × BN bf16 output
    stage. A ValueError says what cannot be built or launched."""
    g = spec(gpu) if isinstance(gpu, str) else gpu
    if g.compute_capability != WGMMA_CC:
        other = ("its MMA is tcgen05.mma (the Blackwell section below)" if g.compute_capability.startswith("10")
                 else "its tensor cores take mma.sync (notebook 06)")
        raise ValueError(f"{g.name} is compute capability {g.compute_capability}: wgmma exists on compute "
                         f"capability {WGMMA_CC} only (sm_90a: H100, H200, GH200); {other}")
    for name, v in (("BM", block_m), ("BN", block_n), ("BK", block_k), ("stages", stages),
                    ("consumer warpgroups", consumers)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a whole number of at least 1 (got {v!r})")
    if block_m % (WGMMA_M * consumers):
        raise ValueError(f"BM = {block_m} over {consumers} consumer warpgroup(s): each owns BM / {consumers} rows, "
                         f"which must be a multiple of wgmma's M = {WGMMA_M}")
    lo, hi = WGMMA_N
    if not lo <= block_n <= hi or block_n % 8:
        raise ValueError(f"BN = {block_n}: one wgmma's N is a multiple of 8 from {lo} to {hi}")
    if block_k % SWIZZLE_ROW_ELEMENTS:
        raise ValueError(f"BK = {block_k}: the TMA's 128-byte swizzle, which the descriptor describes, writes K in "
                         f"rows of {SWIZZLE_ROW_ELEMENTS} bf16; a slot holds whole rows (a multiple of "
                         f"{SWIZZLE_ROW_ELEMENTS})")
    slot = (block_m + block_n) * block_k * BF16_BYTES
    stage = block_m * block_n * BF16_BYTES if tma_store else 0
    smem = ALIGN_SLACK + stages * (slot + BARRIER_BYTES_PER_SLOT) + stage
    b = occupancy.budget(g)
    if smem > b.max_smem_per_block_bytes:
        staged = f" and the {stage / 1024:g} KiB output stage" if stage else ""
        raise ValueError(f"{stages} slots of {slot / 1024:g} KiB ({block_m}+{block_n} rows × {block_k} bf16) take "
                         f"{smem / 1024:,.1f} KiB with their barriers{staged}, more than the "
                         f"{occupancy.fmt_bytes(b.max_smem_per_block_bytes)} a block may use on {g.name}: the tile "
                         "does not fit. Fewer stages or a smaller tile")
    threads = WARPGROUP * (1 + consumers)
    acc = accumulator_registers(block_m // consumers, block_n)
    need = acc + OTHER_REGISTERS
    if not setmaxnreg:
        if need > b.max_registers_per_thread:
            raise ValueError(f"a consumer thread needs about {need} registers ({acc} accumulators + {OTHER_REGISTERS} "
                             f"others), more than the {b.max_registers_per_thread} a thread may have; wgmma's "
                             "accumulators cannot spill (the pitfalls below): a smaller tile or more consumers")
        res = occupancy.residency(b, threads, need, smem)
        return TileBudget(g.name, block_m, block_n, block_k, stages, consumers, False, producer_regs, slot, smem,
                          acc, need, need, need, res, stage)
    need8 = _round8(need)
    if need8 > SETMAXNREG_RANGE[1]:
        raise ValueError(f"a consumer thread needs about {need} registers ({acc} accumulators + {OTHER_REGISTERS} "
                         f"others), more than setmaxnreg's {SETMAXNREG_RANGE[1]}; wgmma's accumulators cannot "
                         "spill: a smaller tile or more consumers")
    register_plan(producer_regs, need8, consumers)   # says so when a count is not one setmaxnreg takes
    most = occupancy.residency(b, threads, 0, smem).resident_blocks   # what shared memory and warps allow
    for blocks in range(most, 0, -1):
        launch = occupancy.max_registers_for_resident_blocks(b, threads, blocks) // 8 * 8
        ceiling = min(SETMAXNREG_RANGE[1],
                      (threads * launch - WARPGROUP * producer_regs) // (WARPGROUP * consumers) // 8 * 8)
        if ceiling >= need8:
            res = occupancy.residency(b, threads, launch, smem)
            return TileBudget(g.name, block_m, block_n, block_k, stages, consumers, True, producer_regs, slot, smem,
                              acc, need, launch, ceiling, res, stage)
    raise ValueError(f"a consumer thread needs about {need8} registers ({acc} accumulators + {OTHER_REGISTERS} "
                     f"others, in setmaxnreg's steps of 8); with the producer at {producer_regs}, setmaxnreg can give "
                     f"the consumers at most {ceiling} even at one block per SM: a smaller tile or more consumers")
