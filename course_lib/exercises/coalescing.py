"""Notebook 04's exercise checks: sectors per warp request, and fixing a kernel's coalescing. Each
returns a Verdict and never raises on a wrong answer.

The fix check compiles the learner's CUDA source with NVRTC in every mode. With no GPU it checks it
*structurally*: it reads the kernel's index arithmetic (``fix_checks``' small C-expression evaluator,
integers only), runs it for every thread of a small launch in Python to prove each element is
written once and correctly, and counts the sectors of a warp with ``course_lib.models.memory``. On a
GPU it also runs the kernel in the kernel checker's child process, compares it with a reference,
and times it against the course's own version.
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
from course_lib.launch.exercise_kernels import strip_comments
from course_lib.models import memory

# None of these is printed on the page (its worked cases are fp32 aligned, 4 bytes late, stride 2, bf16,
# float4 and strides of 8 or more): each needs the byte ranges worked out.
SECTOR_QUESTIONS = {
    "fp32, unit stride, starting 28 bytes past a sector boundary": dict(pattern="unit", element_bytes=4,
                                                                        offset_bytes=28),
    "bf16 (2 B), stride 3": dict(pattern="strided", element_bytes=2, stride=3),
    "float2 (8 B), stride 2": dict(pattern="strided", element_bytes=8, stride=2),
    "fp32, stride 6": dict(pattern="strided", element_bytes=4, stride=6),
    "fp32, unit stride, only the first 16 lanes active, starting 16 bytes into a sector":
        dict(pattern="unit", element_bytes=4, offset_bytes=16, active_lanes=16),
    "fp32, the 32 elements of one aligned 128-byte block, lanes in a shuffled order":
        dict(pattern="permuted", element_bytes=4),
    "fp32, unit stride, only 8 lanes active": dict(pattern="unit", element_bytes=4, active_lanes=8),
}


def sectors_of(question: str) -> int:
    kw = SECTOR_QUESTIONS[question]
    return memory.sector_count(memory.warp_addresses(**kw), kw["element_bytes"]).n_sectors


def check_sectors(answers) -> Verdict:
    """Exercise: how many 32-byte sectors each warp request touches."""
    return check_answers(answers, SECTOR_QUESTIONS, sectors_of, "sectors",
                          "list the byte range each lane touches and count the 32-byte blocks it covers")


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch in "([") - (ch in ")]")
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return parts + [cur]


def _body(src: str, kernel: str) -> str:
    m = re.search(r'extern\s+"C"\s+__global__\s+void\s+' + re.escape(kernel) + r"\s*\(", src)
    if not m:
        raise Unreadable(f'no `extern "C" __global__ void {kernel}(...)` in the source')
    brace = src.index("{", m.end())
    inner, _ = bracket(src, brace, "{", "}")
    return inner


_DECL = re.compile(r"^\s*(?:const\s+)?(?:int|long long|size_t|unsigned(?:\s+int)?)\s+(.*)$", re.S)


def _scale_kernel_program(src: str):
    """(declarations, guard, out index, in index, value scale) of the exercise's elementwise kernel."""
    body = _body(strip_comments(src), "my_scale")
    decls, store = [], None
    for stmt in body.split(";"):
        s = stmt.strip()
        if not s:
            continue
        if m := _DECL.match(s):
            for part in _split_top(m.group(1)):
                name, _, expr = part.partition("=")
                if not expr or not re.fullmatch(r"\s*[A-Za-z_]\w*\s*", name):
                    raise Unreadable(f"could not read the declaration {part.strip()!r}")
                decls.append((name.strip(), c_expr(expr)))
        elif "out[" in s:
            if store is not None:
                raise Unreadable("the check expects one store to out[...]")
            store = s
        else:
            raise Unreadable(f"the check does not follow the statement {s[:60]!r}")
    if store is None:
        raise Unreadable("no store to out[...] found")
    guard = None
    if store.startswith("if"):
        cond, after = bracket(store, store.index("("), "(", ")")
        guard, store = c_expr(cond), store[after:].strip()
    lhs, _, rhs = store.partition("=")
    out_idx, _ = bracket(lhs, lhs.index("["))
    if "in[" not in rhs:
        raise Unreadable("the value stored should read in[...]")
    in_idx, _ = bracket(rhs, rhs.index("in[") + 2)
    return decls, guard, c_expr(out_idx), c_expr(in_idx)


