"""The GPU run a committed notebook shows, stored with it, so that its page can be drawn again with no GPU.

A committed notebook is a render of three things: its code, today's library and the run stored in its
metadata (``course_run``). Everything the page shows that came from the GPU passes through here:

- **live** (a GPU): what the GPU gave is used, and, when ``$COURSE_RUN_LOG`` names a file (the notebook
  run of ``scripts/gpu_test.sh`` sets it), appended to it, one JSON object a line. Experiments' results
  are logged by ``measure.experiments``; every other live-only value (a kernel exercise's child-process
  run, a count by Nsight Compute) by ``capture``. ``scripts/notebook_run.py`` stores the log with the
  notebook, with the device and the software the run had.
- **render** (``COURSE_MODE=render``, ``$COURSE_RENDER_NOTEBOOK`` the notebook): the same calls return
  what the stored run logged, in the order they were logged, and the page is drawn by today's code.
  A call the stored run cannot answer (an experiment or parameter it never measured, a kernel whose
  source changed since) raises ``NotInStoredRun``: that cell needs a GPU run.

This module is the bottom layer's: it knows files and JSON, not what the values mean.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
from pathlib import Path
from typing import Callable, TypeVar

from course_lib.core import runtime

LOG_ENV = "COURSE_RUN_LOG"
NOTEBOOK_ENV = "COURSE_RENDER_NOTEBOOK"
# The stored run's layout. 2: the device, the software and every live-only value are stored beside the
# experiments' results, so the whole page can be rendered from it.
FORMAT = 2

T = TypeVar("T")


class NotInStoredRun(RuntimeError):
    """The page asks for something its stored GPU run does not hold: the cell needs a GPU run."""


class ValuesNotStored(NotInStoredRun):
    """The stored run holds the experiments' results but no live-only values: it was made before they were
    stored (``values_stored`` false). Kernel exercises then show what a page without a GPU shows."""


def sha16(*parts: str | bytes) -> str:
    """A short content hash: what a stored value says it was produced from."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def source_sha16(*objects) -> str:
    """The hash of the source code of functions or modules: what measured a stored value."""
    return sha16(*(inspect.getsource(o) for o in objects))


# --------------------------------------------------------------------------- live: the log

def log(entry: dict) -> None:
    """Append ``entry`` to ``$COURSE_RUN_LOG`` (if set): the notebook's GPU run stores these with it."""
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")


def split_log(lines: list[str]) -> tuple[list[dict], list[dict]]:
    """(experiments' results, other values) from a run log's lines: a result names its ``experiment``."""
    entries = [json.loads(ln) for ln in lines if ln.strip()]
    return [e for e in entries if "experiment" in e], [e for e in entries if "key" in e]


# --------------------------------------------------------------------------- render: reading it back

def rendering() -> bool:
    return runtime.mode() == "render"


def notebook_path() -> Path:
    path = os.environ.get(NOTEBOOK_ENV)
    if not path:
        raise RuntimeError(f"COURSE_MODE=render draws a notebook from its stored run: set {NOTEBOOK_ENV} to the "
                           "notebook's path (make render does)")
    return Path(path)


@functools.lru_cache(maxsize=4)
def _load(path: str) -> dict:
    run = json.loads(Path(path).read_text()).get("metadata", {}).get("course_run")
    if not run:
        raise NotInStoredRun(f"{Path(path).name} has no stored GPU run (course_run): run it live on a GPU "
                             "(make gpu-test NOTEBOOKS=...)")
    if run.get("format", 1) < FORMAT:
        raise NotInStoredRun(f"{Path(path).name}'s stored run ({run.get('executed_at')}) predates rendering: it "
                             "holds the experiments' results but not the device, the software or the live-only "
                             "values its page shows. Run it live on a GPU once (make gpu-test NOTEBOOKS=...).")
    return run


def stored() -> dict:
    """The stored run of the notebook being rendered (``course_run``)."""
    return _load(str(notebook_path().resolve()))


