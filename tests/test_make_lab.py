"""`make lab` gives the learner a working copy: the committed notebooks copied into work/ (ignored by
git), trusted so the calculators are drawn from their saved state when opened, with no text source
beside them for jupytext to rewrite; `make reset` starts it over. JupyterLab's news pop-up is off."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.sign import NotebookNotary

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("make") is None or not (ROOT / ".venv" / "bin" / "jupyter").exists(),
                                reason="needs make and the course's .venv (make setup)")


def make(*targets, work):
    subprocess.run(["make", "-s", "-C", str(ROOT), f"WORK={work}", *targets], check=True, capture_output=True)


def test_the_learners_copy_is_trusted_and_holds_only_notebooks(tmp_path):
    work = tmp_path / "work"
    make(f"{work}/.copied", work=work)
    committed = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(p.name for p in work.glob("*.ipynb")) == committed
    assert not list(work.glob("*.md")) and not (work / "jupytext.toml").exists()
    notary = NotebookNotary()
    copies = [nbformat.read(p, as_version=4) for p in sorted(work.glob("*.ipynb"))]
    assert all(notary.check_signature(nb) for nb in copies)
    # this installation's kernel metadata, so JupyterLab has nothing to rewrite when the kernel starts
    assert {nb.metadata.language_info.version for nb in copies} == {sys.version.split()[0]}
    assert {nb.metadata.kernelspec.display_name for nb in copies} == {"Python 3 (ipykernel)"}
    committed = nbformat.read(ROOT / "notebooks" / "00_your_gpu.ipynb", as_version=4)
    assert [c.outputs for c in copies[0].cells if c.cell_type == "code"] == \
        [c.outputs for c in committed.cells if c.cell_type == "code"]   # the recorded outputs, unchanged


def test_reset_throws_away_the_learners_edits(tmp_path):
    work = tmp_path / "work"
    make(f"{work}/.copied", work=work)
    (work / "00_your_gpu.ipynb").write_text("{}")
    (work / "my_scratch.ipynb").write_text("{}")
    make("reset", work=work)
    assert not (work / "my_scratch.ipynb").exists()
    again = nbformat.read(work / "00_your_gpu.ipynb", as_version=4)
    assert again.cells == nbformat.read(ROOT / "notebooks" / "00_your_gpu.ipynb", as_version=4).cells


def test_jupyterlabs_news_and_update_popups_are_off(tmp_path):
    make(".venv/share/jupyter/lab/settings/overrides.json", work=tmp_path / "work")
    settings = json.loads((ROOT / ".venv/share/jupyter/lab/settings/overrides.json").read_text())
    assert settings["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}


def test_the_working_copy_is_ignored_by_git():
    out = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "work/00_your_gpu.ipynb"], capture_output=True, text=True)
    assert out.returncode == 0


def test_installing_the_course_library_prints_nothing():
    # A first `make lab` once printed 502 lines of setuptools warnings (a data folder of kernels/exercises/ per
    # exercise "absent from packages"), which a newcomer reads as a failed install. The Makefile's own line:
    line = next(ln.strip() for ln in (ROOT / "Makefile").read_text().splitlines() if "--no-deps -e ." in ln)
    out = subprocess.run(line.replace("$(PY)", str(ROOT / ".venv" / "bin" / "python")), shell=True, cwd=ROOT,
                         capture_output=True, text=True, check=True)
    assert out.stdout + out.stderr == ""
