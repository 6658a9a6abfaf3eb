"""Notebook 03's exercise checks: residency, the shared-memory budget, a register cap. Each returns a ``Verdict`` and never raises on a wrong answer."""
from __future__ import annotations

from course_lib.exercises.base import Verdict
from course_lib.models import occupancy as occ

# --------------------------------------------------------------------------- notebook 03

RESIDENCY_QUESTIONS = {
    "H200: 128 threads, 96 registers, 20 KiB shared memory": ("h200", 128, 96, 20 * 1024),
    "H200: 512 threads, 40 registers, no shared memory": ("h200", 512, 40, 0),
    "A100: 256 threads, 32 registers, 40 KiB shared memory": ("a100-sxm", 256, 32, 40 * 1024),
    "L4: 64 threads, 32 registers, no shared memory": ("l4", 64, 32, 0),
}


def residency_answer(question: str) -> occ.Residency:
    gpu, t, r, s = RESIDENCY_QUESTIONS[question]
    return occ.residency(occ.budget(gpu), t, r, s)


def check_residency(answers) -> Verdict:
    """Exercise: resident blocks per SM for each configuration (a number per question)."""
    if not isinstance(answers, dict):
        return Verdict("Answer with a dict {question: resident blocks}.", False)
    wrong = []
    for q in RESIDENCY_QUESTIONS:
        r = residency_answer(q)
        if answers.get(q) != r.resident_blocks:
            wrong.append(f"{q}: work out every ceiling with the allocation rules (registers per warp in "
                         f"units of 256, shared memory + 1 KiB reserved, the architecture's block cap)")
    if wrong:
        return Verdict("Not yet:\n  " + "\n  ".join(wrong), False)
    return Verdict(f"Correct: all {len(RESIDENCY_QUESTIONS)} configurations.", True)


def smem_budget_answer() -> int:
    return occ.smem_for_resident_blocks(occ.budget("h200"), 4)


def check_smem_budget(answer_bytes) -> Verdict:
    """Exercise: the most shared memory per block (bytes) that still lets 4 blocks share an H200 SM."""
    if answer_bytes is None:
        return Verdict("Not answered yet: replace None with a number of bytes.", False)
    want = smem_budget_answer()
    try:
        got = int(answer_bytes)
    except (TypeError, ValueError):
        return Verdict("Answer with a number of bytes.", False)
    if got == want:
        return Verdict(f"Correct: {want:,} bytes ({want / 1024:g} KiB) per block.", True)
    if got == 233472 // 4:
        return Verdict("Close: that is a quarter of the SM, but each block also gets 1 KiB reserved by the driver.",
                       False)
    return Verdict("Not quite: a quarter of 228 KiB, rounded down to 128 bytes, less the 1 KiB the driver "
                   "reserves per block.", False)


def register_cap_answer() -> int:
    return occ.max_registers_for_resident_blocks(occ.budget("h200"), 256, 8)


def check_register_cap(answer) -> Verdict:
    """Exercise: the most registers per thread that keep eight 256-thread blocks (100%) on an H200 SM."""
    if answer is None:
        return Verdict("Not answered yet: replace None with a number of registers.", False)
    want = register_cap_answer()
    try:
        got = int(answer)
    except (TypeError, ValueError):
        return Verdict("Answer with a number of registers.", False)
    if got == want:
        return Verdict(f"Correct: {want} registers per thread. At {want + 1} a warp's allocation rounds up to "
                       f"1,280 registers and only 12 warps fit in each quarter of the register file.", True)
    return Verdict("Not quite: 2,048 threads must share 65,536 registers, allocated 256 at a time per warp.", False)
