"""Tile and wave quantization: why a GEMM's time moves in steps as its shape grows.

A tiled GEMM issues whole tiles: an M × N output on B_M × B_N tiles launches
ceil(M/B_M) · ceil(N/B_N) tiles (times S with split-K), and the edge tiles are
paid for in full even where they hang over the matrix. Those blocks then run in
waves of (SM count × resident blocks per SM), and the last wave is paid for in
full even when it is nearly empty. The two losses multiply:

    useful fraction = M·N / (issued tile area)  ×  blocks / (waves · slots)

First-order: every block takes the same time and a wave starts when the last
one ends. Real schedulers overlap waves and real libraries pick tiles per shape,
so measured cliffs are softer than these, but they sit where this model puts them.
Pure functions, no GPU.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from course_lib.core.hardware import GpuSpec
from course_lib.core.validate import positive, whole_number
from course_lib.models import occupancy
from course_lib.models.launch_geometry import TileGrid, cdiv, tile_grid

# --------------------------------------------------------------------------- tile-edge quantization

# --------------------------------------------------------------------------- wave quantization

@dataclass(frozen=True)
class WaveSchedule:
    """``blocks`` run ``sm_count × resident_blocks_per_sm`` at a time; a partial last wave costs a whole one."""

    blocks: int
    sm_count: int
    resident_blocks_per_sm: int

    @property
    def slots(self) -> int:
        """Blocks the whole GPU holds at once: one wave."""
        return self.sm_count * self.resident_blocks_per_sm

    @property
    def waves(self) -> int:
        return cdiv(self.blocks, self.slots)

    @property
    def last_wave_blocks(self) -> int:
        return self.blocks - (self.waves - 1) * self.slots

    @property
    def last_wave_fill(self) -> float:
        """Share of the last wave's slots that have a block: low means SMs idle while the tail runs."""
        return self.last_wave_blocks / self.slots

    @property
    def wave_efficiency(self) -> float:
        """Blocks over the slots paid for (waves × slots)."""
        return self.blocks / (self.waves * self.slots)

    @property
    def sm_rounds(self) -> int:
        """The SM-round model's count: blocks ÷ SMs, rounded up, the most blocks any SM runs when the
        scheduler spreads a grid over the SMs before it doubles any up. It takes an SM's rate to be the
        same with one resident block as with several, so an SM's time is the blocks it runs, one after
        another; with one block per SM it is the wave count."""
        return cdiv(self.blocks, self.sm_count)

    @property
    def sm_round_efficiency(self) -> float:
        """Blocks over the SM rounds paid for (rounds × SMs): the SM-round model's tail loss."""
        return self.blocks / (self.sm_rounds * self.sm_count)


def schedule(blocks: int, sm_count: int, resident_blocks_per_sm: int) -> WaveSchedule:
    return WaveSchedule(whole_number("blocks", blocks), whole_number("SM count", sm_count),
                        whole_number("resident blocks per SM", resident_blocks_per_sm))


# --------------------------------------------------------------------------- both together

@dataclass(frozen=True)
class Quantization:
    """A GEMM shape's tile grid and its wave schedule on one GPU."""

    grid: TileGrid
    schedule: WaveSchedule

    @property
    def useful_fraction(self) -> float:
        """Share of the SM time paid for that computes elements of C: edge loss × tail loss."""
        return self.grid.tile_edge_efficiency * self.schedule.wave_efficiency

    @property
    def sm_round_useful_fraction(self) -> float:
        """The same share under the SM-round model: edge loss × blocks / (SM rounds × SMs)."""
        return self.grid.tile_edge_efficiency * self.schedule.sm_round_efficiency

    @property
    def busiest_sm_tiles(self) -> float:
        """The SM-round model's time in tiles: the busiest SM runs ``sm_rounds`` blocks, each 1/split-K of
        a tile's K loop. Times an SM's seconds per tile, it predicts the kernel's time."""
        return self.schedule.sm_rounds / self.grid.split_k

    @property
    def slot_model_tiles(self) -> float:
        """The slot (wave) model's time in the same unit: every wave costs a full SM's ``resident``
        blocks, each 1/split-K of a tile."""
        return self.schedule.waves * self.schedule.resident_blocks_per_sm / self.grid.split_k


def quantize(m: int, n: int, block_m: int, block_n: int, sm_count: int, resident_blocks_per_sm: int,
             split_k: int = 1) -> Quantization:
    grid = tile_grid(m, n, block_m, block_n, split_k)
    return Quantization(grid, schedule(grid.blocks, sm_count, resident_blocks_per_sm))


