"""Notebook 02's exercise checks: which block owns a tile, which lanes a mask drops, what divergence costs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from course_lib.exercises.base import Verdict
from course_lib.models import launch_geometry as lg

# --------------------------------------------------------------------------- notebook 02

TILE_QUESTION = {"m": 1000, "n": 700, "block_m": 128, "block_n": 64, "pid": 85}


def tile_owner_answer() -> dict:
    q = TILE_QUESTION
    t = lg.program_tile(lg.tile_grid(q["m"], q["n"], q["block_m"], q["block_n"]), q["pid"])
    return {"pid_m": t.pid_m, "pid_n": t.pid_n, "m0": t.m0, "n0": t.n0, "valid_rows": t.valid_rows,
            "valid_cols": t.valid_cols}


def check_tile_owner(answer) -> Verdict:
    """Exercise: for C of 1000 × 700 in 128 × 64 tiles, block 85's pid_m, pid_n, m0, n0 and how many
    of its rows and columns fall inside C."""
    if answer is None:
        return Verdict("Not answered yet: replace None with a dict of pid_m, pid_n, m0, n0, valid_rows, valid_cols.",
                       False)
    if not isinstance(answer, dict):
        return Verdict("Answer with a dict: {'pid_m': ..., 'pid_n': ..., 'm0': ..., 'n0': ..., "
                       "'valid_rows': ..., 'valid_cols': ...}.", False)
    want = tile_owner_answer()
    wrong = [k for k, v in want.items() if answer.get(k) != v]
    if not wrong:
        return Verdict(f"Correct: block {TILE_QUESTION['pid']} owns C[{want['m0']}:{want['m0'] + 128}, "
                       f"{want['n0']}:{want['n0'] + 64}], {want['valid_rows']} × {want['valid_cols']} of it inside C.",
                       True)
    hint = " (the grid has ceil(700 / 64) columns of tiles: pid_m = pid // G_N)" if \
        {"pid_m", "pid_n"} & set(wrong) else " (m0 = pid_m · BM; count the rows left before row 1000)"
    return Verdict(f"Not yet: {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} off{hint}.", False)


# Not the A trace the notebook prints (its answer is shown there): the B tile of the same stage.
LANE_QUESTION = {"operand": "B", "m": 1000, "n": 700, "k": 300, "block_m": 64, "block_n": 64, "block_k": 32,
                 "stride_row": 700, "stride_col": 1, "pid": 175, "stage": 9, "warp": 3, "threads": 256}


def masked_lanes_answer() -> int:
    q = LANE_QUESTION
    _, trace = lg.operand_trace(q["operand"], q["m"], q["n"], q["k"], q["block_m"], q["block_n"], q["block_k"],
                                q["stride_row"], q["stride_col"], q["pid"], q["stage"], q["warp"], q["threads"])
    return lg.summarize(trace).masked


def check_masked_lanes(answer) -> Verdict:
    """Exercise: in the last reduction stage of the last block, how many lanes of warp 3 are masked
    when loading B (K = 300, N = 700, 32 × 64 tiles of B, row-major)?"""
    if answer is None:
        return Verdict("Not answered yet: replace None with a number of lanes.", False)
    want = masked_lanes_answer()
    try:
        ok = int(answer) == want and float(answer) == int(answer)
    except (TypeError, ValueError):
        return Verdict("Answer with a whole number of lanes (0 to 32).", False)
    if ok:
        return Verdict(f"Correct: {want} of the 32 lanes are masked.", True)
    return Verdict("Not quite: find the warp's row of the B tile (thread // BN) and whether k0 + that row is "
                   "below K = 300, then which of its 32 columns n0 + j are below N = 700.", False)


@dataclass(frozen=True)
class BranchQuestion:
    """A branch of exercise 3: the passes each thread needs (a path and which time it runs it), in blocks
    of ``block_threads``; or, for a branch on random data, the chance ``p_path1`` that a lane takes path 1.
    ``hint``: what a wrong answer is told, the idea, not the number."""
    block_threads: int
    passes: Callable[[int], set] | None
    hint: str
    p_path1: float | None = None


# None of these is a row of the notebook's divergence table: each needs the idea, not the table.
DIVERGENCE_QUESTIONS: dict[str, BranchQuestion] = {
    "for (int i = 0; i < lane % 4; ++i) A();   (256-thread blocks)":
        BranchQuestion(256, lambda t: {("A", i) for i in range(t % lg.WARP_SIZE % 4)},
                       "a warp issues the loop's body until its last lane is done"),
    "if (threadIdx.x % 64 < 32) A(); else B();   (256-thread blocks)":
        BranchQuestion(256, lambda t: {("A" if t % 64 < 32 else "B", 0)},
                       "which threads share a warp? (warp = threadIdx.x / 32)"),
    "if (threadIdx.x < 48) A(); else B();   (64-thread blocks)":
        BranchQuestion(64, lambda t: {("A" if t < 48 else "B", 0)},
                       "take each warp of the block on its own, then average over the block"),
    "if (x[i] == 0) A(); else B();   (each x[i] is 0 with chance 1/64, independently)":
        BranchQuestion(256, None, "a warp runs both paths when any two of its 32 lanes disagree: 1 + the chance "
                                  "that they do", p_path1=1 / 64),
}


def passes_per_warp(question: BranchQuestion, warp: int) -> float:
    """The passes warp ``warp`` issues, one after another: every pass any of its lanes needs (expected,
    for a branch on random data)."""
    if question.passes is None:
        return lg.paths_per_warp(lg.DivergenceMode(-1, "random data", None, p_path1=question.p_path1), warp)
    lanes = range(warp * lg.WARP_SIZE, min((warp + 1) * lg.WARP_SIZE, question.block_threads))
    return float(len(set().union(*(question.passes(t) for t in lanes))))


def divergence_answer(question: str) -> float:
    """Time relative to every lane running one path once, the SM busy issuing: passes per warp, averaged
    over the warps of a block."""
    q = DIVERGENCE_QUESTIONS[question]
    warps = -(-q.block_threads // lg.WARP_SIZE)
    return sum(passes_per_warp(q, w) for w in range(warps)) / warps


def check_divergence(answers) -> Verdict:
    """Exercise: predicted time relative to one path for all lanes (A and B equally long, the SM busy
    issuing), for each branch."""
    if not isinstance(answers, dict):
        return Verdict("Answer with a dict {branch: factor}.", False)
    wrong = []
    for q in DIVERGENCE_QUESTIONS:
        want = divergence_answer(q)
        got = answers.get(q)
        try:
            ok = abs(float(got) - want) <= 0.02 * want
        except (TypeError, ValueError):
            ok = False
        if got is None:
            wrong.append(f"{q}: not answered")
        elif not ok:
            wrong.append(f"{q}: {DIVERGENCE_QUESTIONS[q].hint}")
    if wrong:
        return Verdict("Not yet:\n  " + "\n  ".join(wrong), False)
    return Verdict(f"Correct: all {len(DIVERGENCE_QUESTIONS)} predicted.", True)
