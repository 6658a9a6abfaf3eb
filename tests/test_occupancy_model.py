"""The occupancy model against the lesson's worked example and sensitivity table, the allocation
rules of real hardware, bad input, the residency calculator and notebook 03's exercise checks."""
import re

import pytest

from course_lib.core.hardware import KIB, SPECS
from course_lib.exercises import occupancy as ex
from course_lib.models import occupancy as occ
from course_lib.widgets import occupancy as widgets_occupancy


def test_worked_example_three_blocks_limited_by_shared_memory():
    r = occ.residency(occ.ILLUSTRATIVE_SM, 256, 64, 48 * KIB)
    assert r.limits == {"threads": 8, "warps": 8, "registers": 4, "shared memory": 3, "blocks": 32}
    assert (r.resident_blocks, r.limiter, r.active_warps) == (3, "shared memory", 24)
    assert r.occupancy == 0.375


# change, thread ceiling, register ceiling, shared ceiling, resident blocks, occupancy: the lesson's table
LESSON_ROWS = [
    ({}, 8, 4, 3, 3, 0.375),
    ({"smem_per_block_bytes": 32 * KIB}, 8, 4, 5, 4, 0.5),
    ({"registers_per_thread": 96}, 8, 2, 3, 2, 0.25),
    ({"threads_per_block": 128}, 16, 8, 3, 3, 0.1875),
]


@pytest.mark.parametrize("change, threads, regs, smem, resident, occupancy", LESSON_ROWS)
def test_each_row_of_the_sensitivity_table(change, threads, regs, smem, resident, occupancy):
    r = occ.residency(occ.ILLUSTRATIVE_SM, **(occ.WORKED_CASE | change))
    assert (r.limit_threads, r.limit_registers, r.limit_smem, r.resident_blocks) == (threads, regs, smem, resident)
    assert r.occupancy == occupancy


def test_sensitivity_table_rows_match_the_lesson():
    rows = occ.sensitivity_table()
    assert [(r["thread ceiling"], r["register ceiling"], r["shared ceiling"], r["resident blocks"]) for r in rows] == \
        [row[1:5] for row in LESSON_ROWS]
    assert [r["binds"] for r in rows] == ["shared memory", "registers", "registers", "shared memory"]


