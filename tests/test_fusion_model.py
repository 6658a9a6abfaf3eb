"""The fusion ledger against hand-worked numbers, and its calculator headless."""
import math
import re

import pytest

from course_lib.core.hardware import SPECS
from course_lib.models import fusion, roofline
from course_lib.models.fusion import Chain, Op
from course_lib.widgets.base import _fmt_seconds
from course_lib.widgets.fusion import IDENTICAL, fusion_calculator
from calculator_support import assert_message_then_recovers

H200 = SPECS["h200"]
N = 1 << 20


# --------------------------------------------------------------------------- one intermediate

def test_a_4096_square_bf16_intermediate_and_its_round_trip():
    assert fusion.tensor_bytes(4096 * 4096, 2) == 33_554_432
    assert fusion.materialization_bytes(4096 * 4096, 2) == 67_108_864
    t = fusion.round_trip_seconds(67_108_864, 1.5e12)
    assert t == pytest.approx(44.739e-6, rel=1e-3)
    assert round(t * 1e6, 1) == 44.7


def test_pointwise_intensity_is_flops_over_a_read_and_a_write():
    assert fusion.pointwise_intensity(1, 4) == 1 / 8
    assert fusion.pointwise_intensity(14, 2) == 3.5
    one_op = fusion.ledger(fusion.elementwise_chain(1, N, 1.0, "fp32"), H200)
    assert one_op.unfused.intensity == one_op.fused.intensity == 1 / 8


# --------------------------------------------------------------------------- k identical ops

@pytest.mark.parametrize("k", [1, 2, 4, 8, 16, 32])
def test_k_identical_fp32_ops(k):
    c = 2.0
    p = fusion.ledger(fusion.elementwise_chain(k, N, c, "fp32"), H200)
    assert (p.unfused.bytes_moved, p.unfused.launches) == (k * 2 * 4 * N, k)
    assert (p.fused.bytes_moved, p.fused.launches) == (2 * 4 * N, 1)
    assert p.bytes_saved == (k - 1) * 8 * N == (k - 1) * fusion.materialization_bytes(N, 4)
    assert p.unfused.flop == p.fused.flop == k * c * N
    assert p.unfused.intensity == pytest.approx(c / 8, rel=1e-12)
    assert p.fused.intensity == pytest.approx(k * c / 8, rel=1e-12)
    assert p.fused.seconds == pytest.approx(max(k * c * N / 67e12, 8 * N / 4.8e12), rel=1e-12)
    assert p.unfused.binding_roof == "memory"


def test_two_ops_unfused_is_not_the_fused_plan():
    p = fusion.ledger(fusion.elementwise_chain(2, N), H200)
    assert p.unfused != p.fused
    assert p.unfused.bytes_moved == 2 * p.fused.bytes_moved
    assert p.speedup_bound == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("c", [1.0, 2.0, 8.0, 14.0, 200.0])
def test_compute_bound_chain_length_on_an_h200(c):
    ridge = roofline.ridge_point(H200.peak_flop_per_s["fp32"], H200.hbm_bandwidth_bytes_per_s)
    k = fusion.compute_bound_chain_length(c, 4, H200)
    assert k == math.ceil(ridge / (c / 8))
    assert fusion.ledger(fusion.elementwise_chain(k, N, c), H200).fused.binding_roof == "compute"
    if k > 1:
        assert fusion.ledger(fusion.elementwise_chain(k - 1, N, c), H200).fused.binding_roof == "memory"


def test_compute_bound_chain_length_by_hand():
    assert fusion.compute_bound_chain_length(1, 4, "h200") == 112     # 13.96 FLOP/byte at 1/8 per op
    assert fusion.compute_bound_chain_length(8, 4, "NVIDIA H200") == 14


# --------------------------------------------------------------------------- the epilogue preset

