"""The package's layers, held by import-linter's contracts in pyproject.toml: each test runs
``lint-imports`` on the real tree, and on a copy with one forbidden import added, which must fail."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess:
    if not LINT.exists():
        pytest.fail(f"import-linter is not installed beside {sys.executable}: pip install -r requirements-test.txt")
    return subprocess.run([str(LINT), str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, env={"PYTHONPATH": str(root), "PATH": ""})


def test_every_contract_is_kept():
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


@pytest.mark.parametrize("module, line, contract", [
    ("labs/waves.py", "from course_lib.labs import fusion", "a lab never imports another lab"),
    ("models/roofline.py", "from course_lib.measure import experiments", "layers"),
    ("core/timing.py", "from course_lib.launch import gemm_bf16", "layers"),
    ("models/waves.py", "import cupy", "the models are pure"),
])
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, line, contract):
    shutil.copytree(ROOT / "course_lib", tmp_path / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "course_lib" / module
    target.write_text(line + "\n" + target.read_text())
    proc = lint(tmp_path)
    assert proc.returncode != 0
    broken = proc.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, proc.stdout
