"""The roofline model against the seeds' worked examples."""
import pytest

from course_lib.core.hardware import SPECS
from course_lib.models import roofline


def test_b200_ridge_from_the_lessons_round_numbers():
    assert roofline.ridge_point(2e15, 8e12) == pytest.approx(250.0)


def test_h100_bf16_ridge_is_295():
    h100 = SPECS["h100-sxm"]
    assert roofline.ridge_point(h100.peak("bf16"), h100.hbm_bandwidth_bytes_per_s) == pytest.approx(295, abs=0.5)


@pytest.mark.parametrize("n", [64, 4096, 8192])
def test_square_fp16_gemm_intensity_is_n_over_3(n):
    assert roofline.gemm_intensity(n, n, n, 2) == pytest.approx(n / 3)


def test_square_fp16_gemm_at_4096_is_about_1365():
    assert roofline.gemm_intensity(4096, 4096, 4096, 2) == pytest.approx(1365.33, abs=0.01)


@pytest.mark.parametrize("m, flop, q, intensity", [
    (1, 33_554_432, 33_570_816, 0.9995),
    (128, 4_294_967_296, 35_651_584, 120.47),
    (4096, 137_438_953_472, 100_663_296, 1365.33),
])
def test_compulsory_byte_table(m, flop, q, intensity):
    assert roofline.gemm_flop(m, 4096, 4096) == flop
    assert roofline.gemm_compulsory_bytes(m, 4096, 4096, bytes_a=2) == q
    assert roofline.gemm_intensity(m, 4096, 4096, 2) == pytest.approx(intensity, abs=5e-5 * intensity)


def test_worked_time_bound_is_2_ms_and_memory_bound():
    b = roofline.time_lower_bound(120e9, 3e9, 300e12, 1.5e12)
    assert b.compute_seconds == pytest.approx(0.4e-3)
    assert b.memory_seconds == pytest.approx(2.0e-3)
    assert b.seconds == pytest.approx(2.0e-3)
    assert b.binding_roof == "memory"


def test_attainable_rate_on_the_illustrative_accelerator():
    assert roofline.attainable_flop_per_s(40, 300e12, 1.5e12) == pytest.approx(60e12)
    assert roofline.attainable_flop_per_s(400, 300e12, 1.5e12) == pytest.approx(300e12)


@pytest.mark.parametrize("b", [0.5, 1, 2, 4])
def test_crossover_n_balances_the_two_bounds(b):
    n = roofline.square_gemm_crossover_n(2e15, 8e12, b)
    flop, q = 2 * n ** 3, 3 * n ** 2 * b
    assert flop / 2e15 == pytest.approx(q / 8e12)


def test_b200_fp16_crossover_is_750_and_fp8_does_not_move_it():
    assert roofline.square_gemm_crossover_n(2e15, 8e12, 2) == pytest.approx(750)
    assert roofline.square_gemm_crossover_n(4e15, 8e12, 1) == pytest.approx(750)


def test_square_gemm_estimate_flips_roof_at_crossover():
    b200 = SPECS["b200"]
    e = roofline.square_gemm(4096, "fp16", b200)
    assert e.bound.binding_roof == "compute"
    assert roofline.square_gemm(int(e.crossover_n) - 16, "fp16", b200).bound.binding_roof == "memory"


@pytest.mark.parametrize("call", [
    lambda: roofline.ridge_point(1e12, 0),
    lambda: roofline.ridge_point(-1, 1e12),
    lambda: roofline.ridge_point(float("nan"), 1e12),
    lambda: roofline.arithmetic_intensity(1, 0),
    lambda: roofline.gemm_flop(0, 4, 4),
    lambda: roofline.gemm_flop(2.5, 4, 4),
    lambda: roofline.time_lower_bound(1, 1, 1e12, -5),
    lambda: roofline.square_gemm(64, "int3", SPECS["h200"]),
    lambda: roofline.square_gemm(64, "fp8", SPECS["t4"]),
])
def test_impossible_input_raises_value_error_with_a_message(call):
    with pytest.raises(ValueError, match=r"\w+"):
        call()


def test_ridge_table_has_every_gpu_and_only_its_dtypes():
    rows = roofline.ridge_table(list(SPECS.values()))
    assert [r["gpu"] for r in rows] == [s.name for s in SPECS.values()]
    t4 = rows[0]
    assert "fp8" not in t4 and t4["fp16"] == pytest.approx(65e12 / 320e9)
