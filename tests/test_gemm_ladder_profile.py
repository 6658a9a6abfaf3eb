"""Notebook 06's profile of the ladder: the tile model's L2 bytes, and its tables over the record (the figures
the prose states are notebooks/claims/06_gemm_ladder.py's)."""
import pytest

from course_lib.labs import gemm_ladder as prof
from course_lib.measure import experiments
from course_lib.measure.evidence import Case


def _case(kernel, n=4096, **params):
    return Case("x", {"kernel": kernel, **params}, "k", [1e-3] * 20, 0.0, 0.0, {"passed": True},
                extra={"n": n, "element_bytes": 2 if kernel == "bf16_gemm_mma" else 4})


def test_tile_model_l2_bytes_follow_the_block_tile():
    n = 4096
    # 128x128 fp32 tiles: each block loads K·(B_M + B_N) floats, n²/B² blocks; plus C written once
    assert prof.model_l2_bytes(_case("sgemm_reg2d")) == pytest.approx(n ** 3 * 4 * (2 / 128) + n * n * 4)
    # no staging: two operand loads per multiply-add
    assert prof.model_l2_bytes(_case("sgemm_naive")) == pytest.approx(2 * n ** 3 * 4 + n * n * 4)
    # a wider tile loads fewer bytes
    assert prof.model_l2_bytes(_case("sgemm_warptile_db_16x8")) < prof.model_l2_bytes(_case("sgemm_vec4"))


@pytest.fixture(scope="module")
def recorded():
    return experiments.replay("gemm.profile", experiments.resolve_params("gemm.profile"), "h200")


def test_every_rung_was_profiled_and_says_what_ncu_measured(recorded):
    rows = prof.limit_rows(recorded)
    assert len(rows) == len(prof.LADDER) and all(r["what ncu measured"].startswith("top stall") for r in rows)
    stalls = {r["kernel"]: r["top stall"] for r in prof.stall_rows(recorded)}
    assert "lg_throttle" in stalls["1 naive"] and "mio_throttle" in stalls["3 shared-memory tiles"]
    assert [r["kernel"] for r in prof.memory_rows(recorded)] == list(stalls)   # the memory table: every profiled launch


def test_the_split_of_the_gap_to_cublas_that_notebook_06_states_follows_the_records():
    """06's prose: at 4096³, a third of the time between the mma.sync kernel and cuBLAS belongs to the
    instruction (its measured ceiling), two thirds to the kernel. Re-recording either record re-checks it."""
    ceilings = experiments.replay("hopper.ceilings", experiments.resolve_params("hopper.ceilings"), "h200")
    bf16 = experiments.replay("gemm.bf16_mma", experiments.resolve_params("gemm.bf16_mma"), "h200")
    flop = 2.0 * 4096 ** 3
    at_ceiling = flop / ceilings.case("mma.sync m16n8k16, registers").flop_per_s
    lib, mine = bf16.case("cuBLAS bf16, n=4096").median_s, bf16.case("bf16_gemm_mma (tma), n=4096").median_s
    assert lib < at_ceiling < mine
    assert 0.28 < (at_ceiling - lib) / (mine - lib) < 0.40
    assert 0.70 < at_ceiling / mine < 0.78


def test_bf16_tolerance_scales_with_the_largest_wanted_value():
    """Two bf16 ulps of the largest output: a result judged against a small sum gets a small bound."""
    import numpy as np

    from course_lib.launch import operands

    assert operands.bf16_tolerance(np.array([-3.0, 1.0, 2.0])) == 3.0 * 2.0 ** -7
    assert operands.bf16_tolerance(np.array([0.01, -0.02])) < operands.bf16_tolerance(np.array([0.01, -2.0]))


def test_a_cublas_case_reads_in_the_ladders_stall_table(recorded):
    """gemm.cublas_profile's cases go through the same row builder as the ladder, labelled by the library kernel
    ncu profiled (the experiment waits for a GPU: tests/test_evidence.WAITING_FOR_A_GPU)."""
    import dataclasses

    rung = next(c for c in recorded.cases if c.params["kernel"] == "sgemm_warptile_db_16x8")
    cublas = dataclasses.replace(rung, name="cuBLAS fp32, n=4096", params={"dtype": "fp32", "n": 4096},
                                 kernel="cublas fp32 (torch.mm)",
                                 extra={"ncu": rung.extra["ncu"], "ncu_kernel": "sm90_xmma_gemm_f32f32_example"})
    [row] = prof.stall_rows(dataclasses.replace(recorded, cases=[cublas]))
    assert row["kernel"] == "cuBLAS fp32, n=4096 (sm90_xmma_gemm_f32f32_example)"
    assert row["FMA pipe"].endswith("%") and row["top stall"]
