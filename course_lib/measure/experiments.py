"""Named experiments: the same code runs live and is what the recorder records.

``run(name, **params)`` measures now on a GPU (live) or returns the recorded
result for the same experiment and parameters (replay). Either way the result
carries its provenance, and every figure and table says it.
"""
from __future__ import annotations

import datetime as _dt
import functools
from dataclasses import dataclass, field
from typing import Callable

from course_lib.core import cuda, progress, runtime, session, stored_run
from course_lib.core.hardware import detect, slug
from course_lib.measure import evidence
from course_lib.measure.evidence import Case, Check, NotRecorded


@dataclass(frozen=True)
class Experiment:
    name: str
    defaults: dict
    body: Callable[..., list[Case]]
    summary: str
    # How many times the recorder runs it: a headline comparison (a kernel against a library
    # reference) is recorded at least three times, so its figures are ranges over runs, not one run.
    record_runs: int = 1
    # GPUs of one machine the experiment measures between (notebook 14's collectives): its record goes to
    # data/recorded/<gpu>-x<N>/, and the recorder skips it on a machine with fewer.
    min_gpus: int = 1


REGISTRY: dict[str, Experiment] = {}


def experiment(name: str, summary: str, record_runs: int = 1, min_gpus: int = 1, **defaults):
    def register(fn):
        REGISTRY[name] = Experiment(name, defaults, fn, summary, record_runs, min_gpus)
        return fn
    return register


