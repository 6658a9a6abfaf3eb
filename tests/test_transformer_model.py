"""The transformer-layer atlas against worked examples: the seed's projection table (K = N = 4096 in
bf16 at M = 1, 128, 4096), Llama 3 8B's parameter count and KV cache per token, the grouped path's
KV bytes against the replicated one, and decode falling to the memory roof."""
import pytest

from course_lib.core.hardware import spec
from course_lib.models import transformer
from course_lib.models.transformer import LLAMA3_8B, LLAMA3_70B, ModelShape, Op, decode, overlap_bound, prefill


@pytest.mark.parametrize("m, flop, nbytes, intensity", [
    (1, 33_554_432, 33_570_816, 0.9995),
    (128, 4_294_967_296, 35_651_584, 120.47),
    (4096, 137_438_953_472, 100_663_296, 1365.33),
])
def test_a_square_projection_matches_the_seeds_table(m, flop, nbytes, intensity):
    op = transformer.gemm_op("projection", m, 4096, 4096, 2)
    assert (op.flop, op.bytes) == (flop, nbytes) and op.intensity == pytest.approx(intensity, abs=5e-3)


def test_llama3_8b_has_its_eight_billion_parameters_and_128_kib_of_cache_per_token():
    assert LLAMA3_8B.parameters() == pytest.approx(8.03e9, rel=2e-3)      # Meta's model card: 8.03B
    assert LLAMA3_70B.parameters() == pytest.approx(70.6e9, rel=3e-3)     # 70.6B
    assert LLAMA3_8B.kv_bytes_per_token("bf16") == 32 * 2 * 8 * 128 * 2 == 128 * 1024
    assert LLAMA3_8B.group == 4


def test_the_grouped_path_reads_each_kv_byte_once_per_group():
    phase = decode(batch=1, context=8192)
    grouped = transformer.attention_op(LLAMA3_8B, phase, 2)
    replicated = transformer.attention_op(LLAMA3_8B, phase, 2, replicated_kv=True)
    kv = 2 * 8 * 8192 * 128 * 2                     # K and V of 8 heads, 8k tokens, bf16: 32 MiB
    q_o, append = 2 * 32 * 128 * 2, 2 * 8 * 128 * 2
    assert grouped.bytes == kv + q_o + append
    assert replicated.bytes == 4 * kv + q_o + append and grouped.flop == replicated.flop


def test_causal_prefill_attention_does_half_the_square():
    phase = prefill(batch=2, tokens=1024)
    op = transformer.attention_op(LLAMA3_8B, phase, 2)
    assert op.flop == 4 * 2 * 32 * 1024 * 1024 * 128 / 2


def test_one_layers_weights_are_what_its_gemms_read():
    ops = transformer.layer_ops(LLAMA3_8B, decode(1, 1024))
    weights = sum(op.gemm_mnk[1] * op.gemm_mnk[2] for op in ops if op.kind == "gemm")
    assert weights + 2 * LLAMA3_8B.d_model == LLAMA3_8B.layer_weights()


def test_decode_is_memory_bound_everywhere_and_prefill_gemms_are_compute_bound():
    h100 = spec("NVIDIA H100 SXM")
    at_decode = transformer.atlas(LLAMA3_8B, decode(1, 4096), h100)
    assert all(r.bound.binding_roof == "memory" for r in at_decode)
    at_prefill = transformer.atlas(LLAMA3_8B, prefill(1, 4096), h100)
    gemms = [r for r in at_prefill if r.op.kind == "gemm"]
    assert gemms and all(r.bound.binding_roof == "compute" for r in gemms)
    # decode's floor is the weights' bytes over the bandwidth, to within the activations and the cache
    floor = sum(r.seconds for r in at_decode)
    weights_s = LLAMA3_8B.layer_weights() * 2 / h100.hbm_bandwidth_bytes_per_s
    assert weights_s < floor < 1.2 * weights_s
    assert sum(transformer.time_shares(at_decode)) == pytest.approx(1.0)


def test_batching_decode_moves_the_projections_right_on_the_roofline():
    one = transformer.layer_ops(LLAMA3_8B, decode(1, 1024))[1]
    many = transformer.layer_ops(LLAMA3_8B, decode(64, 1024))[1]
    assert one.intensity == pytest.approx(1.0, rel=0.01) and many.intensity > 50 * one.intensity


@pytest.mark.parametrize("make, message", [
    (lambda: ModelShape("x", 4096, 32, 6, 128, 14336, 128256, 32), "multiple of the KV heads"),
    (lambda: decode(0, 1024), "batch"),
    (lambda: transformer.Phase("decode", 1, 4, 1024), "one token"),
    (lambda: transformer.Phase("prefill", 1, 128, 256), "context must equal tokens"),
    (lambda: transformer.Phase("train", 1, 1, 1), "phase must be one of"),
])
def test_impossible_shapes_are_refused_with_the_reason(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_two_streams_gain_only_what_the_shared_roofs_leave():
    # Worked by hand on the H200's datasheet (989.4 TFLOP/s bf16, 4.8 TB/s):
    # two memory-bound ops reading 240 MB each have a 50 µs floor alone and 100 µs together on HBM.
    h200 = spec("h200")
    a, b = Op("a", "elementwise", 0.0, 240e6), Op("b", "elementwise", 0.0, 240e6)
    half_speed = overlap_bound(a, b, 100e-6, 100e-6, h200)     # each alone at half the bandwidth: room to share
    assert half_speed.serial_s == pytest.approx(200e-6) and half_speed.shared_floor_s == pytest.approx(100e-6)
    assert half_speed.best_gain == pytest.approx(2.0)
    near_roof = overlap_bound(a, b, 55e-6, 55e-6, h200)        # each alone near the roof: together still 100 µs
    assert near_roof.overlapped_s == pytest.approx(100e-6) and near_roof.best_gain == pytest.approx(1.1)
    assert near_roof.limiter == "the shared roofs"
    # a GEMM at the tensor roof for 100 µs (98.94 GFLOP, its bytes negligible) beside a 480 MB read (100 µs):
    # different roofs, so together they need only the longer op's time
    gemm, read = Op("gemm", "gemm", 98.94e9, 1e3), Op("read", "elementwise", 0.0, 480e6)
    mixed = overlap_bound(gemm, read, 110e-6, 105e-6, h200)
    assert mixed.shared_floor_s == pytest.approx(100e-6, rel=1e-3) and mixed.overlapped_s == pytest.approx(110e-6)
    assert mixed.best_gain == pytest.approx(215 / 110) and mixed.limiter == "the longer op alone"
    with pytest.raises(ValueError, match="a_seconds"):
        overlap_bound(a, b, 0.0, 1e-6, h200)
