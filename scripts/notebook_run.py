"""The stamp a live GPU run leaves in a notebook: which GPU, when, and the exact code that ran.

``tests/test_notebook_sources.py`` compares each code cell with the stamp, so outputs can never
sit under code that was edited after the run (the outputs would belong to other code). The live
results of the run go with it, for ``course_lib.measure.claims`` to check the prose against."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path


def code_hashes(nb) -> list[str]:
    return [hashlib.sha256(c.source.encode()).hexdigest()[:16] for c in nb.cells if c.cell_type == "code"]


def stamp_run(nb, run_log: Path | None = None) -> None:
    """``run_log``: the file the kernel's live experiments appended their results to
    (``$COURSE_RUN_LOG``); they are stored with the notebook, for its claims to be checked against."""
    from course_lib.core.hardware import detect

    results = [json.loads(line) for line in run_log.read_text().splitlines()] if run_log and run_log.exists() else []
    nb.metadata["course_run"] = {
        "gpu": detect().name,
        "executed_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "code_sha256_16": code_hashes(nb),
        "results": results,
    }
