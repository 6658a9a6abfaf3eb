import pytest

from course_lib.timing import Timing, benchmark


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

    from course_lib import timing
    from course_lib.timing import benchmark_interleaved

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
    from course_lib.timing import HOLD_CEILING_S, HOLD_FLOOR_S, hold_seconds

    assert hold_seconds(10e-6, 1) == pytest.approx(20e-6 + HOLD_FLOOR_S)
    assert hold_seconds(10e-6, 100) == pytest.approx(2e-3 + HOLD_FLOOR_S)   # many calls per sample
    assert hold_seconds(1.0, 1) == HOLD_CEILING_S
    assert hold_seconds(0.0, 1) == HOLD_FLOOR_S
