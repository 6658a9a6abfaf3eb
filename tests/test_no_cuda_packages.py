"""Replay works where no CUDA package installs (macOS, Windows): the notebooks run with CuPy,
cuda-bindings and the NVRTC wheel hidden, and compile reports come from data/compile_reports.json."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from course_lib.core import cuda

ROOT = Path(__file__).resolve().parent.parent
HIDE = Path(__file__).resolve().parent / "no_cuda"


def test_every_family_has_current_recorded_reports_for_every_architecture():
    reports = cuda.recorded_reports()
    for family in cuda.families():
        for arch in cuda.family_archs(family):
            rec = reports.get(cuda.report_key(family, arch))
            assert rec, f"no recorded report of {family}.cu for {arch}: run scripts/record_compile_reports.py"
            assert rec["source_sha256"] == cuda.source_sha256(family), (
                f"{family}.cu changed since its reports were recorded: run scripts/record_compile_reports.py")


def _without_timings(log: str) -> str:
    """ptxas's report less its compile times, which differ on every machine and every run."""
    return re.sub(r"time = [0-9.]+ ms", "time = … ms", log)


def test_a_recorded_report_matches_a_fresh_compile():
    fresh = cuda.compile_family("elementwise", "sm_90")
    recorded = cuda.recorded_reports()[cuda.report_key("elementwise", "sm_90")]["log"]
    assert cuda.parse_ptxas_report(recorded, "sm_90") == fresh.resources
    assert _without_timings(recorded) == _without_timings(fresh.log)


def test_a_report_that_differs_in_anything_but_its_timings_does_not_match():
    fresh = cuda.compile_family("elementwise", "sm_90").log
    assert _without_timings(fresh.replace("time = ", "time = 9")) == _without_timings(fresh)
    assert "registers" in fresh
    assert _without_timings(fresh.replace("registers", "registers ", 1)) != _without_timings(fresh)


def test_without_nvrtc_the_recorded_report_stands_in_and_says_so(monkeypatch):
    def missing():
        raise cuda.NvrtcUnavailable("NVRTC's Python bindings are missing.")

    monkeypatch.setattr(cuda, "_nvrtc", missing)
    cuda.compile_family.cache_clear()
    cuda.installed_nvrtc_version.cache_clear()
    try:
        fam = cuda.compile_family("elementwise", "sm_90")
        assert fam.recorded_nvrtc and "recorded report" in fam.compiler and fam.cubin == b""
        assert "recorded reports; NVRTC is not installed here" in cuda.nvrtc_version()
        with pytest.raises(cuda.NvrtcUnavailable, match="cannot run"):
            fam.function("vector_add")
        with pytest.raises(cuda.NvrtcUnavailable, match="no report of it was recorded"):
            cuda.compile_family("elementwise", "sm_90", ("-DNEVER_RECORDED=1",))
    finally:
        cuda.compile_family.cache_clear()
        cuda.installed_nvrtc_version.cache_clear()


def test_the_notebooks_replay_with_no_cuda_package_installed():
    env = dict(os.environ, COURSE_MODE="replay", PYTHONPATH=os.pathsep.join(
        filter(None, [str(HIDE), str(ROOT), os.environ.get("PYTHONPATH")])))
    check = subprocess.run([sys.executable, "-c", "import cupy"], env=env, capture_output=True, text=True)
    assert check.returncode != 0 and "hidden" in check.stderr, "the CUDA packages must really be hidden"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                          "notebooks/"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:]
