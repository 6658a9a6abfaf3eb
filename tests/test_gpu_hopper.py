"""On a Hopper GPU only (COURSE_MODE=live, compute capability 9.0): notebook 10's kernels (the rungs and
split-K) against float64 at edge shapes, a K that is not a multiple of 8 refused, and the ceilings' exact sums."""
import os

import pytest

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def hopper():
    from course_lib.core.hardware import detect

    if str(detect().compute_capability) != "9.0":
        pytest.skip("notebook 10's kernels need compute capability 9.0")


def test_every_rung_is_correct_at_edge_shapes():
    from course_lib.launch import hopper_gemm

    hopper_gemm.hopper_smoke()
    hopper_gemm.ceiling_smoke()
    hopper_gemm.split_k_smoke()


def test_a_k_that_the_tma_cannot_read_is_refused_before_launch():
    from course_lib.launch import hopper_gemm

    a, b, _, _ = hopper_gemm.operands(64, 64, 20, 1)
    with pytest.raises(ValueError, match="multiple of 8"):
        hopper_gemm.run(1, a, b, hopper_gemm.nan_output(64, 64))


def test_a_byte_count_that_never_completes_traps_instead_of_hanging():
    from course_lib.labs import hopper_gemm as lab_hopper

    said = lab_hopper._wrong_byte_count(timeout_s=60)
    assert "hung" not in said, said
    # the trap ends the launch; CUDA names it a launch failure (or an illegal instruction, by driver)
    assert said["returncode"] == 0 and ("launch failure" in said["error"] or "illegal instruction" in said["error"]), said
    seconds = float(said["error"].split()[1])
    assert 1.5 < seconds < 20, said   # the 2 s bound of ASYNC_WAIT_NS, not a hang
