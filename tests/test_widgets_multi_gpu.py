"""The collective calculator shows the α–β model's values, follows its controls and its link presets (the spec
table's NVLink figures), and turns impossible input into a message it recovers from."""
import re

import pytest

from course_lib.core.hardware import SPECS
from course_lib.models import collectives as cm
from course_lib.widgets.base import _fmt_seconds
from course_lib.widgets.multi_gpu import TYPED_IN, collective_calculator, link_presets

GIB = 1 << 30


def shown(calc, cls):
    m = re.search(rf'class="{cls}">([^<]*)<', calc.answer.value)
    return m.group(1) if m else None


def test_the_default_is_a_1_gib_all_reduce_on_8_h200s():
    calc = collective_calculator()
    want = cm.predict("all_reduce", GIB, 8, SPECS["h200"].nvlink_per_direction_bytes_per_s, 5e-6)
    assert shown(calc, "course-seconds") == _fmt_seconds(want.seconds)
    assert shown(calc, "course-latency") == _fmt_seconds(70e-6) and shown(calc, "course-steps") == "14"
    assert shown(calc, "course-dominant") == "bandwidth"
    assert shown(calc, "course-busbw") == f"{want.busbw_bytes_per_s / 1e9:,.1f} GB/s"
    assert shown(calc, "course-crossover") == "17.17 MiB"         # 18e6 B: 14 × 5 µs × 450e9 B/s ÷ 1.75
    assert "datasheet: NVIDIA H200" in calc.answer.value


@pytest.mark.parametrize("collective, size, unit, ranks, alpha_us, algorithm", [
    ("all_gather", 64, "KiB", 4, 10.0, "ring"), ("reduce_scatter", 3, "MiB", 2, 2.5, "ring"),
    ("broadcast", 1, "B", 8, 1.0, "ring"), ("all_reduce", 256, "MiB", 8, 8.0, "tree"),
    ("all_to_all", 2, "GiB", 3, 0.0, "ring"),
])
def test_the_calculator_follows_its_controls(collective, size, unit, ranks, alpha_us, algorithm):
    calc = collective_calculator()
    calc.collective.value, calc.size.value, calc.unit.value = collective, size, unit
    calc.ranks.value, calc.alpha_us.value, calc.algorithm.value = ranks, alpha_us, algorithm
    nbytes = size * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": GIB}[unit]
    want = cm.predict(collective, nbytes, ranks, 450e9, alpha_us * 1e-6, algorithm)
    assert shown(calc, "course-seconds") == _fmt_seconds(want.seconds)
    assert shown(calc, "course-bandwidth") == _fmt_seconds(want.bandwidth_s)
    assert shown(calc, "course-dominant") == want.dominant
    assert shown(calc, "course-algbw") == f"{want.algbw_bytes_per_s / 1e9:,.1f} GB/s"


def test_the_presets_are_the_spec_table_s_nvlink_and_typing_a_rate_leaves_them():
    presets = link_presets()
    assert sorted(presets.values()) == [300e9, 450e9, 450e9, 900e9]     # A100; H100 and H200; B200: one direction
    calc = collective_calculator()
    b200 = next(k for k in presets if k.startswith("NVIDIA B200"))
    calc.preset.value = b200
    assert calc.link_gbps.value == 900.0 and "datasheet: NVIDIA B200" in calc.answer.value
    assert shown(calc, "course-seconds") == _fmt_seconds(cm.predict("all_reduce", GIB, 8, 900e9, 5e-6).seconds)
    calc.link_gbps.value = 50.0
    assert calc.preset.value == TYPED_IN and "typed in" in calc.answer.value
    assert shown(calc, "course-seconds") == _fmt_seconds(cm.predict("all_reduce", GIB, 8, 50e9, 5e-6).seconds)


def test_one_gpu_sends_nothing():
    calc = collective_calculator(ranks=1)
    assert shown(calc, "course-seconds") == "0 s" and "nothing to send" in calc.answer.value


@pytest.mark.parametrize("control, value, says", [
    ("ranks", 0, "GPU count must be a positive whole number"), ("size", 0.0, "message size must be a positive"),
    ("size", -3.0, "message size must be a positive"), ("link_gbps", 0.0, "link bandwidth must be a positive"),
    ("alpha_us", -1.0, "latency per step must be zero or positive"),
])
def test_impossible_input_is_a_message_and_the_calculator_recovers(control, value, says):
    calc = collective_calculator()
    good = getattr(calc, control).value
    getattr(calc, control).value = value
    assert "course-calc-error" in calc.answer.value and says in calc.answer.value
    getattr(calc, control).value = good
    assert "course-calc-error" not in calc.answer.value and shown(calc, "course-seconds")


def test_a_tree_all_gather_is_a_message():
    calc = collective_calculator(collective="all_gather")
    calc.algorithm.value = "tree"
    assert "course-calc-error" in calc.answer.value and "all-reduce only" in calc.answer.value
    calc.algorithm.value = "ring"
    assert "course-calc-error" not in calc.answer.value
