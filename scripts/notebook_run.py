"""The run a live GPU execution of a notebook stores in it: which GPU, when, the exact code that ran, and
everything the GPU gave the page, so the page can be rendered again with no GPU (``course_lib.render``).

``course_run`` holds: the GPU and when the run started and ended; the hash of every code cell it executed;
the device's attributes and the software (what ``hardware.detect()`` and ``session.environment()`` return
when the page is rendered); the experiments' live results (also what ``course_lib.measure.claims`` checks
the prose against); and the other live-only values (``core.stored_run.capture``), each with the hashes of
what produced it. ``format`` is ``stored_run.FORMAT``."""
from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from pathlib import Path


def code_hashes(nb) -> list[str]:
    return [hashlib.sha256(c.source.encode()).hexdigest()[:16] for c in nb.cells if c.cell_type == "code"]


def stamp_run(nb, run_log: Path | None = None, started_at: str | None = None) -> None:
    """``run_log``: the file the kernel's live experiments and captures appended to (``$COURSE_RUN_LOG``).
    Called in the process that executed the notebook, on the same machine: the device and the software
    are read here, as the notebook's kernel saw them."""
    from course_lib.core import hardware, session, stored_run

    lines = run_log.read_text().splitlines() if run_log and run_log.exists() else []
    results, values = stored_run.split_log(lines)
    device = hardware.detect()
    nb.metadata["course_run"] = {
        "format": stored_run.FORMAT,
        "gpu": device.name,
        "started_at": started_at or session.now_utc(),
        "executed_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "code_sha256_16": code_hashes(nb),
        "device": dataclasses.asdict(device),
        "environment": dataclasses.asdict(session.environment()),
        "results": results,
        "values": values,
    }
