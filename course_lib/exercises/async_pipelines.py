"""Notebook 09's exercise checks: the stage count that hides a latency within a shared-memory
budget, and a prediction made before the streaming table: the bytes two kernels keep in flight, and
which of them a measurement favours. A verdict says which items are right, never the answer to one
that is not."""
from __future__ import annotations

from course_lib.exercises.base import Verdict, _close, item_marks
from course_lib.labs.async_pipelines import bytes_in_flight
from course_lib.models import pipeline


def fewest_stages(latency_s: float, compute_s_per_stage: float, stage_bytes: int, smem_budget_bytes: int) -> int | None:
    """The fewest stages that hide ``latency_s`` (``pipeline.stages_to_cover``), or None when they do
    not fit in ``smem_budget_bytes``."""
    s = pipeline.stages_to_cover(latency_s, compute_s_per_stage)
    return s if s * stage_bytes <= smem_budget_bytes else None


def check_stages(latency_s: float, compute_s_per_stage: float, stage_bytes: int, smem_budget_bytes: int,
                 answer) -> Verdict:
    """Exercise: the fewest stages that hide the latency within the budget, or "does not fit"."""
    if answer is None:
        return Verdict('Not answered yet: give a stage count, or "does not fit".', False)
    want = fewest_stages(latency_s, compute_s_per_stage, stage_bytes, smem_budget_bytes)
    need = pipeline.stages_to_cover(latency_s, compute_s_per_stage)
    if want is None:
        if answer == "does not fit":
            return Verdict(f"Correct: hiding it takes {need} stages, {need * stage_bytes:,} B, over the "
                           f"{smem_budget_bytes:,} B budget. Make the tiles smaller or the math per stage longer.", True)
        return Verdict("Not quite: count the stages that hide the load, then the shared memory they take.", False)
    if answer == want:
        return Verdict(f"Correct: while one stage computes, the other {want - 1} are in flight, and "
                       f"{want - 1} × {compute_s_per_stage * 1e6:g} µs ≥ {latency_s * 1e6:g} µs; "
                       f"{want * stage_bytes:,} B of shared memory.", True)
    if isinstance(answer, int) and not isinstance(answer, bool) and answer > want:
        return Verdict(f"{answer} stages hide it too, but fewer do: each extra stage costs {stage_bytes:,} B.", False)
    return Verdict("Not quite: with S stages, S - 1 loads are in flight while one stage's math runs; "
                   "their math must last as long as a load takes to land.", False)


def check_winner(result, first: dict, second: dict, answer, in_flight=(None, None)) -> Verdict:
    """Exercise: predict, before the streaming table, the bytes each of two ``pipeline.streaming``
    variants (their params) keeps on its way per SM while it waits (``in_flight``, read from the
    kernels' descriptions), and which of them streams faster, "first" or "second" (``answer``), checked
    against the measurement in ``result``. The verdict says which of the three items are right, and
    shows the measurement only once all three are."""
    if answer is None:
        return Verdict('Not answered yet: name the faster, "first" or "second", and give the bytes in flight per '
                       "SM of each as in_flight.", False)
    if answer not in ("first", "second"):
        return Verdict('Answer "first" or "second", and give the bytes in flight per SM of each as in_flight.', False)
    found = [[c for c in result.cases if c.params == p] for p in (first, second)]
    if not all(found):
        return Verdict(f"{result.experiment} did not measure both variants: {first}, {second}.", False)
    a, b = found[0][0], found[1][0]
    try:
        mine = tuple(in_flight)
    except TypeError:
        mine = ()
    if len(mine) != 2 or None in mine:
        return Verdict("Not answered yet: give in_flight as (bytes of the first, bytes of the second), per SM.", False)
    marks = [("bytes in flight of the first", _close(mine[0], bytes_in_flight(a), 0.01)),
             ("bytes in flight of the second", _close(mine[1], bytes_in_flight(b), 0.01)),
             ("the faster one", answer == ("first" if a.median_s < b.median_s else "second"))]
    lines = item_marks(marks)
    if all(ok for _, ok in marks):
        return Verdict("Correct.\n" + lines + f"\nMeasured: {a.name}, {a.bandwidth_bytes_per_s / 1e9:,.0f} "
                       f"GB/s; {b.name}, {b.bandwidth_bytes_per_s / 1e9:,.0f} GB/s ({result.provenance}).", True)
    hint = ("Count from the kernels' descriptions above the table: what each resident thread of the synchronous "
            "kernel has on its way, and how many 16 KiB tiles a loop that waits for a tile before it issues the "
            "next one has out.")
    return Verdict("Not yet:\n" + lines + "\n" + hint, False)
