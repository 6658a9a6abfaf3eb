"""Notebook 13's model against hand-worked numbers: the visible pairs of a causal mask, FLOPs, exponentials,
the bytes of the materialized, tiled and compulsory plans, the three ceilings and the exponential's rate
from the spec table, and the online softmax on one row, tile by tile."""
import math

import pytest

from course_lib.core.hardware import SPECS
from course_lib.models import attention as a
from course_lib.models import fusion

H100 = SPECS["h100-sxm"]
H200 = SPECS["h200"]


# --------------------------------------------------------------------------- visible pairs

def brute_force_pairs(q_len, kv_len, causal):
    return sum(1 for i in range(q_len) for j in range(kv_len) if not causal or j <= i + kv_len - q_len)


def test_visible_pairs_by_hand():
    assert a.visible_pairs(4, 6, causal=False) == 24
    # square and causal: rows see 1, 2, 3, 4 keys = 4·5/2
    assert a.visible_pairs(4, 4, causal=True) == 10
    # 2 queries over 5 keys, bottom-right: row 0 sees keys 0-3, row 1 keys 0-4: 4 + 5 = 9 = 15 - 3·4/2
    assert a.visible_pairs(2, 5, causal=True) == 9
    # 5 queries over 2 keys: rows 0-2 see nothing, row 3 sees key 0, row 4 keys 0-1: 3
    assert a.visible_pairs(5, 2, causal=True) == 3
    # one query, one key
    assert a.visible_pairs(1, 1, causal=True) == 1


@pytest.mark.parametrize("q_len", [1, 2, 7, 16, 33])
@pytest.mark.parametrize("kv_len", [1, 3, 16, 40])
def test_visible_pairs_match_counting_each_pair(q_len, kv_len):
    for causal in (False, True):
        assert a.visible_pairs(q_len, kv_len, causal) == brute_force_pairs(q_len, kv_len, causal)
        assert a.visible_pairs(q_len, kv_len, causal) == sum(a.visible_keys(i, q_len, kv_len, causal)
                                                             for i in range(q_len))


def test_a_causal_square_is_a_little_more_than_half():
    # N(N+1)/2, not N²/2: at N = 4096 the diagonal adds 2048 pairs a head
    assert a.visible_pairs(4096, 4096, True) == 4096 * 4097 // 2 == 4096**2 // 2 + 2048


def test_visible_keys_refuses_a_row_outside_the_queries():
    with pytest.raises(ValueError, match="row must be a whole number from 0 to q_len - 1 = 3"):
        a.visible_keys(4, 4, 4, True)


# --------------------------------------------------------------------------- FLOPs and exponentials

def test_llama3_8b_prefill_flops():
    full = a.prefill_shape(1, 4096, causal=False)
    assert (full.q_heads, full.kv_heads, full.head_dim, full.group) == (32, 8, 128, 4)
    # 4 · 1 · 32 · 4096² · 128 = 2^2 · 2^5 · 2^24 · 2^7 = 2^38
    assert a.flop(full) == 2**38 == 274_877_906_944
    causal = a.prefill_shape(1, 4096, causal=True)
    # 32 heads · 4096 · 4097 / 2 = 268,500,992 visible pairs, 4 · 128 FLOPs each
    assert a.pairs(causal) == 268_500_992 == a.exp_count(causal)
    assert a.flop(causal) == 4 * 128 * 268_500_992 == 137_472_507_904
    assert a.flop(causal) != a.flop(full) / 2


def test_a_shape_is_checked():
    with pytest.raises(ValueError, match="multiple of the KV heads"):
        a.AttentionShape(1, 3, 2, 8, 8, 64, True)
    with pytest.raises(ValueError, match="causal must be True or False"):
        a.AttentionShape(1, 4, 2, 8, 8, 64, 1)
    with pytest.raises(ValueError, match="batch must be a positive whole number"):
        a.AttentionShape(0, 4, 2, 8, 8, 64, True)


# --------------------------------------------------------------------------- bytes of the plans

