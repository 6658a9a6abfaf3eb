"""Launch geometry and divergence models against the lesson's fixtures; notebook 02's calculator and
exercise checks."""
import re

import pytest

from course_lib.exercises import threads_warps as ex
from course_lib.models import launch_geometry as lg
from course_lib.widgets import threads_warps as widgets_threads_warps


def test_lessons_tile_grid_is_1024_blocks():
    g = lg.tile_grid(4096, 4096, 128, 128)
    assert (g.tiles_m, g.tiles_n, g.blocks) == (32, 32, 1024) and g.tile_edge_efficiency == 1.0


def test_pid_decoding():
    g = lg.tile_grid(4096, 4096, 128, 128)
    t = lg.program_tile(g, 33)
    assert (t.pid_m, t.pid_n, t.m0, t.n0) == (1, 1, 128, 128) and not t.is_edge
    last = lg.program_tile(lg.tile_grid(1000, 700, 128, 64), 87)
    assert (last.pid_m, last.pid_n, last.valid_rows, last.valid_cols) == (7, 10, 104, 60)
    assert last.masked_elements == 128 * 64 - 104 * 60


def test_owner_of_agrees_with_program_tile():
    g = lg.tile_grid(1000, 700, 128, 64)
    for row, col in ((0, 0), (127, 63), (128, 64), (999, 699), (500, 333)):
        t = lg.program_tile(g, lg.owner_of(g, row, col))
        assert t.m0 <= row < t.m0 + t.valid_rows and t.n0 <= col < t.n0 + t.valid_cols


