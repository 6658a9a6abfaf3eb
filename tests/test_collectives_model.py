"""The α–β model of collectives (``models.collectives``) against hand-worked numbers, nccl-tests' bus-bandwidth
factors, the tensor-parallel MLP's split and the gradient-bucket queue; and the spec table's NVLink figures."""
import math
import re

import pytest

from course_lib.core.hardware import SPECS
from course_lib.models import collectives as cm
from course_lib.models import transformer

GIB = 1 << 30


# --------------------------------------------------------------------------- nccl-tests' factors

@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_bus_bandwidth_factors_are_nccl_tests_table(n):
    # nccl-tests, doc/PERFORMANCE.md, "Summary": AllReduce 2(n-1)/n; ReduceScatter, AllGather and AlltoAll
    # (n-1)/n; Broadcast and Reduce 1.
    assert cm.bus_bandwidth_factor("all_reduce", n) == 2 * (n - 1) / n
    for c in ("reduce_scatter", "all_gather", "all_to_all"):
        assert cm.bus_bandwidth_factor(c, n) == (n - 1) / n
    for c in ("broadcast", "reduce"):
        assert cm.bus_bandwidth_factor(c, n) == 1.0


def test_the_factors_at_8_gpus_are_the_familiar_numbers():
    assert cm.bus_bandwidth_factor("all_reduce", 8) == 1.75
    assert cm.bus_bandwidth_factor("all_gather", 8) == 0.875


@pytest.mark.parametrize("collective", cm.COLLECTIVES)
@pytest.mark.parametrize("p", [2, 3, 4, 8])
def test_with_no_latency_the_bus_bandwidth_is_the_link_s(collective, p):
    """busbw is defined so that a bandwidth-optimal collective reaches the link's speed whatever p is."""
    c = cm.predict(collective, 3 * GIB, p, 450e9, 0.0)
    assert c.busbw_bytes_per_s == pytest.approx(450e9, rel=1e-12)
    assert c.crossover_bytes is None and c.dominant == "bandwidth"


# --------------------------------------------------------------------------- worked examples

def test_a_1_gib_all_reduce_on_8_gpus_at_450_gb_s_and_5_us():
    # ring: 2(p-1) = 14 steps → 14 × 5 µs = 70 µs of latency.
    # each rank sends 2·7/8 of 1,073,741,824 B = 1,879,048,192 B; at 450e9 B/s: 4.17566265e-3 s.
    # t = 4.24566265e-3 s; algbw = 1,073,741,824 / t = 252.9 GB/s; busbw = algbw × 1.75 = 442.6 GB/s.
    # crossover: 14 × 5e-6 s × 450e9 B/s / 1.75 = 18,000,000 B.
    c = cm.predict("all_reduce", GIB, 8, 450e9, 5e-6)
    assert c.steps == 14 and c.latency_s == pytest.approx(70e-6, rel=1e-12)
    assert c.bytes_sent_per_rank == 1_879_048_192
    assert c.bandwidth_s == pytest.approx(4.1756626489e-3, rel=1e-9)
    assert c.seconds == pytest.approx(4.2456626489e-3, rel=1e-9)
    assert c.algbw_bytes_per_s / 1e9 == pytest.approx(252.9, abs=0.05)
    assert c.busbw_bytes_per_s / 1e9 == pytest.approx(442.6, abs=0.05)
    assert c.dominant == "bandwidth"
    assert c.crossover_bytes == pytest.approx(18e6, rel=1e-12)


def test_an_8_kib_all_reduce_is_all_latency():
    # 1.75 × 8,192 B = 14,336 B at 450e9 B/s = 31.9 ns, against 70 µs of latency.
    c = cm.predict("all_reduce", 8192, 8, 450e9, 5e-6)
    assert c.bandwidth_s == pytest.approx(14336 / 450e9, rel=1e-12)
    assert c.dominant == "latency" and c.seconds == pytest.approx(70e-6 + 14336 / 450e9, rel=1e-12)


def test_at_the_crossover_the_two_terms_are_equal():
    c = cm.predict("all_gather", 1e6, 4, 300e9, 8e-6)
    at = cm.predict("all_gather", c.crossover_bytes, 4, 300e9, 8e-6)
    assert at.latency_s == pytest.approx(at.bandwidth_s, rel=1e-12)
    # all-gather on 4: 3 steps, 3/4 of S sent: 3 × 8e-6 × 300e9 / 0.75 = 9.6e6 B
    assert c.crossover_bytes == pytest.approx(9.6e6, rel=1e-12)


