"""The tile and wave quantization model against hand-worked numbers, and its calculator headless."""
import re

import numpy as np
import pytest

from course_lib.core.hardware import SPECS
from course_lib.launch import gemm_bf16
from course_lib.models import occupancy, waves
from course_lib.widgets.waves import MAX_DRAWN_TILES, wave_calculator
from calculator_support import assert_message_then_recovers

H200 = SPECS["h200"]


# --------------------------------------------------------------------------- waves

def test_1024_blocks_on_108_sms_three_resident():
    s = waves.schedule(1024, 108, 3)
    assert (s.slots, s.waves, s.last_wave_blocks) == (324, 4, 52)
    assert s.last_wave_fill == pytest.approx(52 / 324, rel=1e-12)
    assert 100 * s.last_wave_fill == pytest.approx(16.049382716049383, rel=1e-12)
    assert s.wave_efficiency == pytest.approx(1024 / (4 * 324), rel=1e-12)


def test_one_block_past_a_full_wave_costs_a_second_wave():
    assert waves.schedule(1024, 1024, 1).waves == 1
    s = waves.schedule(1025, 1024, 1)
    assert (s.waves, s.last_wave_blocks) == (2, 1)
    assert s.last_wave_fill == 1 / 1024


# --------------------------------------------------------------------------- tiles

def test_129_square_on_128_tiles_is_a_quarter_useful():
    g = waves.tile_grid(129, 129, 128, 128)
    assert (g.tiles_m, g.tiles_n, g.tiles, g.blocks) == (2, 2, 4, 4)
    assert g.tile_edge_efficiency == pytest.approx(129 ** 2 / 256 ** 2, rel=1e-12)
    assert round(100 * g.tile_edge_efficiency, 2) == 25.39
    assert g.tile_extent(0, 0) == (128, 128) and g.tile_extent(1, 1) == (1, 1)


def test_split_k_multiplies_blocks_not_tiles_or_flops():
    g = waves.tile_grid(4096, 4096, 128, 128, split_k=4)
    assert (g.tiles, g.blocks) == (1024, 4096)
    assert g.useful_flop(4096) == g.issued_flop(4096) == 2 * 4096 ** 3
    assert waves.tile_grid(4097, 4096, 128, 128).issued_flop(1) == 2 * 4224 * 4096


@pytest.mark.parametrize("n, tiles, n_waves, edge, wave_eff, percent", [
    (1024, 64, 1, 1.0, 64 / 132, 48),
    (1408, 121, 1, 1.0, 121 / 132, 92),
    (1536, 144, 2, 1.0, 144 / 264, 55),
    (4096, 1024, 8, 1.0, 1024 / 1056, 97),
    (4097, 1089, 9, 4097 ** 2 / (33 * 128) ** 2, 1089 / 1188, 86),
    (4224, 1089, 9, 1.0, 1089 / 1188, 92),
])
def test_square_gemms_on_132_sms_one_tile_each(n, tiles, n_waves, edge, wave_eff, percent):
    q = waves.quantize(n, n, 128, 128, sm_count=132, resident_blocks_per_sm=1)
    assert (q.grid.tiles, q.schedule.waves) == (tiles, n_waves)
    assert q.grid.tile_edge_efficiency == pytest.approx(edge, rel=1e-12)
    assert q.schedule.wave_efficiency == pytest.approx(wave_eff, rel=1e-12)
    assert q.useful_fraction == pytest.approx(edge * wave_eff, rel=1e-12)
    assert round(100 * q.useful_fraction) == percent


def test_4097_is_94_percent_useful_in_its_tiles_and_86_overall():
    q = waves.quantize(4097, 4097, 128, 128, 132, 1)
    assert round(100 * q.grid.tile_edge_efficiency) == 94
    assert round(100 * q.schedule.wave_efficiency) == 92
    assert q.useful_fraction == pytest.approx(0.862, abs=5e-4)


