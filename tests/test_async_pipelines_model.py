"""The overlap model against hand-worked schedules and numbers, and its calculator headless."""
import itertools
import re

import pytest

from course_lib.core.hardware import KIB, SPECS
from course_lib.models import occupancy, pipeline
from course_lib.widgets.async_pipelines import pipeline_calculator
from course_lib.widgets.base import _fmt_seconds
from calculator_support import assert_message_then_recovers

H200 = SPECS["h200"]


def times(events, unit):
    return [(e.start_s, e.end_s) for e in events if e.unit == unit]


# --------------------------------------------------------------------------- the schedules

def test_serial_is_n_times_the_whole_step():
    s = pipeline.schedule_times(2.0, 3.0, 1.0, iterations=5, stages=3)
    assert s.serial_s == 5 * (2 + 3 + 1)
    assert times(s.serial, "load")[:2] == [(0.0, 2.0), (6.0, 8.0)]
    assert times(s.serial, "store")[-1] == (29.0, 30.0)
    with_latency = pipeline.schedule_times(1.0, 3.0, 1.0, iterations=4, stages=2, latency_s=2.5)
    assert with_latency.serial_s == 4 * (2.5 + 3 + 1)        # synchronous code waits out the whole latency


@pytest.mark.parametrize("load_s, compute_s, store_s, latency",
                         [(2.0, 3.0, 1.0, None), (1.0, 1.0, 1.0, None), (1.0, 2.0, 0.5, 4.0)])
def test_one_stage_is_the_serial_loop(load_s, compute_s, store_s, latency):
    sched = pipeline.schedule_times(load_s, compute_s, store_s, 7, 1, latency)
    assert sched.pipelined == sched.serial
    assert sched.pipelined_s == sched.predicted_s == sched.serial_s and sched.speedup == 1


def test_compute_bound_pipeline_pays_one_load_and_one_store():
    s = pipeline.schedule_times(1.0, 3.0, 1.0, iterations=8, stages=2)
    assert s.pipelined_s == 1 + 8 * 3 + 1 == 1 + 3 + 1 + 7 * 3
    assert times(s.pipelined, "compute") == [(1 + 3 * i, 4 + 3 * i) for i in range(8)]   # the math never waits
    assert s.covered and s.beat_s == 3 and s.speedup == 40 / 26


def test_memory_bound_pipeline_pays_one_compute_and_one_store():
    s = pipeline.schedule_times(4.0, 1.0, 0.5, iterations=6, stages=2)
    assert s.pipelined_s == 6 * 4 + 1 + 0.5
    assert times(s.pipelined, "load") == [(4.0 * i, 4.0 * i + 4) for i in range(6)]    # loads back to back


def test_in_microseconds_the_formula_holds_to_rounding():
    s = pipeline.schedule_times(1.2e-6, 2.7e-6, 0.4e-6, 16, 3)
    assert s.pipelined_s == pytest.approx(1.2e-6 + 2.7e-6 + 0.4e-6 + 15 * 2.7e-6, rel=1e-12)
    assert s.serial_s == pytest.approx(16 * 4.3e-6, rel=1e-12)


def test_uncovered_latency_makes_the_buffers_set_the_pace():
    # Tiles land 3 after issue and the math takes 1: two buffers turn over once per (3 + 1) / 2 = 2.
    s = pipeline.schedule_times(0.5, 1.0, 0.5, iterations=6, stages=2, latency_s=3.0)
    assert times(s.pipelined, "load") == [(0, 3), (0.5, 3.5), (4, 7), (5, 8), (8, 11), (9, 12)]
    assert times(s.pipelined, "compute") == [(3, 4), (4, 5), (7, 8), (8, 9), (11, 12), (12, 13)]
    assert s.pipelined_s == 13.5
    assert not s.covered and s.stages_needed == 4 and s.beat_s == 2.0
    assert s.predicted_s == 3 + 1 + 0.5 + 5 * 2 > s.pipelined_s
    more = pipeline.schedule_times(0.5, 1.0, 0.5, iterations=6, stages=4, latency_s=3.0)
    assert more.covered and more.pipelined_s == more.predicted_s == 3 + 1 + 0.5 + 5 * 1


GRID = list(itertools.product((0.5, 1.0, 3.0), (0.5, 1.0, 3.0), (0.5, 2.0), (0.0, 1.0, 6.0), (1, 5, 12), (2, 3, 5, 8)))


