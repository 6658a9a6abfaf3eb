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


def test_a_late_sample_is_taken_again_with_a_longer_hold_until_the_enqueue_fits(monkeypatch):
    """A call quick in warm-up and slow afterwards (a library call's uneven host side) outlasts its
    first hold: the sample is taken again with twice the hold, and the hold keeps what it grew to,
    so the samples that count are held long enough and none is late."""
    import time

    from course_lib.core.timing import benchmark

    log = []
    _fake_cupy(monkeypatch, log)
    calls = {"n": 0}

    def slow_after_warm_up():
        calls["n"] += 1
        if calls["n"] > 1:
            time.sleep(1e-3)

    t = benchmark(slow_after_warm_up, samples=20, warmup=1)
    holds = [s for what, s in log if what == "hold"]
    assert t.late_samples == 0 and len(t.samples_s) == 20
    assert holds[1] == pytest.approx(2 * holds[0]) and max(holds) > 1e-3
    assert len(holds) < 20 + 12      # only the first sample was taken again, a few times


def test_samples_still_late_at_the_hold_ceiling_are_counted_and_reported(monkeypatch):
    """An enqueue slower than the ceiling (a host that is not measuring a kernel any more): each such
    sample holds host time, and the benchmark says so. A quick call beside it is not late."""
    import time

    from course_lib.core.timing import HOLD_CEILING_S, benchmark_interleaved

    _fake_cupy(monkeypatch, [])
    calls = {"n": 0}

    def slower_than_the_ceiling():
        calls["n"] += 1
        if calls["n"] > 1:
            time.sleep(HOLD_CEILING_S * 1.05)

    with pytest.warns(RuntimeWarning, match="call 2 of 2: in 20 of 20"):
        quick, slow = benchmark_interleaved([lambda: None, slower_than_the_ceiling], samples=20, warmup=1)
    assert (quick.late_samples, slow.late_samples) == (0, 20)


def test_a_reference_whose_protocols_disagree_is_measured_again_then_flagged(monkeypatch):
    """The second protocol (blocks of back-to-back calls) must agree with the harness within 3%: a
    reference that does after a second measurement keeps the second; one that never does is flagged."""
    from course_lib.core import timing
    from course_lib.core.timing import PROTOCOL_TOLERANCE, Timing, check_reference

    blocks = iter([1.0, 1.0, 1.0, 1.0])
    monkeypatch.setattr(timing, "benchmark_blocks", lambda fns: [Timing((next(blocks),) * 10)])
    agree = check_reference(Timing((1.01,) * 20), None, lambda: pytest.fail("no need to measure again"))
    assert agree.second["agree"] and len(agree.second["attempts"]) == 1
    fixed = check_reference(Timing((1.2,) * 20), None, lambda: Timing((1.0,) * 20))
    assert fixed.median_s == 1.0 and fixed.second["agree"] and len(fixed.second["attempts"]) == 2
    blocks = iter([1.0, 1.0])
    flagged = check_reference(Timing((1.2,) * 20), None, lambda: Timing((1.1,) * 20))
    assert not flagged.second["agree"] and flagged.median_s == 1.2     # the timing taken beside the course's
    assert [a["ratio"] for a in flagged.second["attempts"]] == pytest.approx([1.2, 1.1])
    assert flagged.second["tolerance"] == PROTOCOL_TOLERANCE


def test_a_case_built_from_a_timing_keeps_what_the_harness_saw():
    from course_lib.core.timing import Timing
    from course_lib.measure.evidence import Case, case_from_json, case_to_json

    gpu = {"sm_mhz": {"min": 1400.0, "median": 1700.0, "max": 1980.0}, "max_sm_mhz": 1980.0, "power_limited": True}
    second = {"agree": False, "ratio": 1.06}
    case = Case("x", {}, "cublas", Timing((1e-3,) * 20, 2, gpu, second), 1.0, 1.0, {"reference": "r", "passed": True})
    assert case.samples_s == [1e-3] * 20 and case.extra == {"late_samples": 2, "gpu_during": gpu,
                                                            "second_protocol": second}
    again = case_from_json(case_to_json(case))
    assert again.power_limited and again.protocols_disagree and again.timing.late_samples == 2


