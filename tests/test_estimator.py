"""The executable estimator against the worked fixture, value by value, and the reconciliation's
refusals: an unmeasured case keeps no residual, and a "measurement" that is not evidence is refused."""
import dataclasses

import pytest

from course_lib.models import estimator as e


@pytest.fixture(scope="module")
def est():
    return e.estimate(e.FIXTURE)


def test_the_fixture_closes_exactly(est):
    assert est.blocks == 1024
    assert (est.resident_blocks, est.limiter) == (3, "shared memory")
    assert (est.active_warps, est.occupancy) == (24, 0.375)
    assert (est.slots, est.waves, est.last_wave_blocks) == (324, 4, 52)
    assert 100 * est.last_wave_fill == 16.049382716049383
    assert (est.useful_bytes, est.sectors, est.sector_efficiency) == (128, 4, 1.0)
    assert (est.stage_flop, est.stage_bytes, est.stage_intensity) == (1_048_576, 16_384, 64.0)
    # the seed's GEMM compulsory table at M = N = K = 4096, bf16: 3 · 4096² · 2 bytes, intensity 1365.33
    assert (est.gemm_flop, est.gemm_compulsory_bytes) == (2 * 4096 ** 3, 3 * 4096 ** 2 * 2)
    assert est.gemm_intensity == pytest.approx(1365.33, abs=0.01)
    assert est.fusion_bytes_removed == 67_108_864
    assert est.lower_bound_s == pytest.approx(0.002, rel=1e-12) and est.binding == "DRAM"


def test_an_unmeasured_observation_keeps_no_residual(est):
    assert e.reconcile(est, e.Observation()) == {"status": "unmeasured", "observed_median_s": None,
                                                 "predicted_lower_bound_s": est.lower_bound_s, "residual_s": None}
    with pytest.raises(ValueError, match="carries no samples"):
        e.reconcile(est, e.Observation(samples_s=(1.0,)))


def test_a_measurement_must_be_evidence(est):
    few = e.Observation("measured", tuple([0.003] * 19), True, "fixture")
    with pytest.raises(ValueError, match="19 samples"):
        e.reconcile(est, few, "fixture")
    unchecked = e.Observation("measured", tuple([0.003] * 20), None, "fixture")
    with pytest.raises(ValueError, match="no passed numerical check"):
        e.reconcile(est, unchecked, "fixture")
    other = e.Observation("measured", tuple([0.003] * 20), True, "another case")
    with pytest.raises(ValueError, match="of case 'another case'"):
        e.reconcile(est, other, "fixture")
    with pytest.raises(ValueError, match="status must be"):
        e.reconcile(est, e.Observation("locally_measured"))


def test_a_measurement_reconciles_to_a_residual(est):
    obs = e.Observation("measured", tuple([0.0032] * 10 + [0.0030] * 11), True, "fixture")
    r = e.reconcile(est, obs, "fixture")
    assert r["observed_median_s"] == 0.0030 and r["residual_s"] == pytest.approx(0.001)


def test_sensitivity_moves_the_limiter_as_the_worked_table_says():
    less_smem = e.estimate(dataclasses.replace(e.FIXTURE, smem_per_block_bytes=32 * 1024))
    assert (less_smem.resident_blocks, less_smem.limiter, less_smem.occupancy) == (4, "registers", 0.5)
    more_regs = e.estimate(dataclasses.replace(e.FIXTURE, registers_per_thread=96))
    assert (more_regs.resident_blocks, more_regs.limiter) == (2, "registers")
    misaligned = e.estimate(dataclasses.replace(e.FIXTURE, warp_offset_bytes=4))
    assert (misaligned.sectors, misaligned.sector_efficiency) == (5, 0.8)


def test_levels_without_a_bandwidth_are_refused():
    with pytest.raises(ValueError, match="every memory level needs bytes and a bandwidth"):
        e.estimate(dataclasses.replace(e.FIXTURE, level_bytes={"DRAM": 3e9, "L2": 9e9}))
