"""The stamp a live GPU run leaves in a notebook: which GPU, when, and the exact code that ran.

``tests/test_notebook_sources.py`` compares each code cell with the stamp, so outputs can never
sit under code that was edited after the run (the outputs would belong to other code)."""
from __future__ import annotations

import datetime as dt
import hashlib


def code_hashes(nb) -> list[str]:
    return [hashlib.sha256(c.source.encode()).hexdigest()[:16] for c in nb.cells if c.cell_type == "code"]


def stamp_run(nb) -> None:
    from course_lib.core.hardware import detect

    nb.metadata["course_run"] = {
        "gpu": detect().name,
        "executed_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "code_sha256_16": code_hashes(nb),
    }
