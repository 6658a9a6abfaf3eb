"""The benchmark harness: CUDA events around GPU work that is already queued, raw samples, and their
median, interquartile range and 95th percentile.

A CUDA event records the moment the GPU *reaches* it in its stream. With an idle GPU, the start
event is reached at once, then the GPU waits while the host is still launching the kernel: for a
kernel of a few microseconds, most of such a sample is the host's launch time. ``benchmark``
therefore holds the GPU busy (a spin kernel, ``kernels/timing.cu``) before each start event, for
longer than the host needs to enqueue the event and the timed calls, so the pair brackets GPU time
alone. A sample whose enqueue outlasts its hold all the same (a busy host) is counted
(``Timing.late_samples``) and reported with a warning. ``hold=False`` keeps the idle-GPU timing,
for notebook 00 to show the difference.
When a sample is late, the hold doubles and the sample is taken again, up to ``HOLD_CEILING_S``:
a library call whose host side (torch's dispatch, cuBLAS's heuristics, torch.compile's
guards) is slow and uneven still gets a hold it fits in.
``benchmark_graph`` replays a CUDA graph instead, which also takes launch cost off the host.

A library reference (cuBLAS, torch.compile, PyTorch's kernels) is also timed by a second protocol,
``benchmark_blocks``: blocks of back-to-back calls after a long hold, the functions alternating. The
interleaved harness checks its references against it (``references=``): the two medians must agree
within ``PROTOCOL_TOLERANCE``, or the reference is measured again, and if they still disagree the
Timing says so (``Timing.second``), for the record and the notebook to flag.
Every timing carries the GPU's SM clock, power and temperature sampled during it
(``gpu_monitor``), so a power-limited figure is marked as one.
A host timer around asynchronous work measures how long it took to *enqueue* it; ``host_timed``
exists only to show that.
"""
from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from course_lib.core import cuda, progress
from course_lib.core.gpu_monitor import GpuMonitor

MIN_SAMPLES = 20
HOLD_FLOOR_S = 20e-6      # covers recording the start event itself
HOLD_CEILING_S = 20e-3    # a host that slow is not measuring a kernel any more
BLOCK_CALLS = 10          # the second protocol: calls per block ...
BLOCK_HOLD_S = 2e-3       # ... after a hold this long, which ten library calls' enqueue fits in
PROTOCOL_TOLERANCE = 0.03  # the two protocols' medians of a reference must agree this closely


@dataclass(frozen=True)
class Timing:
    """Raw per-call samples in seconds, and the summary every table reports."""

    samples_s: tuple[float, ...]
    # Samples whose timed calls the host was still enqueuing when the hold before them ran out: the
    # GPU waited for the host, so they include some of its launch time (``benchmark`` says why).
    late_samples: int = 0
    # The GPU during the samples (``GpuMonitor.summary``): SM clock, power, temperature, power-limited.
    gpu: dict = field(default_factory=dict, compare=False)
    # A library reference's second protocol (``benchmark_blocks``): its samples, its median over this
    # one's, whether they agree, and the attempts it took (``check_reference``).
    second: dict | None = field(default=None, compare=False)

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
    def iqr_s(self) -> float:
        return self.percentile_s(75) - self.percentile_s(25)

    @property
    def p95_s(self) -> float:
        return self.percentile_s(95)

    @property
    def spread(self) -> float:
        """Interquartile range over the median: a robust relative spread."""
        return self.iqr_s / self.median_s


def _sync() -> None:
    import cupy

    cupy.cuda.get_current_stream().synchronize()


