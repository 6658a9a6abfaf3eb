"""Launch geometry: which block owns which output tile, which element each lane loads, and which
lanes the edge masks switch off; plus what a branch costs when it splits a warp.

For C[M, N] = A[M, K] · B[K, N] with each block owning a BM × BN tile of C:

    grid = ceil(M / BM) × ceil(N / BN) blocks;  pid_m = pid // G_N,  pid_n = pid % G_N
    A element (m0 + i, k0 + j) lives at offset (m0 + i)·stride_am + (k0 + j)·stride_ak
    and is loaded only if m0 + i < M and k0 + j < K (the edge mask).

Pure functions, no GPU needed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from course_lib.core.validate import whole_number, whole_numbers

WARP_SIZE = 32
SECTOR_BYTES = 32
MAX_THREADS_PER_BLOCK = 1024   # the CUDA limit on blockDim.x * blockDim.y * blockDim.z


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class TileGrid:
    """The blocks a B_M × B_N tile schedule launches for an M × N output (split-K S ways): the grid
    of notebook 02 and the tiles of notebook 07's wave model, one value."""

    m: int
    n: int
    block_m: int
    block_n: int
    split_k: int = 1

    @property
    def tiles_m(self) -> int:
        return cdiv(self.m, self.block_m)

    @property
    def tiles_n(self) -> int:
        return cdiv(self.n, self.block_n)

    @property
    def tiles(self) -> int:
        return self.tiles_m * self.tiles_n

    @property
    def blocks(self) -> int:
        """Each tile's reduction is cut into ``split_k`` slices, one block each."""
        return self.tiles * self.split_k

    @property
    def issued_m(self) -> int:
        return self.tiles_m * self.block_m

    @property
    def issued_n(self) -> int:
        return self.tiles_n * self.block_n

    @property
    def issued_elements(self) -> int:
        """Elements the tiles cover, edges included: the work a fixed-size tile schedule issues."""
        return self.issued_m * self.issued_n

    @property
    def tile_edge_efficiency(self) -> float:
        """M·N over the area the tiles cover: the share of issued tile work that lands in C."""
        return self.m * self.n / (self.issued_m * self.issued_n)

    def useful_flop(self, k: int) -> int:
        """2·M·N·K: the multiply-adds the product needs (one counts 2)."""
        return 2 * self.m * self.n * whole_number("K", k)

    def issued_flop(self, k: int) -> int:
        """The multiply-adds the tiles execute, padding included (split-K cuts K, adds none)."""
        return 2 * self.issued_m * self.issued_n * whole_number("K", k)

    def tile_extent(self, row: int, col: int) -> tuple[int, int]:
        """Rows and columns of tile (row, col) that fall inside M × N; the rest is padding."""
        if not (0 <= row < self.tiles_m and 0 <= col < self.tiles_n):
            raise ValueError(f"tile ({row}, {col}) is outside the {self.tiles_m} × {self.tiles_n} tile grid")
        return (min(self.block_m, self.m - row * self.block_m), min(self.block_n, self.n - col * self.block_n))


def tile_grid(m: int, n: int, block_m: int, block_n: int, split_k: int = 1) -> TileGrid:
    return TileGrid(whole_number("M", m), whole_number("N", n), whole_number("BM", block_m), whole_number("BN", block_n),
                    whole_number("split-K", split_k, "1 for none, 2, 3, …"))


@dataclass(frozen=True)
class ProgramTile:
    """The output tile one program id (block) owns."""

    pid: int
    pid_m: int
    pid_n: int
    m0: int
    n0: int
    valid_rows: int
    valid_cols: int
    block_m: int
    block_n: int

    @property
    def masked_elements(self) -> int:
        return self.block_m * self.block_n - self.valid_rows * self.valid_cols

    @property
    def is_edge(self) -> bool:
        return self.masked_elements > 0


def program_tile(grid: TileGrid, pid: int) -> ProgramTile:
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < grid.blocks:
        raise ValueError(f"program id must be between 0 and {grid.blocks - 1} for a "
                         f"{grid.tiles_m} × {grid.tiles_n} grid, got {pid!r}")
    pid_m, pid_n = divmod(pid, grid.tiles_n)
    m0, n0 = pid_m * grid.block_m, pid_n * grid.block_n
    return ProgramTile(pid, pid_m, pid_n, m0, n0, min(grid.block_m, grid.m - m0), min(grid.block_n, grid.n - n0),
                       grid.block_m, grid.block_n)


