"""Headless checks of the notebook-02 and -03 calculators' wiring."""
from course_lib.models import occupancy as occ
from course_lib.widgets.occupancy import ResidencyCalculator
from course_lib.widgets.threads_warps import LaunchGeometryCalculator


def test_row_stride_follows_the_size_it_belongs_to():
    calc = LaunchGeometryCalculator()
    calc.k.value = 512
    assert calc.stride_row.value == 512            # A is row-major: stride K
    calc.operand.value = "B"
    calc.n.value = 1024
    assert calc.stride_row.value == 1024           # B is row-major: stride N


def test_a_typed_stride_is_kept():
    calc = LaunchGeometryCalculator()
    calc.stride_row.value = 333
    calc.k.value = 512
    assert calc.stride_row.value == 333


def test_kernel_resources_follow_the_chosen_sm():
    sm90 = next(b for b in occ.spec_budgets() if b.name == "NVIDIA H200")
    t4 = next(b for b in occ.spec_budgets() if b.name == "NVIDIA T4")
    calc = ResidencyCalculator(budgets=[sm90, t4], kernels=["gemm_fp32.sgemm_warptile"])
    calc.gpu.value = sm90.name
    calc.kernel.value = "gemm_fp32.sgemm_warptile"
    assert "sm_90" in calc.note.value
    calc.gpu.value = t4.name
    assert "sm_75" in calc.note.value
    from course_lib.core import cuda

    assert calc.registers.value == cuda.resources("gemm_fp32", "sgemm_warptile", "sm_75").registers
