"""Notebook 09's exercise checks: the stage count that hides a latency within a shared-memory
budget, and which of two streaming kernels a measurement favours."""
from __future__ import annotations

from course_lib.exercises.base import Verdict
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
        return Verdict(f"Not quite: count the bytes: {need} stages of {stage_bytes:,} B each.", False)
    if answer == want:
        return Verdict(f"Correct: while one stage computes, the other {want - 1} are in flight, and "
                       f"{want - 1} × {compute_s_per_stage * 1e6:g} µs ≥ {latency_s * 1e6:g} µs; "
                       f"{want * stage_bytes:,} B of shared memory.", True)
    if isinstance(answer, int) and not isinstance(answer, bool) and answer > want:
        return Verdict(f"{answer} stages hide it too, but fewer do: each extra stage costs {stage_bytes:,} B.", False)
    return Verdict("Not quite: with S stages, S - 1 loads are in flight while one stage's math runs; "
                   "their math must last as long as a load takes to land.", False)


def check_winner(result, first: dict, second: dict, answer) -> Verdict:
    """Exercise: which of two ``pipeline.streaming`` variants (their params) ran faster: "first" or
    "second", predicted from their bytes in flight and checked against the measurement."""
    if answer not in ("first", "second"):
        return Verdict('Answer "first" or "second".', False)
    found = [[c for c in result.cases if c.params == p] for p in (first, second)]
    if not all(found):
        return Verdict(f"{result.experiment} did not measure both variants: {first}, {second}.", False)
    a, b = found[0][0], found[1][0]
    want = "first" if a.median_s < b.median_s else "second"
    told = (f"{a.name}: {a.bandwidth_bytes_per_s / 1e9:,.0f} GB/s with {bytes_in_flight(a):,} B in "
            f"flight per SM; {b.name}: {b.bandwidth_bytes_per_s / 1e9:,.0f} GB/s with "
            f"{bytes_in_flight(b):,} B ({result.provenance}).")
    if answer == want:
        return Verdict(f"Correct. {told}", True)
    return Verdict(f"Not this time. {told} Bytes in flight, not warps, set the bandwidth.", False)
