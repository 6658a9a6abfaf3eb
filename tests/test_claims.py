"""Every number the prose states is checked: against the record the notebook replays, against the live
run committed with it, and, for a model's number, against the model (``course_lib.measure.claims``).
The mechanism's own tests show that a wrong figure, a missing sentence and an unclaimed number fail."""
from pathlib import Path

import nbformat
import pytest

from course_lib.measure import claims
from course_lib.measure.claims import Analytic, Given, Measured, Recorded
from course_lib.measure.experiments import replay, resolve_params

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_number_in_the_prose_holds_in_the_record_and_in_the_run_shown(path):
    nb = nbformat.read(path, as_version=4)
    failures = claims.check(path.stem, nb)
    assert not failures, "\n".join(map(str, failures))


HELD_OUT = [(path, where) for path in NOTEBOOKS for where, _ in claims.held_out_runs(path.stem)]


@pytest.mark.parametrize("path, where", HELD_OUT, ids=lambda x: getattr(x, "stem", str(x).split("/")[2]))
def test_every_claim_holds_on_the_kept_runs_of_other_gpus_and_days(path, where):
    """The prose against a run it was not written from (a figure marked as the H200's is checked on H200 runs only)."""
    run = dict(claims.held_out_runs(path.stem))[where]
    nb = nbformat.read(path, as_version=4)
    nb.metadata["course_run"] = {"results": run["results"]}
    failures = claims.check(path.stem, nb, ("notebook",))
    assert not failures, f"{len(failures)} claim(s) fail on {where} ({run['gpu']}):\n" + "\n".join(map(str, failures))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_committed_run_carries_its_results(path):
    """The live run stored every experiment the notebook ran, so its claims have something to check."""
    nb = nbformat.read(path, as_version=4)
    results = claims.notebook_results(nb)
    measured = {name for c in claims.load_claims(path.stem) if isinstance(c, Measured) and not isinstance(c, Recorded)
                for name in ((c.experiment,) if isinstance(c.experiment, str) else c.experiment)}
    assert measured <= {r.experiment for r in results}
    for r in results:
        assert r.mode == "live" and r.gpu.startswith("NVIDIA")
        assert r.provenance in "".join(str(o) for c in nb.cells if c.cell_type == "code" for o in c.outputs) \
            or not r.cases, f"{path.stem}: {r.experiment}'s stored result is not the run whose outputs are shown"


# --------------------------------------------------------------------------- the mechanism rejects

COPY = "machine.copy_bandwidth"


def _copy_tb_per_s(result):
    return max(c.bandwidth_bytes_per_s for c in result.cases) / 1e12


def _notebook(markdown: str, results=()):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(markdown)]
    nb.metadata["course_run"] = {"results": list(results)}
    return nb


def _recorded_copy():
    return replay(COPY, resolve_params(COPY))


def _check(nb, claim_list, monkeypatch, sources=("record",)):
    monkeypatch.setattr(claims, "load_claims", lambda stem: claim_list)
    return claims.check("test", nb, sources)


def test_a_claim_that_holds_passes(monkeypatch):
    value = _copy_tb_per_s(_recorded_copy())
    nb = _notebook(f"The copy ran at about {value:.1f} TB/s.")
    claim = Measured(f"about {value:.1f} TB/s", COPY, _copy_tb_per_s, (value * 0.95, value * 1.05))
    assert _check(nb, [claim], monkeypatch) == []


def test_a_wrong_figure_fails_and_names_its_sentence(monkeypatch):
    nb = _notebook("The copy ran at about 9.9 TB/s.")
    failures = _check(nb, [Measured("about 9.9 TB/s", COPY, _copy_tb_per_s, (9.5, 10.5), unit=" TB/s")], monkeypatch)
    assert len(failures) == 1 and "about 9.9 TB/s" in str(failures[0]) and "outside" in failures[0].message


def test_a_number_no_claim_covers_fails(monkeypatch):
    nb = _notebook("The copy ran at 4.1 TB/s, and a launch costs 2.5 µs (`4 µs` in code is not prose).")
    failures = _check(nb, [Given("4.1 TB/s", "an example")], monkeypatch)
    assert [f.message for f in failures] == ["a number with a unit that no claim covers"]
    assert "2.5 µs" in failures[0].text


