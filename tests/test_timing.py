import pytest

from course_lib.core.timing import Timing, benchmark


def test_median_and_spread():
    t = Timing(tuple([1.0] * 10 + [2.0] * 10 + [100.0]))
    assert t.median_s == 2.0
    assert t.percentile_s(25) == 1.0 and t.percentile_s(75) == 2.0
    assert t.spread == pytest.approx(0.5)


def test_benchmark_refuses_too_few_samples_before_touching_a_gpu():
    with pytest.raises(ValueError, match="at least 20 samples"):
        benchmark(lambda: None, samples=5)


def test_empty_timing_is_an_error():
    with pytest.raises(ValueError):
        Timing(())


def test_interleaved_benchmark_alternates_calls_and_holds_before_each(monkeypatch):
    """Without a GPU: a stand-in CuPy records the order of calls and events."""
    import sys
    import types

    from course_lib.core import timing
    from course_lib.core.timing import benchmark_interleaved

    log = []

    class Hold:
        def __call__(self, seconds):
            log.append("hold")
            holds.append(seconds)

    holds = []
    monkeypatch.setattr(timing, "GpuHold", Hold)

    class Event:
        def record(self):
            log.append("event")

        def synchronize(self):
            pass

    stream = types.SimpleNamespace(synchronize=lambda: None)
    cuda = types.SimpleNamespace(Event=Event, get_current_stream=lambda: stream,
                                 get_elapsed_time=lambda a, b: 1.0)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    with pytest.raises(ValueError, match="at least 20 samples"):
        benchmark_interleaved([lambda: None], samples=3)
    timings = benchmark_interleaved([lambda: log.append("A"), lambda: log.append("B")], samples=20, warmup=1)
    assert [len(t.samples_s) for t in timings] == [20, 20] and timings[0].median_s == pytest.approx(1e-3)
    assert log[:2] == ["A", "B"]                                   # warm-up
    assert log[2:12] == ["hold", "event", "A", "event", "hold", "event", "B", "event", "hold", "event"]


def test_the_hold_outlasts_twice_the_hosts_enqueue_time_and_is_capped():
    from course_lib.core.timing import HOLD_CEILING_S, HOLD_FLOOR_S, hold_seconds

    assert hold_seconds(10e-6, 1) == pytest.approx(20e-6 + HOLD_FLOOR_S)
    assert hold_seconds(10e-6, 100) == pytest.approx(2e-3 + HOLD_FLOOR_S)   # many calls per sample
    assert hold_seconds(1.0, 1) == HOLD_CEILING_S
    assert hold_seconds(0.0, 1) == HOLD_FLOOR_S


def _fake_cupy(monkeypatch, log):
    import sys
    import types

    from course_lib.core import timing

    monkeypatch.setattr(timing, "GpuHold", lambda: (lambda seconds: log.append(("hold", seconds))))
    event = types.SimpleNamespace(record=lambda: None, synchronize=lambda: None)
    stream = types.SimpleNamespace(synchronize=lambda: None)
    cuda = types.SimpleNamespace(Event=lambda: event, get_current_stream=lambda: stream,
                                 get_elapsed_time=lambda a, b: 1.0)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))


def test_samples_the_host_enqueued_after_the_hold_ran_out_are_counted_and_reported(monkeypatch):
    """A call that is quick in warm-up and slow afterwards outlasts its hold (twice its fastest
    enqueue): every such sample holds host time, and the benchmark says so. A quick call does not."""
    import time

    from course_lib.core.timing import benchmark, benchmark_interleaved

    log = []
    _fake_cupy(monkeypatch, log)
    calls = {"n": 0}

    def slow_after_warm_up():
        calls["n"] += 1
        if calls["n"] > 1:
            time.sleep(2e-3)   # far past a hold of 2 x (fastest enqueue) + 20 µs

    with pytest.warns(RuntimeWarning, match="20 of 20 samples the host took longer"):
        t = benchmark(slow_after_warm_up, samples=20, warmup=1)
    assert t.late_samples == 20
    calls["n"] = 0
    with pytest.warns(RuntimeWarning, match="call 2 of 2: in 20 of 20"):
        quick, slow = benchmark_interleaved([lambda: None, slow_after_warm_up], samples=20, warmup=1)
    assert (quick.late_samples, slow.late_samples) == (0, 20)


def test_an_unheld_benchmark_counts_no_late_samples(monkeypatch):
    """hold=False times launch and all on purpose (notebook 00): nothing to warn about."""
    import time
    import warnings

    from course_lib.core.timing import benchmark

    _fake_cupy(monkeypatch, [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert benchmark(lambda: time.sleep(1e-3), samples=20, warmup=1, hold=False).late_samples == 0
