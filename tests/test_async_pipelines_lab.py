"""Notebook 09's pieces that need no GPU: the measured-overlap arithmetic, what the record shows that
no claim checks (notebooks/claims/09_async_pipelines.py holds its figures), the analysis tables, and the
exercise checks."""
import pytest

from course_lib.exercises.async_pipelines import check_stages, check_winner, fewest_stages
from course_lib.labs import async_pipelines as lab_pipeline
from course_lib.launch import pipeline as pipeline_launch
from course_lib.measure import experiments
from course_lib.models import pipeline


def test_interval_union_merges_overlaps_and_rejects_reversed_intervals():
    assert pipeline.interval_union([(3, 4), (0, 1), (0.5, 2)]) == [(0, 2), (3, 4)]
    assert pipeline.covered_length([(0, 2), (1, 3), (5, 6)]) == 4
    with pytest.raises(ValueError, match="end before it starts"):
        pipeline.interval_union([(2, 1)])


def test_overlap_fraction_is_zero_for_the_serial_schedule_and_one_when_hidden():
    serial = pipeline.schedule_times(1.0, 1.0, 1e-9, 6, 1)
    copies = [(e.start_s, e.end_s) for e in serial.serial if e.unit == "load"]
    maths = [(e.start_s, e.end_s) for e in serial.serial if e.unit == "compute"]
    assert pipeline.overlap_fraction(copies, maths) == pytest.approx(0.0)
    assert pipeline.overlap_fraction([(1, 2)], [(0, 3)]) == 1.0
    assert pipeline.overlap_fraction([(0, 4)], [(1, 2), (3, 5)]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no time"):
        pipeline.overlap_fraction([(1, 1)], [(0, 2)])


def test_overlap_of_the_models_pipelined_schedule_grows_with_stages():
    def frac(stages):
        s = pipeline.schedule_times(1.0, 1.0, 1e-9, 20, stages, latency_s=2.0)
        ev = s.pipelined if stages > 1 else s.serial
        return pipeline.overlap_fraction([(e.start_s, e.end_s) for e in ev if e.unit == "load"],
                                         [(e.start_s, e.end_s) for e in ev if e.unit == "compute"])
    assert frac(1) == pytest.approx(0.0) and frac(2) < frac(3) and frac(3) > 0.5


@pytest.fixture(scope="module")
def recorded():
    return {name: experiments.replay(f"pipeline.{name}", experiments.resolve_params(f"pipeline.{name}"), "h200")
            for name in ("latency", "streaming", "timeline", "proxy_fence")}


def test_check_stages_accepts_the_fewest_and_rejects_others():
    assert fewest_stages(1.8e-6, 0.6e-6, 32768, 163840) == 4
    assert fewest_stages(1.8e-6, 0.4e-6, 32768, 163840) is None
    assert check_stages(1.8e-6, 0.6e-6, 32768, 163840, 4).correct
    assert not check_stages(1.8e-6, 0.6e-6, 32768, 163840, 5).correct
    assert not check_stages(1.8e-6, 0.6e-6, 32768, 163840, 3).correct
    assert not check_stages(1.8e-6, 0.6e-6, 32768, 163840, "does not fit").correct
    assert check_stages(1.8e-6, 0.4e-6, 32768, 163840, "does not fit").correct
    assert not check_stages(1.8e-6, 0.4e-6, 32768, 163840, 6).correct
    assert not check_stages(1.8e-6, 0.4e-6, 32768, 163840, None).correct


def test_check_winner_follows_the_measurement_and_judges_each_item(recorded):
    st = recorded["streaming"]
    sync4 = {"kernel": "stream_sync", "blocks_per_sm": 4, "stages": None}   # 16 KiB in flight, 32 warps
    async3 = {"kernel": "stream_cp_async", "blocks_per_sm": 1, "stages": 3}   # 32 KiB, 8 warps
    right = (4 * 256 * 16, 2 * 16 * 1024)
    assert check_winner(st, sync4, async3, "second", right).correct
    assert "GB/s" in check_winner(st, sync4, async3, "second", right)           # the measurement, once all are right
    assert not check_winner(st, sync4, async3, "second").correct                # the bytes are part of the answer
    assert not check_winner(st, sync4, async3, None, right).correct
    for wrong in (check_winner(st, sync4, async3, "first", right),
                  check_winner(st, sync4, async3, "second", (right[0], 3 * 16 * 1024))):   # S tiles, not S - 1
        assert not wrong.correct and "not right" in wrong
        assert "GB/s" not in wrong and "49,152" not in wrong and "32,768" not in wrong   # never the answer
    assert not check_winner(st, sync4, {"kernel": "stream_sync", "blocks_per_sm": 99, "stages": None}, "first",
                            right).correct


def test_chase_hops_warm_a_cache_sized_footprint_and_cap_a_larger_one():
    assert pipeline_launch.chase_hops(16 << 20, 50 << 20) == 2 * (16 << 20) // 128
    assert pipeline_launch.chase_hops(1 << 30, 50 << 20) == 1 << 15
    assert lab_pipeline.max_bytes_in_flight("stream_sync", 8, None) == 8 * 256 * 16
    assert lab_pipeline.max_bytes_in_flight("stream_cp_async", 1, 1) == lab_pipeline.max_bytes_in_flight("stream_cp_async", 1, 2)


def test_bytes_in_flight_follow_each_loop_s_order():
    """stream_cp_async waits for tile j before it issues j + S - 1: S - 1 tiles out while it waits.
    stream_bulk refills a slot as soon as it is read: S tiles out while it waits for one."""
    tile = lab_pipeline.TILE_BYTES
    for s in (2, 3, 4, 8):
        assert lab_pipeline.max_bytes_in_flight("stream_cp_async", 1, s) == (s - 1) * tile
        assert lab_pipeline.max_bytes_in_flight("stream_bulk", 1, s) == s * tile
        assert lab_pipeline.max_bytes_in_flight("stream_bulk", 2, s) == 2 * s * tile
    assert lab_pipeline.max_bytes_in_flight("stream_bulk", 1, 1) == tile
    assert lab_pipeline.max_bytes_in_flight("stream_cp_async", 1, 1) == tile


def test_streaming_rows_count_from_the_loop_not_from_the_record(recorded):
    """The record's stored count predates the correction; the table counts S tiles for the TMA."""
    st = recorded["streaming"]
    rows = lab_pipeline.streaming_rows(st, 340.0)
    bulk2 = next(r for r in rows if r["kernel"] == "stream_bulk" and r["blocks/SM"] == 1 and r["stages"] == 2)
    cp3 = next(r for r in rows if r["kernel"] == "stream_cp_async" and r["blocks/SM"] == 1 and r["stages"] == 3)
    assert bulk2["bytes in flight/SM"] == cp3["bytes in flight/SM"] == 2 * lab_pipeline.TILE_BYTES
