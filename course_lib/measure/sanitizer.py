"""compute-sanitizer over a launch in a child process: what a record keeps of its findings."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from course_lib.core.runtime import REPO_ROOT
from course_lib.measure.target import Target


def racecheck_both(target_for) -> dict:
    """racecheck's summary of ``target_for(True)`` and ``target_for(False)``: a kernel with the fence and without."""
    return {label: sanitizer_summary(target_for(fence))
            for label, fence in (("with the fence", True), ("without the fence", False))}


def sanitizer_summary(target: Target, tool: str = "racecheck", timeout_s: int = 300) -> dict:
    """compute-sanitizer's ``tool`` over ``target`` in a child process: its command, exit status and the
    lines that say what it found (or why it could not run)."""
    script = target.script()
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return {"unavailable": "compute-sanitizer is not on PATH (it ships with the CUDA toolkit)"}
    cmd = [exe, "--tool", tool, "--print-limit", "4", sys.executable, "-c", script]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"unavailable": f"{tool} did not finish within {timeout_s} s"}
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines()
             if ln.startswith("n=") or "SUMMARY" in ln or "Error" in ln or "hazard" in ln.lower()
             or ln.startswith("=========     at ") or "Invalid" in ln]
    return {"command": f"compute-sanitizer --tool {tool} python -c <script>", "script": script,
            "returncode": proc.returncode, "lines": lines[:12]}
