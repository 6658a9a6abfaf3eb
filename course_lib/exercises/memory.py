"""Exercise checks of notebooks 04 and 05. Each returns a Verdict and never raises on a wrong answer.

The "fix the kernel" checks compile the learner's CUDA source with NVRTC in every
mode. With no GPU they check it *structurally*: they read the kernel's index
arithmetic (a small C-expression evaluator, integers only), run it for every
thread of a small launch in Python to prove each element is written once and
correctly, and count the sectors or bank wavefronts of a warp with the models
in ``course_lib.models.memory``. On a GPU they also run the kernel, compare it with a
reference, and time it against the course's own version.
"""
from __future__ import annotations

import ast
import re

from course_lib.core import cuda, runtime
from course_lib.core.timing import benchmark
from course_lib.exercises.base import Verdict
from course_lib.measure.experiments import check_close
from course_lib.models import memory

# --------------------------------------------------------------------------- predict: sectors and banks

SECTOR_QUESTIONS = {
    "fp32, unit stride, aligned": dict(pattern="unit", element_bytes=4),
    "fp32, unit stride, starting 4 bytes past a sector boundary": dict(pattern="unit", element_bytes=4, offset_bytes=4),
    "fp32, stride 2": dict(pattern="strided", element_bytes=4, stride=2),
    "bf16 (2 B), unit stride, aligned": dict(pattern="unit", element_bytes=2),
    "float4 (16 B), unit stride, aligned": dict(pattern="unit", element_bytes=16),
    "fp32, stride 4096 (a column of a 4096-wide matrix)": dict(pattern="strided", element_bytes=4, stride=4096),
    "fp32, unit stride, only 8 lanes active": dict(pattern="unit", element_bytes=4, active_lanes=8),
}


def sectors_of(question: str) -> int:
    kw = SECTOR_QUESTIONS[question]
    return memory.sector_count(memory.warp_addresses(**kw), kw["element_bytes"]).n_sectors


def _as_int(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f == int(f) else None


def _check_answers(answers, questions, truth, unit: str, hint: str) -> Verdict:
    if not isinstance(answers, dict):
        return Verdict(f"Answer with a dict: {{question: number of {unit}}}.", False)
    wrong = []
    for q in questions:
        got = _as_int(answers.get(q))
        if got is None:
            wrong.append(f"{q}: no number yet")
        elif got != truth(q):
            wrong.append(f"{q}: not {got}; {hint}")
    if wrong:
        return Verdict("Not yet:\n  " + "\n  ".join(wrong), False)
    return Verdict(f"Correct: all {len(questions)} predicted.", True)


def check_sectors(answers) -> Verdict:
    """Exercise: how many 32-byte sectors each warp request touches."""
    return _check_answers(answers, SECTOR_QUESTIONS, sectors_of, "sectors",
                          "list the byte range each lane touches and count the 32-byte blocks it covers")


BANK_QUESTIONS = {
    "4 B, a row of a 32 x 32 tile": dict(pattern="row", access_bytes=4),
    "4 B, a column of a 32 x 32 tile": dict(pattern="column", access_bytes=4, pitch=32),
    "4 B, a column of a 32 x 33 (padded) tile": dict(pattern="column", access_bytes=4, pitch=33),
    "4 B, a column of a 32 x 48 tile": dict(pattern="column", access_bytes=4, pitch=48),
    "4 B, every lane reads the same word": dict(pattern="broadcast", access_bytes=4),
    "8 B, a row (consecutive doubles)": dict(pattern="row", access_bytes=8),
    "8 B, a column of a 32 x 32 tile of doubles": dict(pattern="column", access_bytes=8, pitch=32),
}


def wavefronts_of(question: str) -> int:
    kw = BANK_QUESTIONS[question]
    return memory.bank_conflicts(memory.shared_addresses(**kw), kw["access_bytes"]).wavefronts


def check_wavefronts(answers) -> Verdict:
    """Exercise: wavefronts per warp request of each shared-memory pattern."""
    return _check_answers(answers, BANK_QUESTIONS, wavefronts_of, "wavefronts",
                          "find the bank of each lane's word(s) (word mod 32), per phase of 128 bytes, and take "
                          "the most distinct words any bank must serve")


# --------------------------------------------------------------------------- a tiny C integer-expression evaluator

_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Name, ast.Constant, ast.Load,
            ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.BitXor, ast.BitAnd, ast.BitOr, ast.LShift,
            ast.RShift, ast.USub, ast.UAdd, ast.Not, ast.Invert, ast.And, ast.Or, ast.Lt, ast.LtE, ast.Gt,
            ast.GtE, ast.Eq, ast.NotEq)