def test_wave_of_tile_follows_launch_order():
    q = waves.quantize(4097, 4097, 128, 128, 132, 1)      # 33 tiles a row: 4 rows a wave
    assert waves.wave_of_tile(q, 0, 0) == 1
    assert waves.wave_of_tile(q, 3, 32) == 1 and waves.wave_of_tile(q, 4, 0) == 2
    assert waves.wave_of_tile(q, 32, 32) == q.schedule.waves == 9
    split = waves.quantize(4096, 4096, 128, 128, 132, 1, split_k=2)   # tile 0's second slice is block 1024
    assert waves.wave_of_tile(split, 0, 0) == 1024 // 132 + 1
    with pytest.raises(ValueError, match="outside"):
        waves.wave_of_tile(q, 33, 0)


# --------------------------------------------------------------------------- residency, time, cliffs, padding

def test_resident_blocks_come_from_the_occupancy_model():
    expected = occupancy.residency(occupancy.budget(H200), 256, 64, 48 * 1024).resident_blocks
    assert waves.resident_blocks_per_sm("NVIDIA H200", 256, 64, 48 * 1024) == expected == 4
    assert waves.resident_blocks_per_sm(H200, 128, 251, 98304) == 2
    with pytest.raises(ValueError, match="shared memory"):
        waves.resident_blocks_per_sm("h200", 256, 32, 300 * 1024)


def test_predicted_seconds_is_waves_times_the_wave_time():
    assert waves.predicted_seconds(9, 25e-6) == pytest.approx(225e-6, rel=1e-12)
    q = waves.quantize(1536, 1536, 128, 128, 132, 1)
    assert waves.predicted_seconds(q.schedule.waves, 1e-3) == 2e-3


def test_cliffs_at_m_4096_on_132_sms():
    found = waves.cliffs(4096, range(1024, 4609, 64), 128, 128, sm_count=132, resident_blocks_per_sm=1)
    wave_steps = [c for c in found if c.adds_wave]
    # 32 tile rows; N = 1088 makes 9 tile columns = 288 tiles > 264 = two waves' slots.
    assert [c.n for c in wave_steps] == [1088, 1600, 2112, 2624, 3136, 3648, 4288]
    first = wave_steps[0]
    assert (first.n_before, first.tiles_before, first.tiles, first.waves_before, first.waves) == (1024, 256, 288, 2, 3)
    last = wave_steps[-1]                       # 1,056 tiles fill 8 waves exactly; 1,088 spill into a 9th
    assert (last.n_before, last.tiles_before, last.tiles, last.waves) == (4224, 1056, 1088, 9)
    # the tile count steps each time N passes a multiple of 128; most of those steps add no wave
    assert [c.n for c in found] == list(range(1088, 4609, 128))
    assert not any(c.adds_wave for c in found if c.n == 1216)


def test_cliffs_accept_numpy_sizes_and_want_increasing_n():
    assert waves.cliffs(4096, np.arange(1024, 1153, 64), 128, 128, 132, 1)[0].n == 1088
    with pytest.raises(ValueError, match="increasing"):
        waves.cliffs(4096, [2048, 1024], 128, 128, 132, 1)


def test_padding_a_vocabulary_to_the_tile():
    p = waves.pad_to_tile(50_257, 128)
    assert (p.padded, p.padding) == (50_304, 47)
    assert p.padding_fraction == pytest.approx(47 / 50_304, rel=1e-12)
    assert waves.pad_to_tile(50_257, 128).padded == waves.tile_grid(50_257, 1, 128, 1).issued_m
    assert waves.pad_to_tile(4096, 128).padding == 0


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, name", [
    (lambda: waves.tile_grid(0, 128, 128, 128), "M"),
    (lambda: waves.tile_grid(128, -1, 128, 128), "N"),
    (lambda: waves.tile_grid(128, 128, 0, 128), "BM"),
    (lambda: waves.tile_grid(128, 128, 128, 64.5), "BN"),
    (lambda: waves.tile_grid(128, 128, 128, 128, split_k=0), "split-K"),
    (lambda: waves.tile_grid(128.0, 128, 128, 128), "M"),
    (lambda: waves.schedule(True, 132, 1), "blocks"),
    (lambda: waves.schedule(100, 0, 1), "SM count"),
    (lambda: waves.schedule(100, 132, 0), "resident blocks per SM"),
    (lambda: waves.quantize(128, 128, 128, 128, 132, 2.5), "resident blocks per SM"),
    (lambda: waves.tile_grid(128, 128, 128, 128).useful_flop(0), "K"),
    (lambda: waves.predicted_seconds(0, 1.0), "waves"),
    (lambda: waves.predicted_seconds(3, 0.0), "seconds per wave"),
    (lambda: waves.pad_to_tile(50_257, 0), "tile"),
    (lambda: waves.pad_to_tile(-5, 128), "size"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"^{re.escape(name)} must be a positive"):
        call()


