"""Notebook 10's tile calculator and the models under it: the budget it shows is the kernel's own (shared
memory, registers and blocks per SM, held to NVRTC's compile report and the residency table), impossible
input is a message, and the mbarrier parity rule drives a ring without a wait that passes too early or hangs."""
import re

import pytest

from course_lib.core import cuda
from course_lib.labs import hopper_gemm as lab
from course_lib.launch import hopper_gemm as hg
from course_lib.measure import experiments
from course_lib.models import hopper
from course_lib.widgets.hopper_gemm import hopper_tile_calculator
from calculator_support import assert_message_then_recovers

RESOURCES = cuda.compile_family(hg.FAMILY, hg.ARCH).resources
NO_SETMAXNREG = cuda.compile_family(hg.FAMILY, hg.ARCH, ("-DHG_SETMAXNREG=0",)).resources
MACROS = hg.hg_macros()


def shown(calc, cls: str) -> str:
    return re.search(rf'class="{cls}">([^<]+)<', calc.answer.value).group(1)


def table_row(number: int) -> dict:
    return next(r for r in lab.resources_rows() if r["rung"].startswith(f"{number} "))


def rung_budget(number: int, setmaxnreg: bool) -> hopper.TileBudget:
    r = hg.rung(number)
    return hopper.tile_budget("h200", *r.tile, MACROS["HG_BK"], MACROS["HG_STAGES"], r.consumers, setmaxnreg)


# --------------------------------------------------------------------------- the kernel's own numbers

@pytest.mark.parametrize("number", [4, 5])
def test_rung_4_and_5s_choice_is_their_row_of_the_compile_report(number):
    t, row, r = rung_budget(number, True), table_row(number), hg.rung(number)
    assert t.smem_per_block_bytes == hg.smem_bytes(r) == 197_696
    assert t.launch_registers == RESOURCES[r.kernel].registers == row["registers at launch"] == 168
    assert t.residency.resident_blocks == row["blocks/SM"] and t.residency.limiter == row["limited by"]
    assert t.accumulator_registers == 128 and t.threads == r.threads
    # setmaxnreg's arithmetic gives the consumers the kernel's count when the producer keeps its 40
    assert t.producer_regs == MACROS["HG_PRODUCER_REGS"] and t.consumer_ceiling == MACROS["HG_CONSUMER_REGS"]
    # built without setmaxnreg, every thread gets what a consumer needs: the estimate is ptxas's count
    assert rung_budget(number, False).launch_registers == NO_SETMAXNREG[r.kernel].registers == 154


def test_rung_3s_choice_is_its_row_without_setmaxnreg():
    t, row = rung_budget(3, False), table_row(3)
    assert t.smem_per_block_bytes == hg.smem_bytes(hg.rung(3))
    assert t.launch_registers == RESOURCES["hgemm_3_specialized"].registers == row["registers at launch"] == 90
    assert (t.residency.resident_blocks, t.residency.limiter) == (row["blocks/SM"], row["limited by"])


def test_the_registers_beyond_the_accumulators_are_what_ptxas_gave_every_wgmma_kernel():
    compiled = [(RESOURCES["hgemm_3_specialized"].registers, hopper.accumulator_registers(64, 128)),
                (NO_SETMAXNREG["hgemm_4_wide"].registers, hopper.accumulator_registers(64, 256)),
                (NO_SETMAXNREG["hgemm_5_persistent"].registers, hopper.accumulator_registers(64, 256))]
    ceilings = experiments.replay("hopper.ceilings", experiments.resolve_params("hopper.ceilings"), "h200")
    compiled += [(c.launch["registers"], hopper.accumulator_registers(64, c.params["shapes"]))
                 for c in ceilings.cases if c.params.get("a_from") == "shared"]
    assert len(compiled) == 6
    assert {regs - acc for regs, acc in compiled} == {hopper.OTHER_REGISTERS}


def test_the_layout_constants_are_the_kernels():
    assert hopper.ALIGN_SLACK == hg.ALIGN_SLACK
    assert hopper.SWIZZLE_ROW_ELEMENTS == MACROS["HG_BK"]
    assert hopper.PRODUCER_REGS == MACROS["HG_PRODUCER_REGS"]


def test_two_blocks_per_sm_leave_the_80_registers_ptxas_refused_for_rung_3():
    from course_lib.models import occupancy

    pitfalls = experiments.replay("hopper.pitfalls", experiments.resolve_params("hopper.pitfalls"), "h200")
    message = pitfalls.cases[0].extra["register_cap_below_accumulators"]
    cap = occupancy.max_registers_for_resident_blocks(occupancy.budget("h200"), 384, 2)
    assert f"Insufficient registers ({cap})" in message and cap < rung_budget(3, False).consumer_registers


def test_the_exercises_register_plan_is_the_producer_at_24():
    t = hopper.tile_budget("h200", producer_regs=24)
    assert t.consumer_ceiling == 240 and hopper.register_plan(24, 240).fits


def test_intensities_are_the_notebooks():
    t3, t4 = rung_budget(3, False), rung_budget(4, True)
    assert t3.l2_flop_per_byte == pytest.approx(64) and t4.l2_flop_per_byte == pytest.approx(256 / 3)
    # each m64 wgmma reads 64 rows of A and all BN rows of B: 64·BN / (64 + BN) FLOP per byte
    assert t4.smem_flop_per_byte == pytest.approx(64 * 256 / (64 + 256))
    assert t3.wgmmas_per_k16 == t4.wgmmas_per_k16 == 2


