"""Notebook 00's checks: a bandwidth read off a case, and predictions from the timing table."""
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


ADD_BYTES_PER_ELEMENT = 12   # a vector add reads two floats and writes one


def timing_prediction(events_case, host_case, copy_case) -> dict:
    """What the table implies for the large add at twice its size: the held events scale with the bytes
    (the kernel runs at the same bandwidth), the host timer without a synchronize does not (it times the
    launch); and the smallest n at which that launch time would imply more than the copy's bandwidth."""
    return {"events µs": 2 * events_case.median_s * 1e6, "host timer µs": host_case.median_s * 1e6,
            "smallest n": copy_case.bandwidth_bytes_per_s * host_case.median_s / ADD_BYTES_PER_ELEMENT}


def check_timing_prediction(events_case, host_case, copy_case, answers) -> Verdict:
    """Exercise: predict the large add's timings at twice its size (n = 2²⁵), which the page does not show,
    and the size below which the unsynchronized host timer stops implying an impossible bandwidth.
    ``answers``: {"events µs": x, "host timer µs": y, "smallest n": z}."""
    if not isinstance(answers, dict) or not answers:
        return Verdict('Not answered yet: give {"events µs": ..., "host timer µs": ..., "smallest n": ...}.', False)
    want = timing_prediction(events_case, host_case, copy_case)
    problems = []
    if not _close(answers.get("events µs"), want["events µs"], 0.15):
        problems.append("events µs: the held events time the kernel; at the same bandwidth, twice the bytes take ...?")
    got = answers.get("host timer µs")
    if _close(got, 2 * want["host timer µs"], 0.15) and not _close(got, want["host timer µs"], 0.4):
        problems.append("host timer µs: does that timer wait for the work? Compare its two sizes in the table.")
    elif not _close(got, want["host timer µs"], 0.4):
        problems.append("host timer µs: read its two rows in the table; what does it time?")
    if not _close(answers.get("smallest n"), want["smallest n"], 0.25):
        problems.append("smallest n: 12 bytes per element over the host timer's seconds equals the copy's bytes/s "
                        "at what n?")
    if problems:
        return Verdict("Not yet:\n  " + "\n  ".join(problems), False)
    return Verdict(f"Correct: the held events should double to about {want['events µs']:,.0f} µs, since the kernel "
                   f"streams twice the bytes at the same bandwidth; the host timer stays near "
                   f"{want['host timer µs']:,.1f} µs, because it times the launch, whatever the size. From about "
                   f"n = {want['smallest n']:,.0f} up, that launch time implies more bytes per second than the "
                   "copy moves: the host timer's figure is impossible there.", True)
