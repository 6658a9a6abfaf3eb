"""Notebook 01's checks: the ridge, which roof binds, the crossover size, and for a GEMM whose weights are
fixed (N, K) the intensity limit and the number of rows M from which compute binds."""
from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class GemmQuestion:
    """C[M, N] = A[M, K] · B[K, N] in ``dtype`` on ``gpu``, each operand read or written once."""
    m: int
    n: int
    k: int
    dtype: str
    gpu: str

    @property
    def flop(self) -> float:
        return roofline.gemm_flop(self.m, self.n, self.k)

    @property
    def bytes(self) -> float:
        return roofline.gemm_compulsory_bytes(self.m, self.n, self.k, BYTES_PER_ELEMENT[self.dtype])


# Shapes the notebook neither measures nor prints a verdict for: each is a prediction.
BINDING_QUESTIONS = {
    "bf16 GEMM M=64, N=K=4096 on an H200 (a batch of 64 rows through one layer)": GemmQuestion(64, 4096, 4096, "bf16", "h200"),
    "bf16 GEMM M=512, N=K=4096 on an H200": GemmQuestion(512, 4096, 4096, "bf16", "h200"),
    "fp8 GEMM M=256, N=K=8192 on a B200": GemmQuestion(256, 8192, 8192, "fp8", "b200"),
    "fp32 GEMM M=N=K=1024 on an A100, CUDA cores": GemmQuestion(1024, 1024, 1024, "fp32", "a100-sxm"),
}
WORKING = ("flop", "bytes", "intensity", "roof")
WITHIN = 0.005   # three significant figures: leaving C out of the bytes (1.5% at M = 64) is caught


def binding_roof(question: str) -> str:
    q = BINDING_QUESTIONS[question]
    g = spec(q.gpu)
    return roofline.time_lower_bound(q.flop, q.bytes, g.peak(q.dtype), g.hbm_bandwidth_bytes_per_s).binding_roof


def _working_problems(question: str, got: dict) -> list[str]:
    """What is off in one shape's working: each number within WITHIN, and the roof only once they are right
    (a label with no working behind it is not checked, so a label flipped by trial passes nothing)."""
    q = BINDING_QUESTIONS[question]
    b = BYTES_PER_ELEMENT[q.dtype]
    problems = []
    if not _close(got.get("flop"), q.flop, WITHIN):
        problems.append("flop: F = 2·M·N·K")
    if not _close(got.get("bytes"), q.bytes, WITHIN):
        problems.append(f"bytes: Q = b·(M·K + K·N + M·N) with b = {b} for {q.dtype}")
    if not _close(got.get("intensity"), q.flop / q.bytes, WITHIN):
        problems.append("intensity: F / Q")
    roof = str(got.get("roof", "")).strip().lower()
    if roof not in ("memory", "compute"):
        problems.append("roof: 'memory' or 'compute'")
    elif not problems and roof != binding_roof(question):
        problems.append(f"roof: compare your intensity with the {q.dtype} ridge of this GPU (the ridge table above)")
    return problems


def check_binding_roof(answers: dict) -> Verdict:
    """Exercise: for each operation its FLOPs, its compulsory bytes, its intensity, and which roof binds."""
    if not isinstance(answers, dict):
        return Verdict("Answer with a dict: {question: {'flop': ..., 'bytes': ..., 'intensity': ..., "
                       "'roof': 'memory' or 'compute'}}.", False)
    wrong = []
    for question in BINDING_QUESTIONS:
        got = answers.get(question)
        if not isinstance(got, dict):
            wrong.append(f"{question}: not answered (a dict of {', '.join(WORKING)})")
            continue
        problems = _working_problems(question, got)
        if problems:
            wrong.append(f"{question}: " + "; ".join(problems))
    if wrong:
        return Verdict("Not yet:\n  " + "\n  ".join(wrong), False)
    return Verdict(f"Correct: all {len(BINDING_QUESTIONS)} worked out and classified.", True)


def check_crossover(gpu: str, dtype: str, answer) -> Verdict:
    """Exercise: the square-GEMM size N below which memory binds."""
    if answer is None:
        return Verdict("Not answered yet: replace None with your number.", False)

    g = spec(gpu)
    want = roofline.square_gemm_crossover_n(g.peak(dtype), g.hbm_bandwidth_bytes_per_s, BYTES_PER_ELEMENT[dtype])
    if _close(answer, want, 0.03):
        return Verdict(f"Correct: N ≈ {want:,.0f}.", True)
    return Verdict("Not quite: set 2N³/C = 3N²b/B and solve for N.", False)


def check_intensity_limit(n: int, k: int, dtype: str, answer) -> Verdict:
    """Exercise: the intensity that C[M,N] = A[M,K]·B[K,N] approaches as M grows without bound, N and K fixed."""
    if answer is None:
        return Verdict("Not answered yet: replace None with your number in FLOP/byte.", False)
    b = BYTES_PER_ELEMENT[dtype]
    want = 2 * n * k / (b * (n + k))   # 2MNK / b(MK + KN + MN) with the KN term negligible
    if _close(answer, want, 0.02):
        return Verdict(f"Correct: {want:,.0f} FLOP/byte. As M grows the weights' bytes (K·N) stop mattering and "
                       f"every row brings b·(K + N) bytes for 2·N·K FLOPs, so the intensity levels off at "
                       f"2NK / (b(N + K)); no batch size takes this layer past it.", True)
    if _close(answer, roofline.gemm_intensity(4096, n, k, b), 0.02):
        return Verdict("Not yet: that is the intensity at M = 4096, printed above. Let M grow without bound.", False)
    return Verdict("Not quite: write F = 2MNK and Q = b·(MK + KN + MN), divide, and let M → ∞.", False)


def m_crossover(gpu: str, dtype: str, n: int, k: int) -> float:
    """The M where 2MNK / C = b(MK + KN + MN) / B; infinite when even M → ∞ stays below the ridge."""
    g = spec(gpu)
    ridge, b = roofline.ridge_point(g.peak(dtype), g.hbm_bandwidth_bytes_per_s), BYTES_PER_ELEMENT[dtype]
    per_row = 2 * n * k / ridge - b * (n + k)
    return float("inf") if per_row <= 0 else b * k * n / per_row


def check_m_crossover(gpu: str, dtype: str, n: int, k: int, answer) -> Verdict:
    """Exercise: the fewest rows M from which the GEMM with fixed N and K is compute-bound on ``gpu``."""
    if answer is None:
        return Verdict("Not answered yet: replace None with your M.", False)
    want = m_crossover(gpu, dtype, n, k)
    if want == float("inf"):
        if str(answer).strip().lower() in ("inf", "never"):
            return Verdict("Correct: no M is enough; even M → ∞ stays below the ridge.", True)
        return Verdict("Not quite: let M → ∞ first. Does the intensity ever reach the ridge?", False)
    if _close(answer, want, 0.03):
        return Verdict(f"Correct: M ≈ {want:,.0f}. Below it the same weights are re-read for too few rows to pay "
                       "for their bytes.", True)
    g = spec(gpu)
    if _close(answer, roofline.square_gemm_crossover_n(g.peak(dtype), g.hbm_bandwidth_bytes_per_s,
                                                       BYTES_PER_ELEMENT[dtype]), 0.03):
        return Verdict("Not yet: that is the square GEMM's crossover. Here N and K stay at their sizes; only M moves.",
                       False)
    return Verdict("Not quite: set 2MNK / C = b·(MK + KN + MN) / B and solve for M.", False)