def test_a_claim_whose_words_left_the_notebook_fails(monkeypatch):
    failures = _check(_notebook("Nothing measured here."), [Given("12 µs", "gone")], monkeypatch)
    assert failures and failures[0].message == "these words are not in the notebook's prose"


def test_a_wrong_model_number_fails(monkeypatch):
    nb = _notebook("Half of 8 is 5%.")
    assert _check(nb, [Analytic("5%", lambda: 8 / 2 / 100, (0.05, 0.05))], monkeypatch)
    assert not _check(nb, [Analytic("5%", lambda: 10 / 2 / 100, (0.049, 0.051))], monkeypatch)


def test_each_value_of_a_tuple_has_its_range(monkeypatch):
    nb = _notebook("from 2× to 11×")
    claim = Analytic("from 2× to 11×", lambda: (2.0, 12.0), [(1.5, 2.5), (10, 11.5)])
    failures = _check(nb, [claim], monkeypatch)
    assert len(failures) == 1 and "12" in failures[0].message


def test_the_committed_run_is_checked_and_its_absence_fails(monkeypatch):
    record = _recorded_copy().to_record("test")
    value = _copy_tb_per_s(_recorded_copy())
    claim = Measured("runs at X", COPY, _copy_tb_per_s, (value * 0.99, value * 1.01))
    assert _check(_notebook("runs at X", [record]), [claim], monkeypatch, ("notebook",)) == []
    slower = dict(record, cases=[dict(c, samples_s=[s * 2 for s in c["samples_s"]]) for c in record["cases"]])
    assert _check(_notebook("runs at X", [slower]), [claim], monkeypatch, ("notebook",))
    missing = _check(_notebook("runs at X"), [claim], monkeypatch, ("notebook",))
    assert missing and "make gpu-test" in missing[0].message


def test_a_figure_of_another_gpu_is_checked_on_that_gpus_runs_only(monkeypatch):
    record = _recorded_copy().to_record("test")                  # the H200's
    h100 = dict(record, machine=dict(record["machine"], gpu="NVIDIA H100 80GB HBM3"),
                cases=[dict(c, samples_s=[s * 2 for s in c["samples_s"]]) for c in record["cases"]])
    value = _copy_tb_per_s(_recorded_copy())
    words = "on the H200 it runs at X"
    h200_only = Measured(words, COPY, _copy_tb_per_s, (value * 0.99, value * 1.01), belongs_to="NVIDIA H200")
    anywhere = Measured(words, COPY, _copy_tb_per_s, (value * 0.99, value * 1.01))
    assert _check(_notebook(words, [h100]), [h200_only], monkeypatch, ("notebook",)) == []   # the H100 run: not its figure
    assert _check(_notebook(words, [h100]), [anywhere], monkeypatch, ("notebook",))           # a claim about any GPU fails
    assert _check(_notebook(words, [dict(record, cases=h100["cases"])]), [h200_only], monkeypatch, ("notebook",))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_figure_of_one_gpu_names_it(path):
    """A claim checked on one GPU's runs only is stated as that GPU's: its paragraph names the GPU."""
    nb = nbformat.read(path, as_version=4)
    paragraphs = [claims.normalise(p) for c in nb.cells if c.cell_type == "markdown" for p in c.source.split("\n\n")]
    for c in claims.load_claims(path.stem):
        if getattr(c, "belongs_to", None):
            short = c.belongs_to.removeprefix("NVIDIA ").split()[0]
            holding = [p for p in paragraphs if claims.normalise(c.text) in p]
            assert holding and all(short in p for p in holding), (
                f"{path.stem}: «{c.text}» is the {c.belongs_to}'s figure, and its paragraph must say so")


def test_the_number_finder_sees_ranges_signs_and_ratios():
    found = [m for _, _, m in claims.measured_numbers("from 96–98% and −4.4%, 11×, 1.4 times, 293 µs, 12 ops")]
    assert found == ["98%", "−4.4%", "11×", "1.4 times", "293 µs"]