_BUILTIN_NAMES = {"threadIdx.x": "tx", "threadIdx.y": "ty", "blockIdx.x": "bx", "blockIdx.y": "by",
                  "blockDim.x": "bdx", "blockDim.y": "bdy"}


class _Unreadable(ValueError):
    """The structural check cannot follow this source; the message says what it could not read."""


def _strip_comments(src: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", src, flags=re.S))


def _c_expr(expr: str):
    """C integer expression → a compiled Python expression with the same value for non-negative operands."""
    e = re.sub(r"\(\s*(?:const\s+)?(?:size_t|long long|long|unsigned(?:\s+int)?|int)\s*\)", "", expr)
    for c_name, py in _BUILTIN_NAMES.items():
        e = e.replace(c_name, py)
    e = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", e)
    e = e.replace("&&", " and ").replace("||", " or ")
    e = re.sub(r"!(?!=)", " not ", e)
    e = e.replace("/", "//")
    if "?" in e:
        raise _Unreadable(f"the check reads + - * / % ^ & | << >> and comparisons, not `?:`: {expr.strip()}")
    try:
        tree = ast.parse(e.strip(), mode="eval")
    except SyntaxError:
        raise _Unreadable(f"could not read the expression {expr.strip()!r}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Constant) and not isinstance(node.value, int)):
            raise _Unreadable(f"the check reads integer arithmetic only; it cannot follow {expr.strip()!r}")
    return compile(tree, "<kernel expression>", "eval")


def _eval(code, env: dict) -> int:
    try:
        return eval(code, {"__builtins__": {}}, env)   # noqa: S307  (AST restricted to arithmetic above)
    except NameError as exc:
        raise _Unreadable(f"the expression uses a name the check does not know ({exc})") from None
    except ZeroDivisionError:
        raise _Unreadable("the index arithmetic divides by zero") from None


def _bracket(text: str, start: int, open_ch: str = "[", close_ch: str = "]") -> tuple[str, int]:
    """The text inside the bracket opening at ``start`` (text[start] == open_ch), and the index after it."""
    depth = 0
    for i in range(start, len(text)):
        depth += (text[i] == open_ch) - (text[i] == close_ch)
        if depth == 0:
            return text[start + 1:i], i + 1
    raise _Unreadable(f"unbalanced {open_ch}{close_ch} in {text[start:start + 60]!r}")


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
        raise _Unreadable(f'no `extern "C" __global__ void {kernel}(...)` in the source')
    brace = src.index("{", m.end())
    inner, _ = _bracket(src, brace, "{", "}")
    return inner


_DECL = re.compile(r"^\s*(?:const\s+)?(?:int|long long|size_t|unsigned(?:\s+int)?)\s+(.*)$", re.S)


def _scale_kernel_program(src: str):
    """(declarations, guard, out index, in index, value scale) of the exercise's elementwise kernel."""
    body = _body(_strip_comments(src), "my_scale")
    decls, store = [], None
    for stmt in body.split(";"):
        s = stmt.strip()
        if not s:
            continue
        if m := _DECL.match(s):
            for part in _split_top(m.group(1)):
                name, _, expr = part.partition("=")
                if not expr or not re.fullmatch(r"\s*[A-Za-z_]\w*\s*", name):
                    raise _Unreadable(f"could not read the declaration {part.strip()!r}")
                decls.append((name.strip(), _c_expr(expr)))
        elif "out[" in s:
            if store is not None:
                raise _Unreadable("the check expects one store to out[...]")
            store = s
        else:
            raise _Unreadable(f"the check does not follow the statement {s[:60]!r}")
    if store is None:
        raise _Unreadable("no store to out[...] found")
    guard = None
    if store.startswith("if"):
        cond, after = _bracket(store, store.index("("), "(", ")")
        guard, store = _c_expr(cond), store[after:].strip()
    lhs, _, rhs = store.partition("=")
    out_idx, _ = _bracket(lhs, lhs.index("["))
    if "in[" not in rhs:
        raise _Unreadable("the value stored should read in[...]")
    in_idx, _ = _bracket(rhs, rhs.index("in[") + 2)
    return decls, guard, _c_expr(out_idx), _c_expr(in_idx)


def _scale_structure(src: str, n_small: int = 64, n_warp: int = 4096) -> tuple[bool, str, int]:
    """(correct, explanation, sectors per warp read at n_warp) by evaluating the kernel's index arithmetic."""
    decls, guard, out_idx, in_idx = _scale_kernel_program(src)

    def thread(bx, by, tx, ty, n):
        env = {"bx": bx, "by": by, "tx": tx, "ty": ty, "bdx": 32, "bdy": 8, "rows": n, "cols": n}
        for name, code in decls:
            env[name] = _eval(code, env)
        if guard is not None and not _eval(guard, env):
            return None
        return _eval(out_idx, env), _eval(in_idx, env)

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


def _compile(src: str, kernel: str):
    try:
        _, log = cuda.compile_source(src, cuda.target_arch(), f"{kernel}.cu")
    except cuda.CompileError as exc:
        lines = str(exc).splitlines()
        errors = [ln for i, ln in enumerate(lines) if "error" in ln or (i and "error" in lines[i - 1])]
        return None, Verdict("It does not compile:\n" + "\n".join((errors or lines)[-8:]), False)
    if kernel not in cuda.parse_ptxas_report(log, cuda.target_arch()):
        return None, Verdict(f'The source must define `extern "C" __global__ void {kernel}(...)`.', False)
    return True, None


def _live() -> bool:
    return runtime.mode() == "live"


def _time_pair(mine, theirs, samples: int = 20) -> tuple[float, float]:
    return (benchmark(mine, samples, flush_l2=True).median_s, benchmark(theirs, samples, flush_l2=True).median_s)


def _load(src: str, kernel: str):
    cubin, _ = cuda.compile_source(src, cuda.target_arch(), f"{kernel}.cu")
    return cuda._load_module(cubin).get_function(kernel)


SPEED_MARGIN = 1.15   # within 15% of the course's own kernel counts as "as fast"


def check_coalescing_fix(src: str, n: int = 4096) -> Verdict:
    """Exercise: make ``my_scale`` (out = 2 * in on an n x n matrix, block (32, 8)) read and write coalesced."""
    if not isinstance(src, str) or "my_scale" not in src:
        return Verdict("Pass the CUDA source string that defines my_scale.", False)
    ok, verdict = _compile(src, "my_scale")
    if not ok:
        return verdict
    try:
        correct, why, sectors = _scale_structure(src)
    except _Unreadable as exc:
        correct, why, sectors = None, str(exc), None
    if correct is False:
        return Verdict(f"Not correct yet: {why}.", False)
    if not _live():
        if correct is None:
            return Verdict(f"It compiles, but the structural check could not follow it ({why}). "
                           "Timing and a full check need a GPU (live mode).", False)
        if sectors > 4:
            return Verdict(f"Correct, but a warp's read still touches {sectors} sectors (4 is the minimum for 32 "
                           "floats): consecutive lanes should touch consecutive addresses.", False)
        return Verdict(f"Correct (structural check: {why}) and coalesced: a warp's read touches {sectors} sectors "
                       "(sector model). Timing needs a GPU: in live mode this check also runs and times it.", True)
    return _run_scale(src, n, sectors)


def _run_scale(src: str, n: int, sectors) -> Verdict:
    import cupy

    fn = _load(src, "my_scale")
    ref = cuda.kernel("coalescing", "scale_rows")
    a = cupy.random.random((n, n), dtype=cupy.float32)
    out = cupy.full_like(a, -1)
    grid, block = ((n + 31) // 32, (n + 7) // 8), (32, 8)
    args = (out, a, cupy.int32(n), cupy.int32(n))
    fn(grid, block, args)
    check = check_close(out, 2 * a, "2 * in (CuPy)", 0.0)
    if not check["passed"]:
        return Verdict(f"Not correct yet: max error {check['max_abs_err']:.3g} against 2 * in.", False)
    mine, course = _time_pair(lambda: fn(grid, block, args), lambda: ref(grid, block, args))
    gbps = 8.0 * n * n / mine / 1e9
    tail = f" (sector model: {sectors} sectors per warp read)" if sectors else ""
    if mine > SPEED_MARGIN * course:
        return Verdict(f"Correct, but slow: {mine * 1e6:.0f} µs ({gbps:,.0f} GB/s) against "
                       f"{course * 1e6:.0f} µs for coalesced indexing, measured now{tail}.", False)
    return Verdict(f"Correct and coalesced: {mine * 1e6:.0f} µs ({gbps:,.0f} GB/s), the course's coalesced "
                   f"version {course * 1e6:.0f} µs, measured now{tail}.", True)


# --------------------------------------------------------------------------- fix the transpose's tile

_DEFINE = re.compile(r"^\s*#define\s+([A-Za-z_]\w*)\s+(-?\d+)\s*$", re.M)
_TILE_AT = re.compile(r"^\s*#define\s+TILE_AT\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*(.+)$", re.M)
_DECL_TILE = re.compile(r"__shared__\s+float\s+tile\s*((?:\[[^\]]+\]\s*)+);")


def _tile_layout(src: str):
    """(index(r, c) -> word, words in the tile) read from the exercise's TILE_AT macro and tile declaration."""
    text = _strip_comments(src)
    defines = {k: int(v) for k, v in _DEFINE.findall(text)}
    m = _TILE_AT.search(text)
    if not m:
        raise _Unreadable("keep the `#define TILE_AT(r, c) tile[...]` line: the check reads the tile layout from it")
    r_name, c_name, body = m.group(1), m.group(2), m.group(3).strip()
    d = _DECL_TILE.search(text)
    if not d:
        raise _Unreadable("keep the declaration `__shared__ float tile[...];`")
    dims = [_eval(_c_expr(x), defines) for x in re.findall(r"\[([^\]]+)\]", d.group(1))]
    if not body.startswith("tile"):
        raise _Unreadable("TILE_AT should expand to tile[...]")
    idx_exprs, pos = [], len("tile")
    while pos < len(body) and body[pos] == "[":
        inner, pos = _bracket(body, pos)
        idx_exprs.append(_c_expr(inner))
    if len(idx_exprs) != len(dims) or len(dims) not in (1, 2):
        raise _Unreadable(f"TILE_AT indexes tile with {len(idx_exprs)} subscripts; the tile has {len(dims)}")

    def index(r: int, c: int) -> int:
        env = dict(defines, **{r_name: r, c_name: c})
        vals = [_eval(e, env) for e in idx_exprs]
        for v, dim in zip(vals, dims):
            if not 0 <= v < dim:
                raise _Unreadable(f"TILE_AT({r}, {c}) indexes {vals}: outside the tile, declared {dims} words")
        return vals[0] if len(dims) == 1 else vals[0] * dims[1] + vals[1]

    size = dims[0] if len(dims) == 1 else dims[0] * dims[1]
    return index, size


def transpose_tile_wavefronts(src: str) -> tuple[int, int, int]:
    """(max wavefronts of a warp writing a tile row, of a warp reading a tile column, tile words)."""
    index, size = _tile_layout(src)
    slots = {index(r, c) for r in range(32) for c in range(32)}
    if len(slots) != 32 * 32:
        raise _Unreadable(f"TILE_AT maps the 32 x 32 elements onto only {len(slots)} distinct words: "
                          "two elements would overwrite each other")
    row = max(memory.bank_conflicts([4 * index(r, c) for c in range(32)], 4).wavefronts for r in range(32))
    col = max(memory.bank_conflicts([4 * index(r, c) for r in range(32)], 4).wavefronts for c in range(32))
    return row, col, size


def check_transpose_fix(src: str, n: int = 4096) -> Verdict:
    """Exercise: change the tile layout of ``my_transpose`` so neither shared-memory side has bank conflicts."""
    if not isinstance(src, str) or "my_transpose" not in src:
        return Verdict("Pass the CUDA source string that defines my_transpose.", False)
    ok, verdict = _compile(src, "my_transpose")
    if not ok:
        return verdict
    try:
        row, col, words = transpose_tile_wavefronts(src)
    except _Unreadable as exc:
        row = col = words = None
        why = str(exc)
        if not _live():
            return Verdict(f"It compiles, but the structural check could not follow it: {why}.", False)
    if row is not None and (row > 1 or col > 1):
        return Verdict(f"Not yet: a warp writing a tile row takes {row} wavefront(s) and one reading a tile column "
                       f"takes {col} (bank model); both should take 1.", False)
    if not _live():
        return Verdict(f"Conflict-free (bank model): 1 wavefront per row write and per column read, with "
                       f"{words} words of shared memory ({words - 1024} unused). Correctness and timing need a "
                       "GPU: in live mode this check also runs and times it.", True)
    return _run_transpose(src, n, words)


def _run_transpose(src: str, n: int, words) -> Verdict:
    import cupy

    fn = _load(src, "my_transpose")
    ref = cuda.kernel("transpose", "transpose_padded")
    a = cupy.random.random((n, n), dtype=cupy.float32)
    out = cupy.full_like(a, -1)
    grid, block = ((n + 31) // 32, (n + 31) // 32), (32, 8)
    fn(grid, block, (out, a, cupy.int32(n)))
    check = check_close(out, a.T, "CuPy a.T", 0.0)
    if not check["passed"]:
        return Verdict(f"Not correct yet: max error {check['max_abs_err']:.3g} against a.T.", False)
    mine, course = _time_pair(lambda: fn(grid, block, (out, a, cupy.int32(n))),
                              lambda: ref(grid, block, (out, a, cupy.int32(n), cupy.int32(n))))
    gbps = 8.0 * n * n / mine / 1e9
    if mine > SPEED_MARGIN * course:
        return Verdict(f"Correct, but slower than the padded tile: {mine * 1e6:.0f} µs ({gbps:,.0f} GB/s) against "
                       f"{course * 1e6:.0f} µs, measured now.", False)
    return Verdict(f"Correct and conflict-free: {mine * 1e6:.0f} µs ({gbps:,.0f} GB/s), the course's padded tile "
                   f"{course * 1e6:.0f} µs, measured now.", True)