def persistent_sm_rounds(tiles: int, grid_blocks: int, sm_count: int) -> int:
    """The SM-round model for a persistent grid: block b takes tiles b, b + G, b + 2G, … and block b
    lands on SM b mod ``sm_count`` (the grid spread over the SMs first, as notebook 07 measures); the
    answer is the most tiles any SM runs."""
    tiles, grid_blocks, sm_count = (whole_number(n, v) for n, v in
                                    (("tiles", tiles), ("grid blocks", grid_blocks), ("SM count", sm_count)))
    per_sm = [0] * min(sm_count, grid_blocks)
    for b in range(grid_blocks):
        per_sm[b % sm_count] += len(range(b, tiles, grid_blocks))
    return max(per_sm)


def predicted_seconds_sm_rounds(q: Quantization, seconds_per_tile: float) -> float:
    """The SM-round model's time: the busiest SM's tiles (``busiest_sm_tiles``) times what one tile's
    full K loop costs an SM."""
    return q.busiest_sm_tiles * positive("seconds per tile", seconds_per_tile)


def wave_of_tile(q: Quantization, row: int, col: int) -> int:
    """The wave (1-based) that finishes tile (row, col): blocks start in launch order, tiles row-major,
    split-K slices outermost, so the tile's last slice decides. A first-order picture: real hardware
    hands a block to whichever SM frees up first."""
    q.grid.tile_extent(row, col)  # rejects a tile outside the grid
    last_block = (q.grid.split_k - 1) * q.grid.tiles + row * q.grid.tiles_n + col
    return last_block // q.schedule.slots + 1


def resident_blocks_per_sm(gpu: GpuSpec | str, threads_per_block: int, registers_per_thread: int,
                           smem_per_block_bytes: int = 0) -> int:
    """Resident blocks per SM of a kernel on a spec-table GPU, from the occupancy model (allocation
    granularity included). Raises ValueError, naming the resource, when not even one block fits."""
    return occupancy.residency(occupancy.budget(gpu), threads_per_block, registers_per_thread,
                               smem_per_block_bytes).resident_blocks


# --------------------------------------------------------------------------- against a measured sweep

def predicted_seconds(waves: int, seconds_per_wave: float) -> float:
    """Duration if every wave costs the same: the step curve to lay over a measured sweep."""
    return whole_number("waves", waves) * positive("seconds per wave", seconds_per_wave)


@dataclass(frozen=True)
class Cliff:
    """Between two sizes of a sweep, N = ``n_before`` → ``n``, the tile or wave count steps up."""

    n_before: int
    n: int
    tiles_before: int
    tiles: int
    waves_before: int
    waves: int

    @property
    def adds_wave(self) -> bool:
        """A whole extra wave: the big step in time, whatever the tile count did."""
        return self.waves > self.waves_before


def cliffs(m: int, ns: Iterable[int], block_m: int, block_n: int, sm_count: int, resident_blocks_per_sm: int,
           split_k: int = 1) -> list[Cliff]:
    """Every step up in tiles or waves along increasing N values (``range(1024, 4609, 64)``) at fixed M."""
    ns = [whole_number("N", n) for n in ns]
    if any(b <= a for a, b in zip(ns, ns[1:])):
        raise ValueError("N values must be strictly increasing")
    found, before = [], None
    for n in ns:
        q = quantize(m, n, block_m, block_n, sm_count, resident_blocks_per_sm, split_k)
        now = (n, q.grid.tiles, q.schedule.waves)
        if before is not None and (now[1] > before[1] or now[2] > before[2]):
            found.append(Cliff(before[0], n, before[1], now[1], before[2], now[2]))
        before = now
    return found


# --------------------------------------------------------------------------- padding a dimension

@dataclass(frozen=True)
class Padding:
    """A dimension rounded up to a whole number of tiles (a vocabulary, a hidden size)."""

    size: int
    tile: int

    @property
    def padded(self) -> int:
        """The smallest multiple of the tile edge that holds ``size``."""
        return cdiv(self.size, self.tile) * self.tile

    @property
    def padding(self) -> int:
        return self.padded - self.size

    @property
    def padding_fraction(self) -> float:
        """Share of the padded size that is padding. The unpadded size launches the same tiles, so
        this much of its edge is issued and wasted anyway: padding adds no tile, it fills the edge
        tiles so a kernel can drop its masks and take its aligned path."""
        return self.padding / self.padded


def pad_to_tile(size: int, tile: int) -> Padding:
    return Padding(whole_number("size", size), whole_number("tile", tile))
