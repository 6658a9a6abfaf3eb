"""Notebook 12's pieces that need no GPU: the KV cache's lane mapping against the sector model, the
decode launcher's checks and splits, the read ceilings' byte counts, the exercise checks (right
answers accepted, wrong ones rejected) and the recorded results against the atlas."""
import pytest

from course_lib.exercises import transformer_layer as ex
from course_lib.launch import decode_attention as decode
from course_lib.launch.memory_hierarchy import bytes_read
from course_lib.models import transformer


def test_token_major_warp_reads_two_whole_rows_in_sixteen_sectors():
    (addresses, size), = transformer.kv_warp_loads("token-major", 8192)
    assert size == 16 and sorted(addresses) == list(range(0, 512, 16))
    m = transformer.kv_read_model("token-major")
    assert (m.instructions, m.sectors, m.fetched_over_useful) == (1, 16, 1.0)


def test_dimension_major_warp_needs_eight_loads_each_sixteen_sectors():
    loads = transformer.kv_warp_loads("dimension-major", 1000)
    assert len(loads) == 8 and all(size == 2 for _, size in loads)
    first, _ = loads[0]
    assert first[0] == 0 and first[16] == 2 and first[1] == 8 * 1000 * 2   # token t+1 beside t; next dims 2T apart
    m = transformer.kv_read_model("dimension-major", 1000)
    assert (m.sectors_per_instruction, m.fetched_over_useful) == (16.0, 8.0)


@pytest.mark.parametrize("bad", [dict(layout="row-major"), dict(context=1), dict(token=-1), dict(head_dim=64)])
def test_kv_mapping_refuses_what_it_does_not_model(bad):
    args = dict(layout="token-major", context=4096, token=0, head_dim=128) | bad
    with pytest.raises(ValueError):
        transformer.kv_warp_loads(args["layout"], args["context"], args["token"], args["head_dim"])


def test_splits_fill_the_gpu_without_tiny_splits():
    assert decode.splits_for(1, 8, 1024, 132) == 16            # 8 pairs, at least 64 tokens a split
    assert decode.splits_for(8, 8, 8192, 132) == 9             # 64 pairs x 9 >= 4 x 132
    assert decode.splits_for(64, 8, 8192, 132) == 2
    assert decode.splits_for(1, 1, 1, 132) == 1
    with pytest.raises(ValueError, match="context"):
        decode.splits_for(1, 8, 0, 132)


def test_decode_kernel_choice_names_what_is_built():
    assert decode.kernel_for(4) == "decode_grouped_g4" and decode.kernel_for(1) == "decode_replicated"
    with pytest.raises(ValueError, match="group 2"):
        decode.kernel_for(2)
    with pytest.raises(ValueError, match="dimension-major"):
        decode.kernel_for(8, "dimension-major")


def test_read_ceiling_bytes():
    assert bytes_read("per block", 1024, 3, 10) == 30720
    assert bytes_read("partitioned", 1024, 3, 10) == 3072
    with pytest.raises(ValueError, match="kind"):
        bytes_read("strided", 1024, 1, 1)


def test_crossover_exercise_judges_each_number_and_the_reasoning_between_them():
    proj_mb, per_token, crossover = ex.attention_crossover("Llama 3 8B", 16)
    assert per_token == 16 * 2 * 8 * 128 * 2                     # K and V rows of 8 KV heads, 16 sequences
    assert proj_mb == pytest.approx(2 * ex.MODELS["Llama 3 8B"].layer_weights() / 1e6, rel=0.01)   # ≈ the weights
    assert crossover == pytest.approx(proj_mb * 1e6 / per_token, rel=0.002)
    assert ex.check_attention_crossover("Llama 3 8B", 16, proj_mb, per_token, crossover).correct
    assert ex.check_attention_crossover("Llama 3 8B", 16, round(proj_mb, 1), per_token, round(crossover, -1)).correct
    # the printed 4,096 B a token of one sequence, not of the batch: that item and the crossover are wrong,
    # and the crossover is said to follow from the learner's numbers; no verdict gives the answer away
    verdict = ex.check_attention_crossover("Llama 3 8B", 16, proj_mb, 4096, proj_mb * 1e6 / 4096)
    assert not verdict.correct and "projections' MB: right" in verdict and "follows from your two numbers" in verdict
    assert f"{crossover:,.0f}" not in verdict and f"{per_token:,.0f}" not in verdict
    verdict = ex.check_attention_crossover("Llama 3 8B", 16, proj_mb, per_token, 8192)
    assert not verdict.correct and "crossover: not right" in verdict and "follows" not in verdict
    for wrong in ((None, per_token, crossover), ("many", per_token, crossover), (proj_mb, 0, crossover)):
        assert not ex.check_attention_crossover("Llama 3 8B", 16, *wrong).correct


