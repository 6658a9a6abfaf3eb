"""Residency and occupancy: how many blocks of a kernel one SM holds at once, which resource stops
the next block, and what fraction of the SM's warp slots the resident warps fill.

The model is the first-order formula (one ceiling per resource, take the smallest),
with the allocation rules real hardware applies on top of it, the ones CUDA's occupancy
calculator (``cuda_occupancy.h``, ``cuOccupancyMaxActiveBlocksPerMultiprocessor``) applies:

* registers are allocated per warp, in units of 256, and each of the SM's 4 sub-partitions
  holds a quarter of the register file, so a warp's registers must fit in one quarter;
* shared memory is allocated per block in units of 128 bytes (256 on cc 7.x), and from
  cc 8.0 on the driver reserves 1 KiB per block on top of what the kernel asks for;
* every architecture caps the resident blocks and warps per SM (``ARCH_RULES``).

The worked example's illustrative SM (``ILLUSTRATIVE_SM``) has none of that granularity, on purpose: it is
the first-order formula exactly as written. Pure functions, no GPU needed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from course_lib.core.hardware import KIB, SPECS, GpuSpec, spec

WARP_SIZE = 32
LIMIT_NAMES = ("threads", "warps", "registers", "shared memory", "blocks")


@dataclass(frozen=True)
class ArchRules:
    """Per-compute-capability limits the spec table does not carry."""

    compute_capability: str
    max_blocks_per_sm: int
    max_warps_per_sm: int
    smem_alloc_unit_bytes: int
    reserved_smem_per_block_bytes: int
    register_alloc_unit: int = 256        # registers, allocated to a warp at a time
    register_sub_partitions: int = 4      # the register file is split between 4 schedulers
    max_registers_per_thread: int = 255
    max_registers_per_block: int = 65536
    max_threads_per_block: int = 1024


# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability" (resident
# blocks and warps per SM, shared memory per SM, 1 KiB reserved per block from cc 8.0), and the
# allocation rules of cuda_occupancy.h (CUDA 12): shared-memory unit 256 B on 7.x and 128 B on
# 8.x/9.x, register unit 256 per warp, 4 sub-partitions. Checked against
# cuOccupancyMaxActiveBlocksPerMultiprocessor on an H200 (experiment occupancy.api_agreement).
ARCH_RULES: dict[str, ArchRules] = {r.compute_capability: r for r in [
    ArchRules("7.0", max_blocks_per_sm=32, max_warps_per_sm=64, smem_alloc_unit_bytes=256,
              reserved_smem_per_block_bytes=0),
    ArchRules("7.5", max_blocks_per_sm=16, max_warps_per_sm=32, smem_alloc_unit_bytes=256,
              reserved_smem_per_block_bytes=0),
    ArchRules("8.0", max_blocks_per_sm=32, max_warps_per_sm=64, smem_alloc_unit_bytes=128,
              reserved_smem_per_block_bytes=1024),
    ArchRules("8.6", max_blocks_per_sm=16, max_warps_per_sm=48, smem_alloc_unit_bytes=128,
              reserved_smem_per_block_bytes=1024),
    ArchRules("8.7", max_blocks_per_sm=16, max_warps_per_sm=48, smem_alloc_unit_bytes=128,
              reserved_smem_per_block_bytes=1024),
    ArchRules("8.9", max_blocks_per_sm=24, max_warps_per_sm=48, smem_alloc_unit_bytes=128,
              reserved_smem_per_block_bytes=1024),
    ArchRules("9.0", max_blocks_per_sm=32, max_warps_per_sm=64, smem_alloc_unit_bytes=128,
              reserved_smem_per_block_bytes=1024),
    ArchRules("10.0", max_blocks_per_sm=32, max_warps_per_sm=64, smem_alloc_unit_bytes=128,
              reserved_smem_per_block_bytes=1024),
]}


@dataclass(frozen=True)
class SmBudget:
    """What one SM offers to resident blocks, and how it hands it out."""

    name: str
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    smem_per_sm_bytes: int
    max_smem_per_block_bytes: int
    max_threads_per_block: int = 1024
    max_registers_per_thread: int = 255
    max_registers_per_block: int = 65536
    warp_size: int = WARP_SIZE
    register_alloc_unit: int = 256
    register_sub_partitions: int = 4
    smem_alloc_unit_bytes: int = 128
    reserved_smem_per_block_bytes: int = 1024
    compute_capability: str | None = None
    source: str = ""

    def __post_init__(self):
        for field_name in ("max_threads_per_sm", "max_warps_per_sm", "max_blocks_per_sm", "registers_per_sm",
                           "smem_per_sm_bytes", "max_threads_per_block", "warp_size", "register_alloc_unit",
                           "register_sub_partitions", "smem_alloc_unit_bytes"):
            v = getattr(self, field_name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{self.name}: {field_name.replace('_', ' ')} must be a positive whole number, "
                                 f"got {v!r}")
        if self.max_smem_per_block_bytes < 0 or self.reserved_smem_per_block_bytes < 0:
            raise ValueError(f"{self.name}: shared-memory sizes cannot be negative")

    @property
    def arch(self) -> str | None:
        return "sm_" + self.compute_capability.replace(".", "") if self.compute_capability else None


# The worked example: an illustrative SM, not a real GPU, with no allocation granularity.
ILLUSTRATIVE_SM = SmBudget(
    "illustrative SM (worked example)", max_threads_per_sm=2048, max_warps_per_sm=64,
    max_blocks_per_sm=32, registers_per_sm=65536, smem_per_sm_bytes=164 * KIB,
    max_smem_per_block_bytes=164 * KIB, register_alloc_unit=1, register_sub_partitions=1,
    smem_alloc_unit_bytes=1, reserved_smem_per_block_bytes=0,
    source="an illustrative budget; first-order: no allocation granularity, nothing reserved")


def rules_for(compute_capability: str) -> ArchRules:
    if compute_capability not in ARCH_RULES:
        raise ValueError(f"no allocation rules for compute capability {compute_capability} "
                         f"(known: {', '.join(ARCH_RULES)}); use a custom budget")
    return ARCH_RULES[compute_capability]


def _budget(name: str, cc: str, threads_per_sm: int, registers_per_sm: int, smem_per_sm: int,
            smem_per_block: int, source: str) -> SmBudget:
    r = rules_for(cc)
    if threads_per_sm != r.max_warps_per_sm * WARP_SIZE:
        raise ValueError(f"{name}: {threads_per_sm} threads per SM disagrees with {r.max_warps_per_sm} warps "
                         f"per SM for compute capability {cc}")
    return SmBudget(name, threads_per_sm, r.max_warps_per_sm, r.max_blocks_per_sm, registers_per_sm,
                    smem_per_sm, smem_per_block, r.max_threads_per_block, r.max_registers_per_thread,
                    r.max_registers_per_block, WARP_SIZE, r.register_alloc_unit, r.register_sub_partitions,
                    r.smem_alloc_unit_bytes, r.reserved_smem_per_block_bytes, cc, source)


def budget(gpu: GpuSpec | str) -> SmBudget:
    """One SM of a GPU in the spec table (or a ``GpuSpec``), with its architecture's allocation rules."""
    g = spec(gpu) if isinstance(gpu, str) else gpu
    return _budget(g.name, g.compute_capability, g.max_threads_per_sm, g.registers_per_sm, g.smem_per_sm_bytes,
                   g.max_smem_per_block_bytes, f"spec table ({g.source}); cc {g.compute_capability} rules")


