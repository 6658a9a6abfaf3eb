"""The committed notebooks: outputs from a live GPU run, the course's anatomy, analytic cells checked.

nbval executes them (replay mode) in the same test run: see the Makefile's test target."""
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from sync_notebooks import (  # noqa: E402
    COLLAPSED,
    PREDICTION_ANSWER_COLLAPSED,
    VERDICT_COLLAPSED,
    prediction_answer_cells,
    reference_solution_blocks,
)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def text(outputs):
    return "".join("".join(o.get("text", "")) for o in outputs)


def code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def test_notebooks_exist():
    assert [p.name for p in NOTEBOOKS][:2] == ["00_your_gpu.ipynb", "01_roofline.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_with_outputs_of_a_live_gpu_run(path):
    cells = [c for c in code_cells(path) if not "".join(c["source"]).startswith("%load_ext")]   # prints nothing
    assert all(c.get("outputs") for c in cells), "every code cell carries its output"
    assert not any(o["output_type"] == "error" for c in cells for o in c["outputs"])
    first = text(cells[0]["outputs"])
    assert first.startswith("LIVE mode: measured on NVIDIA"), "outputs come from a live run on a GPU"
    assert " UTC." in first.splitlines()[0], "the run says when it measured"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_anatomy(path):
    nb = json.loads(path.read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    for part in ("You will learn", "Time", "Exercises", "Takeaways", "Reference solution"):
        assert part in text, part
    assert "session.banner()" in "".join(code_cells(path)[0]["source"])
    python = [c for c in code_cells(path) if not "".join(c["source"]).startswith("%%cuda_exercise")]
    assert all(len("".join(c["source"]).splitlines()) <= 15 for c in python), "code cells stay short"
    kernels = [c for c in code_cells(path) if "".join(c["source"]).startswith("%%cuda_exercise")]
    assert all(len("".join(c["source"]).splitlines()) <= 45 for c in kernels), "a kernel exercise fits a screen"


def test_analytic_cells_are_output_checked():
    marked = [c for c in code_cells(NOTEBOOKS[1]) if "".join(c["source"]).startswith("# NBVAL_CHECK_OUTPUT")]
    assert len(marked) >= 4
    outputs = "".join(text(c["outputs"]) for c in marked)
    assert "B200 ridge: 250 FLOP/byte" in outputs and "0.9995" in outputs and "2.0 ms" in outputs


REFUSALS = ("Not quite", "Not yet", "Not answered", "Not this", "Answer ", "WRONG", "Not correct")


def reference_blocks(path):
    return reference_solution_blocks(json.loads(path.read_text())["cells"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_reference_solution_passes_its_check(path):
    blocks = reference_blocks(path)
    assert blocks, "the notebook has a reference solution"
    for cells in blocks:
        assert all(c["metadata"].get("jupyter") == COLLAPSED["jupyter"] for c in cells), \
            "a reference solution starts collapsed (run make sync)"
        said = "\n".join(text(c["outputs"]) + "".join(str(o.get("data", {}).get("text/plain", "")) for o in c["outputs"])
                         for c in cells)
        assert not any(r in said for r in REFUSALS), f"a check refused a reference solution:\n{said[:400]}"
        if kernels_run_in_stored_run(path):
            assert "Correct" in said, f"a reference solution that no check accepted:\n{said[:400]}"
        else:   # a run stored before the kernel runs were: a kernel verdict says so, and passed what it checked
            assert "Correct" in said or ("was made before the course stored the kernel runs" in said
                                         and "✘" not in said), f"a reference solution that no check accepted:\n{said[:400]}"


def kernels_run_in_stored_run(path) -> bool:
    return json.loads(path.read_text())["metadata"]["course_run"].get("values_stored", True)


# The course's own answer functions: a reference solution that calls one asks the model to answer the
# model's question, and passes even when the model is wrong.
MODEL_ANSWERS = (r"\w+_answer\(", r"(?<!\w)binding_roof\(", r"(?<!\w)sectors_of\(", r"(?<!\w)wavefronts_of\(",
                 r"mystery_lower_bound_s\(", r"MYSTERY_DEFECTS", r"fusion\.ledger\(", r"waves\.quantize\(",
                 r"(?<!\w)fewest_stages\(")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_reference_solutions_answer_independently_of_the_model(path):
    for cells in reference_blocks(path):
        source = "".join("".join(c["source"]) for c in cells)
        used = [pattern for pattern in MODEL_ANSWERS if re.search(pattern, source)]
        assert not used, f"a reference solution asks the model for its answer ({', '.join(used)})"


def test_each_notebook_but_the_last_links_the_next_one_and_the_readme_links_them_all():
    import re

    readme = (NOTEBOOKS[0].parent.parent / "README.md").read_text()
    for path, following in zip(NOTEBOOKS, NOTEBOOKS[1:]):
        md = path.with_suffix(".md").read_text()
        nexts = re.findall(r"^\*\*Next:\*\* \[[^\]]+\]\(([\w.]+)\)", md, re.M)
        assert nexts == [following.name], f"{path.name} must end by linking {following.name}"
    for path in NOTEBOOKS:
        assert f"](notebooks/{path.name})" in readme, f"the README's course map does not link {path.name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_kernel_exercise_shows_its_code_and_folds_its_recorded_verdict(path):
    cells = [c for c in code_cells(path) if "".join(c["source"]).startswith("%%cuda_exercise")]
    for c in cells:
        assert c["metadata"].get("jupyter") == VERDICT_COLLAPSED["jupyter"], "run make sync"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_prediction_asked_for_is_not_answered_on_screen(path):
    """The output right under "Predict first. Before you run the next cell ..." is that prediction's answer:
    it starts collapsed, so a learner reading the copy with its stored outputs meets the question first."""
    for c in prediction_answer_cells(json.loads(path.read_text())["cells"]):
        assert c["metadata"].get("jupyter") == PREDICTION_ANSWER_COLLAPSED["jupyter"], "run make sync"


def test_the_prediction_prompts_are_found():
    def cells(prompt):
        return [{"cell_type": "markdown", "source": [prompt]}, {"cell_type": "code", "source": ["x"]}]
    assert prediction_answer_cells(cells("Some text.\n\n**Predict first.** Before you run the next cell, rank"))
    assert prediction_answer_cells(cells("**Predict** before you run the cell. If time followed bytes"))
    assert not prediction_answer_cells(cells("**Predict:** three passes against two, so the plans run at 2/3"))
    assert not prediction_answer_cells(cells("The model predicts first the bytes."))
    found = [path.name for path in NOTEBOOKS if prediction_answer_cells(json.loads(path.read_text())["cells"])]
    assert "00_your_gpu.ipynb" in found and "12_transformer_layer.ipynb" in found
