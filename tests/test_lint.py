"""ruff over every Python file of the course, with pyproject.toml's settings (``[tool.ruff]``): the
library, its tests and scripts, the notebooks' claims files and the test-wide conftest. A finding fails the
test with ruff's own report. A file with findings is shown to fail the same check, and a Python file
outside the checked paths fails the test too, so a new folder is not left unchecked."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("course_lib", "tests", "scripts", "notebooks/claims", "conftest.py")
# Not the course's own Python: the venv, build outputs, the learner's copies (work/), caches and test output.
NOT_SOURCE = {".venv", ".git", "build", "work", "test-artifacts", "__pycache__", "node_modules"}


def ruff(*paths: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *paths], cwd=ROOT,
                          capture_output=True, text=True)
    if "No module named ruff" in proc.stderr:
        pytest.fail(f"ruff is not installed beside {sys.executable}: pip install -r requirements-test.txt")
    return proc


def test_ruff_finds_nothing():
    proc = ruff(*TARGETS)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_finding_fails_the_check(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os, sys\n\n\ndef f():\n    l = 1\n    return l + missing\n")
    proc = ruff(str(bad))
    assert proc.returncode != 0
    for code in ("E401", "E741", "F821"):
        assert code in proc.stdout, proc.stdout


def test_every_python_file_is_checked():
    unchecked = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in NOT_SOURCE and not d.startswith(".") and not d.endswith(".egg-info")]
        for name in files:
            rel = (Path(folder) / name).relative_to(ROOT).as_posix()
            if name.endswith(".py") and not any(rel == t or rel.startswith(t + "/") for t in TARGETS):
                unchecked.append(rel)
    assert not unchecked, f"Python files outside {TARGETS} (add their folder to TARGETS): {unchecked}"