def test_attention_floor_is_the_cache_read_at_the_hbm_bandwidth():
    want = ex.attention_floor_s("Llama 3 8B", 16, 16384)
    rep = ex.attention_floor_s("Llama 3 8B", 16, 16384, replicated_kv=True)
    assert rep == pytest.approx(4 * want, rel=0.01)


def test_compute_bound_batch_exercise():
    want = ex.compute_bound_batch("Llama 3 8B", "gate and up projections", 4096)
    assert 150 < want < 300          # about the H200's bf16 ridge in FLOP per byte
    verdict = ex.check_compute_bound_batch("Llama 3 8B", "gate and up projections", 4096, want)
    assert verdict.correct and "206.4 FLOP per byte, just past the H200's bf16 ridge of 206.1" in verdict
    for wrong in (want - 1, want + 1, 1, float(want), None, True):
        assert not ex.check_compute_bound_batch("Llama 3 8B", "gate and up projections", 4096, wrong).correct
    with pytest.raises(ValueError, match="not a GEMM"):
        ex.compute_bound_batch("Llama 3 8B", "RoPE on Q and K", 4096)


LAYER_GEMMS = {"Q, K, V projection": (6144, 4096), "output projection": (4096, 4096),
               "gate and up projections": (28672, 4096), "down projection": (4096, 14336)}


def test_the_layers_gemm_plans_are_the_dispatchs_picks_on_the_recorded_ladder():
    """The plan each projection ran (layer.ops) is the one the SM-round model picks at its shape, calibrated on the
    recorded hopper.ladder: rung 7 at prefill, split-K or rung 5 at decode, as notebook 12 says."""
    from course_lib.launch import hopper_gemm
    from course_lib.measure import experiments

    ladder = experiments.replay("hopper.ladder", experiments.resolve_params("hopper.ladder"), "h200")
    per = hopper_gemm.seconds_per_tile_k_block(ladder, sm_count=ladder.machine["sm_count"])
    ops = experiments.replay("layer.ops", experiments.resolve_params("layer.ops"), "h200")
    seen = {}
    for c in ops.cases:
        if not c.params["plan"].startswith("course GEMM"):
            continue
        n, k = LAYER_GEMMS[c.params["op"]]
        m = c.params["batch"] * c.params["tokens"]
        plan = hopper_gemm.dispatch(m, n, k, per, sm_count=ops.machine["sm_count"])
        assert c.extra["dispatch"] == plan.label and f"({plan.label}," in c.params["plan"], (c.name, plan.label)
        assert c.extra["dispatch_model_s"] == pytest.approx(hopper_gemm.predicted_seconds(plan, m, n, k, per), rel=1e-9)
        assert c.check["passed"], c.name
        seen[c.params["phase"], c.params["op"]] = plan.label
    assert {seen["prefill", op] for op in LAYER_GEMMS} == {"rung 7"}
    assert [seen["decode", op] for op in LAYER_GEMMS] == ["split-K ×8", "split-K ×4", "rung 5", "split-K ×4"]


def test_stream_rows_set_each_pairs_gain_against_the_most_overlap_can_give():
    from types import SimpleNamespace

    from course_lib.labs import transformer_layer as lab
    from course_lib.measure.evidence import Case, Check

    ok = Check("the same ops on one stream", 0.0, 1.0).to_json()

    def case(plan, us, shared_us=100.0):
        return Case(f"p: {plan}", {"pair": "p", "plan": plan}, "PyTorch", [us * 1e-6] * 20, 0, 0, ok,
                    extra={"shared_floor_s": shared_us * 1e-6})
    result = SimpleNamespace(cases=[case("A alone", 60), case("B alone", 80), case("A then B, one stream", 140),
                                    case("A and B, two streams", 112)])
    (row,) = lab.stream_rows(result)
    assert row["best two streams can do µs"] == pytest.approx(100.0)          # the shared roofs, above B alone
    assert row["gain from two streams"] == pytest.approx(140 / 112) and row["most it could be"] == pytest.approx(1.4)


def test_the_stream_pairs_are_independent_ops_of_the_model_with_their_atlas_floors():
    from course_lib.core.hardware import spec
    from course_lib.labs import transformer_layer as lab

    pairs = lab.stream_pairs(transformer.LLAMA3_8B, 16, 8192, 4096, 512)
    assert [(p[2], p[4]) for p in pairs] == [("attention", "MLP")] * 3
    mlp = lab._op_model(transformer.LLAMA3_8B, transformer.prefill(1, 512), "MLP")
    ops = transformer.layer_ops(transformer.LLAMA3_8B, transformer.prefill(1, 512))
    assert mlp.flop == pytest.approx(sum(o.flop for o in ops[6:]))          # RMSNorm (MLP) to the residual add
    h200 = spec("h200")
    chunk = pairs[2]
    attention = lab._op_model(transformer.LLAMA3_8B, chunk[1], "attention")
    assert attention.bound(h200).binding_roof == "memory" and mlp.bound(h200).binding_roof == "compute"
