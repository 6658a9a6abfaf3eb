"""Notebook 14's lab without a GPU: its cases built from real runs of the launcher over gloo (CPU processes)
are valid records, its tables reconcile them with the α–β model, its fit recovers a known α and B, and
replay and live-on-too-few-GPUs say what they need."""
import pytest

from course_lib.core.hardware import SPECS
from course_lib.labs import multi_gpu as lab
from course_lib.launch import collectives as lc
from course_lib.measure import evidence, experiments
from course_lib.measure.evidence import NotRecorded
from course_lib.measure.experiments import Result
from course_lib.models import collectives as cm
from course_lib.models import transformer

CPU_RUN = {"gpu": "CPU processes over gloo (a test run, not a GPU)"}
TINY = transformer.ModelShape("tiny", d_model=64, q_heads=2, kv_heads=1, head_dim=32, mlp=128, vocab=10, layers=1)


def result(name: str, cases) -> Result:
    return Result(name, "live", dict(CPU_RUN), "2026-01-01T00:00:00Z", {}, cases)


def valid(cases) -> None:
    for c in cases:
        assert evidence.case_problems(evidence.case_to_json(c), c.name) == []


@pytest.fixture(scope="module")
def swept():
    rows = lc.sweep("all_reduce", 2, [8, 1024, 65536], backend="gloo", samples=20)
    rows += lc.sweep("all_reduce", 2, [8, 1024, 65536], backend="gloo", samples=20, algo="Ring", proto="LL")
    return rows


def test_collective_cases_are_valid_records_and_keep_the_slowest_rank(swept):
    cases = [lab.collective_case(r, lab.NCCL_CHOICE if r["algo"] is None else "Ring/LL") for r in swept]
    valid(cases)
    c = cases[1]
    assert c.params == {"collective": "all_reduce", "ranks": 2, "variant": lab.NCCL_CHOICE, "requested_bytes": 1024,
                        "bytes": 1024}
    assert c.kernel == "gloo all_reduce (NCCL's choice)" and "gloo" in c.timer
    assert len(c.extra["rank_medians_s"]) == 2 and c.median_s >= min(c.extra["rank_medians_s"])


def test_the_collective_table_is_nccl_tests_arithmetic_and_the_model(swept):
    r = result("multi_gpu.collectives", [lab.collective_case(row, lab.NCCL_CHOICE) for row in swept[:3]])
    rows = lab.collective_rows(r, "all_reduce", 2, step_latency_s=5e-6, link_bytes_per_s=100e9)
    assert [row["size"] for row in rows] == ["8 B", "1 KiB", "64 KiB"]
    for row, c in zip(rows, r.cases):
        assert row["busbw GB/s"] == pytest.approx(c.bytes / c.median_s * 1.0 / 1e9)   # 2(p-1)/p = 1 on 2 ranks
        assert row["model µs"] == pytest.approx(cm.predict("all_reduce", c.bytes, 2, 100e9, 5e-6).seconds * 1e6)
        assert row["measured ÷ model"] == pytest.approx(c.median_s * 1e6 / row["model µs"])
    with pytest.raises(NotRecorded, match="all_reduce on 8 GPUs"):
        lab.collective_rows(r, "all_reduce", 8, 5e-6, 100e9)


def test_the_variant_table_puts_each_algorithm_and_protocol_side_by_side(swept):
    cases = [lab.collective_case(row, lab.NCCL_CHOICE if row["algo"] is None else "Ring/LL") for row in swept]
    rows = lab.variant_rows(result("multi_gpu.collectives", cases), 2)
    assert [list(row) for row in rows][0] == ["size", lab.NCCL_CHOICE, "Ring/LL"]
    assert all(row["Ring/LL"] > 0 for row in rows)


def test_the_fit_recovers_alpha_and_b_and_refuses_what_does_not_fit():
    sizes = [8, 1 << 10, 1 << 16, 1 << 20, 1 << 26, 1 << 30]
    points = [(s, cm.predict("all_reduce", s, 8, 400e9, 6e-6).seconds) for s in sizes]
    fit = lab.fit_alpha_beta(points, "all_reduce", 8)
    assert fit.step_latency_s == pytest.approx(6e-6, rel=1e-9) and fit.link_bytes_per_s == pytest.approx(400e9, rel=1e-9)
    with pytest.raises(ValueError, match="do not fit"):
        lab.fit_alpha_beta([(8, 1e-3), (1 << 30, 1e-6)], "all_reduce", 8)   # bigger and faster: no such link
    with pytest.raises(ValueError, match="two sizes"):
        lab.fit_alpha_beta(points[:1], "all_reduce", 8)


@pytest.fixture(scope="module")
def tensor_parallel():
    return lc.tensor_parallel_mlp(2, 8, TINY.d_model, TINY.mlp, backend="gloo", samples=20)


def test_the_tensor_parallel_run_matches_the_unsplit_mlp_and_makes_valid_cases(tensor_parallel):
    run = tensor_parallel
    assert run["max_abs_err"] <= run["tolerance"]
    cases = lab.tensor_parallel_cases(run, "prefill", TINY)
    valid(cases)
    assert [c.params["plan"] for c in cases] == list(lab.TP_PLANS)
    mlp = cm.tensor_parallel_mlp(TINY, 8, 2, "bf16")
    assert cases[0].flop == mlp.flop_per_rank and cases[1].flop == 0.0
    assert cases[1].bytes == run["all_reduce_bytes"] == 8 * 64 * 4       # float32 on the CPU