# --------------------------------------------------------------------------- the calculator

def shown(calc, cls):
    m = re.search(rf'class="{cls}">([^<]*)<', calc.answer.value)
    return m.group(1) if m else None


def expected(q: waves.Quantization) -> dict[str, str]:
    return {"course-tiles": f"{q.grid.tiles:,}", "course-blocks": f"{q.grid.blocks:,}",
            "course-slots": f"{q.schedule.slots:,}", "course-waves": f"{q.schedule.waves:,}",
            "course-last-wave": f"{q.schedule.last_wave_blocks:,}",
            "course-tile-edge": f"{100 * q.grid.tile_edge_efficiency:.2f}%",
            "course-last-fill": f"{100 * q.schedule.last_wave_fill:.2f}%",
            "course-wave-efficiency": f"{100 * q.schedule.wave_efficiency:.2f}%",
            "course-useful": f"{100 * q.useful_fraction:.2f}%"}


def test_calculator_builds_without_a_gpu_and_shows_the_default():
    calc = wave_calculator()
    assert calc.gpu.value == "NVIDIA H200"
    assert (shown(calc, "course-tiles"), shown(calc, "course-waves"), shown(calc, "course-useful")) == \
        ("1,024", "8", "96.97%")
    assert shown(calc, "course-useful-flop") == f"{2 * 4096 ** 3:,}"
    assert "<svg" in calc.answer.value and "course-capped" not in calc.answer.value


@pytest.mark.parametrize("m, n, bm, bn, split_k, resident", [
    (4097, 4097, 128, 128, 1, 1), (1536, 1536, 128, 128, 1, 1), (1000, 700, 64, 256, 3, 2), (129, 129, 128, 128, 1, 4),
])
def test_calculator_follows_its_controls(m, n, bm, bn, split_k, resident):
    calc = wave_calculator()
    calc.m.value, calc.n.value, calc.block_m.value, calc.block_n.value = m, n, bm, bn
    calc.split_k.value, calc.resident.value = split_k, resident
    want = expected(waves.quantize(m, n, bm, bn, H200.sm_count, resident, split_k))
    assert {cls: shown(calc, cls) for cls in want} == want


def test_slider_and_gpu_drive_the_answer():
    calc = wave_calculator()
    calc.n_slider.value = 1536
    calc.m.value = 1536
    assert calc.n.value == 1536 and shown(calc, "course-waves") == "2"
    calc.gpu.value = SPECS["a100-sxm"].name
    assert shown(calc, "course-slots") == "108"
    assert shown(calc, "course-waves") == str(waves.quantize(1536, 1536, 128, 128, 108, 1).schedule.waves)
    calc.n.value = 100_000                      # past the slider: the text box still rules
    assert shown(calc, "course-tiles") == f"{12 * 782:,}"


def test_drawing_colours_tiles_by_wave_and_shades_padding():
    calc = wave_calculator(m=4097, n=4097)
    svg = calc.answer.value
    assert set(re.findall(r'data-wave="(\d+)"', svg)) == {str(w) for w in range(1, 10)}
    assert svg.count('class="course-padding"') == 2             # the right column and the bottom row
    calc.n.value = 4096
    assert calc.answer.value.count('class="course-padding"') == 1


def test_drawing_is_capped_and_says_so():
    calc = wave_calculator(m=128 * (MAX_DRAWN_TILES + 10), n=4096)
    assert "course-capped" in calc.answer.value
    rows = {y for y in re.findall(r'class="course-tile-run"[^>]* y="(\d+)"', calc.answer.value)}
    assert len(rows) == MAX_DRAWN_TILES


@pytest.mark.parametrize("control, value, name", [
    ("block_m", 0, "BM"), ("block_n", -128, "BN"), ("m", 0, "M"), ("n", 0, "N"), ("k", 0, "K"),
    ("resident", 0, "resident blocks per SM"), ("split_k", 0, "split-K"),
])
def test_impossible_input_is_a_message_not_a_traceback(control, value, name):
    assert_message_then_recovers(wave_calculator(), control, value, f"{name} must be a positive whole number")


