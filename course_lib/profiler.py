"""Profiler evidence: run Nsight Compute on a small Python launch script and parse its metrics.

``ncu_metrics(script, metrics, kernel_regex)`` runs
``ncu --csv --clock-control none --print-units base --metrics ... python -c script``
and returns one ``KernelProfile`` per profiled launch. Clock control is off so
profiled kernels run at the clocks the timed ones ran at. Where profiling is
not possible (no ncu, or no permission to read the GPU's counters) it raises
``ProfilerUnavailable`` saying why; notebooks then show the recorded metrics.
"""
from __future__ import annotations

import csv
import glob
import io
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field


class ProfilerUnavailable(RuntimeError):
    """Nsight Compute cannot profile here; the message says why and what to do."""


@dataclass
class KernelProfile:
    launch_id: int
    kernel: str
    block: str
    grid: str
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)


def ncu_path() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda-*/bin/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def ncu_version() -> str | None:
    exe = ncu_path()
    if not exe:
        return None
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    return out.strip().splitlines()[-1] if out.strip() else None


def _number(text: str) -> float | str:
    t = text.replace(",", "").strip()
    try:
        return float(t)
    except ValueError:
        return text


def parse_csv(stdout: str) -> list[KernelProfile]:
    """ncu's ``--csv`` page (one row per launch and metric) → one profile per launch."""
    rows = [line for line in stdout.splitlines() if line.startswith('"')]
    if not rows:
        return []
    out: dict[int, KernelProfile] = {}
    for r in csv.DictReader(io.StringIO("\n".join(rows))):
        lid = int(r["ID"])
        prof = out.setdefault(lid, KernelProfile(lid, r["Kernel Name"], r.get("Block Size", ""), r.get("Grid Size", "")))
        prof.metrics[r["Metric Name"]] = _number(r["Metric Value"])
        prof.units[r["Metric Name"]] = r.get("Metric Unit", "")
    return [out[k] for k in sorted(out)]


_PERMISSION_HINT = ("the GPU's performance counters are not accessible to this user "
                    "(ERR_NVGPUCTRPERM). On your own machine: run as root or set the driver option "
                    "NVreg_RestrictProfilingToAdminUsers=0; on a cloud/Colab GPU this is usually not allowed, "
                    "so the notebook shows the metrics recorded on the H200 instead")


def ncu_metrics(script: str, metrics: list[str], kernel_regex: str | None = None,
                launch_count: int | None = None, timeout_s: int = 600) -> list[KernelProfile]:
    exe = ncu_path()
    if exe is None:
        raise ProfilerUnavailable("Nsight Compute (ncu) is not installed or not on PATH; "
                                  "it ships with the CUDA toolkit")
    cmd = [exe, "--csv", "--clock-control", "none", "--print-units", "base", "--metrics", ",".join(metrics)]
    if kernel_regex:
        cmd += ["-k", f"regex:{kernel_regex}"]
    if launch_count:
        cmd += ["-c", str(launch_count)]
    cmd += [sys.executable, "-c", script]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_repo_root(), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    text = proc.stdout + proc.stderr
    if "ERR_NVGPUCTRPERM" in text:
        raise ProfilerUnavailable(_PERMISSION_HINT)
    profiles = parse_csv(proc.stdout)
    if proc.returncode != 0 or not profiles:
        tail = "\n".join(text.strip().splitlines()[-15:])
        raise ProfilerUnavailable(f"ncu exited with {proc.returncode} and profiled "
                                  f"{len(profiles)} kernels:\n{tail}")
    return profiles


def _repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def command_line(metrics: list[str], kernel_regex: str | None = None) -> str:
    """The command, as text, for a record's provenance."""
    k = f" -k regex:{kernel_regex}" if kernel_regex else ""
    return f"ncu --csv --clock-control none --print-units base --metrics {','.join(metrics)}{k} python -c <script>"
