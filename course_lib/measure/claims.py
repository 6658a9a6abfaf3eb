"""Claims: every number the prose states about a measurement is checked against the run beside it.

A notebook's claims live next to it, in ``notebooks/claims/NN_name.py``, as a list ``CLAIMS`` of

- ``Measured(text, experiment, quantity, within)``: the words ``text`` (verbatim from a Markdown
  cell) state ``quantity(result)`` of ``experiment``; it must lie in ``within`` (the tolerance the
  words imply: "about 90%" is (0.85, 0.95)). ``quantity`` may return a tuple, one value per range in
  ``within`` ("from about 4x to about 11x" is two).
  With several experiments (a tuple), ``quantity`` takes one result of each, from the same run.
  Against the record it must hold in every recorded run (headline experiments are recorded three
  times), so a figure that moves between runs has to be written as the range it takes.
  ``belongs_to="NVIDIA H200"``: a figure the prose gives as that GPU's ("on the H200, ..."), checked
  against that GPU's runs only; a run on another GPU shows its own figure in the table beside it. Any
  other measured claim is about whatever GPU ran the notebook, so it must hold on every GPU's runs.
- ``Recorded(...)``: the same, for a figure the notebook shows from the record even live (a
  catalogue's evidence): checked against the recorded runs only.
- ``Analytic(text, value, within)``: a model's output, ``value()``, stated in words.
- ``Given(text, why)``: a number that is no measurement and no model output: a datasheet value
  with its source, an input the reader is told to use. ``why`` says which.

A measured claim is checked against two runs: the record the notebook replays
(``data/recorded/<gpu>/``), and the live run committed with the notebook, whose results the GPU run
stores in the notebook's metadata (``course_run.results``, written by ``scripts/notebook_run.py``).
The number finder, ``measured_numbers``, lists the numbers with units in the prose; each must sit
inside some claim's text, so a sentence that quotes a figure no claim covers fails a test.

    python -m course_lib.measure.claims notebooks/08_fusion.ipynb [--source notebook|record]

prints every claim that fails, naming its sentence, and exits 1 if any does.
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Union

from course_lib.core.runtime import REPO_ROOT
from course_lib.measure import experiments
from course_lib.measure.experiments import Result

CLAIMS_DIR = REPO_ROOT / "notebooks" / "claims"
# Runs kept beside the record to check the prose against (data/held_out/<gpu-slug>_<date>/<notebook>.json): the
# results a notebook's live run stored, on a GPU or a day the ranges were not written from.
HELD_OUT_DIR = REPO_ROOT / "data" / "held_out"
Range = tuple[float, float]


@dataclass(frozen=True)
class Measured:
    text: str
    experiment: Union[str, tuple[str, ...]]   # several: ``quantity`` takes one result of each, same run
    quantity: Callable[..., Union[float, tuple]]
    within: Union[Range, list[Range]]
    params: dict = field(default_factory=dict)   # which run of the experiment, where it ran with several
    unit: str = ""                               # how the value is shown in a failure: "%", "µs", "x", ""
    belongs_to: str | None = None                # the GPU whose figure the words state (they name it), or any GPU


@dataclass(frozen=True)
class Recorded(Measured):
    """A measured figure the notebook shows from the record even when it runs live (a catalogue's
    evidence, a reconciliation table): checked against every recorded run, not against the live one."""


@dataclass(frozen=True)
class Analytic:
    text: str
    value: Callable[[], Union[float, tuple]]
    within: Union[Range, list[Range]]
    unit: str = ""


@dataclass(frozen=True)
class Given:
    text: str
    why: str


Claim = Union[Measured, Recorded, Analytic, Given]


@dataclass(frozen=True)
class Failure:
    notebook: str
    text: str
    source: str
    message: str

    def __str__(self) -> str:
        return f"{self.notebook}: «{self.text}» ({self.source}): {self.message}"


# --------------------------------------------------------------------------- the prose

def normalise(text: str) -> str:
    return " ".join(text.split())


_CODE_SPAN = re.compile(r"`[^`]*`")
_MATH_SPAN = re.compile(r"\$[^$]*\$")
_UNITS = (r"%|×(?!\s?\d)|µs|us\b|ms\b|ns\b|GB/s|TB/s|GiB/s|TiB/s|PFLOP/s|TFLOP/s|GFLOP/s|TFLOPS|MHz|GHz|W\b"
          r"|points?\b|percentage points\b|times\b|cycles\b")
_NUMBER = re.compile(r"(?<![\w.])[−+-]?\d[\d,]*(?:\.\d+)?(?:\s?(?:" + _UNITS + r"))")


def prose(nb) -> str:
    """The notebook's Markdown cells, whitespace-normalised, inline code and math blanked out
    (so their characters keep their positions but no number inside them is found)."""
    text = normalise(" \n ".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    blank = lambda m: " " * len(m.group(0))  # noqa: E731
    return _MATH_SPAN.sub(blank, _CODE_SPAN.sub(blank, text))


def measured_numbers(text: str) -> list[tuple[int, int, str]]:
    """Every number followed by a unit of time, rate, ratio or percentage: (start, end, match)."""
    return [(m.start(), m.end(), m.group(0)) for m in _NUMBER.finditer(text)]


def claim_spans(text: str, claims: Iterable[Claim]) -> tuple[list[tuple[int, int]], list[Claim]]:
    """Where each claim's words occur in ``text``, and the claims whose words occur nowhere."""
    spans, missing = [], []
    for claim in claims:
        words = normalise(claim.text)
        found = [m.start() for m in re.finditer(re.escape(words), text)]
        if not found:
            missing.append(claim)
        spans += [(s, s + len(words)) for s in found]
    return spans, missing