SMALL = a.AttentionShape(1, 1, 1, 256, 256, 64, causal=False)


def test_materialized_plan_is_notebook_08s_ledger():
    for s, d, heads in ((256, 64, 1), (8192, 64, 4), (1024, 128, 16)):
        shape = a.AttentionShape(1, heads, heads, s, s, d, False)
        assert a.materialized_bytes(shape) == fusion.attention_bytes(s, d, heads, 2, fused=False)
    # the causal mask does not shrink it: the whole score matrix is written, then masked
    assert a.materialized_bytes(a.AttentionShape(1, 1, 1, 256, 256, 64, True)) == a.materialized_bytes(SMALL)


def test_tiled_and_compulsory_bytes_by_hand():
    # S = 256, d = 64, bf16, one head, query tiles of 128 rows. Q read and O written: 2·256·64·2 = 65,536 B.
    # Compulsory adds K and V once: 2·256·64·2 = 65,536 B.
    assert a.compulsory_bytes(SMALL) == 131_072
    # Tiled, full mask: both query tiles read all 256 keys of K and of V: 2 · 2·256·64·2 = 131,072 B more.
    assert a.query_tiles(256, 128) == 2
    assert a.keys_read_per_head(256, 256, 128, False) == 512
    assert a.tiled_bytes(SMALL, 128) == 65_536 + 131_072
    # Causal: tile 0's last row (127) sees 128 keys, tile 1's (255) all 256: 384 keys of K and V.
    causal = a.AttentionShape(1, 1, 1, 256, 256, 64, True)
    assert a.keys_read_per_head(256, 256, 128, True) == 384
    assert a.tiled_bytes(causal, 128) == 65_536 + 2 * 384 * 64 * 2 == 163_840
    # A partial last tile: 130 queries in tiles of 128, the second tile's last row is 129
    assert a.query_tiles(130, 128) == 2 and a.keys_read_per_head(130, 130, 128, True) == 128 + 130


def test_grouped_heads_read_their_kv_once_in_the_compulsory_plan_and_per_query_head_when_tiled():
    shape = a.AttentionShape(1, 32, 8, 1024, 1024, 128, False)
    q_and_o = 2 * 32 * 1024 * 128 * 2
    assert a.compulsory_bytes(shape) == q_and_o + 2 * 8 * 1024 * 128 * 2
    assert a.tiled_bytes(shape, 1024) == q_and_o + 2 * 32 * 1024 * 128 * 2   # one query tile: each query head once


def test_the_tiled_plans_intensity_is_about_its_tile_height():
    # 4·S²·d FLOPs over about 2·S·d·2·S/BLOCK_M bytes: BLOCK_M FLOP per byte for bf16, whatever S
    for block_m in (64, 128):
        shape = a.AttentionShape(1, 1, 1, 16384, 16384, 128, False)
        intensity = a.flop(shape) / a.tiled_bytes(shape, block_m)
        assert 0.99 * block_m < intensity < block_m


def test_tile_pairs_count_whole_tiles():
    # S = 256, 128 x 64 tiles, causal: tile 0 computes 2 key tiles, tile 1 four: (2 + 4) · 128 · 64
    assert a.tile_pairs(256, 256, 128, 64, True) == 49_152
    assert a.visible_pairs(256, 256, True) == 32_896                 # what is kept of them
    assert a.tile_pairs(256, 256, 128, 64, False) == 256 * 256


def test_bad_bytes_per_element_is_refused():
    with pytest.raises(ValueError, match="bytes_per_element must be a finite number > 0"):
        a.compulsory_bytes(SMALL, 0)


# --------------------------------------------------------------------------- the three ceilings