def test_the_tree_pays_2_log2_p_latencies_and_the_ring_s_bandwidth_term():
    # p = 8: 2·3 = 6 steps against the ring's 14; crossover 6 × 5e-6 × 450e9 / 1.75 = 7,714,285.7 B.
    ring, tree = (cm.predict("all_reduce", GIB, 8, 450e9, 5e-6, a) for a in ("ring", "tree"))
    assert (ring.steps, tree.steps) == (14, 6)
    assert tree.bandwidth_s == ring.bandwidth_s
    assert tree.crossover_bytes == pytest.approx(6 * 5e-6 * 450e9 / 1.75, rel=1e-12)
    assert [cm.steps("all_reduce", p, "tree") for p in (2, 3, 4, 5, 8, 16)] == [2, 2, 4, 4, 6, 8]
    with pytest.raises(ValueError, match="all-reduce only"):
        cm.predict("all_gather", GIB, 8, 450e9, 5e-6, "tree")


def test_broadcast_on_4_a100s():
    # chain: 3 steps × 10 µs = 30 µs; the root sends all 1e8 B at 300e9 B/s = 333.33 µs; t = 363.33 µs.
    # algbw = busbw (factor 1) = 1e8 / 363.33e-6 = 275.2 GB/s.
    c = cm.predict("broadcast", 1e8, 4, SPECS["a100-sxm"].nvlink_per_direction_bytes_per_s, 10e-6)
    assert c.seconds == pytest.approx(30e-6 + 1e8 / 300e9, rel=1e-12)
    assert c.busbw_bytes_per_s == c.algbw_bytes_per_s
    assert c.busbw_bytes_per_s / 1e9 == pytest.approx(275.2, abs=0.05)


def test_ring_steps_and_sent_shares():
    assert [cm.steps(c, 4) for c in cm.COLLECTIVES] == [6, 3, 3, 3, 3, 3]
    assert cm.sent_fraction("all_reduce", 4) == 1.5 and cm.sent_fraction("reduce_scatter", 4) == 0.75
    assert cm.sent_fraction("broadcast", 4) == 1.0


def test_one_gpu_moves_nothing():
    c = cm.predict("all_reduce", GIB, 1, 450e9, 5e-6)
    assert (c.steps, c.seconds, c.bytes_sent_per_rank) == (0, 0.0, 0.0)
    assert c.algbw_bytes_per_s is None and c.busbw_bytes_per_s is None and c.crossover_bytes is None
    assert c.dominant == "nothing moves"


def test_a_measured_time_s_bus_bandwidth():
    # a 1 GiB all-reduce on 8 GPUs in 5 ms: 1,073,741,824 / 5e-3 × 1.75 = 375.8 GB/s
    assert cm.link_bandwidth_from_busbw("all_reduce", 8, GIB, 5e-3) == pytest.approx(GIB / 5e-3 * 1.75)


