"""The calculators headless: moving a control shows the model's answer; bad input a message."""
import re

import pytest

from course_lib.core.hardware import SPECS
from course_lib.models import roofline
from course_lib.widgets import roofline as roofline_widget
from calculator_support import assert_message_then_recovers


def shown(calc, cls):
    m = re.search(rf'class="{cls}">([^<]*)<', calc.answer.value)
    return m.group(1) if m else None


@pytest.fixture
def calc():
    return roofline_widget.roofline_calculator()


def test_default_is_the_lessons_b200_at_4096_fp16(calc):
    assert calc.gpu.value == roofline_widget.ROUND_B200.name
    assert shown(calc, "course-intensity") == "1,365.3"
    assert shown(calc, "course-ridge") == "250.0"
    assert shown(calc, "course-binding") == "compute"
    assert shown(calc, "course-crossover") == "750"


@pytest.mark.parametrize("n, dtype", [(64, "fp16"), (512, "fp8"), (8192, "fp32"), (16384, "fp4")])
def test_setting_controls_shows_the_models_value(calc, n, dtype):
    calc.n.value = n
    calc.dtype.value = dtype
    e = roofline.square_gemm(n, dtype, roofline_widget.ROUND_B200)
    assert shown(calc, "course-intensity") == f"{e.bound.intensity:,.1f}"
    assert shown(calc, "course-binding") == e.bound.binding_roof
    assert shown(calc, "course-crossover") == f"{e.crossover_n:,.0f}"


@pytest.mark.parametrize("n", [512, 1024, 2048, 4096])
def test_the_bars_widths_are_in_the_ratio_of_the_two_times(calc, n):
    # Near the crossover (512, 1024) the two times differ by 30-50%: the bars must too ("the longer bar is the bound").
    calc.n.value = n
    e = roofline.square_gemm(n, "fp16", roofline_widget.ROUND_B200)
    widths = [float(w) for w in re.findall(r'class="course-bar" style="[^"]*width:([\d.]+)px', calc.answer.value)]
    assert len(widths) == 2 and max(widths) == roofline_widget.BAR_PX
    assert widths[0] / widths[1] == pytest.approx(e.bound.compute_seconds / e.bound.memory_seconds, rel=2e-3)


def test_slider_drives_the_answer(calc):
    calc.n_slider.value = 256
    assert calc.n.value == 256
    assert shown(calc, "course-binding") == "memory"


def test_choosing_a_gpu_uses_its_datasheet(calc):
    calc.gpu.value = SPECS["h100-sxm"].name
    calc.dtype.value = "fp16"
    assert shown(calc, "course-ridge") == f"{989.4e12 / 3.35e12:,.1f}"


def test_measured_ceilings_are_offered():
    from course_lib.measure.ceilings import measured_ceilings

    measured = measured_ceilings().as_gpu()
    calc = roofline_widget.roofline_calculator(extra_gpus=[measured])
    calc.gpu.value = measured.name
    calc.dtype.value = "fp32"
    e = roofline.square_gemm(4096, "fp32", measured)
    assert shown(calc, "course-ridge") == f"{e.ridge:,.1f}"


@pytest.mark.parametrize("setup, message", [
    (lambda c: setattr(c.n, "value", 0), "N must be at least 1"),
    (lambda c: setattr(c.n, "value", -8), "N must be at least 1"),
    (lambda c: (setattr(c.gpu, "value", roofline_widget.CUSTOM), setattr(c.bandwidth_tbps, "value", -1.0)),
     "HBM bandwidth must be positive"),
    (lambda c: (setattr(c.gpu, "value", roofline_widget.CUSTOM), setattr(c.bandwidth_tbps, "value", 0.0)),
     "HBM bandwidth must be positive"),
    (lambda c: (setattr(c.gpu, "value", roofline_widget.CUSTOM), setattr(c.peak_tflops, "value", 0.0)),
     "peak must be positive"),
    (lambda c: (setattr(c.gpu, "value", SPECS["t4"].name), setattr(c.dtype, "value", "fp8")),
     "NVIDIA T4 has no fp8 peak"),
])
def test_impossible_input_shows_a_clear_message(calc, setup, message):
    setup(calc)
    assert "course-calc-error" in calc.answer.value
    assert message in calc.answer.value
    assert "Traceback" not in calc.answer.value


def test_recovers_after_bad_input(calc):
    calc.n.value = 0
    calc.n.value = 4096
    assert shown(calc, "course-intensity") == "1,365.3"


def test_custom_gpu_uses_typed_roofs(calc):
    calc.gpu.value = roofline_widget.CUSTOM
    calc.peak_tflops.value = 300.0
    calc.bandwidth_tbps.value = 1.5
    assert shown(calc, "course-ridge") == "200.0"
    assert not calc.peak_tflops.disabled