@pytest.mark.parametrize("args, message", [
    ((0, 32, 0), "at least 1"),
    ((-5, 32, 0), "at least 1"),
    ((1025, 32, 0), "more than the 1024"),
    ((256, 32, 165 * KIB), "165 KiB of shared memory per block is more than illustrative SM"),
    ((256, 32, -1), "cannot be negative"),
    ((256, 256, 0), "between 0 and 255"),
    ((256, 32.5, 0), "whole number"),
    ((1024, 72, 0), "a block may hold at most 65,536"),
])
def test_bad_input_is_a_clear_error(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        occ.residency(occ.ILLUSTRATIVE_SM, *args)


def test_more_shared_memory_than_an_h200_block_may_have():
    with pytest.raises(ValueError, match=r"227 KiB; the whole SM has 228 KiB"):
        occ.residency(occ.budget("h200"), 256, 32, 228 * KIB)


def test_a_kernels_own_thread_cap():
    with pytest.raises(ValueError, match="this kernel allows"):
        occ.residency(occ.budget("h200"), 512, 32, 0, max_threads_per_block=256)


@pytest.mark.parametrize("cc, blocks, warps, unit, reserved", [
    ("7.5", 16, 32, 256, 0), ("8.0", 32, 64, 128, 1024), ("8.6", 16, 48, 128, 1024),
    ("8.9", 24, 48, 128, 1024), ("9.0", 32, 64, 128, 1024), ("10.0", 32, 64, 128, 1024),
])
def test_architecture_rules(cc, blocks, warps, unit, reserved):
    r = occ.ARCH_RULES[cc]
    assert (r.max_blocks_per_sm, r.max_warps_per_sm, r.smem_alloc_unit_bytes, r.reserved_smem_per_block_bytes) == \
        (blocks, warps, unit, reserved)
    assert (r.register_alloc_unit, r.register_sub_partitions) == (256, 4)


@pytest.mark.parametrize("key", list(SPECS))
def test_every_spec_gpu_has_a_consistent_budget(key):
    b = occ.budget(key)
    assert b.max_warps_per_sm * 32 == SPECS[key].max_threads_per_sm
    assert occ.residency(b, 32, 16, 0).resident_blocks == b.max_blocks_per_sm


def test_unknown_architecture_is_a_clear_error():
    with pytest.raises(ValueError, match="no allocation rules for compute capability 6.1"):
        occ.rules_for("6.1")


def test_reserved_shared_memory_turns_the_lessons_five_into_four_on_an_a100():
    a100 = occ.budget("a100-sxm")
    assert a100.smem_per_sm_bytes == occ.ILLUSTRATIVE_SM.smem_per_sm_bytes
    r = occ.residency(a100, 256, 64, 32 * KIB)
    assert r.smem_per_block_allocated_bytes == 33 * KIB and r.limit_smem == 4
    assert occ.residency(occ.ILLUSTRATIVE_SM, 256, 64, 32 * KIB).limit_smem == 5


def test_shared_memory_is_allocated_in_128_byte_units_plus_the_reservation():
    h = occ.budget("h200")
    assert occ.residency(h, 256, 16, 1).smem_per_block_allocated_bytes == 1024 + 128
    assert occ.residency(h, 256, 16, 0).smem_per_block_allocated_bytes == 1024
    assert occ.residency(occ.budget("t4"), 256, 16, 1).smem_per_block_allocated_bytes == 256
    assert occ.residency(occ.budget("t4"), 256, 16, 0).limit_smem is None


def test_registers_are_allocated_per_warp_in_256s_and_per_sub_partition():
    h = occ.budget("h200")
    r = occ.residency(h, 256, 33, 0)                  # 33 × 32 = 1056 → 1280 per warp
    assert r.registers_per_warp_allocated == 1280 and r.limit_registers == 6
    # 40 registers: 1280 per warp; 12 warps per sub-partition, 48 per SM (not 65536 / 1280 = 51)
    assert occ.residency(h, 32, 40, 0).limit_registers == 48
    assert occ.residency(h, 64, 40, 0).limit_registers == 24


def test_a_ragged_block_still_takes_whole_warps():
    r = occ.residency(occ.budget("h200"), 48, 16, 0)
    assert r.warps_per_block == 2 and r.limit_warps == 32 and r.limit_threads == 42
    assert r.resident_blocks == 32 and r.occupancy == 1.0


def test_smem_for_resident_blocks_is_the_exact_edge():
    h = occ.budget("h200")
    for blocks in range(1, 9):
        s = occ.smem_for_resident_blocks(h, blocks)
        assert occ.residency(h, 256, 16, s).limit_smem >= blocks
        if s + 1 <= h.max_smem_per_block_bytes:
            assert occ.residency(h, 256, 16, s + 128).limit_smem < blocks
    assert occ.smem_for_resident_blocks(h, 4) == 57344
    with pytest.raises(ValueError):
        occ.smem_for_resident_blocks(h, 0)


def test_register_cap_for_full_occupancy():
    h = occ.budget("h200")
    assert occ.max_registers_for_resident_blocks(h, 256, 8) == 32
    assert occ.residency(h, 256, 33, 0).resident_blocks < 8


def test_bytes_in_flight():
    r = occ.residency(occ.budget("h200"), 256, 16, 0)
    assert occ.bytes_in_flight_per_sm(r, 4) == 2048 * 4


# --------------------------------------------------------------------------- the calculator

def shown(calc, cls):
    m = re.search(rf'class="{cls}">([^<]*)<', calc.answer.value)
    return m.group(1) if m else None


@pytest.fixture
def calc():
    return widgets_occupancy.residency_calculator(include_device=False)


def test_calculator_starts_on_the_lessons_example(calc):
    assert calc.gpu.value == occ.ILLUSTRATIVE_SM.name
    assert shown(calc, "course-resident-blocks") == "3"
    assert shown(calc, "course-binding") == "shared memory"
    assert shown(calc, "course-active-warps") == "24"
    assert shown(calc, "course-occupancy") == "37.5%"


@pytest.mark.parametrize("gpu, threads, regs, kib", [("h200", 256, 64, 48.0), ("a100-sxm", 128, 96, 20.0),
                                                     ("t4", 1024, 32, 0.0), ("l4", 96, 40, 7.5)])
def test_calculator_shows_the_models_value(calc, gpu, threads, regs, kib):
    b = occ.budget(gpu)
    calc.gpu.value = b.name
    calc.threads.value, calc.registers.value, calc.smem_kib.value = threads, regs, kib
    r = occ.residency(b, threads, regs, int(kib * KIB))
    assert shown(calc, "course-resident-blocks") == str(r.resident_blocks)
    assert shown(calc, "course-binding") == r.limiter
    assert shown(calc, "course-occupancy") == f"{100 * r.occupancy:.1f}%"


@pytest.mark.parametrize("setup, message", [
    (lambda c: setattr(c.threads, "value", 0), "at least 1"),
    (lambda c: setattr(c.threads, "value", 4096), "more than the 1024"),
    (lambda c: setattr(c.smem_kib, "value", 500.0), "more than"),
    (lambda c: setattr(c.smem_kib, "value", -1.0), "cannot be negative"),
    (lambda c: setattr(c.registers, "value", 300), "between 0 and 255"),
    (lambda c: (setattr(c.gpu, "value", widgets_occupancy.CUSTOM), setattr(c.c_warps, "value", 0)),
     "warps per sm must be a positive"),
])
def test_calculator_bad_input_shows_a_message(calc, setup, message):
    setup(calc)
    assert "course-calc-error" in calc.answer.value and message in calc.answer.value
    assert "Traceback" not in calc.answer.value


def test_choosing_a_kernel_fills_in_what_nvrtc_reports(calc):
    from course_lib.core import cuda

    h = occ.budget("h200")
    calc.gpu.value = h.name
    calc.kernel.value = "occupancy.register_pressure"
    res = cuda.resources("occupancy", "register_pressure", "sm_90")
    assert calc.registers.value == res.registers and calc.threads.value == 256
    assert shown(calc, "course-resident-blocks") == str(occ.residency(h, 256, res.registers).resident_blocks)
    assert "NVRTC" in calc.note.value


def test_custom_sm(calc):
    calc.gpu.value = widgets_occupancy.CUSTOM
    calc.c_smem.value = 96.0
    calc.threads.value, calc.registers.value, calc.smem_kib.value = 256, 32, 48.0
    assert shown(calc, "course-resident-blocks") == "2" and shown(calc, "course-binding") == "shared memory"


# --------------------------------------------------------------------------- exercises

def test_residency_exercise():
    right = {q: ex.residency_answer(q).resident_blocks for q in ex.RESIDENCY_QUESTIONS}
    assert right == {"H200: 128 threads, 96 registers, 20 KiB shared memory": 5,
                     "H200: 512 threads, 40 registers, no shared memory": 3,
                     "A100: 256 threads, 32 registers, 40 KiB shared memory": 4,
                     "L4: 64 threads, 32 registers, no shared memory": 24}
    assert ex.check_residency(right).correct
    assert not ex.check_residency({q: v + 1 for q, v in right.items()}).correct
    assert not ex.check_residency(None).correct


def test_smem_and_register_exercises():
    assert ex.check_smem_budget(57344).correct
    assert not ex.check_smem_budget(58368).correct and "reserved" in ex.check_smem_budget(58368)
    assert not ex.check_smem_budget("lots").correct and not ex.check_smem_budget(None).correct
    assert ex.check_register_cap(32).correct
    assert not ex.check_register_cap(33).correct and not ex.check_register_cap(None).correct