def _scale_structure(src: str, n_small: int = 64, n_warp: int = 4096) -> tuple[bool, str, int]:
    """(correct, explanation, sectors per warp read at n_warp) by evaluating the kernel's index arithmetic."""
    decls, guard, out_idx, in_idx = _scale_kernel_program(src)

    def thread(bx, by, tx, ty, n):
        env = {"bx": bx, "by": by, "tx": tx, "ty": ty, "bdx": 32, "bdy": 8, "rows": n, "cols": n}
        for name, code in decls:
            env[name] = evaluate(code, env)
        if guard is not None and not evaluate(guard, env):
            return None
        return evaluate(out_idx, env), evaluate(in_idx, env)

    seen = {}
    for by in range(n_small // 8):
        for bx in range(n_small // 32):
            for ty in range(8):
                for tx in range(32):
                    r = thread(bx, by, tx, ty, n_small)
                    if r is None:
                        continue
                    o, i = r
                    if o != i:
                        return False, f"thread ({tx}, {ty}) of block ({bx}, {by}) writes out[{o}] from in[{i}]", 0
                    seen[o] = seen.get(o, 0) + 1
    if sorted(seen) != list(range(n_small * n_small)) or any(v != 1 for v in seen.values()):
        return False, (f"on a {n_small} x {n_small} matrix the threads write {len(seen)} distinct elements "
                       f"(of {n_small * n_small}), some more than once" if seen else "no thread writes anything"), 0
    warp = [thread(0, 0, tx, 0, n_warp) for tx in range(32)]
    addrs = [4 * w[1] if w else None for w in warp]
    if all(a is None for a in addrs):
        return False, "warp 0 reads nothing", 0
    return True, "every element is written once, from the right place", memory.sector_count(addrs, 4).n_sectors


def check_coalescing_fix(src: str, n: int = 4096) -> Verdict:
    """Exercise: make ``my_scale`` (out = 2 * in on an n x n matrix, block (32, 8)) read and write coalesced."""
    if not isinstance(src, str) or "my_scale" not in src:
        return Verdict("Pass the CUDA source string that defines my_scale.", False)
    cubin, verdict = compile_fix(src, "my_scale")
    if cubin is None:
        return verdict
    try:
        correct, why, sectors = _scale_structure(src)
    except Unreadable as exc:
        correct, why, sectors = None, str(exc), None
    if correct is False:
        return Verdict(f"Not correct yet: {why}.", False)
    if not live_mode():
        if correct is None:
            return Verdict(f"It compiles, but the structural check could not follow it ({why}). "
                           "Timing and a full check need a GPU (live mode).", False)
        if sectors > 4:
            return Verdict(f"Correct, but a warp's read still touches {sectors} sectors (4 is the minimum for 32 "
                           "floats): consecutive lanes should touch consecutive addresses.", False)
        return Verdict(f"Correct (structural check: {why}) and coalesced: a warp's read touches {sectors} sectors "
                       "(sector model). Timing needs a GPU: in live mode this check also runs and times it.", True)
    tail = f" (sector model: {sectors} sectors per warp read)" if sectors else ""
    return run_fix(cases.coalescing_fix_cases, "my_scale", cubin, n,
                    slow="Correct, but slow: {mine:.0f} µs ({gbps:,.0f} GB/s) against {course:.0f} µs for coalesced "
                         "indexing, measured now" + tail + ".",
                    fast="Correct and coalesced: {mine:.0f} µs ({gbps:,.0f} GB/s), the course's coalesced version "
                         "{course:.0f} µs, measured now" + tail + ".", source=src)
