"""Overlap, not occupancy: the serial and the software-pipelined schedule of a load → compute → store loop.

Every iteration loads a tile, computes on it and stores a result. Three hardware paths do that work:
the load path (copy engine, TMA), the math units and the store path. Each runs one iteration at a time,
in order. A load keeps the load path busy for its transfer time ``l`` (how soon the next load can be
issued) and its tile lands ``L ≥ l`` after it was issued (the latency; ``L = l`` when the round trip adds
nothing). The math needs time ``c`` per tile and the store ``s``.

Serial (one stage, synchronous code): each step waits for the one before, so

    serial = n · (L + c + s)

Pipelined with S ≥ 2 stage buffers in shared memory: a load may be issued as soon as the load path is
free and a buffer is: the buffer of tile i is the one tile i − S used, released when the math on tile
i − S ends. Tile i's math starts when it has landed and the math on tile i − 1 is done; its store when
its math is done and the store of tile i − 1 is. With P = max(l, c, s), the slowest path:

    L + c + s + (n − 1) · P  ≤  pipelined  ≤  L + c + s + (n − 1) · max(P, (L + c) / S)

The first tile pays the whole trip, every later one adds one beat. A buffer is held from the issue of
its load to the end of its math, at least L + c, so S buffers turn over at most once per (L + c) / S.
When S · P ≥ L + c the two bounds meet and the formula is exact: the loads are covered. For a
compute-bound loop (P = c) that is (S − 1) · c ≥ L, the rule of ``stages_to_cover``. Without extra
latency (L = l) two stages always cover.

That is the refill order of a TMA ring: a slot is refilled as soon as the math on it ends. A `cp.async` loop
written in the usual order issues differently: it waits for tile j to land, synchronises, and only then issues
tile j + S − 1 (``issue_after_landing``). Tile i then also waits for tile i − S + 1 to land, so while the loop
waits it has S − 1 tiles on their way, and its beat is max(P, (L + c) / S, L / (S − 1)); it is covered when
(S − 1) · P ≥ L. At a steady latency and P = c the two orders need the same stages; where the math is short
(a streaming loop) the `cp.async` order needs one stage more.

Little's law sizes the same thing from the memory side: to keep a bandwidth B busy across a latency L,
B · L bytes must be in flight, shared between the SMs. Every stage costs a tile of A and B in shared
memory, and shared memory is one of the resources that decide how many blocks stay resident: more
stages, fewer blocks (``residency_with_stages``, from ``occupancy``).

Pure functions, no GPU: every number here is analytic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from course_lib.core.hardware import GpuSpec, gpu_spec
from course_lib.core.validate import positive, whole_number
from course_lib.models import occupancy, tiling

UNITS = ("load", "compute", "store")
# Ratios this close to a whole number count as whole, so typed decimals (0.3 µs) do not tip a stage over.
_REL = 1e-9


def _ceil(x: float) -> int:
    return math.ceil(x * (1 - _REL))


# --------------------------------------------------------------------------- the two schedules

@dataclass(frozen=True)
class Event:
    """One unit working on one iteration. A load runs from its issue until its tile has landed."""

    unit: str
    iteration: int
    start_s: float
    end_s: float


def _events(load: float, latency: float, compute: float, store: float, n: int, stages: int,
            issue_after_landing: bool = False) -> tuple[Event, ...]:
    """The earliest-start schedule under the rules of the module docstring (its l, L, c and s are
    ``load``, ``latency``, ``compute`` and ``store``); ``issue_after_landing``: the `cp.async` order, tile
    i issued only once tile i − S + 1 has landed."""
    events: list[Event] = []
    compute_end: list[float] = []
    landed: list[float] = []
    load_free = compute_free = store_free = 0.0
    for i in range(n):
        issue = load_free
        if i >= stages:
            issue = max(issue, compute_end[i - stages])
        if issue_after_landing and stages > 1 and i >= stages - 1:
            issue = max(issue, landed[i - stages + 1])
        if stages == 1:                                   # synchronous: wait for the previous store too
            issue = max(issue, store_free)
        load_free = issue + load
        compute_free = max(issue + latency, compute_free) + compute
        compute_end.append(compute_free)
        landed.append(issue + latency)
        store_free = max(compute_free, store_free) + store
        events += [Event("load", i, issue, issue + latency), Event("compute", i, compute_free - compute, compute_free),
                   Event("store", i, store_free - store, store_free)]
    return tuple(events)


@dataclass(frozen=True)
class Schedule:
    """The serial and the pipelined schedule of one loop, with their events for drawing."""

    load_s: float
    latency_s: float
    compute_s: float
    store_s: float
    iterations: int
    stages: int
    serial: tuple[Event, ...]
    pipelined: tuple[Event, ...]
    issue_after_landing: bool = False

    @property
    def serial_s(self) -> float:
        return self.serial[-1].end_s

    @property
    def pipelined_s(self) -> float:
        return self.pipelined[-1].end_s

    @property
    def speedup(self) -> float:
        return self.serial_s / self.pipelined_s

    @property
    def slowest_s(self) -> float:
        """max(l, c, s): the path every iteration must pass through one at a time."""
        return max(self.load_s, self.compute_s, self.store_s)

    @property
    def speedup_bound(self) -> float:
        """(L + c + s) / max(l, c, s): no number of stages or iterations beats it."""
        return (self.latency_s + self.compute_s + self.store_s) / self.slowest_s

    @property
    def beat_s(self) -> float:
        """Time each iteration adds in the long run: L + c + s serial, max(l, c, s, (L + c)/S) pipelined,
        and also at least L/(S − 1) in the `cp.async` order (``issue_after_landing``)."""
        if self.stages == 1:
            return self.latency_s + self.compute_s + self.store_s
        beat = max(self.slowest_s, (self.latency_s + self.compute_s) / self.stages)
        return max(beat, self.latency_s / (self.stages - 1)) if self.issue_after_landing else beat

    @property
    def predicted_s(self) -> float:
        """L + c + s + (n − 1) · beat: exact serial and when covered, an upper bound otherwise."""
        return self.latency_s + self.compute_s + self.store_s + (self.iterations - 1) * self.beat_s

    @property
    def stages_needed(self) -> int:
        """The fewest stages that cover the loads: S ≥ 2 with S · max(l, c, s) ≥ L + c; in the `cp.async`
        order, also (S − 1) · max(l, c, s) ≥ L."""
        need = max(2, _ceil((self.latency_s + self.compute_s) / self.slowest_s))
        return max(need, _ceil(self.latency_s / self.slowest_s) + 1) if self.issue_after_landing else need

    @property
    def covered(self) -> bool:
        """Whether the slowest path, not the stage buffers, sets the pace (pipelined = predicted exactly)."""
        return self.stages >= self.stages_needed


def schedule_times(load_s: float, compute_s: float, store_s: float, iterations: int, stages: int,
                   latency_s: float | None = None, issue_after_landing: bool = False) -> Schedule:
    """Both schedules of ``iterations`` load → compute → store steps with ``stages`` buffers in flight.

    ``load_s`` is the load path's busy time per tile, ``latency_s`` (default: ``load_s``) the time from
    issuing a load to its tile landing. Times in seconds (any one unit works: they are only added and
    compared). ``stages`` = 1 is the synchronous loop, so both schedules are then the same.
    ``issue_after_landing``: the pipelined loop issues in the `cp.async` order (wait for a tile, then
    issue the next) instead of refilling a slot as soon as its math ends (the TMA ring's order).
    """
    load = positive("load time", load_s)
    compute, store = positive("compute time", compute_s), positive("store time", store_s)
    latency = load if latency_s is None else positive("load latency", latency_s)
    if latency < load:
        raise ValueError(f"load latency must be at least the load time ({load!r} s): a tile cannot land before "
                         f"its bytes are transferred, got {latency_s!r}")
    n, stages = whole_number("iterations", iterations), whole_number("stages", stages)
    times = load, latency, compute, store
    after = bool(issue_after_landing)
    return Schedule(*times, n, stages, _events(*times, n, 1), _events(*times, n, stages, after), after)


# --------------------------------------------------------------------------- Little's law

def bytes_in_flight(bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """Bandwidth × latency: the bytes that must be on their way at every instant to sustain the bandwidth."""
    return positive("bandwidth", bandwidth_bytes_per_s, "bytes/s") * positive("latency", latency_s)


def bytes_in_flight_per_sm(gpu: GpuSpec | str, latency_s: float, bandwidth_bytes_per_s: float | None = None) -> float:
    """Each SM's share of ``bytes_in_flight`` at the GPU's HBM bandwidth (or the one given)."""
    g = gpu_spec(gpu)
    bandwidth = g.hbm_bandwidth_bytes_per_s if bandwidth_bytes_per_s is None else bandwidth_bytes_per_s
    return bytes_in_flight(bandwidth, latency_s) / g.sm_count


def stages_to_cover(latency_s: float, compute_s_per_stage: float) -> int:
    """The fewest stages S ≥ 2 with (S − 1) · compute ≥ latency: while one stage computes, the other
    S − 1 loads are in flight, and their math must last as long as a load takes to land."""
    L, c = positive("latency", latency_s), positive("compute time per stage", compute_s_per_stage)
    return max(2, _ceil(L / c) + 1)


# --------------------------------------------------------------------------- what the stages cost

def stage_smem_bytes(block_m: int, block_n: int, block_k: int, bytes_per_element: float) -> int:
    """Shared memory of one stage: a B_M × B_K tile of A and a B_K × B_N tile of B, in whole bytes."""
    for name, v in (("B_M", block_m), ("B_N", block_n), ("B_K", block_k)):
        whole_number(name, v)
    b = positive("bytes per element", bytes_per_element, "bytes")
    return math.ceil(tiling.stage_bytes(block_m, block_n, block_k, b))


def residency_with_stages(gpu: GpuSpec | str, threads_per_block: int, registers_per_thread: int, stages: int,
                          stage_bytes: int) -> occupancy.Residency:
    """Resident blocks per SM when each block holds ``stages`` buffers of ``stage_bytes`` in shared memory,
    and which resource stops the next block (``.limiter``). Raises ValueError when not even one fits."""
    smem = whole_number("stages", stages) * whole_number("stage bytes", stage_bytes)
    return occupancy.residency(occupancy.budget(gpu_spec(gpu)), threads_per_block, registers_per_thread, smem)


# --------------------------------------------------------------------------- overlap, measured

def interval_union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of closed intervals as sorted, disjoint intervals. An interval must not end before it starts."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if b < a:
            raise ValueError(f"an interval cannot end before it starts: ({a}, {b})")
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def covered_length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in interval_union(intervals))


def overlap_fraction(copies: list[tuple[float, float]], maths: list[tuple[float, float]]) -> float:
    """The share of the time some copy is in flight during which some math is running too: 0 for
    the serial schedule, 1 when every copy is hidden under math. Raises ValueError with no copy time."""
    c, m = interval_union(copies), interval_union(maths)
    total = sum(b - a for a, b in c)
    if total <= 0:
        raise ValueError("the copies take no time: there is nothing to overlap")
    both, j = 0.0, 0
    for a, b in c:
        while j < len(m) and m[j][1] <= a:
            j += 1
        k = j
        while k < len(m) and m[k][0] < b:
            both += min(b, m[k][1]) - max(a, m[k][0])
            k += 1
    return both / total
