"""Notebook 13's lab without a GPU: its tables and figures built from fake results (every number below is
made up for the test, none is a measurement), the SDPA backend read from kernel names, the checked
slice, and the analytic tables against the model."""
import matplotlib
import pytest

from course_lib.core.timing import Timing
from course_lib.labs import attention as lab
from course_lib.launch import attention as cuda_attention
from course_lib.measure import experiments
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import Result
from course_lib.models import attention as attention_model

matplotlib.use("Agg")

MACHINE = {"gpu": "NVIDIA H200", "slug": "h200", "compute_capability": "9.0", "sm_count": 132}
CUDA_LAST = lab.rung_label(len(cuda_attention.RUNGS), cuda_attention.RUNGS[-1])
OK = {"reference": "float64", "max_abs_err": 0.0, "tolerance": 1.0, "passed": True}
AGREE = {"agree": True, "ratio": 1.0, "attempts": [{"harness_median_s": 1e-3, "blocks_median_s": 1e-3, "ratio": 1.0}]}


def fake_case(d, causal, s, plan, median_s, tokens=16384, extra=None):
    shape = attention_model.prefill_shape(max(1, tokens // s), s, d, causal)
    second = AGREE if plan in lab.SDPA_PLANS else None
    case_extra = {"sdpa_backend": "FlashAttention-2 (flash)" if plan == lab.SDPA else "cuDNN"} \
        if plan in lab.SDPA_PLANS else {}
    if plan == lab.TRITON:
        case_extra["triton_config"] = "BLOCK_M=128, BLOCK_N=64, 8 warps, 3 stages"
    case_extra.update(extra or {})
    return Case(f"d={d}, {'causal' if causal else 'full'}, S={s}: {plan}",
                {"head_dim": d, "causal": causal, "seq_len": s, "batch": shape.batch, "plan": plan}, plan,
                Timing((median_s,) * 20, 0, {}, second), attention_model.flop(shape),
                attention_model.compulsory_bytes(shape), OK, extra=case_extra)


def fake_ladder(times: dict, recorded_at="2026-12-01T10:00:00Z") -> Result:
    """``times``: {(d, causal, S): {plan: median seconds}}."""
    cases = [fake_case(d, causal, s, plan, t) for (d, causal, s), plans in times.items() for plan, t in plans.items()]
    return Result("attention.ladder", "recorded", MACHINE, recorded_at, {}, cases)


def plans(sdpa, cuda, triton, early=None, expanded=None):
    out = {lab.rung_label(i, r): early or 2 * cuda for i, r in enumerate(cuda_attention.RUNGS[:-1], 1)}
    out = {**out, CUDA_LAST: cuda, lab.TRITON: triton, lab.SDPA: sdpa}
    return {**out, lab.SDPA_EXPANDED: expanded} if expanded else out


# --------------------------------------------------------------------------- the ladder's tables


def test_ladder_rows_give_tflops_from_the_model_and_shares_of_sdpa():
    result = fake_ladder({(128, True, 4096): plans(sdpa=1e-3, cuda=1.25e-3, triton=2e-3, expanded=0.8e-3)})
    (row,) = lab.ladder_rows(result)
    shape = attention_model.prefill_shape(4, 4096, 128, True)
    assert row["batch"] == 4 and row["mask"] == "causal" and row["SDPA backend"] == "FlashAttention-2 (flash)"
    assert row["SDPA TFLOP/s"] == pytest.approx(attention_model.flop(shape) / 1e-3 / 1e12)
    last = cuda_attention.RUNGS[-1]
    assert row[f"{last} % of SDPA"] == pytest.approx(80.0)      # 1.00 ms over 1.25 ms
    assert row["Triton % of SDPA"] == pytest.approx(50.0)
    assert row["Triton config"].startswith("BLOCK_M=128")
    assert row["SDPA expanded % of SDPA"] == pytest.approx(125.0) and row["SDPA expanded backend"] == "cuDNN"
    assert row["SDPA's two protocols"] == "agree"


def runs_of(shares_by_run: list[tuple[float, float]]) -> Result:
    """A ladder recorded once per entry: (CUDA's, Triton's) % of SDPA at d = 128, causal, 4k."""
    made = [fake_ladder({(128, True, 4096): plans(sdpa=1e-3, cuda=100e-3 / cuda, triton=100e-3 / tri,
                                                  expanded=0.5e-3)},
                        recorded_at=f"2026-12-0{i + 1}T10:00:00Z") for i, (cuda, tri) in enumerate(shares_by_run)]
    last = made[-1]
    last.repeats = made[:-1]
    return last


def test_target_rows_range_over_runs_and_judge_the_lowest():
    (row,) = lab.target_rows(runs_of([(92.0, 75.0), (88.0, 71.0), (95.0, 80.0)]))
    assert row["runs"] == 3 and row["CUDA rung"] == cuda_attention.RUNGS[-1]
    assert row["CUDA % of SDPA"] == "88–95" and row["Triton % of SDPA"] == "71–80"
    assert row["CUDA ≥ 70%"] == "yes" and row["CUDA ≥ 90%"] == "no"     # one run at 88 misses the aim
    assert row["Triton ≥ 70%"] == "yes" and row["SDPA flagged in a run"] == "no"
    assert row["CUDA % of SDPA expanded"] == "44–48"      # the expanded SDPA took half the time


def test_target_rows_reject_a_run_below_the_target():
    (row,) = lab.target_rows(runs_of([(75.0, 72.0), (69.0, 72.0), (75.0, 65.0)]))
    assert row["CUDA ≥ 70%"] == "no" and row["Triton ≥ 70%"] == "no"


def test_target_rows_keep_to_d_128_and_4k_to_16k():
    result = fake_ladder({(d, False, s): plans(1e-3, 1e-3, 1e-3) for d in (64, 128) for s in (1024, 4096, 16384)})
    assert [(r["d"], r["S"]) for r in lab.target_rows(result)] == [(128, 4096), (128, 16384)]


def test_target_rows_show_a_flagged_reference():
    result = runs_of([(92.0, 75.0), (92.0, 75.0)])
    sdpa = next(c for c in result.repeats[0].cases if c.params["plan"] == lab.SDPA)
    sdpa.extra["second_protocol"] = {**AGREE, "agree": False}
    assert lab.target_rows(result)[0]["SDPA flagged in a run"] == "yes"


def test_ladder_figure_is_titled_with_its_provenance():
    result = fake_ladder({(d, c, s): plans(1e-3, 1.1e-3, 1.3e-3) for d in (128, 64) for c in (False, True)
                          for s in (1024, 4096)})
    fig = lab.ladder_figure(result)
    assert "recorded on NVIDIA H200, 2026-12-01" in fig._suptitle.get_text()
    assert len(fig.axes) == 4 and fig.axes[0].get_title() == "d = 128, full"
    assert "exp not overlapped" in " ".join(t.get_text() for t in fig.axes[-1].get_legend().get_texts())


# --------------------------------------------------------------------------- the ceilings' table


def ceiling_case(plan, median_s, ncu=None):
    shape = attention_model.prefill_shape(2, 8192, 64, False)
    extra = {"model": lab.model_extra(shape, "h200")}
    if ncu:
        extra["ncu"] = ncu
    else:
        extra["ncu_unavailable"] = "ncu is not installed"
    return fake_case(64, False, 8192, plan, median_s, extra=extra)


def test_ceiling_rows_put_each_plan_beside_the_three_floors():
    shape = attention_model.prefill_shape(2, 8192, 64, False)
    floors = attention_model.ceilings(shape, "h200")
    t = 2 * floors.tensor_s
    # ncu says (made up): the kernel took t, asked for 2^31 MUFU instructions (32 results each), read the
    # compulsory bytes twice from DRAM and the tiled plan's bytes once from L2
    ncu = {"gpu__time_duration.sum": t * 1e9, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": 45.0,
           "smsp__inst_executed_pipe_xu.sum": 2.0**31, "dram__bytes_read.sum": 2 * floors.compulsory_bytes,
           "lts__t_sectors_op_read.sum": attention_model.tiled_bytes(shape, 128) / 32,
           "smsp__issue_active.avg.pct_of_peak_sustained_active": 60.0}
    result = Result("attention.ceilings", "recorded", MACHINE, "2026-12-01T10:00:00Z", {},
                    [ceiling_case(lab.SDPA, t, ncu), ceiling_case(lab.TRITON, 3 * floors.tensor_s)])
    sdpa, triton = lab.ceiling_rows(result)
    assert sdpa["binds (model)"] == "tensor cores" and sdpa["measured ÷ floor"] == pytest.approx(2.0)
    assert sdpa["% of bf16 peak"] == pytest.approx(50.0)
    assert sdpa["exp not overlapped, % of peak (analytic)"] == pytest.approx(100 * floors.serial_fraction_of_peak)
    assert sdpa["MUFU results ÷ rate × time %"] == pytest.approx(100 * 32 * 2.0**31 / (4.18176e12 * t))
    assert sdpa["DRAM read ÷ compulsory"] == pytest.approx(2.0)
    assert sdpa["L2 read ÷ tiled (BLOCK_M = 128)"] == pytest.approx(1.0)
    assert triton["ncu"] == "ncu is not installed" and triton["measured ÷ floor"] == pytest.approx(3.0)


def test_ceilings_figure_draws_floors_and_plans():
    result = Result("attention.ceilings", "recorded", MACHINE, "2026-12-01T10:00:00Z", {},
                    [ceiling_case(lab.SDPA, 1e-3), ceiling_case(lab.TRITON, 1.2e-3)])
    fig = lab.ceilings_figure(result)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["tensor floor", "HBM floor", "exp floor", lab.SDPA, lab.TRITON]
    assert "recorded on NVIDIA H200" in fig._suptitle.get_text()


# --------------------------------------------------------------------------- pieces


@pytest.mark.parametrize("names, backend", [
    (["void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)"],
     "FlashAttention-2 (flash)"),
    (["fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<...>::Params)"],
     "memory-efficient (CUTLASS)"),
    (["cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x128x128_4x1x1"], "cuDNN"),
])
def test_the_sdpa_backend_is_read_from_its_kernels(names, backend):
    assert lab.sdpa_backend(names) == backend


def test_an_unknown_backend_says_which_kernels_ran():
    assert lab.sdpa_backend(["at::native::softmax_kernel"]).startswith("unknown (kernels: at::native::softmax_kernel")


def test_the_checked_slice_is_the_last_rows_of_two_kv_groups():
    shape = attention_model.prefill_shape(4, 4096, 128, True)
    assert lab._check_slice(shape) == (8, 128)            # 2 KV heads x 4 query heads each, 128 rows
    small = attention_model.AttentionShape(1, 2, 2, 17, 17, 64, True)
    assert lab._check_slice(small) == (2, 17)
    assert "last 128 query rows of sequence 0, query heads 0-7, over all 4096 keys" in lab.check_description(shape)


def test_the_plans_are_the_ladder_then_triton_then_sdpa():
    labels = lab.plan_labels()
    assert labels[:len(cuda_attention.RUNGS)] == [f"CUDA rung {i}: {r}" for i, r in enumerate(cuda_attention.RUNGS, 1)]
    assert labels[-3:] == [lab.TRITON, lab.SDPA, lab.SDPA_EXPANDED]


def test_the_experiments_are_registered_with_their_defaults():
    ladder = experiments.resolve_params("attention.ladder")
    assert ladder["seq_lens"] == [1024, 2048, 4096, 8192, 16384] and ladder["head_dims"] == [128, 64]
    assert experiments.REGISTRY["attention.ladder"].record_runs == 3
    assert experiments.resolve_params("attention.ceilings")["seq_len"] == 8192


def test_every_case_fills_the_gpu_with_the_same_tokens():
    for s in experiments.resolve_params("attention.ladder")["seq_lens"]:
        shape = lab._prefill(lab.MODELS["Llama 3 8B"], s, 16384, 128, True)
        assert shape.batch * shape.q_len == 16384 and shape.heads * shape.q_len // 128 >= 4 * 132


# --------------------------------------------------------------------------- analytic tables


def test_plan_bytes_rows_are_the_models():
    rows = lab.plan_bytes_rows(seq_lens=(4096,), head_dim=128)
    shape = attention_model.prefill_shape(1, 4096, 128, True)
    assert [r["MiB"] * 2**20 for r in rows] == pytest.approx([attention_model.materialized_bytes(shape),
                                                               attention_model.tiled_bytes(shape, 128),
                                                               attention_model.compulsory_bytes(shape)])
    assert rows[0]["FLOP per byte"] < rows[1]["FLOP per byte"] < rows[2]["FLOP per byte"]


def test_ceiling_model_rows_show_the_exponential_close_at_d_64():
    rows = {(r["d"], r["mask"]): r for r in lab.ceiling_model_rows("h100-sxm")}
    assert rows[(64, "full")]["exp ÷ tensor"] == pytest.approx(0.924, abs=1e-3)
    assert rows[(128, "full")]["exp ÷ tensor"] == pytest.approx(0.462, abs=1e-3)
    assert all(r["binds"] == "tensor cores" for r in rows.values())


def test_online_softmax_rows_print_the_models_numbers():
    rows = lab.online_softmax_rows([1.0, 3.0, 2.0, 5.0], [[1, 0], [0, 1], [1, 1], [2, 0]], tile=2)
    assert [r["tile"] for r in rows] == ["keys 0–1", "keys 2–3", "output acc / l", "softmax · V directly"]
    assert rows[1]["rescale exp(m old − m new)"] == 0.1353 and rows[1]["l"] == 1.2034
    assert rows[2]["acc"] == rows[3]["acc"] == "(1.7185, 0.1538)"


# --------------------------------------------------------------------------- the experiment's body, on the CPU


@pytest.fixture
def cpu_lab(monkeypatch):
    """The ladder's body with the GPU taken out: CPU operands, every plan computed by the float64 reference
    (the CUDA rungs, Triton and SDPA alike, rounded to bf16), made-up timings, and a NumPy check. What runs
    for real: the plans' wiring, the checked slice, the cases, their names, params and extras."""
    import numpy as np
    import torch

    from course_lib.measure.evidence import Check

    def operands(shape, seed):
        gen = torch.Generator().manual_seed(seed)
        return tuple(torch.randn(shape.batch, h, n, shape.head_dim, generator=gen).bfloat16()
                     for h, n in ((shape.q_heads, shape.q_len), (shape.kv_heads, shape.kv_len),
                                  (shape.kv_heads, shape.kv_len)))

    def exact(q, k, v, *, causal, **_):
        return cuda_attention.reference(q, k, v, causal=causal).bfloat16()

    calls = []

    def rung_forward(q, k, v, *, causal, rung):
        calls.append(rung)
        if rung == "refused":
            raise ValueError("this GPU cannot run it")
        return exact(q, k, v, causal=causal)

    def close(got, want, reference, rtol, atol=0.0):
        err = float(np.abs(np.asarray(got, dtype=np.float64) - np.asarray(want, dtype=np.float64)).max())
        return Check(reference, err, rtol * float(np.abs(np.asarray(want)).max()) + atol).to_json()

    monkeypatch.setattr(lab, "_operands", operands)
    monkeypatch.setattr(lab, "_sdpa", lambda q, k, v, causal: exact(q, k, v, causal=causal))
    monkeypatch.setattr(lab, "check_close", close)
    monkeypatch.setattr(cuda_attention, "forward", rung_forward)
    monkeypatch.setattr(lab.attention_triton, "forward", exact)
    monkeypatch.setattr(lab.attention_triton, "last_config", lambda: lab.attention_triton.TileConfig(16, 16, 4, 1))
    monkeypatch.setattr(lab.attention_triton, "last_resources", lambda: {"registers": 1})
    monkeypatch.setattr(lab.attention_triton, "last_generated_code", lambda: (_ for _ in ()).throw(ValueError("none")))
    monkeypatch.setattr(lab, "benchmark_interleaved",
                        lambda fns, samples, references=(): [Timing((1e-3 * (i + 1),) * samples) for i in range(len(fns))])
    monkeypatch.setattr(lab.profiler, "kernels_launched", lambda fn: ["void pytorch_flash::flash_fwd_kernel<x>(p)"])
    return calls


def test_the_ladders_body_checks_each_plan_and_records_its_case(cpu_lab):
    shape = attention_model.AttentionShape(1, 4, 2, 40, 40, 64, True)
    cases = lab._run_cases(shape, list(cuda_attention.RUNGS), 20, seed=1, skipped={})
    assert [c.params["plan"] for c in cases] == lab.plan_labels()
    assert cpu_lab == list(cuda_attention.RUNGS)
    for c in cases:
        assert c.check["passed"] and c.flop == attention_model.flop(shape)
        assert c.check["reference"] == lab.check_description(shape)
        assert c.params == {"head_dim": 64, "causal": True, "seq_len": 40, "batch": 1, "plan": c.params["plan"]}
    sdpa = next(c for c in cases if c.params["plan"] == lab.SDPA)
    assert sdpa.kernel == "torch SDPA, FlashAttention-2 (flash)" and sdpa.extra["skipped_rungs"] == {}
    triton = next(c for c in cases if c.params["plan"] == lab.TRITON)
    assert triton.extra["triton_config_fields"] == [16, 16, 4, 1] and "triton_code_unavailable" in triton.extra
    rung = next(c for c in cases if c.params["plan"].startswith("CUDA"))
    assert rung.extra["compile_report"]["registers"] > 0 and rung.extra["describe"]


def test_a_wrong_plan_fails_its_check(cpu_lab, monkeypatch):
    """The checked slice sees an error in the last rows: a kernel whose causal mask is off fails there."""
    wrong = lambda q, k, v, *, causal, **_: cuda_attention.reference(q, k, v, causal=False).bfloat16()  # noqa: E731
    monkeypatch.setattr(lab.attention_triton, "forward", wrong)
    shape = attention_model.AttentionShape(1, 4, 2, 300, 300, 64, True)
    with pytest.raises(AssertionError, match="result differs"):
        lab._run_cases(shape, [], 20, seed=1, skipped={})


def test_a_rung_the_gpu_refuses_is_skipped_and_said(cpu_lab, monkeypatch):
    monkeypatch.setattr(cuda_attention, "RUNGS", ("mma", "refused"))
    shape = attention_model.AttentionShape(1, 2, 2, 16, 16, 64, False)
    skipped = {}
    cases = lab._run_cases(shape, ["mma", "refused"], 20, seed=2, skipped=skipped)
    assert skipped == {"CUDA rung 2: refused": "this GPU cannot run it"}
    assert [c.params["plan"] for c in cases] == ["CUDA rung 1: mma", lab.TRITON, lab.SDPA, lab.SDPA_EXPANDED]
    assert next(c for c in cases if c.params["plan"] == lab.SDPA).extra["skipped_rungs"] == skipped