class _L2Flusher:
    """Writes a buffer twice the L2's size so the next kernel starts with a cold cache."""

    def __init__(self):
        import cupy

        l2 = cupy.cuda.Device().attributes["L2CacheSize"]
        self._buf = cupy.empty(max(2 * l2, 1 << 20) // 4, dtype=cupy.float32)

    def __call__(self):
        self._buf.fill(0)


class GpuHold:
    """Enqueues a spin of ``seconds`` on the current stream: the GPU stays busy while the host works."""

    def __init__(self):
        import cupy

        self._kernel = cuda.kernel("timing", "gpu_hold")
        self._spun = cupy.zeros(1, dtype=cupy.int64)
        self._int64 = cupy.int64

    def __call__(self, seconds: float) -> None:
        self._kernel((1,), (1,), (self._int64(int(seconds * 1e9)), self._spun))


def _warm_up(fn: Callable[[], object], calls: int) -> float:
    """Run ``fn`` ``calls`` times; return the host's fastest enqueue time of one call (seconds)."""
    enqueue = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        enqueue.append(time.perf_counter() - t0)
    _sync()
    return min(enqueue) if enqueue else HOLD_CEILING_S / 10


def hold_seconds(enqueue_s: float, calls: int) -> float:
    """How long to hold the GPU before a sample: twice the host's time to enqueue its calls."""
    return min(2.0 * enqueue_s * calls + HOLD_FLOOR_S, HOLD_CEILING_S)


def _warn_if_late(late: int, samples: int, hold_s: float, what: str) -> None:
    if late:
        warnings.warn(f"{what}: in {late} of {samples} samples the host took longer than the "
                      f"{hold_s * 1e6:.0f} µs hold to enqueue the timed calls, so those samples include some "
                      "host launch time. A busy host does this (another process, a notebook's output): time "
                      "again, or capture the calls in a CUDA graph (benchmark_graph).", RuntimeWarning, stacklevel=3)


def _check_samples(samples: int) -> None:
    if samples < MIN_SAMPLES:
        raise ValueError(f"at least {MIN_SAMPLES} samples are needed for a median and spread, got {samples}")


def benchmark(fn: Callable[[], object], samples: int = 30, warmup: int = 3, repeat: int = 1,
              flush_l2: bool = False, hold: bool = True, reference: bool = False) -> Timing:
    """Time ``fn`` on the GPU with CUDA events, the GPU held busy before each start event.

    Each sample brackets ``repeat`` back-to-back calls with a pair of events and is divided by
    ``repeat``. The hold lasts twice the host's enqueue time of those calls (measured during
    warm-up), so the start event and every call are queued before the GPU reaches them and the
    sample holds no host launch time; a sample that is late all the same is taken again with a longer
    hold. ``flush_l2`` evicts the L2 before each sample, outside the timed region, so a bandwidth
    figure cannot be flattered by cache hits. ``hold=False`` is the naive idle-GPU event pair (launch
    time included), kept to teach the difference. ``reference=True``: a library call, checked against
    the second protocol (``check_reference``).
    """
    progress.step(f"timing one kernel, {samples} samples")
    _check_samples(samples)
    if repeat < 1 or warmup < 0:
        raise ValueError("repeat must be >= 1 and warmup >= 0")
    import cupy

    flush = _L2Flusher() if flush_l2 else None
    spin = GpuHold() if hold else None
    hold_s = hold_seconds(_warm_up(fn, warmup), repeat)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    out, late = [], 0
    with GpuMonitor() as gpu:
        for _ in range(samples):
            elapsed, was_late, hold_s = _fitted_sample(fn, repeat, spin, hold_s, start, stop, flush)
            late += was_late
            out.append(elapsed)
    _warn_if_late(late, samples, hold_s, "benchmark")
    timing = Timing(tuple(out), late, gpu.summary())
    return check_reference(timing, fn, lambda: benchmark(fn, samples, warmup, repeat, flush_l2, hold)) \
        if reference else timing


def _fitted_sample(fn, calls: int, spin, hold_s: float, start, stop, before=None) -> tuple[float, bool, float]:
    """A held sample, taken again with twice the hold while the host's enqueue outlasts it, up to
    ``HOLD_CEILING_S``. Returns seconds per call, whether it is late even so, and the hold it reached
    (the next sample starts from there). ``before``: run before each attempt (an L2 flush)."""
    while True:
        if before:
            before()
        elapsed, late = _held_sample(fn, calls, spin, hold_s, start, stop)
        if not late or hold_s >= HOLD_CEILING_S:
            return elapsed, late, hold_s
        hold_s = min(2 * hold_s, HOLD_CEILING_S)


def _held_sample(fn, calls: int, spin, hold_s: float, start, stop) -> tuple[float, bool]:
    """One sample: hold the GPU, record the start event, enqueue ``calls`` calls, record the stop event.
    Returns seconds per call and whether the host was still enqueuing when the hold ran out."""
    import cupy

    if spin:
        spin(hold_s)
    enqueued_from = time.perf_counter()
    start.record()
    for _ in range(calls):
        fn()
    late = spin is not None and time.perf_counter() - enqueued_from > hold_s
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) * 1e-3 / calls, late