def test_the_tensor_parallel_table_sets_each_plan_against_its_prediction(tensor_parallel):
    r = result("multi_gpu.tensor_parallel_mlp", lab.tensor_parallel_cases(tensor_parallel, "prefill", TINY))
    h100 = SPECS["h100-sxm"]
    rows = lab.tensor_parallel_rows(r, 5e-6, 450e9, model_name="Llama 3 8B", gpu=h100)
    pred = cm.tensor_parallel_prediction(cm.tensor_parallel_mlp(transformer.LLAMA3_8B, 8, 2), h100, 450e9, 5e-6)
    want = [pred.compute_s, pred.communication.seconds, pred.serialized_s, pred.overlapped_s]
    assert [row["predicted µs"] for row in rows] == pytest.approx([w * 1e6 for w in want])
    saved = lab.overlap_rows(r)[0]
    by = {c.params["plan"]: c.median_s for c in r.cases}
    assert saved["saved µs"] == pytest.approx((by["compute, then all-reduce"]
                                               - by["all-reduce beside independent compute"]) * 1e6)
    with pytest.raises(NotRecorded, match="no stream timeline"):
        lab.timeline_figure(r, "prefill", 2)


def test_gradient_bucket_cases_and_their_table():
    run = lc.gradient_buckets(2, 1 << 16, [1 << 14, 1 << 16], 32, 8, backend="gloo", samples=20)
    assert run["max_abs_err"] == 0.0
    cases = lab.bucket_cases(run)
    valid(cases)
    assert [c.name for c in cases] == ["2 GPUs: backward alone", "2 GPUs: all-reduces alone, 16 KiB buckets",
                                       "2 GPUs: backward with all-reduces, 16 KiB buckets",
                                       "2 GPUs: all-reduces alone, 64 KiB buckets",
                                       "2 GPUs: backward with all-reduces, 64 KiB buckets"]
    assert "bucket_bytes" not in cases[0].params and cases[1].extra["buckets"] == 4
    r = result("multi_gpu.gradient_buckets", cases)
    fit = lab.FittedLink("all_reduce", 2, 1e-4, 1e9, 2)
    rows = lab.bucket_rows(r, 2, fit)
    backward = cases[0].median_s
    plan = cm.gradient_buckets(1 << 16, 1 << 14, 2, backward, 1e9, 1e-4)
    assert rows[0]["model step µs"] == pytest.approx(plan.step_s * 1e6)
    assert rows[0]["exposed µs"] == pytest.approx((cases[2].median_s - backward) * 1e6)


def test_the_buckets_become_ready_as_the_gemms_run():
    assert [lc.ready_after_gemm(k, 4, 256) for k in range(1, 5)] == [64, 128, 192, 256]
    assert [lc.ready_after_gemm(k, 512, 256) for k in (1, 2, 3, 512)] == [1, 1, 2, 256]


def test_the_figure_draws_a_cpu_run_without_a_model_line(swept):
    import matplotlib.pyplot as plt

    r = result("multi_gpu.collectives", [lab.collective_case(row, lab.NCCL_CHOICE) for row in swept[:3]])
    fig = lab.collectives_figure(r)
    assert CPU_RUN["gpu"] in fig._suptitle.get_text()
    assert not any("model" in line.get_label() for line in fig.axes[0].get_lines())
    plt.close(fig)


# --------------------------------------------------------------------------- records, replay and too few GPUs

def test_record_folders_are_named_by_gpu_and_count(tmp_path, monkeypatch):
    for name in ("h200", "h200-x2", "h200-x8", "h100-sxm-x4", "h200-x4"):
        (tmp_path / name).mkdir()
    assert lab.recorded_machines("h200", tmp_path) == ["h200-x2", "h200-x4", "h200-x8"]
    monkeypatch.setenv("COURSE_REPLAY_GPU", "h200")
    monkeypatch.delenv("COURSE_REPLAY_GPUS", raising=False)
    assert lab.replay_slug(tmp_path) == "h200-x8"
    monkeypatch.setenv("COURSE_REPLAY_GPUS", "2")
    assert lab.replay_slug(tmp_path) == "h200-x2"
    assert lab.machine_slug("h100-sxm", 4) == "h100-sxm-x4"


def test_replay_with_nothing_recorded_says_what_to_record(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_REPLAY_GPU", "h200")
    monkeypatch.delenv("COURSE_REPLAY_GPUS", raising=False)
    with pytest.raises(NotRecorded, match="need a machine with 2 to 8 GPUs.*python -m course_lib.record multi_gpu"):
        lab.replay_slug(tmp_path)


@pytest.mark.skipif(lc.gpu_count() >= 2, reason="this machine has the GPUs: the experiments would run")
@pytest.mark.parametrize("name", lab.EXPERIMENTS)
def test_each_experiment_on_too_few_gpus_says_what_it_needs(name):
    body = experiments.REGISTRY[name].body
    with pytest.raises(lc.NeedsMoreGpus, match=rf"needs 2 GPUs and this machine has {lc.gpu_count()}\."):
        body(**experiments.resolve_params(name))