def test_scale_bias_gelu_residual_in_bf16():
    n = 4096 * 4096
    chain = fusion.scale_bias_gelu_residual(n, "bf16")
    assert [op.name for op in chain.ops] == ["scale", "bias", "GELU", "residual add"]
    assert 8 <= fusion.GELU_FLOP_PER_ELEMENT <= 20
    p = fusion.ledger(chain, H200)
    assert p.unfused.bytes_moved == 9 * 2 * n           # 3 read+write pairs, and x + residual in, y out
    assert p.fused.bytes_moved == 3 * 2 * n             # x and the residual in, y out; the bias counts 0
    assert p.bytes_saved == 3 * fusion.materialization_bytes(n, 2) == 3 * 67_108_864
    assert (p.unfused.launches, p.fused.launches) == (4, 1)
    assert p.fused.flop == (3 + fusion.GELU_FLOP_PER_ELEMENT) * n
    assert p.fused.binding_roof == p.unfused.binding_roof == "memory"
    assert p.speedup_bound == pytest.approx(3.0, rel=1e-12)
    assert p.seconds_saved == pytest.approx(3 * 67_108_864 / 4.8e12, rel=1e-12)


def test_the_compute_roof_is_the_fp32_peak_unless_told_otherwise():
    chain = fusion.scale_bias_gelu_residual(N)
    assert fusion.ledger(chain, H200).peak_flop_per_s == 67e12
    assert fusion.ledger(chain, H200, "bf16").peak_flop_per_s == 989.4e12


# --------------------------------------------------------------------------- reductions

def test_a_reduction_inside_the_chain_ends_the_fused_kernel():
    row = 4096
    b = 4.0
    row_max = Op("row max", 1.0, b / row, reduces=True)
    subtract = Op("subtract max", 1.0, b, extra_in_bytes_per_element=b)     # re-reads x beside the row max
    p = fusion.ledger(Chain((row_max, subtract), N, b), H200)
    assert p.fused == p.unfused and p.fused.launches == 2
    assert p.bytes_saved == 0 and p.speedup_bound == 1.0


def test_ops_before_a_reduction_and_a_reduction_last_still_fuse():
    b, row = 2.0, 1024
    chain = Chain((Op("square", 1.0, b), Op("row sum", 1.0, b / row, reduces=True)), N, b)
    p = fusion.ledger(chain, H200)
    assert p.fused.launches == 1
    assert p.fused.bytes_moved == N * (b + b / row)
    assert p.bytes_saved == fusion.materialization_bytes(N, b)


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, name", [
    (lambda: fusion.tensor_bytes(0, 2), "elements"),
    (lambda: fusion.materialization_bytes(-4, 2), "elements"),
    (lambda: fusion.materialization_bytes(16, 0), "bytes_per_element"),
    (lambda: fusion.round_trip_seconds(-1, 1e12), "bytes_moved"),
    (lambda: fusion.round_trip_seconds(1, 0), "bandwidth_bytes_per_s"),
    (lambda: fusion.pointwise_intensity(-1, 4), "flop_per_element"),
    (lambda: Op("bad", -1, 4), "flop_per_element"),
    (lambda: Op("bad", 1, -4), "out_bytes_per_element"),
    (lambda: Op("bad", 1, 4, extra_in_bytes_per_element=float("nan")), "extra_in_bytes_per_element"),
    (lambda: Chain((), 16, 4), "ops"),
    (lambda: Chain((Op("x", 1, 4),), 0, 4), "elements"),
    (lambda: Chain((Op("x", 1, 4),), 16.5, 4), "elements"),
    (lambda: Chain((Op("x", 1, 4),), 16, -4), "in_bytes_per_element"),
    (lambda: fusion.elementwise_chain(0, 16), "k"),
    (lambda: fusion.elementwise_chain(2, 16, -1.0), "flop_per_op_element"),
    (lambda: fusion.elementwise_chain(2, 16, 1.0, "fp12"), "dtype"),
    (lambda: fusion.scale_bias_gelu_residual(-1), "elements"),
    (lambda: fusion.ledger(fusion.elementwise_chain(2, 16), "v100"), "gpu"),
    (lambda: fusion.ledger(fusion.elementwise_chain(2, 16), H200, "fp12"), "dtype"),
    (lambda: fusion.compute_bound_chain_length(0, 4, H200), "flop_per_op_element"),
    (lambda: fusion.compute_bound_chain_length(1, 4, "t4", "bf16"), "bf16"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=re.escape(name)):
        call()