def test_pipelined_lies_between_its_bounds_and_meets_them_when_covered():
    covered = 0
    for case in GRID:
        load_s, compute_s, store_s, extra, n, stages = case
        sched = pipeline.schedule_times(load_s, compute_s, store_s, n, stages, latency_s=load_s + extra)
        floor = sched.latency_s + compute_s + store_s + (n - 1) * max(load_s, compute_s, store_s)
        assert floor - 1e-9 <= sched.pipelined_s <= sched.predicted_s + 1e-9, case
        if sched.covered:
            covered += 1
            assert sched.pipelined_s == pytest.approx(floor, rel=1e-12), case
        assert sched.speedup <= sched.speedup_bound + 1e-12, case
        for unit in pipeline.UNITS:                # one event per (unit, iteration), each unit one at a time
            spans = times(sched.pipelined, unit)
            assert len(spans) == n and all(b[0] >= a[0] for a, b in zip(spans, spans[1:])), case
        loads, computes, stores = (times(sched.pipelined, u) for u in pipeline.UNITS)
        assert all(b[0] >= a[0] + load_s - 1e-12 for a, b in zip(loads, loads[1:])), case     # one transfer at a time
        assert all(b[0] >= a[1] - 1e-12 for a, b in zip(computes, computes[1:])), case
        assert all(comp[0] >= load[1] - 1e-12 for load, comp in zip(loads, computes)), case   # math after landing
        assert all(st[0] >= comp[1] - 1e-12 for comp, st in zip(computes, stores)), case
        assert all(loads[i][0] >= computes[i - stages][1] - 1e-12 for i in range(stages, n)), case  # buffer reuse
    assert 0 < covered < len(GRID)


def test_the_cp_async_order_keeps_one_tile_fewer_in_flight_and_stays_within_its_bounds():
    """Waiting for tile j before issuing tile j + S - 1: tile i also waits for tile i - S + 1 to land."""
    covered = 0
    for case in GRID:
        load_s, compute_s, store_s, extra, n, stages = case
        kw = dict(latency_s=load_s + extra)
        after = pipeline.schedule_times(load_s, compute_s, store_s, n, stages, issue_after_landing=True, **kw)
        refill = pipeline.schedule_times(load_s, compute_s, store_s, n, stages, **kw)
        floor = after.latency_s + compute_s + store_s + (n - 1) * max(load_s, compute_s, store_s)
        assert floor - 1e-9 <= after.pipelined_s <= after.predicted_s + 1e-9, case
        assert after.pipelined_s >= refill.pipelined_s - 1e-9, case          # never ahead of the TMA order
        assert after.stages_needed >= refill.stages_needed and after.beat_s >= refill.beat_s, case
        if after.covered:
            covered += 1
            assert after.pipelined_s == pytest.approx(floor, rel=1e-12), case
        loads = times(after.pipelined, "load")
        assert all(loads[i][0] >= loads[i - stages + 1][1] - 1e-12 for i in range(stages - 1, n)), case
        assert after.serial == refill.serial, case
    assert 0 < covered < len(GRID)


def test_a_short_math_makes_the_two_stage_cp_async_loop_nearly_serial():
    """Notebook 09's streaming loops: two stages in the cp.async order run like one, the TMA's do not."""
    kw = dict(latency_s=3.0)
    after = pipeline.schedule_times(1.0, 0.1, 0.05, 16, 2, issue_after_landing=True, **kw)
    refill = pipeline.schedule_times(1.0, 0.1, 0.05, 16, 2, **kw)
    assert after.beat_s == 3.0 and refill.beat_s == pytest.approx(1.55)
    assert after.pipelined_s > 0.9 * after.serial_s > refill.pipelined_s
    assert (after.stages_needed, refill.stages_needed) == (4, 4)
    # with the math as long as the load, the two orders need the same stages at a steady latency
    same = [pipeline.schedule_times(1.0, 1.0, 0.5, 12, s, latency_s=2.0, issue_after_landing=o) for o in (False, True)
            for s in (2, 3)]
    assert [x.stages_needed for x in same] == [3, 3, 3, 3]


def test_without_extra_latency_two_stages_always_cover():
    for load_s, compute_s, store_s in itertools.product((0.5, 1.0, 3.0), repeat=3):
        sched = pipeline.schedule_times(load_s, compute_s, store_s, 10, 2)
        assert sched.covered and sched.pipelined_s == pytest.approx(
            load_s + compute_s + store_s + 9 * max(load_s, compute_s, store_s), rel=1e-12)


def test_speedup_approaches_its_bound_with_many_iterations():
    s = pipeline.schedule_times(1.0, 1.0, 1.0, iterations=1000, stages=2)
    assert s.speedup_bound == 3 and s.speedup == 3000 / 1002


# --------------------------------------------------------------------------- Little's law

def test_bytes_in_flight_on_an_h200():
    assert pipeline.bytes_in_flight(4.8e12, 600e-9) == pytest.approx(2.88e6, rel=1e-12)
    per_sm = pipeline.bytes_in_flight_per_sm("h200", 600e-9)
    assert per_sm == pytest.approx(2.88e6 / 132, rel=1e-12)
    assert round(per_sm / 1e3, 1) == 21.8
    assert pipeline.bytes_in_flight_per_sm(H200, 600e-9, bandwidth_bytes_per_s=2.4e12) == pytest.approx(per_sm / 2)


