"""Live on a GPU other than the reference one, tables show the learner's rows beside the record's."""
import dataclasses
import importlib
import inspect
import pkgutil

import pytest

from course_lib import labs
from course_lib.figures import plots
from course_lib.labs import waves as lab_waves
from course_lib.measure import experiments

# Row builders whose other arguments come from the live run (a measured ceiling or latency): the
# reference's rows would be computed against the learner's GPU's numbers, so they stay as they are.
NOT_BESIDE = {("coalescing", "copy_rows"), ("coalescing", "dram_rows"), ("async_pipelines", "streaming_rows"),
              ("coalescing", "strided_figure"), ("async_pipelines", "streaming_figure")}


@pytest.fixture(autouse=True)
def replay(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "replay")


def _as_if_live_on(result, gpu: str, slug: str):
    machine = {**result.machine, "gpu": gpu, "slug": slug}
    return dataclasses.replace(result, mode="live", machine=machine,
                               reference=experiments.reference_for(result.experiment, result.params, slug))


def test_the_reference_gpu_gets_no_reference_and_another_gets_the_record():
    rec = experiments.run("waves.remedies")
    assert experiments.reference_for("waves.remedies", rec.params, "h200") is None
    ref = experiments.reference_for("waves.remedies", rec.params, "l4")
    assert ref is not None and ref.gpu == "NVIDIA H200" and ref.mode == "recorded"
    assert experiments.reference_for("waves.remedies", {**rec.params, "samples": 7}, "l4") is None   # never recorded


def test_rows_alternate_the_learners_gpu_and_the_record_and_the_caption_says_so():
    rec = experiments.run("waves.remedies")
    plain = lab_waves.remedy_rows(rec)
    live = _as_if_live_on(rec, "NVIDIA L4", "l4")
    rows = lab_waves.remedy_rows(live)
    assert len(rows) == 2 * len(plain) and "GPU" not in plain[0]
    assert [r["GPU"] for r in rows[:2]] == ["NVIDIA L4", "NVIDIA H200 (recorded)"]
    assert {k: v for k, v in rows[1].items() if k != "GPU"} == plain[0]
    assert "beside the NVIDIA H200's record" in live.provenance
    table = plots.Table(rows, live.provenance, ["shape", "variant", "median µs"])
    assert table.columns[0] == "GPU" and "NVIDIA H200 (recorded)" in repr(table)


def test_an_exercise_check_reads_only_the_learners_rows():
    from course_lib.exercises.hopper_gemm import check_costliest

    rec = experiments.run("hopper.ablations")
    live = _as_if_live_on(rec, "NVIDIA H100 80GB HBM3", "h100")
    answer = "rung 6 freeing the other block's slot with .release.cluster"
    mine, recorded = check_costliest(live, "4096×4096×4096", answer), check_costliest(rec, "4096×4096×4096", answer)
    assert mine.correct and str(mine).replace(live.provenance, rec.provenance) == str(recorded)


def test_a_figure_is_followed_by_the_records_figure(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.close("all")
    rec = experiments.run("waves.n_sweep")
    fig = lab_waves.sweep_figure(_as_if_live_on(rec, "NVIDIA L4", "l4"))
    figs = [plt.figure(n) for n in plt.get_fignums()]
    assert len(figs) == 2 and figs[0] is fig
    titles = [" ".join(t.get_text() for ax in f.axes for t in [ax.title]) for f in figs]
    assert "measured on NVIDIA L4" in titles[0] and "recorded on NVIDIA H200" in titles[1]
    plt.close("all")
    lab_waves.sweep_figure(rec)
    assert len(plt.get_fignums()) == 1   # replay, or live on the H200: one figure
    plt.close("all")


def test_every_row_and_figure_builder_over_a_result_shows_the_reference_or_says_why_not():
    missing = []
    scanned = 0
    for mod in pkgutil.iter_modules(labs.__path__):
        module = importlib.import_module(f"{labs.__name__}.{mod.name}")
        scanned += 1
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if not name.endswith(("_rows", "_figure")) or name.startswith("_") or fn.__module__ != module.__name__:
                continue
            first = next(iter(inspect.signature(inspect.unwrap(fn)).parameters), None)
            if first == "result" and not hasattr(fn, "__wrapped__") and (mod.name, name) not in NOT_BESIDE:
                missing.append(f"{mod.name}.{name}")
    assert scanned >= 10, f"only {scanned} lab modules found in {labs.__path__}"
    assert not missing, f"row or figure builders without @beside_reference(_figure): {missing}"