def owner_of(grid: TileGrid, row: int, col: int) -> int:
    """The program id whose tile holds C[row, col]."""
    if not (0 <= row < grid.m and 0 <= col < grid.n):
        raise ValueError(f"C[{row}, {col}] is outside the {grid.m} × {grid.n} output")
    return (row // grid.block_m) * grid.tiles_n + col // grid.block_n


@dataclass(frozen=True)
class LaneAccess:
    """One lane's load of one tile element (or nothing, when the tile has fewer elements than threads)."""

    lane: int
    thread: int
    element: int | None
    local_row: int | None
    local_col: int | None
    row: int | None
    col: int | None
    offset_elements: int | None
    address_bytes: int | None
    valid: bool

    @property
    def status(self) -> str:
        if self.element is None:
            return "idle (no element)"
        return "loads" if self.valid else "masked (past the edge)"


def tile_load_trace(rows: int, cols: int, tile_rows: int, tile_cols: int, row0: int, col0: int,
                    stride_row: int, stride_col: int, warp: int, threads_per_block: int, pass_index: int = 0,
                    element_bytes: int = 4, base_address: int = 0) -> list[LaneAccess]:
    """The 32 lanes of warp ``warp`` loading a ``tile_rows × tile_cols`` tile whose corner is
    (row0, col0) of a ``rows × cols`` operand with the given strides (in elements).

    Threads walk the tile in row-major order: in pass ``p`` thread ``t`` takes element
    ``p · threads_per_block + t``, i.e. local row ``e // tile_cols``, local column ``e % tile_cols``.
    """
    whole_numbers(rows=rows, cols=cols, tile_rows=tile_rows, tile_cols=tile_cols, threads_per_block=threads_per_block,
              element_bytes=element_bytes)
    for name, v in (("row0", row0), ("col0", col0), ("warp", warp), ("pass", pass_index),
                    ("row stride", stride_row), ("column stride", stride_col)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            # Strides too: the offsets are counted from the operand's first element, at address 0, and a
            # negative stride would put elements before it (0 is a broadcast, and legal).
            raise ValueError(f"{name} must be a whole number >= 0, got {v!r}")
    if threads_per_block > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"a block holds at most {MAX_THREADS_PER_BLOCK:,} threads on every GPU since compute "
                         f"capability 2.0; a launch of {threads_per_block:,} fails (cudaErrorInvalidConfiguration)")
    warps = cdiv(threads_per_block, WARP_SIZE)
    if warp >= warps:
        raise ValueError(f"a block of {threads_per_block} threads has warps 0..{warps - 1}; warp {warp} does not exist")
    out = []
    for lane in range(WARP_SIZE):
        t = warp * WARP_SIZE + lane
        e = pass_index * threads_per_block + t
        if t >= threads_per_block or e >= tile_rows * tile_cols:
            out.append(LaneAccess(lane, t, None, None, None, None, None, None, None, False))
            continue
        i, j = divmod(e, tile_cols)
        r, c = row0 + i, col0 + j
        offset = r * stride_row + c * stride_col
        valid = r < rows and c < cols
        out.append(LaneAccess(lane, t, e, i, j, r, c, offset, base_address + offset * element_bytes, valid))
    return out


def operand_trace(operand: str, m: int, n: int, k: int, block_m: int, block_n: int, block_k: int,
                  stride_row: int, stride_col: int, pid: int, stage: int, warp: int, threads_per_block: int,
                  pass_index: int = 0, element_bytes: int = 4) -> tuple[ProgramTile, list[LaneAccess]]:
    """What warp ``warp`` of block ``pid`` loads of operand ``"A"`` (M × K) or ``"B"`` (K × N) in
    reduction stage ``stage`` (k0 = stage · BK)."""
    whole_numbers(K=k, BK=block_k)
    grid = tile_grid(m, n, block_m, block_n)
    tile = program_tile(grid, pid)
    stages = cdiv(k, block_k)
    if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage < stages:
        raise ValueError(f"stage must be between 0 and {stages - 1} (K = {k} in steps of {block_k}), got {stage!r}")
    k0 = stage * block_k
    if operand == "A":
        trace = tile_load_trace(m, k, block_m, block_k, tile.m0, k0, stride_row, stride_col, warp,
                                threads_per_block, pass_index, element_bytes)
    elif operand == "B":
        trace = tile_load_trace(k, n, block_k, block_n, k0, tile.n0, stride_row, stride_col, warp,
                                threads_per_block, pass_index, element_bytes)
    else:
        raise ValueError(f"operand must be 'A' or 'B', got {operand!r}")
    return tile, trace


@dataclass(frozen=True)
class WarpSummary:
    loading: int
    masked: int
    idle: int
    bytes_requested: int
    sectors: int


def summarize(trace: list[LaneAccess], element_bytes: int = 4) -> WarpSummary:
    loading = [a for a in trace if a.valid]
    sectors = {a.address_bytes // SECTOR_BYTES for a in loading}
    return WarpSummary(len(loading), sum(1 for a in trace if a.element is not None and not a.valid),
                       sum(1 for a in trace if a.element is None), len(loading) * element_bytes, len(sectors))


# --------------------------------------------------------------------------- divergence

@dataclass(frozen=True)
class DivergenceMode:
    """How the ``divergence`` kernel picks a path for each thread (``mode`` is its kernel argument).

    ``path(lane, warp)`` gives the path index, or ``None`` when the thread skips the work. A
    data-dependent mode has no fixed path; ``p_path1`` is the chance a lane takes path 1.
    """

    mode: int
    label: str
    path: Callable[[int, int], int | None] | None
    p_path1: float | None = None


DIVERGENCE_MODES: dict[str, DivergenceMode] = {m.label: m for m in [
    DivergenceMode(0, "one path for every lane", lambda lane, warp: 0),
    DivergenceMode(1, "2 paths, split by warp", lambda lane, warp: warp % 2),
    DivergenceMode(2, "2 paths, split inside each warp", lambda lane, warp: lane % 2),
    DivergenceMode(3, "4 paths, split by warp", lambda lane, warp: warp % 4),
    DivergenceMode(4, "4 paths, split inside each warp", lambda lane, warp: lane % 4),
    DivergenceMode(5, "half the warps skip the work", lambda lane, warp: None if warp % 2 else 0),
    DivergenceMode(6, "half the lanes of every warp skip the work", lambda lane, warp: None if lane % 2 else 0),
    DivergenceMode(7, "2 paths chosen by random data", None, p_path1=0.5),
]}


def paths_per_warp(mode: DivergenceMode, warp: int) -> float:
    """How many distinct paths warp ``warp`` must execute one after the other (expected, for data modes)."""
    if mode.path is None:
        p = mode.p_path1
        return 2.0 - p ** WARP_SIZE - (1 - p) ** WARP_SIZE
    return float(len({mode.path(lane, warp) for lane in range(WARP_SIZE)} - {None}))


def divergence_factor(mode: DivergenceMode | str, warps: int = 1024) -> float:
    """Predicted time relative to every lane taking one path, when the SM is issue-bound: the work a
    warp issues is one pass per distinct path it holds, whatever the fraction of lanes on each."""
    m = DIVERGENCE_MODES[mode] if isinstance(mode, str) else mode
    whole_numbers(warps=warps)
    return sum(paths_per_warp(m, w) for w in range(warps)) / warps


def lane_efficiency(mode: DivergenceMode | str, warps: int = 1024) -> float:
    """Useful lanes per issued lane slot: active threads per instruction over 32, what ncu's
    ``smsp__thread_inst_executed_per_inst_executed.ratio`` measures (divided by 32)."""
    m = DIVERGENCE_MODES[mode] if isinstance(mode, str) else mode
    if m.path is None:
        return 1.0 / paths_per_warp(m, 0)
    busy = sum(1 for w in range(warps) for lane in range(WARP_SIZE) if m.path(lane, w) is not None)
    issued = sum(paths_per_warp(m, w) for w in range(warps)) * WARP_SIZE
    return busy / issued if issued else 0.0