@pytest.mark.parametrize("latency, compute, stages", [
    (800e-9, 300e-9, 4), (600e-9, 300e-9, 3), (0.6e-6, 0.2e-6, 4), (100e-9, 300e-9, 2), (300e-9, 300e-9, 2),
])
def test_stages_to_cover(latency, compute, stages):
    assert pipeline.stages_to_cover(latency, compute) == stages
    assert (stages - 1) * compute >= latency * (1 - 1e-9)
    assert stages == 2 or (stages - 2) * compute < latency


def test_a_compute_bound_schedule_needs_the_stages_littles_law_says():
    for latency, compute in [(800e-9, 300e-9), (600e-9, 300e-9), (2e-6, 0.3e-6)]:
        s = pipeline.schedule_times(100e-9, compute, 50e-9, 8, 2, latency_s=latency)
        assert s.stages_needed == pipeline.stages_to_cover(latency, compute)


# --------------------------------------------------------------------------- what the stages cost

def test_one_stage_of_a_128x128x64_bf16_tile():
    assert pipeline.stage_smem_bytes(128, 128, 64, 2) == (128 * 64 + 64 * 128) * 2 == 32_768
    assert pipeline.stage_smem_bytes(128, 128, 32, 2) * 2 == 32 * KIB          # double-buffered, B_K = 32
    assert pipeline.stage_smem_bytes(128, 64, 64, 0.5) == 6144


def test_three_stages_on_an_h200():
    r = pipeline.residency_with_stages("h200", 128, 255, 3, 32 * KIB)
    assert r == occupancy.residency(occupancy.budget(H200), 128, 255, 3 * 32 * KIB)
    assert (r.smem_per_block_bytes, r.smem_per_block_allocated_bytes) == (96 * KIB, 97 * KIB)   # + 1 KiB reserved
    assert r.resident_blocks == 2 and r.limiter == "shared memory and registers"     # 228 // 97 = 2, 255 regs: 2
    six, two = (pipeline.residency_with_stages("h200", 128, 255, s, 32 * KIB) for s in (6, 2))
    assert six.resident_blocks == 1 <= two.resident_blocks == 2


def test_more_stages_cost_blocks():
    blocks = {s: pipeline.residency_with_stages(H200, 128, 128, s, 32 * KIB) for s in (1, 2, 3, 6)}
    assert [blocks[s].resident_blocks for s in (1, 2, 3, 6)] == [4, 3, 2, 1]
    assert blocks[1].limiter == "registers" and blocks[6].limiter == "shared memory"
    assert blocks[6].resident_blocks <= blocks[2].resident_blocks
    with pytest.raises(ValueError, match="shared memory per block"):
        pipeline.residency_with_stages(H200, 128, 128, 8, 32 * KIB)                # 256 KiB > 227 KiB


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, name", [
    (lambda: pipeline.schedule_times(0, 1, 1, 4, 2), "load time"),
    (lambda: pipeline.schedule_times(1, -1, 1, 4, 2), "compute time"),
    (lambda: pipeline.schedule_times(1, 1, float("nan"), 4, 2), "store time"),
    (lambda: pipeline.schedule_times(1, 1, 1, 4, 2, latency_s=0), "load latency"),
    (lambda: pipeline.schedule_times(1, 1, 1, 0, 2), "iterations"),
    (lambda: pipeline.schedule_times(1, 1, 1, 4.0, 2), "iterations"),
    (lambda: pipeline.schedule_times(1, 1, 1, 4, 0), "stages"),
    (lambda: pipeline.schedule_times(1, 1, 1, 4, True), "stages"),
    (lambda: pipeline.bytes_in_flight(0, 1e-6), "bandwidth"),
    (lambda: pipeline.bytes_in_flight(1e12, -1e-6), "latency"),
    (lambda: pipeline.stages_to_cover(800e-9, 0), "compute time per stage"),
    (lambda: pipeline.stage_smem_bytes(0, 128, 64, 2), "B_M"),
    (lambda: pipeline.stage_smem_bytes(128, 128, 64.5, 2), "B_K"),
    (lambda: pipeline.stage_smem_bytes(128, 128, 64, 0), "bytes per element"),
    (lambda: pipeline.residency_with_stages("h200", 128, 128, 0, 32 * KIB), "stages"),
    (lambda: pipeline.residency_with_stages("h200", 128, 128, 2, 0), "stage bytes"),
    (lambda: pipeline.residency_with_stages("h999", 128, 128, 2, 32 * KIB), "gpu"),
    (lambda: pipeline.bytes_in_flight_per_sm("no such gpu", 600e-9), "gpu"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"^{re.escape(name)} must be"):
        call()


