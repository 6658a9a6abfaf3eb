"""Two address maps of one warp: global memory sectors (coalescing) and shared-memory banks.

Pure functions, no GPU. Addresses are byte offsets; ``None`` marks an inactive lane.

**Sectors** (global memory, compute capability 6.0 and newer). A warp's load or
store is serviced by the 32-byte sectors that cover the bytes its active lanes
ask for. The count is the first-order formula

    N_sector = | union over active lanes i of { floor(x / 32) : x in [a_i, a_i + b - 1] } |
    efficiency = N_active * b / (N_sector * 32)

It is a *request-boundary* count: what the L1 asks of the memory system for this
one instruction. A neighbouring warp may find an over-fetched sector still in a
cache, so DRAM traffic can be lower; ``predicted_copy`` states both limits.

**Banks** (shared memory). 32 banks, each 4 bytes wide: word ``w`` (= byte // 4)
lives in bank ``w % 32``. Lanes that ask for *different* words of the same bank
are served one after another (a conflict); lanes that ask for the same word share
one read (broadcast). Accesses wider than 4 bytes are split by the hardware into
phases of 128 bytes: an 8-byte access is processed per half-warp (16 lanes at a
time), a 16-byte one per quarter-warp. Conflicts only happen within a phase, so
a warp of 8-byte loads needs at least 2 wavefronts, and that is not a conflict.

Loads wider than 4 bytes have one exception. An NVIDIA engineer states it for 16-byte
loads on NVIDIA's developer forum ("Unexpected shared memory bank conflict", thread
77228, for compute capability 7.x): shared memory returns 128 bytes per cycle, one
4-byte register for every lane, so an LDS.128 takes 4 wavefronts; but when every
lane n reads the same address as lane n ^ 1, or every lane n the same as lane n ^ 2,
the returned registers are packed two lanes to one and the load takes 2. The model
then serves the warp per half-warp (at most 8 distinct 16-byte addresses, 128 bytes,
per phase). ``banks.wide_probe`` measured the same for 8-byte loads on the H200: when
every lane n reads what lane n ^ 1 reads (a broadcast included), a warp of LDS.64 is
one wavefront, not two; lanes 16 apart sharing keep two. So a paired 8-byte load is
served 32 lanes at a time. Pairing by n ^ 2 is applied to 16-byte loads only: the
probe did not test it at 8 bytes. The same probe counted every 16-byte pattern the
model predicts (rows, strides, columns at pitch 32 and 33, and each grouping of
shared addresses), and the H200's profile of notebook 06 agrees rung by rung
(``gemm_fp32_wavefronts``). Stores keep the plain phases; the Programming Guide states
no rule for wider words.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional, Sequence

from course_lib.core.validate import whole_numbers

WARP_SIZE = 32
SECTOR_BYTES = 32
LINE_BYTES = 128
BANKS = 32
BANK_WIDTH_BYTES = 4
PHASE_BYTES = BANKS * BANK_WIDTH_BYTES   # what the banks deliver in one wavefront

GLOBAL_PATTERNS = ("unit", "strided", "shifted", "permuted", "random")
SHARED_PATTERNS = ("row", "column", "strided", "swizzled column", "broadcast", "grouped", "repeating", "random")

Addresses = Sequence[Optional[int]]


# --------------------------------------------------------------------------- input checks

def _check_element_bytes(element_bytes, what: str = "element size", allowed=(1, 2, 4, 8, 16)) -> int:
    if isinstance(element_bytes, bool) or not isinstance(element_bytes, int):
        raise ValueError(f"{what} must be a whole number of bytes, got {element_bytes!r}")
    if element_bytes < 1 or element_bytes & (element_bytes - 1):
        raise ValueError(f"{what} must be a power of two (1, 2, 4, 8 or 16 bytes); got {element_bytes}. "
                         "A GPU thread loads 1, 2, 4, 8 or 16 bytes in one instruction")
    if element_bytes not in allowed:
        raise ValueError(f"{what} of {element_bytes} bytes is not one access: a thread loads at most 16 bytes "
                         f"(a float4) per instruction; allowed here: {', '.join(map(str, allowed))}")
    return element_bytes


def _check_stride(stride, name: str = "stride", zero_hint: str = "") -> int:
    if isinstance(stride, bool) or not isinstance(stride, int):
        raise ValueError(f"{name} must be a whole number of elements, got {stride!r}")
    if stride == 0:
        raise ValueError(f"{name} 0 makes every lane touch the same element; the model needs a stride of at "
                         f"least 1{zero_hint}")
    if stride < 0:
        raise ValueError(f"{name} must be positive, got {stride}; reverse the lane order with 'permuted' instead")
    return stride


def _check_lanes(active_lanes) -> int:
    if isinstance(active_lanes, bool) or not isinstance(active_lanes, int) or not 1 <= active_lanes <= WARP_SIZE:
        raise ValueError(f"active lanes must be between 1 and {WARP_SIZE}, got {active_lanes!r}")
    return active_lanes


def _check_addresses(addresses: Addresses, element_bytes: int) -> list[Optional[int]]:
    if isinstance(addresses, (str, bytes)) or not hasattr(addresses, "__len__"):
        raise ValueError(f"a warp pattern is a list of {WARP_SIZE} byte addresses (None for an inactive lane)")
    if len(addresses) != WARP_SIZE:
        raise ValueError(f"a warp has {WARP_SIZE} lanes, so a pattern needs exactly {WARP_SIZE} addresses "
                         f"(None for an inactive lane); got {len(addresses)}")
    out = []
    for lane, a in enumerate(addresses):
        if a is None:
            out.append(None)
            continue
        if isinstance(a, bool) or not isinstance(a, int):
            raise ValueError(f"lane {lane}: address {a!r} is not a whole number of bytes")
        if a < 0:
            raise ValueError(f"lane {lane}: address {a} is negative")
        if a % element_bytes:
            raise ValueError(f"lane {lane}: a {element_bytes}-byte access at byte {a} is misaligned; CUDA requires "
                             f"every access to be aligned to its size (this load would fault). Use an offset that "
                             f"is a multiple of {element_bytes} bytes")
        out.append(a)
    if all(a is None for a in out):
        raise ValueError("no active lanes: at least one lane must access memory")
    return out


# --------------------------------------------------------------------------- global memory: sectors

@dataclass(frozen=True)
class SectorCount:
    """One warp request at the sector boundary."""

    addresses_bytes: tuple[Optional[int], ...]
    element_bytes: int
    sector_bytes: int
    line_bytes: int
    sectors: tuple[int, ...]          # indices of the sectors touched (address // sector_bytes)
    lines: tuple[int, ...]            # indices of the lines touched (address // line_bytes)

    @property
    def active_lanes(self) -> int:
        return sum(a is not None for a in self.addresses_bytes)

    @property
    def n_sectors(self) -> int:
        return len(self.sectors)

    @property
    def n_lines(self) -> int:
        return len(self.lines)

    @property
    def requested_bytes(self) -> int:
        return self.active_lanes * self.element_bytes

    @property
    def fetched_bytes(self) -> int:
        return self.n_sectors * self.sector_bytes

    @property
    def efficiency(self) -> float:
        """Requested over fetched bytes: 1.0 means every fetched byte was asked for."""
        return self.requested_bytes / self.fetched_bytes


def sector_count(addresses_bytes: Addresses, element_bytes: int, sector_bytes: int = SECTOR_BYTES,
                 line_bytes: int = LINE_BYTES) -> SectorCount:
    """The seed's formula: unique sectors covering every active lane's bytes."""
    b = _check_element_bytes(element_bytes)
    addrs = _check_addresses(addresses_bytes, b)
    for name, v in (("sector size", sector_bytes), ("line size", line_bytes)):
        if not isinstance(v, int) or v < 1 or v & (v - 1):
            raise ValueError(f"{name} must be a positive power of two, got {v!r}")
    sectors, lines = set(), set()
    for a in addrs:
        if a is None:
            continue
        sectors.update(range(a // sector_bytes, (a + b - 1) // sector_bytes + 1))
        lines.update(range(a // line_bytes, (a + b - 1) // line_bytes + 1))
    return SectorCount(tuple(addrs), b, sector_bytes, line_bytes, tuple(sorted(sectors)), tuple(sorted(lines)))


def _lane_order(seed: int) -> list[int]:
    order = list(range(WARP_SIZE))
    random.Random(seed).shuffle(order)
    return order


def warp_addresses(pattern: str = "unit", element_bytes: int = 4, stride: int = 1, offset_bytes: int = 0,
                   shift: int = 1, active_lanes: int = WARP_SIZE, seed: int = 0,
                   gather_elements: int = 1 << 20) -> tuple[Optional[int], ...]:
    """The 32 byte addresses one warp asks for; lanes at or past ``active_lanes`` are inactive.

    ``unit``: lane i reads element i. ``strided``: element i * stride. ``shifted``:
    element i + shift (a neighbour access, e.g. a stencil). ``permuted``: the unit
    elements in a shuffled lane order. ``random``: a gather from ``gather_elements``
    elements. Every pattern starts ``offset_bytes`` into the array.
    """
    if pattern not in GLOBAL_PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}; choose one of {', '.join(GLOBAL_PATTERNS)}")
    b = _check_element_bytes(element_bytes)
    n = _check_lanes(active_lanes)
    if pattern == "strided":
        _check_stride(stride, zero_hint=" (32 lanes reading one element is a broadcast: one sector, one request)")
    if pattern == "shifted" and (not isinstance(shift, int) or isinstance(shift, bool) or shift < 0):
        raise ValueError(f"shift must be a whole number of elements, 0 or more; got {shift!r}")
    if not isinstance(offset_bytes, int) or isinstance(offset_bytes, bool) or offset_bytes < 0:
        raise ValueError(f"offset must be a whole number of bytes, 0 or more; got {offset_bytes!r}")
    if offset_bytes % b:
        raise ValueError(f"an offset of {offset_bytes} bytes misaligns every {b}-byte element; CUDA requires each "
                         f"access aligned to its size (the load would fault). Use a multiple of {b}")
    if pattern == "unit":
        index = list(range(WARP_SIZE))
    elif pattern == "strided":
        index = [i * stride for i in range(WARP_SIZE)]
    elif pattern == "shifted":
        index = [i + shift for i in range(WARP_SIZE)]
    elif pattern == "permuted":
        index = _lane_order(seed)
    else:
        rng = random.Random(seed)
        index = [rng.randrange(gather_elements) for _ in range(WARP_SIZE)]
    return tuple(offset_bytes + i * b if lane < n else None for lane, i in enumerate(index))


@dataclass(frozen=True)
class CopyPrediction:
    """What a read-then-write kernel should reach if DRAM moves the fetched sectors at the copy ceiling."""

    requested_bytes: float
    dram_bytes: float
    seconds: float
    bandwidth_bytes_per_s: float     # useful (requested) bytes per second, as the measurement counts them


def predicted_copy(read_bytes: float, write_bytes: float, read_efficiency: float, write_efficiency: float,
                   ceiling_bytes_per_s: float) -> CopyPrediction:
    """Fetched bytes = requested / efficiency on each side; time = fetched bytes / ceiling.

    With the request-boundary efficiencies this assumes no reuse of over-fetched
    sectors between warps (the DRAM upper bound of traffic); with 1.0 it is the
    perfect-reuse limit.
    """
    if not ceiling_bytes_per_s > 0:
        raise ValueError(f"the copy ceiling must be positive, got {ceiling_bytes_per_s}")
    for name, e in (("read efficiency", read_efficiency), ("write efficiency", write_efficiency)):
        if not 0 < e <= 1:
            raise ValueError(f"{name} must be in (0, 1], got {e}")
    if read_bytes < 0 or write_bytes < 0 or read_bytes + write_bytes == 0:
        raise ValueError("a copy must read or write some bytes")
    dram = read_bytes / read_efficiency + write_bytes / write_efficiency
    seconds = dram / ceiling_bytes_per_s
    return CopyPrediction(read_bytes + write_bytes, dram, seconds, (read_bytes + write_bytes) / seconds)


def dram_blocks(addresses_bytes: Addresses, element_bytes: int, block_bytes: int = 64) -> SectorCount:
    """The same count with a coarser grain: the blocks DRAM moves when the L2 fetches more than one sector.

    On the H200 the profiler shows the L2 reading 64-byte blocks (two sectors) from DRAM for scattered misses
    (notebook 04 measures it), so ``block_bytes=64`` gives the DRAM-side bytes of a request with no reuse.
    """
    return sector_count(addresses_bytes, element_bytes, sector_bytes=block_bytes,
                        line_bytes=max(LINE_BYTES, block_bytes))


def strided_sectors(stride: int, element_bytes: int = 4) -> SectorCount:
    """A full, sector-aligned warp reading every ``stride``-th element."""
    return sector_count(warp_addresses("strided", element_bytes, stride=stride), element_bytes)


# --------------------------------------------------------------------------- shared memory: banks

@dataclass(frozen=True)
class BankCount:
    """One warp's shared-memory request: which bank each lane hits, and how many wavefronts it takes."""

    addresses_bytes: tuple[Optional[int], ...]
    access_bytes: int
    lanes_per_phase: int                      # 32 for 4-byte, 16 for 8-byte (half-warps), 8 for 16-byte;
                                              # doubled for a load with paired lanes
    lane_banks: tuple[tuple[int, ...], ...]   # banks each lane touches (empty for inactive lanes)
    phase_wavefronts: tuple[int, ...]         # wavefronts of each phase (0 for a phase with no active lane)

    @property
    def wavefronts(self) -> int:
        """Wavefronts for the whole request: what ncu counts per shared-memory instruction."""
        return sum(self.phase_wavefronts)

    @property
    def ideal_wavefronts(self) -> int:
        """The minimum for this access width: one per phase that has an active lane."""
        return sum(1 for w in self.phase_wavefronts if w)

    @property
    def paired(self) -> bool:
        """A wide load served in half as many phases because neighbouring lanes share addresses."""
        return self.access_bytes in (8, 16) and self.lanes_per_phase == 2 * (PHASE_BYTES // self.access_bytes)

    @property
    def ways(self) -> int:
        """The n of an n-way conflict: the most distinct words one bank serves in one phase."""
        return max(self.phase_wavefronts)

    @property
    def conflict_degree(self) -> float:
        """Wavefronts over the minimum: 1.0 is conflict-free."""
        return self.wavefronts / self.ideal_wavefronts

    @property
    def extra_wavefronts(self) -> int:
        """Wavefronts beyond the minimum: what ncu reports as bank conflicts."""
        return self.wavefronts - self.ideal_wavefronts


def bank_of(address_bytes: int) -> int:
    return (address_bytes // BANK_WIDTH_BYTES) % BANKS


def paired_lanes(addresses_bytes: Addresses) -> Optional[int]:
    """1 or 2 when every lane n reads what lane n ^ 1 (or n ^ 2) reads, inactive lanes paired with
    inactive ones; None otherwise. The condition under which a wide load packs two lanes' registers
    into one return, halving its wavefronts (n ^ 2: 16-byte loads only)."""
    for d in (1, 2):
        if all(addresses_bytes[n] == addresses_bytes[n ^ d] for n in range(WARP_SIZE)):
            return d
    return None


def bank_conflicts(addresses_bytes: Addresses, access_bytes: int = 4, store: bool = False) -> BankCount:
    """Wavefronts of one warp's shared-memory access (4-byte banks, 128-byte phases).

    A 16-byte *load* whose lanes are paired (``paired_lanes``) is served per half-warp, so it takes
    at least 2 wavefronts instead of 4, and an 8-byte load whose lanes pair by n ^ 1 is served in one
    phase, at least 1 wavefront instead of 2; ``store=True`` turns that off."""
    b = _check_element_bytes(access_bytes, "access size")
    addrs = _check_addresses(addresses_bytes, b)
    per_phase = max(1, min(WARP_SIZE, PHASE_BYTES // b))
    pairing = None if store else paired_lanes(addrs)
    if (b == 16 and pairing is not None) or (b == 8 and pairing == 1):
        per_phase = 2 * per_phase
    lane_banks, phase_wavefronts = [], []
    for lane, a in enumerate(addrs):
        if a is None:
            lane_banks.append(())
        else:
            words = range(a // BANK_WIDTH_BYTES, (a + b - 1) // BANK_WIDTH_BYTES + 1)
            lane_banks.append(tuple(w % BANKS for w in words))
    for start in range(0, WARP_SIZE, per_phase):
        words_in_bank: dict[int, set[int]] = {}
        for a in addrs[start:start + per_phase]:
            if a is None:
                continue
            for w in range(a // BANK_WIDTH_BYTES, (a + b - 1) // BANK_WIDTH_BYTES + 1):
                words_in_bank.setdefault(w % BANKS, set()).add(w)
        phase_wavefronts.append(max((len(s) for s in words_in_bank.values()), default=0))
    return BankCount(tuple(addrs), b, per_phase, tuple(lane_banks), tuple(phase_wavefronts))


def shared_addresses(pattern: str = "row", access_bytes: int = 4, stride: int = 1, pitch: int = 32,
                     index: int = 0, active_lanes: int = WARP_SIZE, seed: int = 0) -> tuple[Optional[int], ...]:
    """The 32 byte addresses of a warp's access to a row-major shared tile.

    The tile has ``pitch`` elements of ``access_bytes`` per row. ``row``: lane i
    reads (index, i). ``column``: lane i reads (i, index). ``strided``: lane i
    reads element i * stride of a flat array. ``swizzled column``: a column of a
    tile stored with the XOR swizzle (r, c) -> (r, c ^ (r mod k)), k the elements
    per 128 bytes. ``broadcast``: every lane reads element ``index``. ``grouped``:
    lane i reads element i // stride (groups of ``stride`` neighbouring lanes share
    one element, as a GEMM warp's A reads do). ``repeating``: lane i reads element
    i % stride (lanes ``stride`` apart share one). ``random``: lanes read random
    elements of a 32 x pitch tile.
    """
    if pattern not in SHARED_PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}; choose one of {', '.join(SHARED_PATTERNS)}")
    b = _check_element_bytes(access_bytes, "access size")
    n = _check_lanes(active_lanes)
    if isinstance(pitch, bool) or not isinstance(pitch, int) or pitch < 1:
        raise ValueError(f"row pitch must be at least 1 element, got {pitch!r}")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"row/column index must be 0 or more, got {index!r}")
    if pattern in ("row", "column", "swizzled column") and index >= (WARP_SIZE if pattern == "row" else pitch):
        raise ValueError(f"index {index} is outside the tile (it has {WARP_SIZE} rows of {pitch} elements)")
    if pattern == "row" and pitch < WARP_SIZE:
        raise ValueError(f"a row of {pitch} elements is shorter than the {WARP_SIZE} lanes reading it")
    k = max(1, PHASE_BYTES // b)
    if pattern == "swizzled column" and pitch % k:
        raise ValueError(f"the XOR swizzle permutes groups of {k} elements (128 bytes), so the row pitch must be a "
                         f"multiple of {k}; got {pitch}. Swizzling replaces padding: use pitch {k * (pitch // k or 1)}")
    if pattern == "row":
        elements = [index * pitch + i for i in range(WARP_SIZE)]
    elif pattern == "column":
        elements = [i * pitch + index for i in range(WARP_SIZE)]
    elif pattern == "strided":
        _check_stride(stride, zero_hint=" (for one shared word pick the 'broadcast' pattern)")
        elements = [i * stride for i in range(WARP_SIZE)]
    elif pattern == "swizzled column":
        elements = [i * pitch + swizzle(i, index, k) for i in range(WARP_SIZE)]
    elif pattern == "broadcast":
        elements = [index] * WARP_SIZE
    elif pattern in ("grouped", "repeating"):
        _check_stride(stride, "group size" if pattern == "grouped" else "period",
                      " (for one shared word pick the 'broadcast' pattern)")
        elements = [i // stride if pattern == "grouped" else i % stride for i in range(WARP_SIZE)]
    else:
        rng = random.Random(seed)
        elements = [rng.randrange(WARP_SIZE * pitch) for _ in range(WARP_SIZE)]
    return tuple(e * b if lane < n else None for lane, e in enumerate(elements))


def swizzle(row: int, col: int, group: int = 32) -> int:
    """Physical column of logical (row, col) under the XOR swizzle: col ^ (row mod group), within groups."""
    return (col // group) * group + ((col % group) ^ (row % group))


# --------------------------------------------------------------------------- the transpose kernels' shared tile

@dataclass(frozen=True)
class TransposeSmemPrediction:
    """Shared-memory requests and wavefronts of a whole transpose launch, from the bank model."""

    store_requests: int
    load_requests: int
    store_wavefronts: int
    load_wavefronts: int

    @property
    def store_conflicts(self) -> int:
        return self.store_wavefronts - self.store_requests

    @property
    def load_conflicts(self) -> int:
        return self.load_wavefronts - self.load_requests


def transpose_tile_address(row: int, col: int, pitch: int, swizzled: bool) -> int:
    """Byte address of logical tile element (row, col) of a 4-byte tile, as the course's kernels store it."""
    return 4 * (row * pitch + (swizzle(row, col, 32) if swizzled else col))


def transpose_smem(rows: int, cols: int, tile: int, block_rows: int, pitch: int, swizzled: bool) -> TransposeSmemPrediction:
    """Every warp's store (row of the tile) and load (column of the tile) in a launch of the course's tiled transpose.

    Block (tile, block_rows); each thread handles tile / block_rows rows. Edge
    tiles are counted with their inactive lanes.
    """
    whole_numbers(rows=rows, cols=cols, tile=tile, block_rows=block_rows, pitch=pitch)
    if tile % WARP_SIZE or tile % block_rows:
        raise ValueError(f"tile ({tile}) must be a multiple of {WARP_SIZE} and of block_rows ({block_rows})")
    if pitch < tile:
        raise ValueError(f"the row pitch ({pitch}) must hold a tile row ({tile})")
    cache: dict = {}

    def wavefronts(kind: str, tx0: int, r: int, valid: tuple) -> int:
        key = (kind, tx0, r, valid)
        if key not in cache:
            lanes = range(tx0, tx0 + WARP_SIZE)
            if kind == "store":   # thread (tx, ty) writes logical (r, tx)
                addrs = [transpose_tile_address(r, tx, pitch, swizzled) if ok else None for tx, ok in zip(lanes, valid)]
            else:                 # thread (tx, ty) reads logical (tx, r)
                addrs = [transpose_tile_address(tx, r, pitch, swizzled) if ok else None for tx, ok in zip(lanes, valid)]
            cache[key] = bank_conflicts(addrs, 4).wavefronts if any(valid) else 0
        return cache[key]

    st_req = ld_req = st_wf = ld_wf = 0
    for by in range(0, rows, tile):
        for bx in range(0, cols, tile):
            for ty in range(block_rows):
                for tx0 in range(0, tile, WARP_SIZE):
                    for j in range(0, tile, block_rows):
                        r = ty + j
                        v_st = tuple(bx + tx < cols and by + r < rows for tx in range(tx0, tx0 + WARP_SIZE))
                        v_ld = tuple(by + tx < rows and bx + r < cols for tx in range(tx0, tx0 + WARP_SIZE))
                        if any(v_st):
                            st_req += 1
                            st_wf += wavefronts("store", tx0, r, v_st)
                        if any(v_ld):
                            ld_req += 1
                            ld_wf += wavefronts("load", tx0, r, v_ld)
    return TransposeSmemPrediction(st_req, ld_req, st_wf, ld_wf)


def transpose_smem_full_tiles(n: int, tile: int, block_rows: int, pitch: int, swizzled: bool) -> TransposeSmemPrediction:
    """``transpose_smem`` for an n x n matrix with n a multiple of the tile: one tile, times the tile count."""
    if n % tile:
        raise ValueError(f"n ({n}) must be a multiple of the tile ({tile}); use transpose_smem for edges")
    one = transpose_smem(tile, tile, tile, block_rows, pitch, swizzled)
    k = (n // tile) ** 2
    return TransposeSmemPrediction(one.store_requests * k, one.load_requests * k,
                                   one.store_wavefronts * k, one.load_wavefronts * k)


# --------------------------------------------------------------------------- notebook 06's fp32 ladder, through the bank model

@dataclass(frozen=True)
class SharedAccess:
    """One shared-memory instruction of one warp: its lanes' byte addresses, width, direction, and how
    many times the warp executes it per stage of K."""

    addresses_bytes: tuple[Optional[int], ...]
    access_bytes: int
    store: bool
    per_stage: int = 1


@dataclass(frozen=True)
class LaunchWavefronts:
    """Shared-memory wavefronts of a whole launch, from the bank model, split into loads and stores."""

    load_wavefronts: int
    store_wavefronts: int
    load_conflicts: int      # wavefronts beyond each instruction's minimum (what ncu calls bank conflicts)
    store_conflicts: int

    @property
    def wavefronts(self) -> int:
        return self.load_wavefronts + self.store_wavefronts

    @property
    def conflicts(self) -> int:
        return self.load_conflicts + self.store_conflicts


def _launch_wavefronts(warps: Sequence[Sequence[SharedAccess]], stages: int, blocks: int) -> LaunchWavefronts:
    """Sum one block's warps' accesses over ``stages`` stages and ``blocks`` identical blocks."""
    lw = sw = lc = sc = 0
    for accesses in warps:
        for acc in accesses:
            r = bank_conflicts(acc.addresses_bytes, acc.access_bytes, store=acc.store)
            if acc.store:
                sw, sc = sw + r.wavefronts * acc.per_stage, sc + r.extra_wavefronts * acc.per_stage
            else:
                lw, lc = lw + r.wavefronts * acc.per_stage, lc + r.extra_wavefronts * acc.per_stage
    k = stages * blocks
    return LaunchWavefronts(lw * k, sw * k, lc * k, sc * k)


def _lanes(warp: int, fn) -> tuple[int, ...]:
    """Byte addresses fn(tid) of the 32 lanes of ``warp`` (fn gives a float index)."""
    return tuple(4 * fn(32 * warp + lane) for lane in range(WARP_SIZE))


# Each kernel's tile as kernels/gemm_fp32.cu sets it (tests/test_memory_model.py checks the macros).
WARPTILE = dict(bm=128, bn=128, bk=8, wm=64, wn=32, lm=8)       # WT_*: steps 7 and 8
WARPTILE_16X8 = dict(bm=256, bn=128, bk=8, wm=64, wn=64, lm=4)  # WB_*: step 9


def _warptile_accesses(bm: int, bn: int, bk: int, wm: int, wn: int, lm: int):
    """Steps 7-9: per warp, the transposed scalar stores of A, the float4 stores of B and the float4
    reads of A and B per k (As pitch bm + 4)."""
    nt = (bm // wm) * (bn // wn) * 32
    ln = 32 // lm
    tm, tn = wm // lm, wn // ln
    a4, b4, pitch = bm * bk // 4 // nt, bk * bn // 4 // nt, bm + 4
    warps = []
    for w in range(nt // 32):
        wm0, wn0 = (w // (bn // wn)) * wm, (w % (bn // wn)) * wn
        acc = []
        for load in range(a4):                       # a thread's float4 loads of A, each stored as 4 scalars
            for q in range(4):
                acc.append(SharedAccess(_lanes(w, lambda t: ((t + load * nt) % (bk // 4) * 4 + q) * pitch
                                               + (t + load * nt) // (bk // 4)), 4, True))
        for load in range(b4):                       # and of B, stored as float4s
            acc.append(SharedAccess(_lanes(w, lambda t: (t + load * nt) // (bn // 4) * bn
                                           + (t + load * nt) % (bn // 4) * 4), 16, True))
        for k in range(bk):
            for i in range(0, tm, 4):
                acc.append(SharedAccess(_lanes(w, lambda t: k * pitch + wm0 + i * lm + (t % 32) // ln * 4), 16, False))
            for j in range(0, tn, 4):
                acc.append(SharedAccess(_lanes(w, lambda t: k * bn + wn0 + j * ln + (t % 32) % ln * 4), 16, False))
        warps.append(acc)
    return warps, nt, bm, bn, bk


def _ladder_accesses(kernel: str):
    """(accesses per warp of one block, threads, BM, BN, BK) of one ladder kernel, as its SASS runs it.

    Read from kernels/gemm_fp32.cu, with the vector widths the compiled SASS shows (notebook 06's
    table): at steps 3 and 4 the compiler reads a thread's A values, the same address for the whole
    warp or half-warp, 16 bytes at a time (LDS.128); from step 5 on every shared load is an LDS.128."""
    if kernel == "sgemm_smem":                       # block (32, 32): warp w is row ty = w
        t = 32
        warps = [[SharedAccess(_lanes(w, lambda x: x), 4, True), SharedAccess(_lanes(w, lambda x: x), 4, True)]
                 + [SharedAccess(_lanes(w, lambda x: (x // 32) * t + 4 * q), 16, False) for q in range(t // 4)]
                 + [SharedAccess(_lanes(w, lambda x: k * t + x % 32), 4, False) for k in range(t)]
                 for w in range(32)]
        return warps, 1024, t, t, t
    if kernel == "sgemm_reg1d":                      # 512 threads, 64x64x8, 8 outputs of a column
        warps = [[SharedAccess(_lanes(w, lambda x: (x % 8) * 64 + x // 8), 4, True),
                  SharedAccess(_lanes(w, lambda x: (x // 64) * 64 + x % 64), 4, True)]
                 + [a for k in range(8) for a in
                    [SharedAccess(_lanes(w, lambda x: k * 64 + x % 64), 4, False)]
                    + [SharedAccess(_lanes(w, lambda x: k * 64 + (x // 64) * 8 + 4 * h), 16, False) for h in range(2)]]
                 for w in range(16)]
        return warps, 512, 64, 64, 8
    if kernel in ("sgemm_reg2d", "sgemm_vec4"):      # 256 threads, 128x128x8, 8x8 outputs, thread grid 16x16
        vec = kernel == "sgemm_vec4"
        pitch = 128 + (4 if vec else 0)
        warps = []
        for w in range(8):
            if vec:                                  # one float4 of A stored as 4 scalars down a column, B as a float4
                acc = [SharedAccess(_lanes(w, lambda x: ((x % 2) * 4 + q) * pitch + x // 2), 4, True) for q in range(4)]
                acc.append(SharedAccess(_lanes(w, lambda x: (x // 32) * 128 + (x % 32) * 4), 16, True))
            else:                                    # 4 scalar loads each of A (stored transposed) and B
                acc = [SharedAccess(_lanes(w, lambda x: ((x + 256 * load) % 8) * pitch + (x + 256 * load) // 8), 4,
                                    True) for load in range(4)]
                acc += [SharedAccess(_lanes(w, lambda x: x + 256 * load), 4, True) for load in range(4)]
            for k in range(8):
                for h in range(2):
                    acc.append(SharedAccess(_lanes(w, lambda x: k * pitch + (x // 16) * 8 + 4 * h), 16, False))
                    acc.append(SharedAccess(_lanes(w, lambda x: k * 128 + (x % 16) * 8 + 4 * h), 16, False))
            warps.append(acc)
        return warps, 256, 128, 128, 8
    if kernel in ("sgemm_warptile", "sgemm_warptile_db"):
        return _warptile_accesses(**WARPTILE)
    if kernel == "sgemm_warptile_db_16x8":
        return _warptile_accesses(**WARPTILE_16X8)
    if kernel in ("sgemm_naive", "sgemm_coalesced"):
        return [], 1024, 32, 32, 32
    raise ValueError(f"no fp32 ladder kernel {kernel!r} in the bank model")


def gemm_fp32_wavefronts(kernel: str, n: int) -> LaunchWavefronts:
    """Shared-memory wavefronts of one n x n x n launch of a notebook-06 ladder kernel, from the bank
    model; n must be a multiple of the kernel's block tile (no edge tiles)."""
    warps, _, bm, bn, bk = _ladder_accesses(kernel)
    whole_numbers(n=n)
    if n % bm or n % bn or n % bk:
        raise ValueError(f"n ({n}) must be a multiple of {kernel}'s {bm}x{bn}x{bk} tile")
    return _launch_wavefronts(warps, n // bk, (n // bm) * (n // bn))