@dataclass
class Result:
    experiment: str
    mode: str                # "live" or "recorded"
    machine: dict
    recorded_at: str
    params: dict
    cases: list[Case]
    # Live on a GPU other than the one the course was recorded on: that GPU's record of the same
    # experiment, which the row builders marked ``beside_reference`` show beside the learner's rows.
    reference: "Result | None" = field(default=None, repr=False, compare=False)
    # The recorder's other runs of the same experiment (``record_runs``), oldest first; this one is the last.
    repeats: list["Result"] = field(default_factory=list, repr=False, compare=False)

    def runs(self) -> list["Result"]:
        """Every recorded run of this experiment, this one last (a live result is one run)."""
        return [*self.repeats, self]

    def case_range_s(self, name: str) -> tuple[float, float, float]:
        """(lowest, median, highest) of case ``name``'s median time over the recorded runs."""
        medians = sorted(r.case(name).median_s for r in self.runs())
        return medians[0], medians[len(medians) // 2], medians[-1]

    @property
    def gpu(self) -> str:
        return self.machine["gpu"]

    @property
    def provenance(self) -> str:
        """The label every table and figure built on this result carries."""
        if self.mode == "live":
            label = f"measured on {self.gpu}, {session.utc_label(self.recorded_at)}"
            if self.reference is not None:
                label += f", beside the {self.reference.gpu}'s record ({self.reference.recorded_at[:10]})"
            return label
        return f"recorded on {self.gpu}, {self.recorded_at[:10]}"

    def case(self, name: str) -> Case:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(f"{self.experiment} has no case {name!r}; it has: {', '.join(c.name for c in self.cases)}")

    @classmethod
    def from_record(cls, record: dict, mode: str = "recorded") -> "Result":
        """The inverse of ``to_record``: the result a record holds, with its earlier runs as ``repeats``."""
        def run(entry: dict, machine: dict) -> "Result":
            return cls(record["experiment"], mode, machine, entry["recorded_at"], record.get("params", {}),
                       [evidence.case_from_json(c) for c in entry["cases"]])

        result = run(record, record["machine"])
        result.repeats = [run(r, {**record["machine"], "gpu_state": r.get("gpu_state")})
                          for r in record.get("repeats", [])]
        return result

    def to_record(self, command: str, earlier_runs: list["Result"] = ()) -> dict:
        record = {"experiment": self.experiment, "status": "recorded", "recorded_at": self.recorded_at,
                  "command": command, "machine": self.machine, "params": self.params,
                  "cases": [evidence.case_to_json(c) for c in self.cases]}
        if earlier_runs:
            record["repeats"] = [{"recorded_at": r.recorded_at, "gpu_state": r.machine.get("gpu_state"),
                                  "cases": [evidence.case_to_json(c) for c in r.cases]} for r in earlier_runs]
        return record


LABS_PACKAGE = "course_lib.labs"


def all_experiments() -> dict[str, Experiment]:
    """Every registered experiment. Experiments are found by name, so the registry loads the labs
    package (its ``__init__`` imports each lab, and each lab registers its experiments with
    ``@experiment``). It is named here as data, not imported: the framework sits below the labs."""
    import importlib

    importlib.import_module(LABS_PACKAGE)
    return REGISTRY


def _lookup(name: str) -> Experiment:
    if name not in all_experiments():
        raise KeyError(f"no experiment {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def _normalise(value):
    return list(value) if isinstance(value, tuple) else value


def resolve_params(name: str, **params) -> dict:
    exp = _lookup(name)
    unknown = set(params) - set(exp.defaults)
    if unknown:
        raise TypeError(f"{name} takes {', '.join(exp.defaults) or 'no parameters'}; got {', '.join(sorted(unknown))}")
    return {k: _normalise(params.get(k, v)) for k, v in exp.defaults.items()}


def run(name: str, **params) -> Result:
    """Measure ``name`` now (live) or replay its record (no GPU)."""
    resolved = resolve_params(name, **params)
    if runtime.mode() == "live":
        return run_live(name, resolved)
    if runtime.mode() == "render":
        return render(name, resolved)
    return replay(name, resolved)


def machine_manifest() -> dict:
    env = session.environment()
    info = detect()
    return {"gpu": info.name, "slug": slug(info.name), "compute_capability": info.compute_capability,
            "sm_count": info.sm_count, "l2_bytes": info.l2_bytes,
            "smem_per_sm_bytes": info.smem_per_sm_bytes, "total_memory_bytes": info.total_memory_bytes,
            "driver": env.driver, "cuda_runtime": env.cuda_runtime, "nvrtc": env.nvrtc,
            "cupy": env.cupy, "torch": env.torch, "clocks_mhz": env.clocks_mhz}


def run_live(name: str, resolved: dict) -> Result:
    exp = _lookup(name)
    machine = machine_manifest()
    before = session.gpu_state()
    with progress.measuring(f"{name} on {machine['gpu']}"):
        cases = exp.body(**resolved)
    # The clock and power at both ends: a run that throttled, or ran far below the maximum clock, shows it.
    machine["gpu_state"] = {"before": before, "after": session.gpu_state()}
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    result = Result(name, "live", machine, now, resolved, cases, reference_for(name, resolved, machine["slug"]))
    log_run(result)
    return result


def log_run(result: Result) -> None:
    """Log the live result for the notebook's stored run (``core.stored_run``): its page is rendered from it
    and its claims are checked against it (``measure.claims``)."""
    stored_run.log(result.to_record(f"notebook run of {result.experiment}"))


def render(name: str, resolved: dict) -> Result:
    """The live result the notebook's stored run logged for this experiment and these parameters, as the
    live run showed it (``measured on <GPU>, <time>``, and beside the reference GPU's record where it was
    another GPU)."""
    result = Result.from_record(stored_run.stored_result(name, resolved), "live")
    result.reference = reference_for(name, resolved, result.machine.get("slug") or slug(result.gpu))
    return result


def reference_for(name: str, resolved: dict, live_slug: str) -> Result | None:
    """The record of ``name`` on the course's reference GPU (``runtime.replay_gpu()``), to show beside
    a live run on another GPU; None on the reference GPU itself, or where nothing matching was recorded."""
    if live_slug == runtime.replay_gpu():
        return None
    try:
        return replay(name, resolved)
    except NotRecorded:
        return None


def beside_reference(rows_fn: Callable[..., list[dict]]) -> Callable[..., list[dict]]:
    """For a row builder whose first argument is a Result: live on another GPU, each of the learner's
    rows is followed by the reference GPU's recorded row in the same place (a "GPU" column says which),
    so a workshop on an L4 sees its numbers beside the H200's. Otherwise the rows are unchanged."""
    @functools.wraps(rows_fn)
    def with_reference(result, *args, **kwargs):
        rows = rows_fn(result, *args, **kwargs)
        ref = getattr(result, "reference", None)
        if ref is None:
            return rows
        ref_rows = rows_fn(ref, *args, **kwargs)
        mine = [{"GPU": result.gpu, **r} for r in rows]
        theirs = [{"GPU": f"{ref.gpu} (recorded)", **r} for r in ref_rows]
        if len(mine) != len(theirs):   # different variants ran (an older GPU skips some): one block each
            return mine + theirs
        return [row for pair in zip(mine, theirs) for row in pair]
    return with_reference


def beside_reference_figure(figure_fn: Callable[..., object]) -> Callable[..., object]:
    """For a figure builder whose first argument is a Result: live on another GPU it also draws the
    reference GPU's record (its title says "recorded on ..."), after the learner's figure, so the
    notebook shows both. Returns the learner's figure."""
    @functools.wraps(figure_fn)
    def with_reference(result, *args, **kwargs):
        fig = figure_fn(result, *args, **kwargs)
        if getattr(result, "reference", None) is not None:
            figure_fn(result.reference, *args, **kwargs)
        return fig
    return with_reference


def replay(name: str, resolved: dict, gpu_slug: str | None = None) -> Result:
    gpu_slug = gpu_slug or runtime.replay_gpu()
    record = evidence.load(gpu_slug, name)
    recorded = record.get("params", {})
    result = Result.from_record(record)
    cases = result.cases
    for key, want in resolved.items():
        have = recorded.get(key)
        if want == have:
            continue
        if isinstance(want, list) and isinstance(have, list) and set(map(repr, want)) <= set(map(repr, have)):
            cases = [c for c in cases if key not in c.params or c.params[key] in want]
            continue
        raise NotRecorded(
            f"{name} with {key}={want!r} was never measured on {record['machine']['gpu']} "
            f"(recorded: {key}={have!r}). Use a recorded value, or run it on a GPU to measure it.")
    kept = {c.name for c in cases}
    for run in result.runs():   # the parameters asked for, and only their cases, in every run
        run.params, run.cases = resolved, [c for c in run.cases if c.name in kept]
    return result


# --------------------------------------------------------------------------- helpers for bodies

def check_close(got, ref, reference: str, rtol: float, atol: float = 0.0) -> dict:
    """Max |got - ref| against a tolerance scaled to the reference's magnitude."""
    import cupy

    got = cupy.asarray(got, dtype=cupy.float64)
    ref = cupy.asarray(ref, dtype=cupy.float64)
    err = float(cupy.abs(got - ref).max())
    tol = rtol * float(cupy.abs(ref).max()) + atol
    return Check(reference, err, tol).to_json()


def require_passed(case: Case) -> Case:
    if not case.check["passed"]:
        raise AssertionError(f"{case.name}: result differs from {case.check['reference']} "
                             f"(max abs err {case.check['max_abs_err']:.3g} > {case.check['tolerance']:.3g})")
    return case


def launch_record(grid, block, resources, dynamic_smem_bytes: int = 0) -> dict:
    """A case's ``launch`` entry: geometry, and what the compiler gave the kernel."""
    return {"grid": list(grid), "block": list(block), "dynamic_smem_bytes": dynamic_smem_bytes,
            "registers": resources.registers, "static_smem_bytes": resources.static_smem_bytes,
            "spill_store_bytes": resources.spill_store_bytes}


def kernel_launch_record(grid, block, family: str, kernel: str, dynamic_smem_bytes: int = 0) -> dict:
    """``launch_record`` for a course kernel, its resources from NVRTC for the current GPU."""

    return launch_record(grid, block, cuda.resources(family, kernel), dynamic_smem_bytes)