@pytest.mark.parametrize("call, message", [
    (lambda: lg.tile_grid(0, 10, 4, 4), "M must be a positive"),
    (lambda: lg.tile_grid(10, 10, 4, -1), "BN must be a positive"),
    (lambda: lg.program_tile(lg.tile_grid(10, 10, 4, 4), 9), "between 0 and 8"),
    (lambda: lg.owner_of(lg.tile_grid(10, 10, 4, 4), 10, 0), "outside"),
    (lambda: lg.operand_trace("A", 10, 10, 10, 4, 4, 4, 10, 1, 0, 3, 0, 32), "stage must be between 0 and 2"),
    (lambda: lg.operand_trace("C", 10, 10, 10, 4, 4, 4, 10, 1, 0, 0, 0, 32), "operand must be"),
    (lambda: lg.operand_trace("A", 10, 10, 10, 4, 4, 4, 10, 1, 0, 0, 1, 32), "warp 1 does not exist"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_lane_addresses_follow_the_lessons_stride_formula():
    # A row-major 1000 x 300, tile 64 x 32 at (m0, k0) = (960, 288): a_offset = (m0+i)*stride_am + (k0+j)*stride_ak
    tile, trace = lg.operand_trace("A", 1000, 700, 300, 64, 64, 32, 300, 1, pid=175, stage=9, warp=3,
                                   threads_per_block=256)
    assert (tile.m0, tile.n0) == (960, 640)
    for a in trace:
        i, j = divmod(96 + a.lane, 32)
        assert (a.local_row, a.local_col) == (i, j)
        assert a.offset_elements == (960 + i) * 300 + (288 + j) * 1
        assert a.address_bytes == 4 * a.offset_elements
        assert a.valid == (960 + i < 1000 and 288 + j < 300)
    assert lg.summarize(trace).masked == 20


def test_column_major_b_and_rows_past_the_edge():
    # B (K x N) column-major: stride_bk = 1, stride_bn = K. Block 175's n0 = 640: columns 640..703, N = 700.
    # Warp 1 takes tile row 0, columns 32..63 of the 32 x 64 B tile: C columns 672..703.
    _, trace = lg.operand_trace("B", 1000, 700, 300, 64, 64, 32, 1, 300, pid=175, stage=0, warp=1,
                                threads_per_block=256)
    assert all(a.offset_elements == a.row + a.col * 300 for a in trace)
    assert [a.valid for a in trace] == [True] * 28 + [False] * 4     # columns 700..703 are past N
    _, rows_out = lg.operand_trace("A", 1000, 700, 300, 64, 64, 32, 300, 1, pid=175, stage=0, warp=7,
                                   threads_per_block=1024)
    assert all(a.valid for a in rows_out)               # row 967 < 1000
    _, beyond = lg.operand_trace("A", 970, 700, 300, 64, 64, 32, 300, 1, pid=175, stage=0, warp=15,
                                 threads_per_block=1024)
    assert not any(a.valid for a in beyond)              # tile row 15: A row 975 >= M = 970


def test_idle_lanes_when_the_tile_is_smaller_than_the_block():
    _, trace = lg.operand_trace("A", 64, 64, 64, 8, 8, 4, 64, 1, pid=0, stage=0, warp=0, threads_per_block=64)
    s = lg.summarize(trace)
    assert (s.loading, s.idle) == (32, 0)
    _, trace = lg.operand_trace("A", 64, 64, 64, 8, 8, 4, 64, 1, pid=0, stage=0, warp=1, threads_per_block=64)
    assert lg.summarize(trace).idle == 32


def test_sectors_of_an_aligned_warp_load():
    _, trace = lg.operand_trace("A", 128, 128, 128, 64, 64, 32, 128, 1, pid=0, stage=0, warp=0,
                                threads_per_block=256)
    s = lg.summarize(trace)
    assert (s.bytes_requested, s.sectors) == (128, 4)    # the lesson's aligned fp32 warp: 4 sectors


@pytest.mark.parametrize("label, factor, efficiency", [
    ("one path for every lane", 1.0, 1.0), ("2 paths, split by warp", 1.0, 1.0),
    ("2 paths, split inside each warp", 2.0, 0.5), ("4 paths, split by warp", 1.0, 1.0),
    ("4 paths, split inside each warp", 4.0, 0.25), ("half the warps skip the work", 0.5, 1.0),
    ("half the lanes of every warp skip the work", 1.0, 0.5),
])
def test_divergence_model(label, factor, efficiency):
    assert lg.divergence_factor(label) == factor
    assert lg.lane_efficiency(label) == efficiency


def test_data_dependent_branch_almost_always_splits():
    f = lg.divergence_factor("2 paths chosen by random data")
    assert 2 - 1e-9 < f < 2.0


def test_modes_match_the_kernels_switch():
    from course_lib.core import cuda

    src = cuda.kernel_source("warps", "divergence")
    assert [m.mode for m in lg.DIVERGENCE_MODES.values()] == list(range(8))
    for mode in range(7):
        assert f"case {mode}:" in src


# --------------------------------------------------------------------------- the calculator

def shown(calc, cls):
    m = re.search(rf'class="{cls}">([^<]*)<', calc.answer.value)
    return m.group(1) if m else None


def test_calculator_shows_the_models_values():
    c = widgets_threads_warps.launch_geometry_calculator()
    c.m.value, c.n.value, c.k.value = 1000, 700, 300
    c.bm.value, c.bn.value, c.bk.value = 64, 64, 32
    c.pid.value, c.stage.value, c.warp.value = 175, 9, 3
    assert (shown(c, "course-grid-m"), shown(c, "course-grid-n"), shown(c, "course-blocks")) == ("16", "11", "176")
    assert (shown(c, "course-pid-m"), shown(c, "course-pid-n"), shown(c, "course-m0")) == ("15", "10", "960")
    assert shown(c, "course-masked") == "20" and shown(c, "course-loading") == "12"
    assert "masked (past the edge)" in c.answer.value


def test_calculator_operand_switch_sets_row_major_strides():
    c = widgets_threads_warps.launch_geometry_calculator(n=700, k=300)
    c.operand.value = "B"
    assert (c.stride_row.value, c.stride_col.value) == (700, 1)
    c.operand.value = "A"
    assert (c.stride_row.value, c.stride_col.value) == (300, 1)


@pytest.mark.parametrize("field, value, message", [
    ("m", 0, "M must be a positive"), ("bk", 0, "BK must be a positive"),
    ("pid", 10_000, "program id must be between"), ("warp", 9, "does not exist"), ("stage", -1, "stage must be"),
    ("threads", 4096, "at most 1,024 threads"), ("stride_row", -300, "row stride must be a whole number"),
    ("stride_col", -1, "column stride must be"),
])
def test_calculator_bad_input_shows_a_message(field, value, message):
    c = widgets_threads_warps.launch_geometry_calculator()
    setattr(getattr(c, field), "value", value)
    assert "course-calc-error" in c.answer.value and message in c.answer.value
    assert "Traceback" not in c.answer.value


# --------------------------------------------------------------------------- exercises

def test_tile_owner_exercise():
    right = ex.tile_owner_answer()
    assert right == {"pid_m": 7, "pid_n": 8, "m0": 896, "n0": 512, "valid_rows": 104, "valid_cols": 64}
    assert ex.check_tile_owner(right).correct
    assert not ex.check_tile_owner(right | {"pid_n": 5}).correct
    assert not ex.check_tile_owner(None).correct and not ex.check_tile_owner("7, 8").correct


def test_masked_lanes_exercise():
    assert ex.check_masked_lanes(4).correct      # B's warp 3: 28 columns inside N = 700, 4 past it
    assert not ex.check_masked_lanes(20).correct   # the A trace's answer, printed in the notebook, is not this one
    assert not ex.check_masked_lanes(12).correct and not ex.check_masked_lanes("x").correct


def test_divergence_exercise():
    right = {q: ex.divergence_answer(q) for q in ex.DIVERGENCE_QUESTIONS}
    loop, uniform, partial, data = ex.DIVERGENCE_QUESTIONS
    assert (right[loop], right[uniform], right[partial]) == (3.0, 1.0, 1.5)
    assert abs(right[data] - (2 - (63 / 64) ** 32 - (1 / 64) ** 32)) < 1e-12   # 1.396
    assert ex.check_divergence(right).correct
    assert ex.check_divergence(right | {data: 1.39}).correct       # rounded by hand
    assert not ex.check_divergence({q: 1.0 for q in right}).correct
    assert not ex.check_divergence("2").correct
    # The wrong readings each question is there to catch: the loop's average lane (1.5) or its total
    # (0 + 1 + 2 + 3 = 6); a split counted per block, not per warp (2); one path for the rare value (1).
    for trap in ({loop: 1.5}, {loop: 6}, {uniform: 2}, {partial: 2}, {data: 1.0}, {data: 2.0}):
        verdict = ex.check_divergence(right | trap)
        assert not verdict.correct and next(iter(trap)) in verdict


def test_the_divergence_questions_are_not_rows_of_the_table_above_them():
    table = {label for label in lg.DIVERGENCE_MODES}
    assert not any(label in q for q in ex.DIVERGENCE_QUESTIONS for label in table)


def test_the_block_order_figure_counts_the_waves_the_model_predicts(monkeypatch):
    from course_lib.labs import threads_warps as lab_warps
    from course_lib.measure import experiments

    monkeypatch.setenv("COURSE_MODE", "replay")
    waves = lab_warps.launch_waves(experiments.run("warps.block_order"))
    assert (waves["blocks"], waves["slots"], waves["waves"]) == (3969, 1056, 4)
    assert abs(waves["last_fill"] - 0.7585) < 1e-3
