"""Profiler evidence: run Nsight Compute on a small Python launch script and parse its metrics.

``ncu_metrics(target, metrics, kernel_regex)`` runs
``ncu --csv --clock-control none --print-units base --metrics ... python -c <target's script>``
and returns one ``KernelProfile`` per profiled launch. Clock control is off so
profiled kernels run at the clocks the timed ones ran at. Where profiling is
not possible (no ncu, or no permission to read the GPU's counters) it raises
``ProfilerUnavailable`` saying why; notebooks then show the recorded metrics.

``attach_profiles`` runs a target that repeats an experiment's launches under ncu and
stores each launch's metrics in the matching case's ``extra["ncu"]`` (or the reason in
``extra["ncu_unavailable"]``); ``profiled_result`` picks the live metrics when there are
some, else the recorded run's, saying why.
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

from course_lib.core import progress
from course_lib.core.runtime import REPO_ROOT
from course_lib.measure import experiments
from course_lib.measure.target import Target


class ProfilerUnavailable(RuntimeError):
    """Nsight Compute cannot profile here; the message says why and what to do."""


class CountersUnavailable(ProfilerUnavailable):
    """This machine cannot count at all: no ncu, or the GPU's counters closed to this user (not a failed run)."""


@dataclass
class KernelProfile:
    launch_id: int
    kernel: str
    block: str
    grid: str
    metrics: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)

    @property
    def function(self) -> str:
        """The kernel's name without an argument list (ncu may print either)."""
        return self.kernel.split("(")[0].strip()


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


def ncu_command(metrics: list[str], kernel_regex: str | None = None, launch_count: int | None = None) -> list[str]:
    """ncu's options for ``metrics`` of the launches matching ``kernel_regex``: the profiled program follows."""
    exe = ncu_path()
    if exe is None:
        raise CountersUnavailable("Nsight Compute (ncu) is not installed or not on PATH; "
                                  "it ships with the CUDA toolkit")
    cmd = [exe, "--csv", "--clock-control", "none", "--print-units", "base", "--metrics", ",".join(metrics)]
    if kernel_regex:
        cmd += ["-k", f"regex:{kernel_regex}"]
    if launch_count:
        cmd += ["-c", str(launch_count)]
    return cmd


def run_ncu(cmd: list[str], timeout_s: int) -> list[KernelProfile]:
    """Run an ``ncu_command`` with its program: one profile per launch, or ``ProfilerUnavailable`` saying why."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise ProfilerUnavailable(f"ncu did not finish within {timeout_s} s") from None
    text = proc.stdout + proc.stderr
    if "ERR_NVGPUCTRPERM" in text:
        raise CountersUnavailable(_PERMISSION_HINT)
    profiles = parse_csv(proc.stdout)
    if proc.returncode != 0 or not profiles:
        tail = "\n".join(text.strip().splitlines()[-15:])
        raise ProfilerUnavailable(f"ncu exited with {proc.returncode} and profiled "
                                  f"{len(profiles)} kernels:\n{tail}")
    return profiles


def ncu_metrics(target: Target, metrics: list[str], kernel_regex: str | None = None,
                launch_count: int | None = None, timeout_s: int = 600) -> list[KernelProfile]:
    """Profile every launch of ``target`` (run in a child process) whose kernel matches ``kernel_regex``."""
    cmd = ncu_command(metrics, kernel_regex, launch_count) + [sys.executable, "-c", target.script()]
    progress.step(f"Nsight Compute: {len(metrics)} metrics per kernel (each kernel is replayed, so this takes a while)")
    return run_ncu(cmd, timeout_s)


def command_line(metrics: list[str], kernel_regex: str | None = None) -> str:
    """The command, as text, for a record's provenance."""
    k = f" -k regex:{kernel_regex}" if kernel_regex else ""
    return f"ncu --csv --clock-control none --print-units base --metrics {','.join(metrics)}{k} python -c <script>"


def attach_profiles(cases: list, target: Target, metrics: list[str], kernel_regex: str,
                    expected_kernels: list[str], timeout_s: int = 240) -> bool:
    """Run ``target`` (it launches each case's kernel once, in case order) under ncu and store
    each launch's metrics in the matching case's ``extra``. Never raises for a profiler that
    cannot run: the reason goes into ``extra["ncu_unavailable"]`` and the result is ``False``."""
    try:
        profiles = ncu_metrics(target, metrics, kernel_regex, timeout_s=timeout_s)
        got = [p.function for p in profiles]
        if got != list(expected_kernels):
            raise ProfilerUnavailable(f"ncu profiled {got}, expected {list(expected_kernels)}")
    except ProfilerUnavailable as exc:
        for c in cases:
            c.extra["ncu_unavailable"] = str(exc)
        return False
    command, version = command_line(metrics, kernel_regex), ncu_version()
    for c, p in zip(cases, profiles):
        c.extra["ncu"] = {m: p.metrics.get(m) for m in metrics}
        c.extra["ncu_command"] = command
        c.extra["ncu_version"] = version
    return True


def has_profile(result) -> bool:
    return any("ncu" in c.extra for c in result.cases)


def ncu_provenance(result) -> str:
    """Which Nsight Compute, and the command line, behind a result's profile."""
    for c in result.cases:
        if "ncu" in c.extra:
            return f"{c.extra.get('ncu_version') or 'ncu (version not recorded)'} | {c.extra.get('ncu_command', '')}"
    return "no profile"


def profiled_result(result):
    """``(result with ncu metrics or None, note)``: the live metrics if this run has them, else the
    recorded run's, with the reason profiling was not possible here."""
    if has_profile(result):
        return result, f"Nsight Compute metrics {result.provenance}"
    reasons = sorted({c.extra["ncu_unavailable"] for c in result.cases if c.extra.get("ncu_unavailable")})
    why = "; ".join(reasons) or "this run carries no profiler metrics"

    try:
        recorded = experiments.replay(result.experiment, result.params)
    except Exception as exc:  # noqa: BLE001  (NotRecorded or a missing file: say so)
        return None, f"Profiling was not possible here ({why}), and there is no recorded profile: {exc}"
    if not has_profile(recorded):
        return None, f"Profiling was not possible here ({why}), and the recorded run has no profile either."
    return recorded, (f"Profiling was not possible here: {why}. Showing the Nsight Compute metrics "
                      f"{recorded.provenance} instead.")


def short_kernel_name(name: str) -> str:
    """A profiler kernel name without its template arguments and parameter list."""
    head = name.replace("(anonymous namespace)::", "").split("(")[0]
    if "<" in head:
        head = head.split("<")[0]
    return head.replace("void ", "").strip() or name


def kernels_launched(fn) -> list[str]:
    """The CUDA kernels one call of ``fn`` launches, in order, as the PyTorch profiler names them
    (memsets and copies included: they are work the call asked for too)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]