def test_the_roofline_calculators_greyed_roofs_follow_the_chosen_gpu():

    c = roofline_widget.roofline_calculator()
    assert (c.peak_tflops.value, c.bandwidth_tbps.value) == (2000.0, 8.0)   # the round-number B200
    c.gpu.value = SPECS["h200"].name
    assert (c.peak_tflops.value, c.bandwidth_tbps.value) == (989.4, 4.8) and c.peak_tflops.disabled
    c.dtype.value = "fp32"
    assert c.peak_tflops.value == 67.0
    c.gpu.value = roofline_widget.CUSTOM
    c.peak_tflops.value, c.bandwidth_tbps.value = 100.0, 1.0
    assert not c.peak_tflops.disabled and "custom GPU" in c.answer.value


def test_the_tile_calculator_names_impossible_entries_instead_of_clamping_them():
    from course_lib.widgets import gemm_ladder as widgets_tiling

    c = widgets_tiling.tile_calculator()
    c.stages.value = -1
    assert c.stages.value == -1 and "stages must be a whole number of at least 1; got -1" in c.answer.value
    c.stages.value = 2
    c.registers.value = -5
    assert "cannot be negative" in c.answer.value
    c.registers.value = 0
    assert "estimated" in c.answer.value and "0 = estimate" in c.registers.description


def test_ink_on_a_swatch_is_whichever_contrasts_more():
    from course_lib.figures.plots import PALETTE
    from course_lib.widgets.base import ink_on

    assert ink_on("#ffffff") == "#111" and ink_on("#000000") == "#fff"
    assert ink_on("#dd8452") == "#111" and ink_on("#4c72b0") == "#fff"   # orange takes dark ink, blue white
    assert {ink_on(c) for c in PALETTE} == {"#111", "#fff"}


def test_a_typed_n_is_taken_as_typed_not_snapped(calc):
    calc.n.value = 750
    assert calc.n.value == 750 and calc.n_slider.value == 750 and "N = 750" in calc.answer.value


@pytest.mark.parametrize("make, field, value, says", [
    ("roofline", "n", 10 ** 11, "more than the 180 GB"),
    ("waves", "m", 10 ** 11, "more than the 141 GB of NVIDIA H200"),
    ("waves", "resident", 99_999_999_999, "holds at most 32 blocks"),
    ("fusion", "m", 10 ** 11, "more than the 141 GB of NVIDIA H200"),
])
def test_a_problem_no_gpu_can_hold_gets_a_message_and_a_sane_one_clears_it(make, field, value, says):
    from course_lib.widgets.fusion import fusion_calculator
    from course_lib.widgets.roofline import roofline_calculator
    from course_lib.widgets.waves import WaveCalculator

    widget = {"roofline": roofline_calculator, "waves": WaveCalculator, "fusion": fusion_calculator}[make]()
    assert_message_then_recovers(widget, field, value, says)


def test_a_typed_in_gpu_is_held_to_the_largest_memory_in_the_table():
    from course_lib.widgets.roofline import CUSTOM, roofline_calculator

    calc = roofline_calculator()
    calc.gpu.value = CUSTOM
    calc.n.value = 10 ** 7
    assert "any GPU in the course&#x27;s table" in calc.answer.value   # HTML-escaped


def test_the_roofline_calculator_takes_m_n_k_and_handles_a_matrix_vector_product(calc):
    from course_lib.core.hardware import BYTES_PER_ELEMENT

    assert calc.m.disabled and calc.k.disabled and calc.m.value == calc.k.value == calc.n.value   # square
    calc.gpu.value = SPECS["h200"].name
    calc.square.value = False
    assert not calc.m.disabled
    calc.m.value, calc.n.value, calc.k.value = 1, 8192, 8192
    b = BYTES_PER_ELEMENT["fp16"]
    want = 2 * 8192 * 8192 / (b * (8192 + 8192 * 8192 + 8192))
    assert shown(calc, "course-intensity") == f"{want:,.1f}" == "1.0"
    assert shown(calc, "course-binding") == "memory"
    assert "M = 1, N = 8,192, K = 8,192 (a matrix-vector product)" in calc.answer.value
    assert shown(calc, "course-crossover") is None   # the square crossover is not this shape's
    calc.m.value = 4096                              # many rows: the same weights, compute-bound
    assert shown(calc, "course-binding") == "compute"
    calc.m.value = 0
    assert "M must be at least 1" in calc.answer.value
    calc.square.value = True                         # back to square: M and K follow N again
    assert calc.m.value == calc.k.value == 8192 and shown(calc, "course-crossover") == "618"


def test_the_roofline_calculator_says_when_the_bound_is_below_a_launch(calc):
    calc.n.value = 8
    assert "course-launch-note" in calc.answer.value and "start one kernel" in calc.answer.value
    calc.n.value = 4096
    assert "course-launch-note" not in calc.answer.value