def test_the_exponential_rate_comes_from_the_spec_table():
    # 16 results a clock an SM (CUDA programming guide, cc 9.0) x 132 SMs x 1980 MHz = 4.18 T exp/s.
    # FlashAttention-3 quotes 3.9 TFLOPS of special functions for the H100 SXM5: the same 16 x 132 at a
    # lower clock (1830 MHz gives 3.87).
    assert H100.sfu_results_per_clock_per_sm == 16
    assert a.exp_results_per_s(H100) == 16 * 132 * 1980e6 == 4.18176e12
    assert SPECS["t4"].sfu_results_per_clock_per_sm == 16           # cc 7.5: the 7.x column
    with pytest.raises(ValueError, match="no special-function rate"):
        a.exp_results_per_s("b200")


def test_at_d_64_the_exponentials_take_about_as_long_as_the_matrix_products_on_hopper():
    # per visible pair: 4·d / 989.4 TFLOP/s against 1 / 4.18 T exp/s; they meet at d = 989.4 / (4 · 4.18) = 59.1
    assert a.balanced_head_dim(H100) == pytest.approx(989.4e12 / (4 * 4.18176e12))
    assert 59.0 < a.balanced_head_dim(H100) < 59.3
    assert a.exp_over_tensor(64, H100) == pytest.approx(59.15 / 64, rel=1e-3)       # 0.92
    assert a.exp_over_tensor(128, H100) == pytest.approx(59.15 / 128, rel=1e-3)     # 0.46
    # Ampere's A100 has a third of the tensor peak at the same 16 results a clock: the MUFU matters less
    assert a.balanced_head_dim("a100-sxm") == pytest.approx(312e12 / (4 * 16 * 108 * 1410e6))


def test_ceilings_of_a_llama3_prefill_on_the_h200():
    # B = 2, S = 4096, full mask, d = 128: 2^39 FLOPs; Q and O 2·(2·32·4096·128)·2 B and K, V 2·(2·8·4096·128)·2 B
    shape = a.prefill_shape(2, 4096, causal=False)
    c = a.ceilings(shape, H200)
    assert c.flop == 2**39
    assert c.compulsory_bytes == 134_217_728 + 33_554_432
    assert c.tensor_s == pytest.approx(2**39 / 989.4e12)                  # 555.6 µs
    assert c.memory_s == pytest.approx(167_772_160 / 4.8e12)              # 35.0 µs
    assert c.exp_s == pytest.approx(2 * 32 * 4096**2 / 4.18176e12)        # 256.8 µs
    assert c.binding == "tensor cores" and c.seconds == c.tensor_s
    # a kernel whose exponentials never overlap its MMAs reaches tensor / (tensor + exp) of the peak: 68%
    assert c.serial_fraction_of_peak == pytest.approx(1 / (1 + 59.15 / 128), rel=1e-3)
    # with nothing cached, K and V re-read per 128-row query tile would take longer than the MMAs
    assert c.tiled_memory_binds and c.memory_tiled_s > c.tensor_s


def test_each_roof_can_bind():
    assert a.ceilings(a.prefill_shape(2, 4096, head_dim=32), H200).binding == "exponentials (MUFU)"   # d < 59
    assert a.ceilings(a.prefill_shape(2, 128, causal=False), H200).binding == "HBM"                    # S < 258
    assert a.ceilings(a.prefill_shape(2, 4096, head_dim=64), H200).serial_fraction_of_peak == pytest.approx(
        1 / (1 + 59.15 / 64), rel=1e-2)                                                              # 52%


# --------------------------------------------------------------------------- online softmax on one row

SCORES = [1.0, 3.0, 2.0, 5.0]
V = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]


