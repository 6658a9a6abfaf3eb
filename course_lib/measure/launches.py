"""An experiment as a list of launches, one per case: how each is launched once and checked, what the
model says of it; measured into cases, and profiled under Nsight Compute by a child process that
repeats the profiled launches (a ``Target``). No kernel knowledge: the launchers in ``launch/`` build
the lists."""
from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass, field
from typing import Callable

from course_lib.core.timing import benchmark
from course_lib.measure import profiler
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import require_passed
from course_lib.measure.target import Target


@dataclass
class Launch:
    """One case of an experiment: how to launch it once, check it, and what the model says about it."""

    name: str
    params: dict
    kernel: str                      # "family.kernel", or a library name
    run: Callable[[], None]
    check: Callable[[], dict]
    bytes: float
    flop: float = 0
    launch: dict | None = None
    extra: dict = field(default_factory=dict)
    function: str | None = None      # the kernel's name under ncu; None: not profiled (library calls)
    library: bool = False            # a library reference: timed by a second protocol too


def measure(launches: list[Launch], samples: int, flush_l2: bool) -> list[Case]:
    """Each launch checked, then timed: one case per launch, in order."""
    cases = []
    for la in launches:
        check = la.check()
        t = benchmark(la.run, samples, flush_l2=flush_l2, reference=la.library)
        cases.append(require_passed(Case(la.name, la.params, la.kernel, t, la.flop, la.bytes,
                                          check, la.launch, extra=dict(la.extra))))
    return cases


def launch_profiled(launches: list[Launch]) -> None:
    """What a profiling child process runs: every profiled launch once, in case order."""
    import cupy

    for la in launches:
        if la.function:
            la.run()
    cupy.cuda.Device().synchronize()


def attach_profiles(cases: list[Case], launches: list[Launch], target: Target, metrics: list[str]) -> None:
    """The profiled cases' metrics from ``target`` under ncu (``profiler.attach_profiles``), matched by
    kernel name."""
    wanted = [(c, la) for c, la in zip(cases, launches) if la.function]
    names = sorted({la.function for _, la in wanted})
    profiler.attach_profiles([c for c, _ in wanted], target, metrics, "^(" + "|".join(names) + ")$",
                             [la.function for _, la in wanted])


def attach_known_profiles(cases: list[Case], launches: list[Launch], target: Target, metrics: list[str],
                          kernel_regex: str) -> None:
    """Profile the profiled cases' kernels (``target`` under ncu) into each case's extra, keeping only the
    metrics this ncu knows when it refuses one (the dropped ones are named in the case)."""
    wanted = [(c, la) for c, la in zip(cases, launches) if la.function]
    usable = list(metrics)
    try:
        try:
            profiles = profiler.ncu_metrics(target, usable, kernel_regex, timeout_s=180)
        except profiler.ProfilerUnavailable as exc:
            known = known_metrics()
            if "metric" not in str(exc).lower() or known is None:
                raise
            # an older or newer ncu may lack a metric: keep the ones this one knows, say which were dropped
            usable = [m for m in metrics if m.rsplit(".", 1)[0] in known]
            profiles = profiler.ncu_metrics(target, usable, kernel_regex, timeout_s=180)
        names = [p.kernel.split("(")[0].strip() for p in profiles]
        expected = [la.function for _, la in wanted]
        if names != expected:
            raise profiler.ProfilerUnavailable(f"ncu profiled {names}, expected {expected}")
    except (profiler.ProfilerUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        for c, _ in wanted:
            c.extra["ncu_unavailable"] = str(exc)
        return
    command = profiler.command_line(usable, kernel_regex)
    version = profiler.ncu_version()
    for (c, _), p in zip(wanted, profiles):
        c.extra["ncu"] = {m: (v if isinstance(v := p.metrics.get(m), float) else None) for m in usable}
        c.extra["ncu_command"] = command
        c.extra["ncu_version"] = version
        if len(usable) < len(metrics):
            c.extra["ncu_metrics_not_on_this_gpu"] = sorted(set(metrics) - set(usable))


@functools.lru_cache(maxsize=1)
def known_metrics() -> frozenset | None:
    """Base names of the metrics ncu offers on this GPU, or None if it cannot say (then try them all)."""

    exe = profiler.ncu_path()
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = {line.split()[0] for line in out.splitlines() if line.strip() and "__" in line.split()[0]}
    return frozenset(names) or None


def ratio(a, b):
    """a / b of two profiler counters, or None where either is missing (or b is zero)."""
    return a / b if a is not None and b else None


def megabytes(v):
    return v / 1e6 if v is not None else None
