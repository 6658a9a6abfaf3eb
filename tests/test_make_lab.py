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


def _readme_route_without_make() -> str:
    """The README's sentence that gives the route without make."""
    text = (ROOT / "README.md").read_text()
    return next(ln for ln in text.splitlines() if ln.startswith("Without make"))


def test_the_route_without_make_starts_jupyterlab_as_root(tmp_path):
    # A learner who followed this route as root (Docker, cloud images) found `jupyter lab notebooks/` refusing to
    # start and the committed notebooks opening untrusted. Run the README's own commands: its learner copy, then
    # JupyterLab on it with the flag it says root needs, and wait until the server answers.
    import os
    import re
    import socket
    import time
    import urllib.request

    route = _readme_route_without_make()
    copy = re.search(r"`\.venv/bin/python (scripts/learner_copy\.py) (\w+)`", route)
    lab = re.search(r"`\.venv/bin/jupyter lab (\w+)/`[^`]*\(add `(--allow-root)` as root\)", route)
    assert copy and lab and copy.group(2) == lab.group(1), "the README's route without make changed: update this test"
    work = tmp_path / copy.group(2)
    subprocess.run([str(ROOT / ".venv/bin/python"), copy.group(1), str(work)], cwd=ROOT, check=True,
                   capture_output=True)
    notary = NotebookNotary()
    assert all(notary.check_signature(nbformat.read(p, as_version=4)) for p in work.glob("*.ipynb"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flags = [lab.group(2)] if os.geteuid() == 0 else []
    server = subprocess.Popen([str(ROOT / ".venv/bin/jupyter"), "lab", str(work), *flags, "--no-browser",
                               f"--port={port}", "--ServerApp.token=", "--ServerApp.ip=127.0.0.1"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, answered = time.monotonic() + 90, False
        while time.monotonic() < deadline and server.poll() is None and not answered:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=2) as r:
                    answered = r.status == 200
            except OSError:
                time.sleep(0.5)
        log = "" if answered else server.communicate(timeout=5)[0] if server.poll() is not None else ""
        assert answered, f"JupyterLab did not start by the README's route without make:\n{log[-2000:]}"
    finally:
        server.terminate()
        server.wait(timeout=20)