def benchmark_interleaved(fns: Sequence[Callable[[], object]], samples: int = 30, warmup: int = 3,
                          hold: bool = True, references: Sequence[int] = ()) -> list[Timing]:
    """Time several functions call by call in turn (A, B, C, A, B, C, ...), one Timing each.

    For ratios between them: a GPU at its power cap moves its clock with temperature, and
    timing one function's samples after another's would credit the first with a cooler chip.
    Each call is held as in ``benchmark``. ``references``: the indices of library calls, each then
    checked against the second protocol; where one disagrees, every call is timed again in turn, so that
    both sides of each ratio come from one interleaved run (``check_references_in_turn``).
    """
    timings = _timed_in_turn(fns, samples, warmup, hold)
    if not references:
        return timings
    return check_references_in_turn(timings, fns, references, lambda: _timed_in_turn(fns, samples, warmup, hold))


def _timed_in_turn(fns: Sequence[Callable[[], object]], samples: int, warmup: int, hold: bool) -> list[Timing]:
    """One interleaved run of ``benchmark_interleaved``: every call timed in turn, ``samples`` rounds."""
    progress.step(f"timing {len(fns)} calls in turn, {samples} samples each")
    _check_samples(samples)
    import cupy

    holds = [hold_seconds(_warm_up(fn, warmup), 1) for fn in fns]
    spin = GpuHold() if hold else None
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    out: list[list[float]] = [[] for _ in fns]
    late = [0] * len(fns)
    with GpuMonitor() as gpu:
        for _ in range(samples):
            for i, fn in enumerate(fns):
                elapsed, was_late, holds[i] = _fitted_sample(fn, 1, spin, holds[i], start, stop)
                late[i] += was_late
                out[i].append(elapsed)
    for i, (n_late, hold_s) in enumerate(zip(late, holds)):
        _warn_if_late(n_late, samples, hold_s, f"benchmark_interleaved, call {i + 1} of {len(fns)}")
    return [Timing(tuple(times), n_late, gpu.summary()) for times, n_late in zip(out, late)]


def benchmark_blocks(fns: Sequence[Callable[[], object]], samples: int = 10, calls: int = BLOCK_CALLS,
                     hold_s: float = BLOCK_HOLD_S) -> list[Timing]:
    """The second protocol: for each sample, each function in turn runs ``calls`` times back to back
    between one pair of events, after a GPU hold of ``hold_s``; a sample is the pair's time over
    ``calls``. It shares nothing with ``benchmark``'s per-call hold, so a reference measured alike by
    both is not an artefact of either."""
    import cupy

    for fn in fns:
        _warm_up(fn, 2)
    spin, start, stop = GpuHold(), cupy.cuda.Event(), cupy.cuda.Event()
    out: list[list[float]] = [[] for _ in fns]
    late = [0] * len(fns)
    with GpuMonitor() as gpu:
        for _ in range(samples):
            for i, fn in enumerate(fns):
                elapsed, was_late = _held_sample(fn, calls, spin, hold_s, start, stop)
                late[i] += was_late
                out[i].append(elapsed)
    return [Timing(tuple(times), n_late, gpu.summary()) for times, n_late in zip(out, late)]


def _second_protocol(blocks: Timing, ratio: float, attempts: list[dict]) -> dict:
    """What ``Timing.second`` holds: the blocks' samples, the ratio of the medians, whether they agree."""
    return {"protocol": f"blocks of {BLOCK_CALLS} back-to-back calls after a {BLOCK_HOLD_S * 1e3:.0f} ms hold",
            "samples_s": list(blocks.samples_s), "late_samples": blocks.late_samples, "gpu": blocks.gpu,
            "ratio": ratio, "agree": abs(ratio - 1) <= PROTOCOL_TOLERANCE, "tolerance": PROTOCOL_TOLERANCE,
            "attempts": attempts}


