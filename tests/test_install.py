"""The pins install from plain PyPI on every platform the README names: uv resolves
requirements-test.txt (which includes requirements.txt) for Linux x86_64 and aarch64, macOS 14+ on
Apple silicon and Windows, with no local wheel folder. A set of pins that cannot be installed
together is shown to fail the same check. Needs PyPI (CI has it)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UV = Path(sys.executable).with_name("uv")
PYTHON = "3.11"   # the oldest Python the pins allow (numpy 2.4 and torch 2.13 need 3.11)
PLATFORMS = {"Linux x86_64": ("x86_64-manylinux_2_28", {}),
             "Linux aarch64": ("aarch64-manylinux_2_28", {}),
             "macOS 14 arm64": ("aarch64-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": "14.0"}),
             "Windows x86_64": ("x86_64-pc-windows-msvc", {})}


def resolve(requirements: Path, platform: str, extra_env: dict) -> subprocess.CompletedProcess:
    if not UV.exists():
        pytest.fail(f"uv is not installed beside {sys.executable}: pip install -r requirements-test.txt")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}   # no local wheel folders
    env.update(extra_env, UV_NO_CONFIG="1")
    return subprocess.run([str(UV), "pip", "compile", str(requirements), "--python-platform", platform,
                           "--python-version", PYTHON, "--no-header", "--quiet"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name", PLATFORMS)
def test_the_pins_resolve_from_pypi(name):
    platform, extra_env = PLATFORMS[name]
    proc = resolve(ROOT / "requirements-test.txt", platform, extra_env)
    assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
    assert "torch==2.13.0" in proc.stdout


def test_pins_that_clash_are_caught(tmp_path):
    """torch 2.13 on Linux needs cuda-bindings 13: the 12.x pin the course once had cannot resolve."""
    clash = tmp_path / "requirements.txt"
    clash.write_text("torch==2.13.0\ncuda-bindings==12.9.4\n")
    proc = resolve(clash, *PLATFORMS["Linux x86_64"])
    assert proc.returncode != 0 and "cuda-bindings" in proc.stderr