def budget_from_device(info) -> SmBudget:
    """One SM of the GPU in use, from what the device reports (``hardware.detect()``)."""
    return _budget(f"{info.name} (this GPU)", info.compute_capability, info.max_threads_per_sm,
                   info.registers_per_sm, info.smem_per_sm_bytes, info.max_smem_per_block_bytes,
                   "device attributes; cc rules")


def spec_budgets() -> list[SmBudget]:
    return [budget(g) for g in SPECS.values()]


@dataclass(frozen=True)
class Residency:
    """How many blocks of one kernel configuration fit on one SM, and why no more."""

    budget: str
    threads_per_block: int
    registers_per_thread: int
    smem_per_block_bytes: int
    warps_per_block: int
    registers_per_warp_allocated: int
    smem_per_block_allocated_bytes: int
    limit_threads: int
    limit_warps: int
    limit_registers: int | None       # None: the kernel uses none of this resource
    limit_smem: int | None
    limit_blocks: int
    resident_blocks: int
    max_warps_per_sm: int

    @property
    def active_warps(self) -> int:
        return self.resident_blocks * self.warps_per_block

    @property
    def occupancy(self) -> float:
        """Resident warps over the SM's warp slots (a fraction, 0..1)."""
        return self.active_warps / self.max_warps_per_sm

    @property
    def resident_threads(self) -> int:
        return self.resident_blocks * self.threads_per_block

    @property
    def limits(self) -> dict[str, int | None]:
        return {"threads": self.limit_threads, "warps": self.limit_warps, "registers": self.limit_registers,
                "shared memory": self.limit_smem, "blocks": self.limit_blocks}

    @property
    def binding(self) -> tuple[str, ...]:
        """Every resource whose ceiling equals the resident count (ties are real: both bind)."""
        order = ("shared memory", "registers", "warps", "blocks")
        return tuple(k for k in order if self.limits[k] == self.resident_blocks)

    @property
    def limiter(self) -> str:
        return " and ".join(self.binding)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def fmt_bytes(b: int) -> str:
    return f"{b / KIB:g} KiB" if b % 128 == 0 and b >= KIB else f"{b:,} B"