def uncovered(text: str, claims: Iterable[Claim]) -> list[str]:
    """The numbers with units in ``text`` that no claim's words cover, each with its context."""
    spans, _ = claim_spans(text, claims)
    out = []
    for start, end, number in measured_numbers(text):
        if not any(s <= start and end <= e for s, e in spans):
            out.append(f"{number!r} in «…{text[max(0, start - 60):end + 30]}…»")
    return out


# --------------------------------------------------------------------------- the runs

def load_module(stem: str):
    """``notebooks/claims/<stem>.py``, loaded by path (the folder is no package): a notebook's claims
    file, or ``_shared``, the helpers several of them use (``shared = claims.load_module("_shared")``)."""
    spec = importlib.util.spec_from_file_location(f"course_claims_{stem}", CLAIMS_DIR / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_claims(stem: str) -> list[Claim]:
    """``CLAIMS`` of ``notebooks/claims/<stem>.py`` (empty when the notebook has no such file)."""
    if not (CLAIMS_DIR / f"{stem}.py").exists():
        return []
    return list(load_module(stem).CLAIMS)


def held_out_runs(stem: str) -> list[tuple[str, dict]]:
    """(where it is kept, its file's content) of every kept run of notebook ``stem``."""
    return [(str(p.relative_to(REPO_ROOT)), json.loads(p.read_text())) for p in sorted(HELD_OUT_DIR.glob(f"*/{stem}.json"))]


def notebook_results(nb) -> list[Result]:
    """The live results the GPU run stored with the notebook (``course_run.results``)."""
    return [Result.from_record(r, "live") for r in nb.metadata.get("course_run", {}).get("results", [])]


def _params_match(result: Result, experiment: str, wanted: dict) -> bool:
    resolved = experiments.resolve_params(experiment, **wanted)
    return result.experiment == experiment and all(
        result.params.get(k) == v for k, v in resolved.items() if k in wanted)


class RunLookup:
    """One run's results by experiment: the record (replayed) or the notebook's committed live run."""

    def __init__(self, source: str, nb=None):
        self.source = source
        self._results = notebook_results(nb) if source == "notebook" else []
        self._cache: dict = {}

    def get(self, experiment: str, params: dict) -> list[Result]:
        """The run's result of ``experiment``: every recorded run of it (``Result.runs``) for the
        record, so a figure that moves between runs must hold in each; the one live run otherwise."""
        if self.source == "record":
            key = (experiment, json.dumps(params, sort_keys=True))
            if key not in self._cache:
                self._cache[key] = experiments.replay(experiment, experiments.resolve_params(experiment, **params))
            return self._cache[key].runs()
        for r in self._results:
            if _params_match(r, experiment, params):
                return [r]
        raise LookupError(f"the live run committed with this notebook has no result of {experiment}"
                          f"{' ' + str(params) if params else ''}; run it on a GPU (make gpu-test)")

    def label(self, result: Result) -> str:
        return (f"record of {result.recorded_at[:10]}" if self.source == "record"
                else f"live run of {result.recorded_at[:16]}")


def _ranges(within) -> list[Range]:
    return [within] if isinstance(within[0], (int, float)) else list(within)


def _show(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value * 100:.1f}%"
    return f"{value:.4g}{unit}"


def _out_of_range(values, within, unit: str) -> str | None:
    values = values if isinstance(values, tuple) else (values,)
    ranges = _ranges(within)
    if len(values) != len(ranges):
        return f"the quantity gives {len(values)} values for {len(ranges)} ranges"
    bad = [f"{_show(v, unit)} outside {_show(lo, unit)}–{_show(hi, unit)}"
           for v, (lo, hi) in zip(values, ranges) if not lo <= v <= hi]
    return "; ".join(bad) or None


def check(stem: str, nb, sources: Iterable[str] = ("record", "notebook")) -> list[Failure]:
    """Every claim of notebook ``stem`` against each source, plus the prose's uncovered numbers."""
    claims = load_claims(stem)
    text = prose(nb)
    failures = [Failure(stem, c.text, "text", "these words are not in the notebook's prose")
                for c in claim_spans(text, claims)[1]]
    failures += [Failure(stem, u, "text", "a number with a unit that no claim covers") for u in uncovered(text, claims)]
    for c in claims:
        if isinstance(c, Analytic):
            bad = _out_of_range(c.value(), c.within, c.unit)
            if bad:
                failures.append(Failure(stem, c.text, "model", bad))
    for source in sources:
        runs = RunLookup(source, nb)
        for c in claims:
            if not isinstance(c, Measured) or (isinstance(c, Recorded) and source != "record"):
                continue
            names = (c.experiment,) if isinstance(c.experiment, str) else c.experiment
            try:
                per_experiment = [runs.get(name, c.params if len(names) == 1 else {}) for name in names]
            except LookupError as e:   # NotRecorded is a LookupError too
                failures.append(Failure(stem, c.text, source, str(e)))
                continue
            # Recorded runs of several experiments pair up by position (the recorder's n-th run of each);
            # an experiment recorded once stands beside every run of the others.
            for i in range(max(map(len, per_experiment))):
                results = [rs[min(i, len(rs) - 1)] for rs in per_experiment]
                if c.belongs_to and results[-1].gpu != c.belongs_to:
                    continue   # the words state another GPU's figure; this run's is in the table beside them
                try:
                    bad = _out_of_range(c.quantity(*results), c.within, c.unit)
                except LookupError as e:   # a case the quantity needs is not in this run
                    bad = str(e)
                if bad:
                    failures.append(Failure(stem, c.text, f"{', '.join(names)}, {runs.label(results[-1])}", bad))
    return failures


def main(argv: list[str]) -> int:
    import nbformat

    sources = ("record", "notebook")
    if "--source" in argv:
        i = argv.index("--source")
        sources = (argv[i + 1],)
        argv = argv[:i] + argv[i + 2:]
    failed = 0
    for path in map(Path, argv):
        nb = nbformat.read(path, as_version=4)
        for f in check(path.stem, nb, sources):
            print(f)
            failed += 1
    print(f"{failed} claim(s) failed" if failed else "every claim holds")
    return 1 if failed else 0


if __name__ == "__main__":
    # Run as a script this file is ``__main__``, while the claims files import the claim types from
    # ``course_lib.measure.claims``: check with that module, whose isinstance tests see their claims.
    from course_lib.measure import claims as _claims

    sys.exit(_claims.main(sys.argv[1:]))
