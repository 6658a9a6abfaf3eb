"""Measurement records: the format, the validator, and the replay store.

One JSON file per experiment under ``data/recorded/<gpu-slug>/``, readable
without this library. A record is only evidence if it names the machine, the
kernel behind every case, has at least 20 raw samples per case, and every case
passed its correctness check; ``validate`` enforces exactly that.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_lib.core.runtime import REPO_ROOT
from course_lib.core.gpu_monitor import power_limited
from course_lib.core.timing import MIN_SAMPLES, Timing

RECORDED_DIR = REPO_ROOT / "data" / "recorded"
MACHINE_KEYS = ("gpu", "compute_capability", "sm_count", "driver", "cuda_runtime", "nvrtc", "cupy")


class InvalidRecord(ValueError):
    """A record that is not evidence; the message lists every reason."""


class NotRecorded(LookupError):
    """The experiment, or these parameters of it, were never measured on that GPU."""


@dataclass
class Check:
    """The comparison of a case's output with a reference."""

    reference: str
    max_abs_err: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return math.isfinite(self.max_abs_err) and self.max_abs_err <= self.tolerance

    def to_json(self) -> dict:
        return asdict(self) | {"passed": self.passed}


@dataclass
class Case:
    """One measured configuration of one experiment."""

    name: str
    params: dict
    kernel: str
    samples_s: list[float]      # or the harness's Timing (see __post_init__)
    flop: float
    bytes: float
    check: dict
    launch: dict | None = None
    timer: str = "cuda-events"
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        # A Timing from the harness may stand for the samples: they are kept, and what the harness saw
        # while taking them goes into ``extra``: late samples, the GPU's clock and power, a library
        # reference's second protocol.
        if isinstance(self.samples_s, Timing):
            t = self.samples_s
            self.samples_s = list(t.samples_s)
            self.extra = dict(self.extra)
            if t.late_samples:
                self.extra["late_samples"] = t.late_samples
            if t.gpu:
                self.extra["gpu_during"] = t.gpu
            if t.second is not None:
                self.extra["second_protocol"] = t.second

    @property
    def timing(self) -> Timing:
        return Timing(tuple(self.samples_s), self.extra.get("late_samples", 0), self.extra.get("gpu_during", {}),
                      self.extra.get("second_protocol"))

    @property
    def power_limited(self) -> bool:
        """The SM clock fell below ``gpu_monitor.POWER_LIMITED_FRACTION`` of its maximum during the samples."""
        return power_limited(self.extra.get("gpu_during"))

    @property
    def protocols_disagree(self) -> bool:
        """A library reference whose two timing protocols disagreed beyond their tolerance, twice."""
        second = self.extra.get("second_protocol")
        return bool(second) and not second["agree"]

    @property
    def median_s(self) -> float:
        return self.timing.median_s

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.bytes / self.median_s

    @property
    def flop_per_s(self) -> float:
        return self.flop / self.median_s


def case_problems(case: dict, where: str) -> list[str]:
    problems = []
    samples = case.get("samples_s")
    if not isinstance(samples, list) or len(samples) < MIN_SAMPLES:
        n = len(samples) if isinstance(samples, list) else 0
        problems.append(f"{where}: {n} raw samples; at least {MIN_SAMPLES} are required")
    elif not all(isinstance(s, (int, float)) and s > 0 and math.isfinite(s) for s in samples):
        problems.append(f"{where}: samples must be positive, finite seconds")
    if not case.get("kernel"):
        problems.append(f"{where}: no kernel identity (which code produced this timing?)")
    check = case.get("check")
    if not isinstance(check, dict) or not check.get("reference"):
        problems.append(f"{where}: no correctness check against a reference")
    elif check.get("passed") is not True:
        problems.append(f"{where}: its correctness check failed "
                        f"(max_abs_err {check.get('max_abs_err')} > tolerance {check.get('tolerance')})")
    for key in ("flop", "bytes"):
        if not isinstance(case.get(key), (int, float)) or case[key] < 0:
            problems.append(f"{where}: {key} must be a non-negative number")
    if not isinstance(case.get("params"), dict):
        problems.append(f"{where}: params must be an object")
    return problems


def validate(record: dict) -> list[str]:
    """Every reason ``record`` is not valid evidence; empty when it is."""
    problems = []
    for key in ("experiment", "status", "recorded_at", "command"):
        if not record.get(key):
            problems.append(f"missing {key!r}")
    if record.get("status") not in (None, "recorded"):
        problems.append(f"status is {record.get('status')!r}; only 'recorded' is replayable")
    machine = record.get("machine")
    if not isinstance(machine, dict):
        problems.append("no machine manifest")
    else:
        missing = [k for k in MACHINE_KEYS if not machine.get(k)]
        if missing:
            problems.append(f"machine manifest lacks {', '.join(missing)}")
    cases = record.get("cases")
    if not isinstance(cases, list) or not cases:
        problems.append("no cases")
    else:
        names = [c.get("name") for c in cases]
        if len(set(names)) != len(names):
            problems.append("case names are not unique")
        for i, c in enumerate(cases):
            problems += case_problems(c, f"case {c.get('name', i)!r}")
        for j, run in enumerate(record.get("repeats", [])):
            if not run.get("recorded_at") or {c.get("name") for c in run.get("cases", [])} != set(names):
                problems.append(f"repeat {j}: needs recorded_at and the same cases as the record")
            for c in run.get("cases", []):
                problems += case_problems(c, f"repeat {j}, case {c.get('name')!r}")
    return problems


def check_valid(record: dict) -> None:
    problems = validate(record)
    if problems:
        raise InvalidRecord(f"{record.get('experiment', '?')}: " + "; ".join(problems))


def recorded_gpus(root: Path = RECORDED_DIR) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.exists() else []


def record_path(gpu_slug: str, experiment: str, root: Path = RECORDED_DIR) -> Path:
    return root / gpu_slug / f"{experiment}.json"


def load(gpu_slug: str, experiment: str, root: Path = RECORDED_DIR) -> dict:
    """A validated record, or a ``NotRecorded`` that says what does exist."""
    path = record_path(gpu_slug, experiment, root)
    if not path.exists():
        gpus = recorded_gpus(root)
        if gpu_slug not in gpus:
            raise NotRecorded(f"nothing was recorded on {gpu_slug!r}; recorded GPUs: {', '.join(gpus) or 'none'}")
        have = sorted(p.stem for p in (root / gpu_slug).glob("*.json"))
        raise NotRecorded(f"{experiment!r} was never recorded on {gpu_slug}; recorded there: {', '.join(have)}. "
                          f"Record it on a GPU with: python -m course_lib.record {experiment}")
    record = json.loads(path.read_text())
    check_valid(record)
    return record


def save(record: dict, root: Path = RECORDED_DIR) -> Path:
    check_valid(record)
    path = record_path(record["machine"]["slug"], record["experiment"], root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def case_from_json(c: dict) -> Case:
    return Case(name=c["name"], params=c["params"], kernel=c["kernel"], samples_s=c["samples_s"],
                flop=c["flop"], bytes=c["bytes"], check=c["check"], launch=c.get("launch"),
                timer=c.get("timer", "cuda-events"), extra=c.get("extra", {}))


def case_to_json(c: Case) -> dict:
    return asdict(c)