def test_a_tile_cannot_land_before_its_transfer_ends():
    with pytest.raises(ValueError, match="^load latency must be at least the load time"):
        pipeline.schedule_times(2.0, 1.0, 1.0, 4, 2, latency_s=1.0)


# --------------------------------------------------------------------------- the calculator

def shown(calc, cls):
    m = re.search(rf'class="{cls}">([^<]*)<', calc.answer.value)
    return m.group(1) if m else None


def timelines(calc):
    return re.findall(r'<svg class="course-pipe-timeline".*?</svg>', calc.answer.value)


def test_calculator_builds_without_a_gpu_and_shows_the_model():
    calc = pipeline_calculator()
    s = calc.compute()
    assert calc.gpu.value == "NVIDIA H200" and calc.iterations.value == 8 and calc.stages.value == 2
    assert shown(calc, "course-serial-time") == _fmt_seconds(s.serial_s) == _fmt_seconds(8 * 4.5e-6)
    assert shown(calc, "course-pipelined-time") == _fmt_seconds(s.pipelined_s)
    assert shown(calc, "course-speedup") == f"{s.speedup:.2f}×"
    assert shown(calc, "course-stages-needed") == "3"
    assert (shown(calc, "course-stage-smem"), shown(calc, "course-smem")) == ("32 KiB", "64 KiB")
    assert (shown(calc, "course-resident"), shown(calc, "course-limiter")) == ("3", "shared memory")
    assert len(timelines(calc)) == 2 and "course-calc-error" not in calc.answer.value


def test_stages_from_one_to_three_change_the_pipelined_time_to_the_models():
    calc = pipeline_calculator(stages=1)
    assert shown(calc, "course-pipelined-time") == shown(calc, "course-serial-time")
    calc.stages.value = 3
    want = pipeline.schedule_times(1e-6, 1.5e-6, 0.5e-6, 8, 3, latency_s=2.5e-6)
    assert shown(calc, "course-pipelined-time") == _fmt_seconds(want.pipelined_s) != shown(calc, "course-serial-time")
    assert _fmt_seconds(want.pipelined_s) == _fmt_seconds(2.5e-6 + 1.5e-6 + 0.5e-6 + 7 * 1.5e-6)
    assert (shown(calc, "course-smem"), shown(calc, "course-resident")) == ("96 KiB", "2")


def test_each_timeline_has_one_box_per_unit_and_iteration():
    calc = pipeline_calculator(iterations=5)
    for svg in timelines(calc):
        boxes = re.findall(r'class="course-pipe-box" data-unit="(\w+)" data-iteration="(\d+)"', svg)
        assert sorted(boxes) == sorted((u, str(i)) for u in pipeline.UNITS for i in range(5))
    calc.iterations.value = 12
    assert all(svg.count('class="course-pipe-box"') == 36 for svg in timelines(calc))
    assert 'class="course-in-flight"' in calc.answer.value          # latency 2.5 µs > 1 µs transfer
    calc.latency.value = 1.0
    assert 'class="course-in-flight"' not in calc.answer.value


def test_the_order_menu_switches_the_pipelined_schedule_to_the_cp_async_order():
    from course_lib.widgets.async_pipelines import ORDERS

    calc = pipeline_calculator(compute_us=0.2, latency_us=2.5)
    refill = shown(calc, "course-pipelined-time")
    calc.order.value = next(k for k, v in ORDERS.items() if v)
    want = pipeline.schedule_times(1e-6, 0.2e-6, 0.5e-6, 8, 2, latency_s=2.5e-6, issue_after_landing=True)
    assert shown(calc, "course-pipelined-time") == _fmt_seconds(want.pipelined_s) != refill
    assert "tile i issued once tile i − S + 1 has landed" in calc.answer.value


@pytest.mark.parametrize("control, value, message", [
    ("load", 0.0, "load time must be a positive number"),
    ("compute_time", -1.0, "compute time must be a positive number"),
    ("store", 0.0, "store time must be a positive number"),
    ("latency", 0.5, "load latency must be at least the load time"),
])
def test_impossible_timing_is_a_message_not_a_traceback(control, value, message):
    shown = assert_message_then_recovers(pipeline_calculator(), control, value, message)
    assert "<svg" not in shown


@pytest.mark.parametrize("control, value, message", [
    ("block_m", 0, "B_M must be a positive whole number"),
    ("stages", 8, "shared memory per block is more than"),
    ("registers", 300, "registers per thread must be between"),
])
def test_stages_that_do_not_fit_are_a_message_beside_the_timelines(control, value, message):
    calc = pipeline_calculator()
    getattr(calc, control).value = value
    assert "course-calc-error" in calc.answer.value and message in calc.answer.value
    assert len(timelines(calc)) == 2 and shown(calc, "course-resident") is None
