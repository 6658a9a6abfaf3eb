"""Notebook 05's exercise checks: wavefronts per shared-memory request, and fixing the transpose's
tile layout. Each returns a Verdict and never raises on a wrong answer.

The fix check compiles the learner's CUDA with NVRTC in every mode and reads the tile layout from
its TILE_AT macro through the bank model (``course_lib.models.memory``); on a GPU it also runs the
kernel in the kernel checker's child process, compares it with a.T and times it against the
course's padded tile.
"""
from __future__ import annotations

import re

from course_lib.exercises.base import Verdict
from course_lib.exercises.fix_checks import (
    Unreadable,
    bracket,
    c_expr,
    check_answers,
    compile_fix,
    evaluate,
    live_mode,
    run_fix,
)
from course_lib.exercises.kernel import cases
from course_lib.launch.exercise_kernels import numeric_defines, strip_comments
from course_lib.models import memory

# None of these is printed on the page (the calculator's first cell and the two probe tables show the row,
# the column at pitch 32, 33 and 34, broadcasts, 8-byte rows, columns and stride 2, and the 16-byte row,
# stride 2, columns and sharing groups): each needs the bank rules worked through.
BANK_QUESTIONS = {
    "4 B, a column of a 32 x 40 tile": dict(pattern="column", access_bytes=4, pitch=40),
    "4 B, a column of a 32 x 48 tile": dict(pattern="column", access_bytes=4, pitch=48),
    "4 B, stride 6 (lane i reads word 6 i)": dict(pattern="strided", access_bytes=4, stride=6),
    "8 B, stride 3 (lane i reads double 3 i)": dict(pattern="strided", access_bytes=8, stride=3),
    "8 B, a column of a 32 x 34 tile of doubles": dict(pattern="column", access_bytes=8, pitch=34),
    "16 B, stride 3 (lane i reads float4 3 i)": dict(pattern="strided", access_bytes=16, stride=3),
    "16 B, a column of a tile of float4 at pitch 34": dict(pattern="column", access_bytes=16, pitch=34),
    "16 B, lanes 4 apart share (lane i reads float4 i % 4)": dict(pattern="repeating", access_bytes=16, stride=4),
}


def wavefronts_of(question: str) -> int:
    kw = BANK_QUESTIONS[question]
    return memory.bank_conflicts(memory.shared_addresses(**kw), kw["access_bytes"]).wavefronts


def check_wavefronts(answers) -> Verdict:
    """Exercise: wavefronts per warp request of each shared-memory pattern."""
    return check_answers(answers, BANK_QUESTIONS, wavefronts_of, "wavefronts",
                          "find the bank of each lane's word(s) (word mod 32), per phase of 128 bytes, and take "
                          "the most distinct words any bank must serve")


# --------------------------------------------------------------------------- fix the transpose's tile

_TILE_AT = re.compile(r"^\s*#define\s+TILE_AT\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*(.+)$", re.M)
_DECL_TILE = re.compile(r"__shared__\s+float\s+tile\s*((?:\[[^\]]+\]\s*)+);")


def _tile_layout(src: str):
    """(index(r, c) -> word, words in the tile) read from the exercise's TILE_AT macro and tile declaration."""
    text = strip_comments(src)
    defines = numeric_defines(text)
    m = _TILE_AT.search(text)
    if not m:
        raise Unreadable("keep the `#define TILE_AT(r, c) tile[...]` line: the check reads the tile layout from it")
    r_name, c_name, body = m.group(1), m.group(2), m.group(3).strip()
    d = _DECL_TILE.search(text)
    if not d:
        raise Unreadable("keep the declaration `__shared__ float tile[...];`")
    dims = [evaluate(c_expr(x), defines) for x in re.findall(r"\[([^\]]+)\]", d.group(1))]
    if not body.startswith("tile"):
        raise Unreadable("TILE_AT should expand to tile[...]")
    idx_exprs, pos = [], len("tile")
    while pos < len(body) and body[pos] == "[":
        inner, pos = bracket(body, pos)
        idx_exprs.append(c_expr(inner))
    if len(idx_exprs) != len(dims) or len(dims) not in (1, 2):
        raise Unreadable(f"TILE_AT indexes tile with {len(idx_exprs)} subscripts; the tile has {len(dims)}")

    def index(r: int, c: int) -> int:
        env = dict(defines, **{r_name: r, c_name: c})
        vals = [evaluate(e, env) for e in idx_exprs]
        for v, dim in zip(vals, dims):
            if not 0 <= v < dim:
                raise Unreadable(f"TILE_AT({r}, {c}) indexes {vals}: outside the tile, declared {dims} words")
        return vals[0] if len(dims) == 1 else vals[0] * dims[1] + vals[1]

    size = dims[0] if len(dims) == 1 else dims[0] * dims[1]
    return index, size


def transpose_tile_wavefronts(src: str) -> tuple[int, int, int]:
    """(max wavefronts of a warp writing a tile row, of a warp reading a tile column, tile words)."""
    index, size = _tile_layout(src)
    slots = {index(r, c) for r in range(32) for c in range(32)}
    if len(slots) != 32 * 32:
        raise Unreadable(f"TILE_AT maps the 32 x 32 elements onto only {len(slots)} distinct words: "
                          "two elements would overwrite each other")
    row = max(memory.bank_conflicts([4 * index(r, c) for c in range(32)], 4).wavefronts for r in range(32))
    col = max(memory.bank_conflicts([4 * index(r, c) for r in range(32)], 4).wavefronts for c in range(32))
    return row, col, size


def check_transpose_fix(src: str, n: int = 4096) -> Verdict:
    """Exercise: change the tile layout of ``my_transpose`` so neither shared-memory side has bank conflicts."""
    if not isinstance(src, str) or "my_transpose" not in src:
        return Verdict("Pass the CUDA source string that defines my_transpose.", False)
    cubin, verdict = compile_fix(src, "my_transpose")
    if cubin is None:
        return verdict
    try:
        row, col, words = transpose_tile_wavefronts(src)
    except Unreadable as exc:
        row = col = words = None
        why = str(exc)
        if not live_mode():
            return Verdict(f"It compiles, but the structural check could not follow it: {why}.", False)
    if row is not None and (row > 1 or col > 1):
        return Verdict(f"Not yet: a warp writing a tile row takes {row} wavefront(s) and one reading a tile column "
                       f"takes {col} (bank model); both should take 1.", False)
    if not live_mode():
        return Verdict(f"Conflict-free (bank model): 1 wavefront per row write and per column read, with "
                       f"{words} words of shared memory ({words - 1024} unused). Correctness and timing need a "
                       "GPU: in live mode this check also runs and times it.", True)
    return run_fix(cases.transpose_fix_cases, "my_transpose", cubin, n,
                    slow="Correct, but slower than the padded tile: {mine:.0f} µs ({gbps:,.0f} GB/s) against "
                         "{course:.0f} µs, measured now.",
                    fast="Correct and conflict-free: {mine:.0f} µs ({gbps:,.0f} GB/s), the course's padded tile "
                         "{course:.0f} µs, measured now.", source=src)
