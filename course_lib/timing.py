"""The benchmark harness: CUDA events, warm-up, raw samples, median and spread.

A host timer around an asynchronous launch measures how long it took to
*enqueue* the work, not to do it; ``host_timed`` exists only to show that.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

MIN_SAMPLES = 20


@dataclass(frozen=True)
class Timing:
    """Raw per-call samples in seconds, and the summary every table reports."""

    samples_s: tuple[float, ...]

    def __post_init__(self):
        if not self.samples_s:
            raise ValueError("a timing needs at least one sample")

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    def percentile_s(self, q: float) -> float:
        xs = sorted(self.samples_s)
        pos = (len(xs) - 1) * q / 100.0
        lo, hi = int(pos), min(int(pos) + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    @property
    def spread(self) -> float:
        """Interquartile range over the median: a robust relative spread."""
        return (self.percentile_s(75) - self.percentile_s(25)) / self.median_s


class _L2Flusher:
    """Writes a buffer twice the L2's size so the next kernel starts with a cold cache."""

    def __init__(self):
        import cupy

        l2 = cupy.cuda.Device().attributes["L2CacheSize"]
        self._buf = cupy.empty(max(2 * l2, 1 << 20) // 4, dtype=cupy.float32)

    def __call__(self):
        self._buf.fill(0)


def benchmark(fn: Callable[[], object], samples: int = 30, warmup: int = 3, repeat: int = 1,
              flush_l2: bool = False) -> Timing:
    """Time ``fn`` on the GPU with CUDA events.

    Each sample brackets ``repeat`` back-to-back calls with a pair of events
    and is divided by ``repeat`` (``repeat > 1`` measures throughput, as a
    training loop sees it). ``flush_l2`` evicts the L2 before each sample,
    outside the timed region, so a bandwidth figure cannot be flattered by cache hits.
    """
    if samples < MIN_SAMPLES:
        raise ValueError(f"at least {MIN_SAMPLES} samples are needed for a median and spread, got {samples}")
    if repeat < 1 or warmup < 0:
        raise ValueError("repeat must be >= 1 and warmup >= 0")
    import cupy

    flush = _L2Flusher() if flush_l2 else None
    for _ in range(warmup):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    out = []
    for _ in range(samples):
        if flush:
            flush()
        start.record()
        for _ in range(repeat):
            fn()
        stop.record()
        stop.synchronize()
        out.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3 / repeat)
    return Timing(tuple(out))


def benchmark_interleaved(fns: Sequence[Callable[[], object]], samples: int = 30, warmup: int = 3,
                          hold: Callable[[], object] | None = None) -> list[Timing]:
    """Time several functions call by call in turn (A, B, C, A, B, C, ...), one Timing each.

    For ratios between them: a GPU at its power cap moves its clock with temperature, and
    timing one function's samples after another's would credit the first with a cooler chip.
    ``hold``, if given, enqueues GPU work (a short spin) before each start event, so that the
    timed call is already queued when the event runs: host launch time stays out of the sample.
    """
    if samples < MIN_SAMPLES:
        raise ValueError(f"at least {MIN_SAMPLES} samples are needed for a median and spread, got {samples}")
    import cupy

    for _ in range(warmup):
        for fn in fns:
            fn()
    cupy.cuda.get_current_stream().synchronize()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for fn, times in zip(fns, out):
            if hold:
                hold()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3)
    return [Timing(tuple(times)) for times in out]


def host_timed(fn: Callable[[], object], samples: int = 30, synchronize: bool = False) -> Timing:
    """Wall-clock around each call, with or without waiting for the GPU: the teaching foil."""
    import cupy

    stream = cupy.cuda.get_current_stream()
    stream.synchronize()
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        if synchronize:
            stream.synchronize()
        out.append(time.perf_counter() - t0)
    stream.synchronize()
    return Timing(tuple(out))
