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
