"""On a CUDA machine only (COURSE_MODE=live): notebook 07's kernel variants against float64."""
import os

import pytest

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)


def test_scheduled_and_narrow_variants_are_correct_at_edge_shapes():
    from course_lib.launch import gemm_bf16

    gemm_bf16.scheduled_smoke()


@pytest.mark.parametrize("split_k, grid", [(5, None), (1, 7), (2, 3)])
def test_split_k_and_persistent_grids_at_an_aligned_shape_with_tails(split_k, grid):
    import cupy

    from course_lib.launch import gemm_bf16, operands
    from course_lib.launch.gemm_bf16 import SCHEDULED

    m, n, k = 1000, 776, 1096   # edge tiles in M and N, a partial last K tile, uneven slices
    a, b, c = gemm_bf16.bf16_operands(m, n, k, 3)
    work = cupy.empty(split_k * m * n, dtype=cupy.float32)
    c.fill(0xFFFF)
    gemm_bf16.run_variant(a, b, c, SCHEDULED, grid_blocks=grid, split_k=split_k, workspace=work)
    ref = operands.bf16_bits_to_float32(a).astype(cupy.float64) @ operands.bf16_bits_to_float32(b).astype(cupy.float64)
    err = float(cupy.abs(operands.bf16_bits_to_float32(c) - ref).max())
    assert err <= operands.bf16_tolerance_rel() * float(cupy.abs(ref).max()), err


def test_split_k_without_the_scheduled_variant_is_refused():
    import cupy

    from course_lib.launch import gemm_bf16

    a, b, c = gemm_bf16.bf16_operands(64, 64, 64, 1)
    with pytest.raises(ValueError, match="TC_SCHEDULED"):
        gemm_bf16.run_variant(a, b, c, split_k=2, workspace=cupy.empty(2 * 64 * 64, dtype=cupy.float32))


@pytest.mark.parametrize("blocks", [1, 90, 270])
def test_the_placement_probe_accounts_for_every_block(blocks):
    from course_lib.core.hardware import detect
    from course_lib.labs import waves as lab_waves
    from course_lib.launch import gemm_bf16
    from course_lib.launch.gemm_bf16 import SCHEDULED, bf16_geometry

    info = detect()
    _, block, smem = bf16_geometry(2304, 1920, SCHEDULED.defines)
    resident = gemm_bf16.resident_blocks(info.name, SCHEDULED)
    p = lab_waves.placement(blocks, block[0], smem)
    assert p["started_later"] == max(0, blocks - resident * info.sm_count), p
    assert p["most_on_one_sm"] <= resident and p["sms_used"] <= min(blocks, info.sm_count), p
    assert p["sms_with_two"] <= p["sms_used"], p