def test_the_gpu_summary_marks_a_clock_that_fell_as_power_limited():
    from course_lib.core.gpu_monitor import POWER_LIMITED_FRACTION, clock_label, summarise

    steady = summarise([(1980.0, 500.0, 50.0), (1970.0, 520.0, 51.0)], 1980.0, 700.0)
    fell = summarise([(1980.0, 690.0, 60.0), (1500.0, 700.0, 62.0)], 1980.0, 700.0)
    assert not steady["power_limited"] and fell["power_limited"] and 1500 < POWER_LIMITED_FRACTION * 1980
    assert fell["sm_mhz"] == {"min": 1500.0, "median": 1740.0, "max": 1980.0}
    assert clock_label(fell) == "1500 MHz (76%) power-limited" and clock_label(None) == "not sampled"


def test_without_nvml_the_monitor_says_why(monkeypatch):
    from course_lib.core import gpu_monitor
    from course_lib.core.gpu_monitor import GpuMonitor

    def no_binding():
        raise ModuleNotFoundError("No module named 'pynvml'")

    monkeypatch.setattr(gpu_monitor, "_nvml", no_binding)
    with GpuMonitor(device_index=0) as m:
        pass
    assert "unavailable" in m.summary() and "nvidia-ml-py" in m.summary()["unavailable"]


def test_an_unheld_benchmark_counts_no_late_samples(monkeypatch):
    """hold=False times launch and all on purpose (notebook 00): nothing to warn about."""
    import time
    import warnings

    from course_lib.core.timing import benchmark

    _fake_cupy(monkeypatch, [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert benchmark(lambda: time.sleep(1e-3), samples=20, warmup=1, hold=False).late_samples == 0


def test_a_disagreeing_reference_timed_in_turn_is_timed_again_with_the_kernels_it_is_compared_to(monkeypatch):
    """A ratio's two sides come from one interleaved run: a reference whose protocols disagree makes the whole
    comparison run again in turn, never the reference alone; the second run is kept (both sides) only if its
    references agree, else the first run (both sides), the reference flagged."""
    from course_lib.core import timing
    from course_lib.core.timing import Timing, benchmark_interleaved, check_references_in_turn

    monkeypatch.setattr(timing, "benchmark", lambda *a, **k: pytest.fail("a reference was timed alone"))
    blocks = iter([1.0, 1.0, 1.0, 1.0])
    monkeypatch.setattr(timing, "benchmark_blocks", lambda fns: [Timing((next(blocks),) * 10)])
    first = [Timing((1.2,) * 20), Timing((2.0,) * 20)]            # cuBLAS 20% off its back-to-back time
    second = [Timing((1.01,) * 20), Timing((2.2,) * 20)]
    kept = check_references_in_turn(first, [None, None], [0], lambda: second)
    assert [t.median_s for t in kept] == [1.01, 2.2]             # both sides from the second run
    assert kept[0].second["agree"] and [a["ratio"] for a in kept[0].second["attempts"]] == pytest.approx([1.2, 1.01])
    assert kept[1].second is None                                # the course's kernel carries no second protocol
    flagged = check_references_in_turn(first, [None, None], [0], lambda: [Timing((1.1,) * 20), Timing((9.0,) * 20)])
    assert [t.median_s for t in flagged] == [1.2, 2.0] and not flagged[0].second["agree"]
    blocks = iter([1.0])
    fine = check_references_in_turn([Timing((2.0,) * 20), Timing((1.02,) * 20)], [None, None], [1],
                                    lambda: pytest.fail("agreeing references need no second run"))
    assert fine[1].second["agree"] and len(fine[1].second["attempts"]) == 1

    # and the harness itself routes through it: a disagreement re-runs every call in turn
    runs = []
    monkeypatch.setattr(timing, "_timed_in_turn", lambda fns, *a: runs.append(len(fns)) or [Timing((1.2,) * 20)] * len(fns))
    blocks = iter([1.0, 1.0])
    benchmark_interleaved([lambda: None, lambda: None, lambda: None], samples=20, references=[0])
    assert runs == [3, 3]