def test_split_k_slices_are_never_empty():
    """The bf16 kernel's TMA path would hang on a slice with no K tile; the host refuses such splits."""

    assert gemm_bf16.k_tiles(72) == 2 and gemm_bf16.max_split(72) == 2
    assert gemm_bf16.empty_slices(72, 3) and not gemm_bf16.empty_slices(72, 2)
    assert not gemm_bf16.empty_slices(16384, 7)                 # the recorded remedy: 256 tiles in 7 slices
    assert gemm_bf16.empty_slices(448, 6) and gemm_bf16.max_split(448) == 7   # 7 tiles: 6 slices leave one empty


# --------------------------------------------------------------------------- the SM-round model

def test_sm_rounds_count_blocks_per_sm_with_the_grid_spread_first():
    s = waves.schedule(288, 132, 2)                      # 4096 x 1152 on 128 x 128 tiles
    assert (s.waves, s.sm_rounds) == (2, 3)
    assert s.sm_round_efficiency == pytest.approx(288 / 396)
    assert waves.schedule(256, 132, 2).sm_rounds == 2    # one wave of slots, two rounds
    assert waves.schedule(100, 132, 1).sm_rounds == waves.schedule(100, 132, 1).waves == 1


def test_split_k_4_loses_to_3_under_the_sm_round_model_and_wins_under_the_slot_model():
    """768 x 768 x 16384 on 132 SMs at 2 blocks each: 108 blocks fit one round, 144 need two."""
    q3, q4 = (waves.quantize(768, 768, 128, 128, 132, 2, s) for s in (3, 4))
    assert q4.useful_fraction > q3.useful_fraction and q4.slot_model_tiles < q3.slot_model_tiles
    assert (q3.schedule.sm_rounds, q4.schedule.sm_rounds) == (1, 2)
    assert q3.busiest_sm_tiles == pytest.approx(1 / 3) and q4.busiest_sm_tiles == pytest.approx(1 / 2)
    assert waves.predicted_seconds_sm_rounds(q4, 185e-6) > waves.predicted_seconds_sm_rounds(q3, 185e-6)


@pytest.mark.parametrize("grid, rounds", [(270, 3), (264, 3), (135, 4), (132, 3), (90, 3)])
def test_a_persistent_grid_s_rounds_are_its_busiest_sm_s_tiles(grid, rounds):
    assert waves.persistent_sm_rounds(270, grid, 132) == rounds


def test_calculator_shows_both_models_and_a_time_given_a_tile_s_cost():
    calc = wave_calculator(m=768, n=768, k=16384, split_k=4, resident_blocks_per_sm=2)
    assert shown(calc, "course-sm-rounds") == "2" and shown(calc, "course-round-useful") == "54.55%"
    assert shown(calc, "course-round-us") is None               # no time until a tile's cost is given
    calc.tile_us.value = 185.0
    assert shown(calc, "course-round-us") == "92.5 µs" and shown(calc, "course-slot-us") == "92.5 µs"
    calc.split_k.value = 3
    assert shown(calc, "course-round-us") == "61.7 µs" and shown(calc, "course-slot-us") == "123.3 µs"


def test_the_split_time_exercise_wants_the_sm_round_prediction_in_us():
    from course_lib.exercises.waves import check_split_time, sm_round_split_time_s
    from course_lib.measure import experiments

    r = experiments.replay("waves.remedies", experiments.resolve_params("waves.remedies"), "h200")
    base = r.case("split_k: course 128x128, one tile per block").median_s
    assert sm_round_split_time_s(r, 4) == pytest.approx(base * 2 / 4)     # 144 blocks: two rounds of K/4
    assert sm_round_split_time_s(r, 3) == pytest.approx(base / 3)         # 108 blocks: one round of K/3
    assert check_split_time(r, 4, base * 1e6 / 2).correct
    assert not check_split_time(r, 4, base * 1e6 / 4).correct             # the slot count, not the SM count
    assert not check_split_time(r, 4, base / 2).correct                   # seconds, not µs
    assert "seconds" in check_split_time(r, 4, base / 2)
    assert not check_split_time(r, 4, None).correct and not check_split_time(r, 4, "fast").correct