def test_online_softmax_on_one_row_by_hand():
    row = a.online_softmax_row(SCORES, V, tile=2)
    first, second = row.steps
    # keys 0-1: m = max(-inf, 3) = 3; rescale exp(-inf) = 0; p = (e^-2, e^0) = (0.135335, 1)
    # l = 1.135335; acc = 0.135335·(1, 0) + 1·(0, 1) = (0.135335, 1)
    assert (first.m_old, first.m_new, first.rescale) == (-math.inf, 3.0, 0.0)
    assert first.p == pytest.approx((math.exp(-2), 1.0))
    assert first.l_new == pytest.approx(1.135335, abs=1e-6)
    assert first.acc_new == pytest.approx((0.135335, 1.0), abs=1e-6)
    # keys 2-3: a new max, 5; old sum and acc rescaled by e^(3-5) = 0.135335; p = (e^-3, 1) = (0.049787, 1)
    # l = 1.135335 · 0.135335 + 1.049787 = 1.203438
    # acc = (0.135335, 1) · 0.135335 + 0.049787·(1, 1) + 1·(2, 0) = (2.068103, 0.185122)
    assert (second.m_old, second.m_new) == (3.0, 5.0)
    assert second.rescale == pytest.approx(0.135335, abs=1e-6)
    assert second.p == pytest.approx((0.049787, 1.0), abs=1e-6)
    assert second.l_new == pytest.approx(1.203438, abs=1e-6)
    assert second.acc_new == pytest.approx((2.068103, 0.185122), abs=1e-6)
    # output acc / l = (1.718495, 0.153828): softmax(1, 3, 2, 5) · V computed directly
    assert row.output == pytest.approx((1.718495, 0.153828), abs=1e-6)
    assert row.output == pytest.approx(a.softmax_row(SCORES, V), rel=1e-12)
    assert (row.row_max, row.row_sum) == (5.0, pytest.approx(1.203438, abs=1e-6))


def test_forgetting_the_rescale_gives_another_answer():
    """What the recurrence guards against: adding tile 2's terms to an accumulator still scaled by the old
    max (3) counts keys 0-1 e² = 7.4 times too heavily."""
    second = a.online_softmax_row(SCORES, V, tile=2).steps[1]
    wrong_l = second.l_old + sum(second.p)            # 1.135335 + 1.049787 = 2.185122, not 1.203438
    assert wrong_l == pytest.approx(2.185122, abs=1e-6)
    assert wrong_l / second.l_new == pytest.approx(1.8157, abs=1e-4)
    assert second.l_old * second.rescale + sum(second.p) == pytest.approx(second.l_new, rel=1e-15)


@pytest.mark.parametrize("tile", [1, 2, 3, 4, 100])
def test_every_tile_size_gives_the_direct_answer(tile):
    assert a.online_softmax_row(SCORES, V, tile).output == pytest.approx(a.softmax_row(SCORES, V), rel=1e-12)


def test_a_max_that_holds_rescales_by_one_and_a_masked_tile_changes_nothing():
    held = a.online_softmax_row([5.0, 1.0], [[1.0], [0.0]], tile=1)
    assert held.steps[1].rescale == 1.0
    masked = a.online_softmax_row([-math.inf, 2.0], [[9.0], [3.0]], tile=1)
    assert masked.steps[0].p == (0.0,) and masked.steps[0].l_new == 0.0 and masked.steps[0].rescale == 1.0
    assert masked.output == (3.0,)


def test_large_logits_stay_finite():
    # exp(1000) overflows a float; exp(s - max) never exceeds 1
    with pytest.raises(OverflowError):
        math.exp(1000.0)
    row = a.online_softmax_row([1000.0, 999.0], [[1.0], [0.0]], tile=1)
    assert row.output[0] == pytest.approx(1 / (1 + math.exp(-1)))          # 0.731059


@pytest.mark.parametrize("scores, values, match", [
    ([], [], "at least one key"),
    ([1.0, 2.0], [[1.0]], "one row per key"),
    ([1.0, float("nan")], [[1.0], [2.0]], "finite numbers"),
    ([1.0, 2.0], [[1.0], [2.0, 3.0]], "same, non-zero length"),
    ([-math.inf, -math.inf], [[1.0], [2.0]], "every key is masked"),
])
def test_bad_rows_get_a_sentence(scores, values, match):
    with pytest.raises(ValueError, match=match):
        a.online_softmax_row(scores, values, tile=1)


def test_a_tile_must_be_a_whole_number():
    with pytest.raises(ValueError, match="tile must be a positive whole number"):
        a.online_softmax_row(SCORES, V, tile=0)