# --------------------------------------------------------------------------- the calculator

def test_the_calculator_opens_on_rung_5s_row():
    calc = hopper_tile_calculator()
    t = rung_budget(5, True)
    assert shown(calc, "course-smem") == f"{t.smem_per_block_bytes:,}"
    assert shown(calc, "course-launch-regs") == "168" and shown(calc, "course-consumer-ceiling") == "232"
    assert shown(calc, "course-acc-regs") == "128" and shown(calc, "course-consumer-regs") == "154"
    assert shown(calc, "course-blocks") == "1" and shown(calc, "course-limiter") == "shared memory and registers"
    assert shown(calc, "course-l2-intensity") == "85.3" and shown(calc, "course-smem-intensity") == "51.2"
    assert shown(calc, "course-l2-rate") == "11.6 TB/s" and shown(calc, "course-fits") == "fits"


def test_moving_the_controls_follows_the_model():
    calc = hopper_tile_calculator()
    calc.block_n.value, calc.setmaxnreg.value = 128, "off"
    assert shown(calc, "course-launch-regs") == "90" and shown(calc, "course-l2-intensity") == "64.0"
    calc.block_n.value, calc.stages.value, calc.setmaxnreg.value = 64, 2, "on"
    t = hopper.tile_budget("h200", 128, 64, 64, 2, 2, True)
    assert shown(calc, "course-blocks") == str(t.residency.resident_blocks) and t.residency.resident_blocks > 1


@pytest.mark.parametrize("field, value, says", [
    ("stages", 5, "does not fit"), ("block_m", 256, "does not fit"), ("gpu", "NVIDIA B200", "tcgen05"),
    ("gpu", "NVIDIA A100-SXM4-80GB", "compute capability 9.0 only"), ("block_n", 300, "N is a multiple of 8"),
    ("block_k", 32, "128-byte swizzle"), ("consumers", 3, "multiple of wgmma's M"),
    ("consumers", 1, "more than setmaxnreg's 256"), ("consumers", 0, "at least 1")])
def test_impossible_input_is_a_message_and_a_good_value_clears_it(field, value, says):
    assert_message_then_recovers(hopper_tile_calculator(), field, value, says)


def test_without_setmaxnreg_a_too_wide_consumer_is_refused():
    with pytest.raises(ValueError, match="more than the 255"):
        hopper.tile_budget("h200", 128, 256, 64, 4, 1, setmaxnreg=False)


# --------------------------------------------------------------------------- mbarrier phases and parity

def test_a_fresh_barrier_lets_parity_1_through_and_holds_parity_0():
    assert hopper.parity_wait_returns(0, 1) and not hopper.parity_wait_returns(0, 0)
    assert hopper.parity_wait_returns(1, 0) and not hopper.parity_wait_returns(1, 1)


@pytest.mark.parametrize("stages", [1, 2, 4])
def test_the_rings_parities_pass_exactly_when_the_phase_they_need_has_completed(stages):
    """Pass p of a slot needs fill p of full[s] and free p - 1 of empty[s]: each wait must hold one phase
    earlier and return once that phase completes (the order the figure draws)."""
    for j in range(6 * stages):
        _, p = hopper.ring_use(j, stages)
        full_parity, empty_parity = hopper.ring_parities(j, stages)
        assert not hopper.parity_wait_returns(p, full_parity)          # fill p not landed yet
        assert hopper.parity_wait_returns(p + 1, full_parity)          # it has
        assert hopper.parity_wait_returns(p, empty_parity)             # free p - 1 done (or none needed)
        if p:
            assert not hopper.parity_wait_returns(p - 1, empty_parity)  # free p - 1 not done yet


def test_one_bit_cannot_tell_a_phase_from_the_one_two_later():
    assert hopper.parity_wait_returns(3, 0) == hopper.parity_wait_returns(1, 0)


def test_the_parity_figure_draws_each_wait():
    import matplotlib

    matplotlib.use("Agg")
    from course_lib.figures import hopper as figures

    fig = figures.parity_figure()
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sum("wait(full," in t for t in texts) == 4 and sum("wait(empty," in t for t in texts) == 4
    assert "tile 0: wait(empty, 1)" in texts and "wait(full, 1)" in texts


def test_rung_7s_output_stage_is_the_kernels_and_leaves_room_for_three_slots_not_four():
    r = hg.rung(7)
    t = hopper.tile_budget("h200", *r.tile, MACROS["HG_BK"], MACROS["HG_STORE_STAGES"], r.consumers, True, tma_store=True)
    assert t.smem_per_block_bytes == hg.smem_bytes(r) == 214_064 and t.output_stage_bytes == 128 * 256 * 2
    assert t.launch_registers == RESOURCES[r.kernel].registers
    with pytest.raises(ValueError, match="64 KiB output stage"):
        hopper.tile_budget("h200", *r.tile, MACROS["HG_BK"], 4, r.consumers, True, tma_store=True)
    calc = hopper_tile_calculator(stages=4)
    calc.epilogue.value = "TMA store"
    assert "does not fit" in calc.answer.value
    calc.stages.value = 3
    assert shown(calc, "course-smem") == "214,064"