@pytest.mark.parametrize("call, message", [
    (lambda: cm.predict("allreduce", 1e6, 8, 450e9, 5e-6), "collective must be one of"),
    (lambda: cm.predict("all_reduce", 0, 8, 450e9, 5e-6), "message size must be a positive number"),
    (lambda: cm.predict("all_reduce", 1e6, 0, 450e9, 5e-6), "GPU count must be a positive whole number"),
    (lambda: cm.predict("all_reduce", 1e6, 2.5, 450e9, 5e-6), "GPU count must be a positive whole number"),
    (lambda: cm.predict("all_reduce", 1e6, 8, 0, 5e-6), "link bandwidth must be a positive number"),
    (lambda: cm.predict("all_reduce", 1e6, 8, 450e9, -1e-6), "latency per step must be zero or positive"),
    (lambda: cm.predict("all_reduce", 1e6, 8, 450e9, 5e-6, "butterfly"), "algorithm must be one of"),
    (lambda: cm.predict("all_reduce", math.inf, 8, 450e9, 5e-6), "message size must be a positive number"),
])
def test_bad_input_is_a_clear_sentence(call, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# --------------------------------------------------------------------------- tensor parallelism

LLAMA = transformer.LLAMA3_8B


def test_the_tensor_parallel_mlp_of_llama_3_8b_at_prefill_on_4_gpus():
    # 14,336 / 4 = 3,584 columns a rank; gate and up: M = 4,096, N = 2 × 3,584 = 7,168, K = 4,096:
    # 2·4096·7168·4096 = 240,518,168,576 FLOPs. The all-reduce: 4,096 rows × 4,096 × 2 B = 33,554,432 B (32 MiB).
    mlp = cm.tensor_parallel_mlp(LLAMA, 4096, 4)
    gate_up, silu, down = mlp.ops
    assert gate_up.gemm_mnk == (4096, 7168, 4096) and gate_up.flop == 240_518_168_576
    assert down.gemm_mnk == (4096, 4096, 3584)
    assert mlp.all_reduce_bytes == 33_554_432
    assert cm.tensor_parallel_mlp(LLAMA, 16, 8).all_reduce_bytes == 131_072   # decode, batch 16: 128 KiB


@pytest.mark.parametrize("ranks", [1, 2, 4, 8])
def test_the_ranks_together_do_the_unsplit_mlp_s_work(ranks):
    step = transformer.prefill(1, 4096)
    unsplit = [op for op in transformer.layer_ops(LLAMA, step)
               if op.name in ("gate and up projections", "SiLU(gate) · up", "down projection")]
    mlp = cm.tensor_parallel_mlp(LLAMA, step.rows, ranks)
    assert ranks * mlp.flop_per_rank == pytest.approx(sum(op.flop for op in unsplit), rel=1e-12)


def test_the_overlap_prediction_on_8_h100s():
    # comm: ring all-reduce of 32 MiB on 8 GPUs at 450e9 B/s, α = 5 µs: 70 µs + 1.75 × 33,554,432 / 450e9 =
    # 70 µs + 130.489 µs = 200.489 µs. Compute: the rank's three ops at the H100 datasheet's roofs (the atlas).
    h100 = SPECS["h100-sxm"]
    mlp = cm.tensor_parallel_mlp(LLAMA, 4096, 8)
    pred = cm.tensor_parallel_prediction(mlp, h100, h100.nvlink_per_direction_bytes_per_s, 5e-6)
    assert pred.communication.seconds == pytest.approx(70e-6 + 1.75 * 33_554_432 / 450e9, rel=1e-12)
    # gate and up alone: 2·4096·3584·4096 = 120,259,084,288 FLOPs at 989.4e12 FLOP/s = 121.5 µs (compute-bound)
    assert mlp.ops[0].bound(h100).seconds == pytest.approx(120_259_084_288 / 989.4e12, rel=1e-12)
    assert pred.compute_s == sum(op.bound(h100).seconds for op in mlp.ops)
    assert pred.serialized_s == pred.compute_s + pred.communication.seconds
    assert pred.overlapped_s == max(pred.compute_s, pred.communication.seconds)


def test_a_split_the_mlp_cannot_take_is_refused():
    with pytest.raises(ValueError, match="cannot split evenly"):
        cm.tensor_parallel_mlp(LLAMA, 4096, 3)
    with pytest.raises(ValueError, match="rows"):
        cm.tensor_parallel_mlp(LLAMA, 0, 2)


# --------------------------------------------------------------------------- gradient buckets

def brute_force_finish_s(plan: cm.BucketPlan) -> float:
    """The queue, bucket by bucket: start when ready and when the stream is free."""
    free, done = 0.0, 0.0
    for k in range(1, plan.buckets + 1):
        ready = plan.backward_s * min(k * plan.bucket_bytes, plan.gradient_bytes) / plan.gradient_bytes
        t = plan.full_bucket.seconds if k < plan.buckets else plan.last_bucket.seconds
        free = max(ready, free) + t
        done = free
    return done


def test_four_buckets_on_four_gpus():
    # G = 1.6e9 B in buckets of 0.4e9 on 4 GPUs at 100e9 B/s, α = 10 µs: each all-reduce is
    # 6 × 10 µs + 1.5 × 0.4e9 / 100e9 = 60 µs + 6 ms = 6.06 ms. Backward 40 ms: buckets ready at 10, 20, 30,
    # 40 ms, each done 6.06 ms later; the last ends at 46.06 ms: 6.06 ms exposed.
    plan = cm.gradient_buckets(1.6e9, 0.4e9, 4, 40e-3, 100e9, 10e-6)
    assert plan.buckets == 4 and plan.full_bucket.seconds == pytest.approx(6.06e-3, rel=1e-12)
    assert plan.exposed_s == pytest.approx(6.06e-3, rel=1e-9)
    assert plan.latency_overhead_s == pytest.approx(240e-6, rel=1e-12)
    assert plan.communication_s == pytest.approx(24.24e-3, rel=1e-12)
    # Backward 20 ms: ready at 5, 10, 15, 20 ms; 5 + 6.06 = 11.06, then 17.12, 23.18, 29.24 ms: 9.24 ms exposed.
    short = cm.gradient_buckets(1.6e9, 0.4e9, 4, 20e-3, 100e9, 10e-6)
    assert short.finish_s == pytest.approx(29.24e-3, rel=1e-9) and short.exposed_s == pytest.approx(9.24e-3, rel=1e-9)


def test_tiny_buckets_drown_in_latency_and_one_bucket_overlaps_nothing():
    # 1,600 buckets of 1e6 B: 60 µs + 15 µs = 75 µs each, one ready every 25 µs: the queue grows, and the
    # last ends at 25 µs + 1,600 × 75 µs = 120.025 ms: 80.025 ms exposed, 96 ms of it latency.
    tiny = cm.gradient_buckets(1.6e9, 1e6, 4, 40e-3, 100e9, 10e-6)
    assert tiny.buckets == 1600 and tiny.finish_s == pytest.approx(120.025e-3, rel=1e-9)
    assert tiny.latency_overhead_s == pytest.approx(96e-3, rel=1e-9)
    # 16 buckets of 1e8 B: 1.56 ms each, one ready every 2.5 ms: only the last is exposed, 1.56 ms.
    mid = cm.gradient_buckets(1.6e9, 1e8, 4, 40e-3, 100e9, 10e-6)
    assert mid.exposed_s == pytest.approx(1.56e-3, rel=1e-9)
    # one bucket: 60 µs + 24 ms, all of it after the backward pass.
    one = cm.gradient_buckets(1.6e9, 1.6e9, 4, 40e-3, 100e9, 10e-6)
    assert one.buckets == 1 and one.exposed_s == pytest.approx(24.06e-3, rel=1e-9)
    assert mid.step_s < min(tiny.step_s, one.step_s)


@pytest.mark.parametrize("grads, bucket, backward", [
    (1.6e9, 0.4e9, 40e-3), (1e9, 0.4e9, 10e-3), (1e9, 3e7, 5e-3), (1e9, 3e7, 500e-3), (7e8, 7e8, 1e-3),
    (1e9, 1e6, 30e-3),
])
def test_the_closed_form_is_the_queue(grads, bucket, backward):
    plan = cm.gradient_buckets(grads, bucket, 8, backward, 450e9, 5e-6)
    assert plan.finish_s == pytest.approx(brute_force_finish_s(plan), rel=1e-12)


def test_an_uneven_last_bucket():
    plan = cm.gradient_buckets(1e9, 0.4e9, 2, 10e-3, 100e9, 0.0)   # 0.4, 0.4 and 0.2 GB
    assert plan.buckets == 3 and plan.last_bucket.message_bytes == pytest.approx(0.2e9)
    assert plan.communication_s == pytest.approx((0.4e9 * 2 + 0.2e9) / 100e9, rel=1e-12)


def test_a_bucket_larger_than_the_gradients_is_refused():
    with pytest.raises(ValueError, match="larger than all"):
        cm.gradient_buckets(1e9, 2e9, 2, 1e-3, 100e9, 0.0)
    with pytest.raises(ValueError, match="backward time must be a positive number"):
        cm.gradient_buckets(1e9, 1e8, 2, 0, 100e9, 0.0)


# --------------------------------------------------------------------------- the spec table's NVLink

def test_nvlink_figures_are_the_datasheets_and_halve_per_direction():
    # datasheets: A100 SXM 600 GB/s (NVLink 3, 12 links), H100 and H200 SXM 900 GB/s (NVLink 4, 18 links),
    # HGX B200 1.8 TB/s per GPU (NVLink 5, 18 links): both directions added together.
    want = {"a100-sxm": 600e9, "h100-sxm": 900e9, "h200": 900e9, "b200": 1.8e12}
    for key, total in want.items():
        gpu = SPECS[key]
        assert gpu.nvlink_bidirectional_bytes_per_s == total
        assert gpu.nvlink_per_direction_bytes_per_s == total / 2
        assert "NVLink" in gpu.source and "datasheet" in gpu.source
    for key in set(SPECS) - set(want):        # PCIe cards: no NVLink figure
        assert SPECS[key].nvlink_bidirectional_bytes_per_s is None
        assert SPECS[key].nvlink_per_direction_bytes_per_s is None