def _whole(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
        raise ValueError(f"{name} must be a whole number, got {v!r}")
    return int(v)


def residency(b: SmBudget, threads_per_block: int, registers_per_thread: int, smem_per_block_bytes: int = 0,
              max_threads_per_block: int | None = None) -> Residency:
    """Resident blocks per SM for a block of ``threads_per_block`` threads, each using
    ``registers_per_thread`` registers, the block using ``smem_per_block_bytes`` of shared memory
    (static + dynamic). ``max_threads_per_block`` is a kernel's own cap (``__launch_bounds__``).

    A configuration that cannot launch at all raises ``ValueError`` saying which resource it overruns.
    """
    t = _whole("threads per block", threads_per_block)
    r = _whole("registers per thread", registers_per_thread)
    s = _whole("shared memory per block", smem_per_block_bytes)
    if t < 1:
        raise ValueError(f"threads per block must be at least 1 (got {t}): a block of no threads does no work")
    cap = min(b.max_threads_per_block, max_threads_per_block or b.max_threads_per_block)
    if t > cap:
        who = "this kernel allows" if cap < b.max_threads_per_block else f"a block may have on {b.name}"
        raise ValueError(f"{t} threads per block is more than the {cap} {who}")
    if not 0 <= r <= b.max_registers_per_thread:
        raise ValueError(f"registers per thread must be between 0 and {b.max_registers_per_thread} (got {r})")
    if s < 0:
        raise ValueError(f"shared memory per block cannot be negative (got {s} bytes)")
    if s > b.max_smem_per_block_bytes:
        raise ValueError(f"{fmt_bytes(s)} of shared memory per block is more than {b.name} allows a block "
                         f"({fmt_bytes(b.max_smem_per_block_bytes)}; the whole SM has {fmt_bytes(b.smem_per_sm_bytes)})")

    warps = -(-t // b.warp_size)
    limit_threads = b.max_threads_per_sm // t
    limit_warps = b.max_warps_per_sm // warps

    regs_per_warp = _round_up(r * b.warp_size, b.register_alloc_unit) if r else 0
    if regs_per_warp:
        # The hardware checks a block's registers as if its warps were spread over every sub-partition.
        assumed = regs_per_warp * _round_up(warps, b.register_sub_partitions)
        if max(assumed, regs_per_warp * warps) > b.max_registers_per_block:
            raise ValueError(f"a block of {t} threads at {r} registers each needs {regs_per_warp * warps:,} "
                             f"registers ({regs_per_warp:,} per warp once allocated); a block may hold at most "
                             f"{b.max_registers_per_block:,}: the launch fails")
        per_partition = (b.registers_per_sm // b.register_sub_partitions) // regs_per_warp
        limit_registers = (per_partition * b.register_sub_partitions) // warps
    else:
        limit_registers = None

    smem_alloc = _round_up(s + b.reserved_smem_per_block_bytes, b.smem_alloc_unit_bytes)
    limit_smem = b.smem_per_sm_bytes // smem_alloc if smem_alloc else None

    ceilings = [limit_warps, b.max_blocks_per_sm] + [x for x in (limit_registers, limit_smem) if x is not None]
    resident = min(ceilings)
    if resident == 0:
        why = "registers" if limit_registers == 0 else "shared memory" if limit_smem == 0 else "warps"
        raise ValueError(f"not even one block of {t} threads fits on an SM of {b.name}: {why} run out "
                         f"({r} registers/thread, {fmt_bytes(s)} shared memory): the launch fails")
    return Residency(b.name, t, r, s, warps, regs_per_warp, smem_alloc, limit_threads, limit_warps,
                     limit_registers, limit_smem, b.max_blocks_per_sm, resident, b.max_warps_per_sm)


def smem_for_resident_blocks(b: SmBudget, blocks: int) -> int:
    """The most shared memory per block (static + dynamic, bytes) that still lets ``blocks`` blocks
    share one SM, counting the allocation unit and the per-block reservation."""
    blocks = _whole("blocks", blocks)
    if blocks < 1:
        raise ValueError(f"ask for at least one resident block (got {blocks})")
    alloc = (b.smem_per_sm_bytes // blocks) // b.smem_alloc_unit_bytes * b.smem_alloc_unit_bytes
    most = min(alloc - b.reserved_smem_per_block_bytes, b.max_smem_per_block_bytes)
    if most < 0:
        raise ValueError(f"{blocks} blocks cannot share the {fmt_bytes(b.smem_per_sm_bytes)} of one SM")
    return most


def max_registers_for_resident_blocks(b: SmBudget, threads_per_block: int, blocks: int) -> int:
    """The most registers per thread that still let ``blocks`` blocks of ``threads_per_block`` be resident."""
    for r in range(b.max_registers_per_thread, -1, -1):
        try:
            if residency(b, threads_per_block, r, 0).resident_blocks >= blocks:
                return r
        except ValueError:
            continue
    raise ValueError(f"{blocks} blocks of {threads_per_block} threads never fit on {b.name}")


def bytes_in_flight_per_sm(res: Residency, bytes_per_thread: int) -> int:
    """Little's law's supply side: bytes one SM can have requested and not yet received, if every
    resident thread has ``bytes_per_thread`` of independent loads outstanding."""
    return res.resident_threads * bytes_per_thread


# The worked example and its sensitivity table.
WORKED_CASE = {"threads_per_block": 256, "registers_per_thread": 64, "smem_per_block_bytes": 48 * KIB}
LESSON_SENSITIVITY = [
    ("256 threads, 64 registers, 48 KiB", {}),
    ("shared memory falls to 32 KiB", {"smem_per_block_bytes": 32 * KIB}),
    ("registers rise to 96/thread", {"registers_per_thread": 96}),
    ("block falls to 128 threads, same per-block SMEM", {"threads_per_block": 128}),
]


def sensitivity_table(b: SmBudget = ILLUSTRATIVE_SM, base: dict | None = None,
                      changes: list[tuple[str, dict]] | None = None) -> list[dict]:
    """One row per change from a base configuration: every ceiling and the resident result."""
    base = dict(WORKED_CASE if base is None else base)
    rows = []
    for label, change in (LESSON_SENSITIVITY if changes is None else changes):
        cfg = base | change
        res = residency(b, **cfg)
        rows.append({"change": label, "threads": cfg["threads_per_block"],
                     "registers": cfg["registers_per_thread"], "smem": fmt_bytes(cfg["smem_per_block_bytes"]),
                     "thread ceiling": res.limit_threads, "register ceiling": res.limit_registers,
                     "shared ceiling": res.limit_smem, "resident blocks": res.resident_blocks,
                     "active warps": res.active_warps, "occupancy %": 100 * res.occupancy,
                     "binds": res.limiter})
    return rows


def custom_budget(name: str = "custom SM", *, like: SmBudget | None = None, **fields) -> SmBudget:
    """A typed-in SM: the fields given replace those of ``like`` (default: the worked example's SM)."""
    return replace(like or ILLUSTRATIVE_SM, name=name, source="typed in", **fields)