def test_error_messages_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"^elements must be a positive whole number \(1, 2, 3, …\), got 0$"):
        fusion.tensor_bytes(0, 2)
    with pytest.raises(ValueError, match=r"choose one of t4, l4"):
        fusion.ledger(fusion.elementwise_chain(1, 16), "v100")
    with pytest.raises(ValueError, match=r"^flop_per_element must be a finite number ≥ 0 .*\(op 'bad'\)$"):
        Op("bad", -1, 4)


# --------------------------------------------------------------------------- the calculator

def shown(calc, cls):
    m = re.search(rf'class="{cls}">([^<]*)<', calc.answer.value)
    return m.group(1) if m else None


def test_calculator_builds_without_a_gpu_and_shows_the_preset():
    calc = fusion_calculator()
    assert calc.gpu.value == "NVIDIA H200" and calc.k.disabled
    p = fusion.ledger(fusion.scale_bias_gelu_residual(4096 * 4096, "bf16"), H200)
    assert shown(calc, "course-unfused-bytes") == f"{p.unfused.bytes_moved:,.0f}" == "301,989,888"
    assert shown(calc, "course-fused-bytes") == "100,663,296"
    assert shown(calc, "course-bytes-saved") == f"{3 * 67_108_864:,}"
    assert (shown(calc, "course-unfused-launches"), shown(calc, "course-fused-launches")) == ("4", "1")
    assert shown(calc, "course-fused-time") == _fmt_seconds(p.fused.seconds)
    assert shown(calc, "course-fused-binding") == "memory"
    assert shown(calc, "course-compute-bound-k") is None


@pytest.mark.parametrize("k", [1, 2, 8, 32])
def test_changing_k_shows_the_models_bytes(k):
    calc = fusion_calculator(chain=IDENTICAL, dtype="fp32", m=1024, n=1024, flop_per_op=8.0)
    calc.k.value = k
    p = fusion.ledger(fusion.elementwise_chain(k, N, 8.0, "fp32"), H200)
    assert shown(calc, "course-unfused-bytes") == f"{p.unfused.bytes_moved:,.0f}" == f"{k * 8 * N:,}"
    assert shown(calc, "course-fused-bytes") == f"{8 * N:,}"
    assert shown(calc, "course-bytes-saved") == f"{(k - 1) * 8 * N:,}"
    assert shown(calc, "course-fused-intensity") == f"{p.fused.intensity:,.3g}"
    assert shown(calc, "course-fused-binding") == ("compute" if k >= 14 else "memory")
    assert shown(calc, "course-compute-bound-k") == "14"


def test_gpu_and_dtype_drive_the_answer():
    calc = fusion_calculator(chain=IDENTICAL, k=4)
    calc.dtype.value = "fp8"
    assert shown(calc, "course-unfused-bytes") == f"{4 * 2 * 4096 * 4096:,}"
    calc.gpu.value = SPECS["a100-sxm"].name
    a100 = fusion.ledger(fusion.elementwise_chain(4, 4096 * 4096, 1.0, "fp8"), SPECS["a100-sxm"])
    assert shown(calc, "course-ridge") == f"{a100.ridge:,.1f}"
    assert shown(calc, "course-unfused-time") == _fmt_seconds(a100.unfused.seconds)


@pytest.mark.parametrize("control, value, name", [
    ("m", 0, "M"), ("n", -3, "N"), ("k", 0, "k"), ("flop_per_op", -1.0, "flop_per_op_element"),
])
def test_impossible_input_is_a_message_not_a_traceback(control, value, name):
    assert_message_then_recovers(fusion_calculator(chain=IDENTICAL), control, value, f"{name} must be")