def runs_kernels() -> bool:
    """Whether a kernel exercise's check runs the learner's kernel: live, or rendered from a stored run that
    holds the runs it made (a run made before they were stored answers False; so does replay)."""
    if rendering():
        return stored().get("values_stored", True)
    return runtime.mode() == "live"


def why_kernels_not_run() -> str:
    """The sentence a verdict gives for not running the kernel: no GPU, or a stored run without kernel runs."""
    if rendering():
        return (f"this page's stored GPU run ({stored().get('executed_at')}) was made before the course stored "
                "the kernel runs behind each verdict")
    return "no GPU here (replay mode)"


class _Cursor:
    """Which stored entries this render has handed out: the n-th call for a key gets the n-th entry."""

    def __init__(self):
        self.path: str | None = None
        self.taken: dict[str, int] = {}

    def next(self, kind: str, key: str, entries: list[dict]) -> dict:
        path = str(notebook_path().resolve())
        if path != self.path:
            self.path, self.taken = path, {}
        n = self.taken.get(f"{kind}:{key}", 0)
        if n >= len(entries):
            have = "never" if not entries else f"only {len(entries)} time(s)"
            raise NotInStoredRun(f"{Path(path).name}: the page asks for {kind} {key} once more than its stored GPU "
                                 f"run ({stored().get('executed_at')}) measured it ({have}). This cell needs a GPU "
                                 "run (make gpu-test NOTEBOOKS=...).")
        self.taken[f"{kind}:{key}"] = n + 1
        return entries[n]


_cursor = _Cursor()


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True)


def stored_result(experiment: str, params: dict) -> dict:
    """The record the stored run logged for ``experiment`` at ``params`` (the n-th one on the n-th call)."""
    entries = [r for r in stored().get("results", []) if r["experiment"] == experiment
               and canonical(r.get("params", {})) == canonical(params)]
    if not entries:
        measured = [r.get("params", {}) for r in stored().get("results", []) if r["experiment"] == experiment]
        raise NotInStoredRun(f"{notebook_path().name}: its stored GPU run ({stored().get('executed_at')}) has no "
                             f"{experiment} with {canonical(params)}" + (f" (it measured {measured})" if measured else "")
                             + ": the experiment or its parameters changed since. Run it live on a GPU.")
    return _cursor.next("experiment", f"{experiment} {canonical(params)}", entries)


# --------------------------------------------------------------------------- live-only values

def capture(key: str, compute: Callable[[], T], inputs: dict[str, str] | None = None,
            raises: tuple[type[Exception], ...] = ()) -> T:
    """``compute()`` live (logging its JSON value under ``key``); in render, the value the stored run logged.

    ``inputs``: hashes of what produced the value (a kernel's source, the code that measured it). In render a
    stored value whose inputs differ from today's is refused: that cell needs a GPU run. ``raises``: exceptions
    that are part of the answer (the profiler's counters closed): logged live, raised again in render."""
    inputs = dict(inputs or {})
    if rendering():
        entries = [v for v in stored().get("values", []) if v["key"] == key]
        if not entries and not stored().get("values_stored", True):
            raise ValuesNotStored(f"{notebook_path().name}: {key} is not in its stored GPU run "
                                  f"({stored().get('executed_at')}), made before live-only values were stored")
        entry = _cursor.next("value", key, entries)
        if entry.get("inputs", {}) != inputs:
            changed = sorted(k for k in set(inputs) | set(entry.get("inputs", {}))
                             if inputs.get(k) != entry.get("inputs", {}).get(k))
            raise NotInStoredRun(f"{notebook_path().name}: {key} was measured on the GPU by other code than today's "
                                 f"({', '.join(changed)} changed since the run of {stored().get('executed_at')}). "
                                 "This cell needs a GPU run (make gpu-test NOTEBOOKS=...).")
        if "raised" in entry:
            cls = next((c for c in raises if c.__name__ == entry["raised"]), RuntimeError)
            raise cls(entry["message"])
        return entry["value"]
    try:
        value = compute()
    except raises as exc:
        log({"key": key, "inputs": inputs, "raised": type(exc).__name__, "message": str(exc)})
        raise
    log({"key": key, "inputs": inputs, "value": value})
    return value
