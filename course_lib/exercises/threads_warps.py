"""Notebook 02's exercise checks: which block owns a tile, which lanes a mask drops, what divergence costs."""
from __future__ import annotations

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


DIVERGENCE_QUESTIONS = {
    "if (lane < 8) A(); else B();": lambda lane, warp: 0 if lane < 8 else 1,
    "if (warp % 3 == 0) A(); else B();": lambda lane, warp: 0 if warp % 3 == 0 else 1,
    "switch (lane / 8) { four different paths }": lambda lane, warp: lane // 8,
    "if (lane == 0) A();  (the other lanes do nothing)": lambda lane, warp: 0 if lane == 0 else None,
}


def divergence_answer(question: str) -> float:
    mode = lg.DivergenceMode(-1, question, DIVERGENCE_QUESTIONS[question])
    return lg.divergence_factor(mode, 96)


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
        if not ok:
            wrong.append(f"{q}: count the distinct paths each warp must run")
    if wrong:
        return Verdict("Not yet:\n  " + "\n  ".join(wrong), False)
    return Verdict(f"Correct: all {len(DIVERGENCE_QUESTIONS)} predicted.", True)
