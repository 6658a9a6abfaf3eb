"""Notebook 01's checks: the ridge, which roof binds, the crossover size."""
from __future__ import annotations

from course_lib.core.hardware import BYTES_PER_ELEMENT, spec
from course_lib.exercises.base import Verdict, _close
from course_lib.models import roofline


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

    g = spec(gpu)
    want = roofline.square_gemm_crossover_n(g.peak(dtype), g.hbm_bandwidth_bytes_per_s, BYTES_PER_ELEMENT[dtype])
    if _close(answer, want, 0.03):
        return Verdict(f"Correct: N ≈ {want:,.0f}.", True)
    return Verdict("Not quite: set 2N³/C = 3N²b/B and solve for N.", False)
