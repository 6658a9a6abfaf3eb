"""Notebook 00's checks: a bandwidth read off a case, and which timer to trust."""
from __future__ import annotations

from course_lib.exercises.base import Verdict, _close


def check_bandwidth(case, answer_gb_per_s) -> Verdict:
    """Exercise: a case's achieved bandwidth in GB/s from its bytes and median time."""
    if answer_gb_per_s is None:
        return Verdict("Not answered yet: replace None with your number in GB/s.", False)
    want = case.bytes / case.median_s / 1e9
    if _close(answer_gb_per_s, want, 0.01):
        return Verdict(f"Correct: {want:,.0f} GB/s.", True)
    return Verdict("Not quite: bandwidth = bytes moved ÷ median seconds, then ÷ 1e9 for GB/s.", False)


def check_timing_sanity(events_case, host_case, copy_case, answers) -> Verdict:
    """Exercise: the bandwidth each timing of the same vector add implies, and which one a GPU whose
    copy reaches ``copy_case``'s bandwidth can have produced. ``answers``: {"events GB/s": x,
    "host timer GB/s": y, "possible": "events" or "host timer"}."""
    if not isinstance(answers, dict) or not answers:
        return Verdict('Not answered yet: give {"events GB/s": ..., "host timer GB/s": ..., "possible": ...}.', False)
    want = {name: c.bytes / c.median_s / 1e9 for name, c in (("events GB/s", events_case), ("host timer GB/s", host_case))}
    copy = copy_case.bandwidth_bytes_per_s / 1e9
    problems = [f"{name}: bytes moved ÷ that timing's median seconds, ÷ 1e9" for name, value in want.items()
                if not _close(answers.get(name), value, 0.02)]
    choice = str(answers.get("possible", "")).strip().lower()
    if choice not in ("events", "host timer"):
        problems.append('possible: "events" or "host timer"')
    elif not problems:
        if choice != ("events" if want["events GB/s"] <= 1.05 * copy else "host timer"):
            problems.append(f"possible: which of the two is at or below the {copy:,.0f} GB/s the copy reached?")
    if problems:
        return Verdict("Not yet:\n  " + "\n  ".join(problems), False)
    return Verdict(f"Correct: the events say {want['events GB/s']:,.0f} GB/s, {100 * want['events GB/s'] / copy:.0f}% of "
                   f"the copy's {copy:,.0f} GB/s; the host timer's {want['host timer GB/s']:,.0f} GB/s is "
                   f"{want['host timer GB/s'] / copy:.0f}× what the memory can move, so it timed the launch, not "
                   "the kernel.", True)
