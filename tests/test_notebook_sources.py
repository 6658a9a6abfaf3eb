"""Each notebook and its MyST text source agree, and each carries the GPU run its page shows.

The text source (``notebooks/NN_name.md``) is what authors edit; ``make sync`` writes the notebook.
A live GPU run stores itself in the notebook (scripts/notebook_run.py); the outputs are the render of
the notebook's code against that run, which ``tests/test_render.py`` checks output by output."""
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from sync_notebooks import text_to_notebook  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# A learner who ran and saved a committed notebook (rather than their copy in work/) replaced its H200
# outputs: the fix is to restore it, not to sync it.
RESTORE = ("if you ran and saved it yourself, restore the committed one with `git checkout -- notebooks/{name}` "
           "(learners work on their own copies: `make lab` opens work/)")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def cells(nb):
    return [(c.cell_type, c.source) for c in nb.cells]


def test_every_notebook_has_exactly_one_text_source():
    texts = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.*"))
    stems = {p.stem for p in NOTEBOOKS}
    assert {p.stem for p in texts if p.suffix == ".md"} == stems
    assert not [p for p in texts if p.suffix not in (".md", ".ipynb")], "one text format for the whole course"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_text_source_and_notebook_agree_cell_by_cell(path):
    text = jupytext.read(path.with_suffix(".md"), fmt="md:myst")
    nb = nbformat.read(path, as_version=4)
    assert cells(text) == cells(nb), f"{path.name} and its .md differ: run `make sync` (or save it in JupyterLab)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_come_from_a_gpu_run_stored_with_the_notebook(path):
    nb = nbformat.read(path, as_version=4)
    run = nb.metadata.get("course_run")
    assert run, f"{path.name} was not executed by scripts/gpu_test.sh on a GPU; " + RESTORE.format(name=path.name)
    # The code that ran is stamped (code_sha256_16); today's code may differ from it: a change to how results
    # are shown is rendered from the run (make render), and tests/test_render.py fails on any output it changes.
    assert run["gpu"].startswith("NVIDIA") and run["executed_at"] and run["code_sha256_16"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_calculators_carry_their_widget_state(path):
    nb = nbformat.read(path, as_version=4)
    views = [o["data"][WIDGET_VIEW]["model_id"] for c in nb.cells if c.cell_type == "code"
             for o in c.outputs if WIDGET_VIEW in o.get("data", {})]
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    assert all(v in state for v in views), (f"{path.name}: a calculator's widget state is missing; "
                                            + RESTORE.format(name=path.name))


def test_sync_keeps_outputs_under_prose_edits_and_drops_them_under_code_edits(tmp_path):
    src = NOTEBOOKS[0]
    md, ipynb = tmp_path / src.with_suffix(".md").name, tmp_path / src.name
    md.write_text(src.with_suffix(".md").read_text().replace("# 00 ·", "# 00 (edited) ·", 1)
                  .replace("env = session.banner()", "env = session.banner()  # edited"))
    ipynb.write_bytes(src.read_bytes())
    stale = text_to_notebook(md)
    assert stale == ["from course_lib.core import session"]
    after, before = nbformat.read(ipynb, as_version=4), nbformat.read(src, as_version=4)
    assert after.cells[0].source.startswith("# 00 (edited)")
    code_after = [c for c in after.cells if c.cell_type == "code"]
    code_before = [c for c in before.cells if c.cell_type == "code"]
    assert code_after[0].outputs == [] and code_after[1].outputs == code_before[1].outputs
    assert after.metadata == before.metadata, "the widget state and the run's stamp survive a sync"


def test_a_new_text_source_gets_a_notebook_without_outputs(tmp_path):
    md = tmp_path / "99_new.md"
    md.write_text("# 99 · new\n\n```{code-cell} ipython3\nprint(1)\n```\n")
    assert text_to_notebook(md) == ["print(1)"]
    nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    assert nb.metadata.kernelspec.name == "python3" and nb.cells[1].outputs == []
