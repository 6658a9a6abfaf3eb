"""Exercise checks. Each returns a short verdict and never raises on a wrong answer."""
from __future__ import annotations

from . import roofline
from .hardware import spec


class Verdict(str):
    """A string that notebooks print; ``.correct`` tells tests the outcome."""

    correct: bool

    def __new__(cls, text: str, correct: bool):
        obj = super().__new__(cls, text)
        obj.correct = correct
        return obj

    def __repr__(self) -> str:
        return str(self)


def _close(got, want: float, rel: float) -> bool:
    try:
        return abs(float(got) - want) <= rel * abs(want)
    except (TypeError, ValueError):
        return False


def check_ridge(gpu: str, dtype: str, answer) -> Verdict:
    """Exercise: the ridge point of ``gpu`` in ``dtype`` from its datasheet numbers, in FLOP/byte."""
    if answer is None:
        return Verdict("Not answered yet: replace None with your number.", False)
    g = spec(gpu)
    want = roofline.ridge_point(g.peak(dtype), g.hbm_bandwidth_bytes_per_s)
    if _close(answer, want, 0.02):
        return Verdict(f"Correct: {g.name} {dtype} ridge ≈ {want:,.0f} FLOP/byte.", True)
    hint = " (did you divide TFLOP/s by TB/s with the same prefixes?)" if _close(answer, want * 1e3, 0.05) or \
        _close(answer, want / 1e3, 0.05) else ""
    return Verdict(f"Not quite: {answer} is off by more than 2%{hint}. Ridge = peak FLOP/s ÷ bytes/s.", False)


BINDING_QUESTIONS = {
    "fp32 vector add of 2^26 elements on an H200": (2 ** 26, 12 * 2 ** 26, "h200", "fp32"),
    "bf16 matmul 4096³ on an H200": (2 * 4096 ** 3, 3 * 2 * 4096 ** 2, "h200", "bf16"),
    "bf16 matmul 256³ on an H200": (2 * 256 ** 3, 3 * 2 * 256 ** 2, "h200", "bf16"),
    "bf16 matrix-vector 8192 on a B200": (2 * 8192 ** 2, 2 * (8192 ** 2 + 2 * 8192), "b200", "bf16"),
}


def binding_roof(question: str) -> str:
    flop, q, gpu, dtype = BINDING_QUESTIONS[question]
    g = spec(gpu)
    return roofline.time_lower_bound(flop, q, g.peak(dtype), g.hbm_bandwidth_bytes_per_s).binding_roof


def check_binding_roof(answers: dict) -> Verdict:
    """Exercise: for each operation, "memory" or "compute"."""
    if not isinstance(answers, dict):
        return Verdict("Answer with a dict: {question: 'memory' or 'compute'}.", False)
    unanswered, wrong = [], 0
    for question in BINDING_QUESTIONS:
        got = str(answers.get(question, "")).strip().lower()
        if got not in ("memory", "compute"):
            unanswered.append(f"{question}: answer 'memory' or 'compute'")
        elif got != binding_roof(question):
            wrong += 1
    if unanswered:
        return Verdict("Not yet:\n  " + "\n  ".join(unanswered), False)
    if wrong:   # how many, not which: with two choices, naming them would be the answer
        return Verdict(f"Not yet: {wrong} of the {len(BINDING_QUESTIONS)} are wrong. For each, compare the "
                       "operation's intensity (FLOPs over HBM bytes) with the GPU's ridge.", False)
    return Verdict(f"Correct: all {len(BINDING_QUESTIONS)} classified.", True)


def check_crossover(gpu: str, dtype: str, answer) -> Verdict:
    """Exercise: the square-GEMM size N below which memory binds."""
    if answer is None:
        return Verdict("Not answered yet: replace None with your number.", False)
    from .hardware import BYTES_PER_ELEMENT

    g = spec(gpu)
    want = roofline.square_gemm_crossover_n(g.peak(dtype), g.hbm_bandwidth_bytes_per_s, BYTES_PER_ELEMENT[dtype])
    if _close(answer, want, 0.03):
        return Verdict(f"Correct: N ≈ {want:,.0f}.", True)
    return Verdict("Not quite: set 2N³/C = 3N²b/B and solve for N.", False)


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
