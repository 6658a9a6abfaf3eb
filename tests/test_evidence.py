"""Recorded measurements: every committed file validates; bad records are rejected; replay is honest."""
import copy
import json

import pytest

from course_lib.measure import evidence, experiments
from course_lib.measure.evidence import RECORDED_DIR, NotRecorded

RECORD_FILES = sorted(RECORDED_DIR.glob("*/*.json"))


# Experiments written and reviewed but not yet run on the H200 (no machine could be started in the session that
# wrote them). Record them with `python -m course_lib.record NAME`, then take them off this list: the test below
# fails for a name still listed once its record exists. No notebook shows them until they are recorded.
WAITING_FOR_A_GPU: dict[str, str] = {   # experiments registered before a GPU could record them: name -> why
    "layer.streams": "notebook 12's two ops on two streams, written while no GPU could be had",
    "attention.ladder": "notebook 13's ladder (CUDA rungs, Triton, SDPA), written while no GPU could be had",
    "attention.ceilings": "notebook 13's three ceilings with ncu's counts, written while no GPU could be had",
    "multi_gpu.links": "notebook 14's copies between GPUs: no machine of several GPUs has been lent",
    "multi_gpu.collectives": "notebook 14's collectives swept with NCCL: no machine of several GPUs has been lent",
    "multi_gpu.tensor_parallel_mlp": "notebook 14's tensor-parallel MLP: no machine of several GPUs has been lent",
    "multi_gpu.gradient_buckets": "notebook 14's gradient buckets: no machine of several GPUs has been lent",
}


def test_there_are_h200_records_for_every_experiment():
    # an experiment between GPUs (min_gpus) is recorded on a machine of several H200s: data/recorded/h200-x<N>/
    several = {p.stem for p in RECORDED_DIR.glob("h200-x*/*.json")}
    have = {p.stem for p in (RECORDED_DIR / "h200").glob("*.json")} | {
        name for name, exp in experiments.all_experiments().items() if exp.min_gpus > 1 and name in several}
    assert set(experiments.all_experiments()) - set(WAITING_FOR_A_GPU) <= have
    assert not set(WAITING_FOR_A_GPU) & have, "recorded now: take it off WAITING_FOR_A_GPU and show it in its notebook"
    assert set(WAITING_FOR_A_GPU) <= set(experiments.all_experiments())


def test_no_notebook_asks_for_an_experiment_that_is_not_recorded_yet():
    sources = "".join(p.read_text() for p in (RECORDED_DIR.parent.parent / "notebooks").glob("*.md"))
    assert not [name for name in WAITING_FOR_A_GPU if f'"{name}"' in sources]


@pytest.mark.parametrize("path", RECORD_FILES, ids=[f"{p.parent.name}/{p.name}" for p in RECORD_FILES])
def test_every_recorded_file_validates(path):
    record = json.loads(path.read_text())
    assert evidence.validate(record) == []
    assert record["experiment"] == path.stem and record["machine"]["slug"] == path.parent.name
    assert record["command"].startswith("python -m course_lib.record")


@pytest.fixture
def good():
    return json.loads((RECORDED_DIR / "h200" / "machine.copy_bandwidth.json").read_text())


@pytest.mark.parametrize("damage, reason", [
    (lambda r: r["cases"][0].update(samples_s=r["cases"][0]["samples_s"][:19]), "at least 20"),
    (lambda r: r["cases"][0].update(kernel=""), "kernel identity"),
    (lambda r: r.pop("machine"), "no machine manifest"),
    (lambda r: r["machine"].pop("gpu"), "manifest lacks gpu"),
    (lambda r: r["cases"][1]["check"].update(passed=False), "check failed"),
    (lambda r: r["cases"][1].pop("check"), "no correctness check"),
    (lambda r: r["cases"][0].update(samples_s=[-1.0] * 30), "positive"),
    (lambda r: r.update(status="unmeasured"), "only 'recorded'"),
    (lambda r: r.update(cases=[]), "no cases"),
    (lambda r: r["cases"].append(copy.deepcopy(r["cases"][0])), "not unique"),
])
def test_validator_rejects_each_kind_of_bad_record(good, damage, reason):
    assert evidence.validate(good) == []
    damage(good)
    problems = evidence.validate(good)
    assert any(reason in p for p in problems), problems
    with pytest.raises(evidence.InvalidRecord):
        evidence.check_valid(good)


def test_check_passes_only_within_tolerance():
    assert evidence.Check("ref", 1e-6, 1e-5).passed
    assert not evidence.Check("ref", 1e-4, 1e-5).passed
    assert not evidence.Check("ref", float("nan"), 1.0).passed


def test_replay_labels_the_gpu_and_date():
    r = experiments.run("machine.copy_bandwidth")
    assert r.mode == "recorded" and r.provenance.startswith("recorded on NVIDIA H200, 20")


def test_replay_of_a_subset_of_recorded_sizes():
    r = experiments.run("roofline.measured", matmul_sizes=[256, 4096], matmul_dtypes=["bf16"])
    sizes = {c.params["matmul_sizes"] for c in r.cases if c.params.get("op") == "matmul"}
    assert sizes == {256, 4096}
    assert all(c.params.get("matmul_dtypes", "bf16") == "bf16" for c in r.cases if "matmul_dtypes" in c.params)


def test_a_parameter_never_recorded_gets_a_clear_message():
    with pytest.raises(NotRecorded, match=r"matmul_sizes=\[100\] was never measured on NVIDIA H200"):
        experiments.run("roofline.measured", matmul_sizes=[100])
    with pytest.raises(NotRecorded, match="n_bytes"):
        experiments.run("machine.copy_bandwidth", n_bytes=12345)


def test_unknown_experiment_gpu_and_parameter():
    with pytest.raises(KeyError, match="no experiment"):
        experiments.run("nope.nothing")
    with pytest.raises(TypeError, match="takes"):
        experiments.run("machine.copy_bandwidth", stride=3)
    with pytest.raises(NotRecorded, match="recorded GPUs: h200"):
        evidence.load("b200", "machine.copy_bandwidth")


def test_results_round_trip_through_the_record_format(good):
    r = experiments.run("machine.copy_bandwidth")
    again = r.to_record(good["command"])
    assert evidence.validate(again) == []
    assert again["cases"] == good["cases"]