def check_reference(timing: Timing, fn: Callable[[], object], measure_again: Callable[[], Timing]) -> Timing:
    """``timing`` of a library call timed on its own, checked by the second protocol. If the two medians
    disagree by more than ``PROTOCOL_TOLERANCE``, both are measured again (the harness by ``measure_again``).
    If they then agree, the first harness timing was the outlier and the second one is kept; if they still
    disagree, the first one is kept, flagged. ``Timing.second`` records every attempt. (A reference timed in
    turn with the course's kernels is checked by ``check_references_in_turn`` instead, which never puts a
    timing taken alone beside ones taken in turn.)"""
    first, attempts, all_blocks = timing, [], []
    for attempt in range(2):
        blocks = benchmark_blocks([fn])[0]
        all_blocks.append(blocks)
        ratio = timing.median_s / blocks.median_s
        attempts.append({"harness_median_s": timing.median_s, "blocks_median_s": blocks.median_s,
                         "ratio": ratio})
        if abs(ratio - 1) <= PROTOCOL_TOLERANCE or attempt == 1:
            break
        timing = measure_again()
    if abs(ratio - 1) > PROTOCOL_TOLERANCE:   # keep the first harness timing, and the blocks it was compared with
        timing, ratio, blocks = first, attempts[0]["ratio"], all_blocks[0]
    return replace(timing, second=_second_protocol(blocks, ratio, attempts))


def check_references_in_turn(timings: list[Timing], fns: Sequence[Callable[[], object]], references: Sequence[int],
                             measure_again: Callable[[], list[Timing]]) -> list[Timing]:
    """The library calls ``references`` of an interleaved run ``timings``, each checked by the second protocol.
    If any disagrees by more than ``PROTOCOL_TOLERANCE``, every call is timed again in turn (``measure_again``:
    the course's kernels with the references, so each ratio's two sides share a run) and checked again. The
    second run is kept only if all its references agree; otherwise the first, each disagreeing reference
    flagged. A reference's ``Timing.second`` records every attempt."""
    runs = []
    for attempt in range(2):
        blocks = {i: benchmark_blocks([fns[i]])[0] for i in references}
        ratios = {i: timings[i].median_s / blocks[i].median_s for i in references}
        runs.append((timings, blocks, ratios))
        agree = all(abs(r - 1) <= PROTOCOL_TOLERANCE for r in ratios.values())
        if agree or attempt == 1:
            break
        timings = measure_again()
    timings, blocks, ratios = runs[-1] if agree else runs[0]
    out = list(timings)
    for i in references:
        attempts = [{"harness_median_s": t[i].median_s, "blocks_median_s": b[i].median_s, "ratio": r[i],
                     "in turn with": len(fns) - 1} for t, b, r in runs]
        out[i] = replace(timings[i], second=_second_protocol(blocks[i], ratios[i], attempts))
    return out


def benchmark_graph(fn: Callable[[], object], calls: int, samples: int = 30) -> Timing:
    """Capture ``calls`` calls of ``fn`` in one CUDA graph; time its replays (held), per call.

    A graph is launched by one host call however many kernels it holds, so per-kernel launch cost
    leaves the host: the way to run many tiny kernels.
    """
    _check_samples(samples)
    if calls < 1:
        raise ValueError("a graph needs at least one call")
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        fn()  # loads the module outside the capture
        stream.synchronize()
        stream.begin_capture()
        for _ in range(calls):
            fn()
        graph = stream.end_capture()
        graph.launch()
        enqueue = _warm_up(graph.launch, 3)
        spin, hold_s = GpuHold(), hold_seconds(enqueue, 1)
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        out = []
        with GpuMonitor() as gpu:
            for _ in range(samples):
                spin(hold_s)
                start.record()
                graph.launch()
                stop.record()
                stop.synchronize()
                out.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3 / calls)
    return Timing(tuple(out), gpu=gpu.summary())


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
