"""What notebooks 04 and 05's checks share: answers checked against a model, a tiny C
integer-expression evaluator, NVRTC's verdict on a fix, and the live run of a fix in the kernel
checker's child process."""
from __future__ import annotations

import ast
import re

from course_lib.core import cuda, stored_run
from course_lib.exercises.base import Verdict
from course_lib.exercises.kernel.checker import DEFAULT_TIME_LIMIT_S, run_child


def _as_int(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f == int(f) else None


def check_answers(answers, questions, truth, unit: str, hint: str) -> Verdict:
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


# --------------------------------------------------------------------------- a tiny C integer-expression evaluator

_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Name, ast.Constant, ast.Load,
            ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.BitXor, ast.BitAnd, ast.BitOr, ast.LShift,
            ast.RShift, ast.USub, ast.UAdd, ast.Not, ast.Invert, ast.And, ast.Or, ast.Lt, ast.LtE, ast.Gt,
            ast.GtE, ast.Eq, ast.NotEq)
_BUILTIN_NAMES = {"threadIdx.x": "tx", "threadIdx.y": "ty", "blockIdx.x": "bx", "blockIdx.y": "by",
                  "blockDim.x": "bdx", "blockDim.y": "bdy"}


class Unreadable(ValueError):
    """The structural check cannot follow this source; the message says what it could not read."""



def c_expr(expr: str):
    """C integer expression → a compiled Python expression with the same value for non-negative operands."""
    e = re.sub(r"\(\s*(?:const\s+)?(?:size_t|long long|long|unsigned(?:\s+int)?|int)\s*\)", "", expr)
    for c_name, py in _BUILTIN_NAMES.items():
        e = e.replace(c_name, py)
    e = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", e)
    e = e.replace("&&", " and ").replace("||", " or ")
    e = re.sub(r"!(?!=)", " not ", e)
    e = e.replace("/", "//")
    if "?" in e:
        raise Unreadable(f"the check reads + - * / % ^ & | << >> and comparisons, not `?:`: {expr.strip()}")
    try:
        tree = ast.parse(e.strip(), mode="eval")
    except SyntaxError:
        raise Unreadable(f"could not read the expression {expr.strip()!r}") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Constant) and not isinstance(node.value, int)):
            raise Unreadable(f"the check reads integer arithmetic only; it cannot follow {expr.strip()!r}")
    return compile(tree, "<kernel expression>", "eval")


def evaluate(code, env: dict) -> int:
    try:
        return eval(code, {"__builtins__": {}}, env)   # noqa: S307  (AST restricted to arithmetic above)
    except NameError as exc:
        raise Unreadable(f"the expression uses a name the check does not know ({exc})") from None
    except ZeroDivisionError:
        raise Unreadable("the index arithmetic divides by zero") from None


def bracket(text: str, start: int, open_ch: str = "[", close_ch: str = "]") -> tuple[str, int]:
    """The text inside the bracket opening at ``start`` (text[start] == open_ch), and the index after it."""
    depth = 0
    for i in range(start, len(text)):
        depth += (text[i] == open_ch) - (text[i] == close_ch)
        if depth == 0:
            return text[start + 1:i], i + 1
    raise Unreadable(f"unbalanced {open_ch}{close_ch} in {text[start:start + 60]!r}")


def compile_fix(src: str, kernel: str):
    """(cubin, None), or (None, the Verdict saying why it did not compile or lacks the kernel)."""
    try:
        cubin, log = cuda.compile_source(src, cuda.target_arch(), f"{kernel}.cu")
    except cuda.CompileError as exc:
        lines = str(exc).splitlines()
        errors = [ln for i, ln in enumerate(lines) if "error" in ln or (i and "error" in lines[i - 1])]
        return None, Verdict("It does not compile:\n" + "\n".join((errors or lines)[-8:]), False)
    if kernel not in cuda.parse_ptxas_report(log, cuda.target_arch()):
        return None, Verdict(f'The source must define `extern "C" __global__ void {kernel}(...)`.', False)
    return cubin, None


def live_mode() -> bool:
    """Whether the check runs the kernel: live, or rendered from a stored live run that holds its runs."""
    return stored_run.runs_kernels()


SPEED_MARGIN = 1.15   # within 15% of the course's own kernel counts as "as fast"


def run_fix(live, kernel: str, cubin: bytes, n: int, slow: str, fast: str, source: str = "") -> Verdict:
    """Run a fix-the-kernel check's live cases (n × n) in the kernel checker's child process and judge
    them: a hang, a failed launch or a wrong result is said so; a right one is "as fast" within
    SPEED_MARGIN of the course's kernel. ``slow`` and ``fast`` are the verdicts' texts, formatted with
    the medians ``mine`` and ``course`` (µs) and ``gbps`` (the learner's, 8 bytes per element)."""
    run = run_child(live, kernel, (n,), cubin, DEFAULT_TIME_LIMIT_S, None, time_it=True, launch={}, source=source)
    if "hung" in run:
        return Verdict(f"Your kernel did not finish in {run['hung']:g} s, so the checker stopped it (it ran in a separate "
                       "process: this notebook's GPU state is untouched).", False)
    if run.get("error") or not run.get("cases"):
        return Verdict(f"The launch failed: {run.get('error', '(no result)')}. CUDA errors such as an illegal address "
                       "come from reading or writing outside an array.", False)
    case = run["cases"][0]
    if not case["passed"]:
        return Verdict(f"Not correct yet: {case['first_wrong']}.", False)
    mine, course = run["timing"]["yours_us"], run["timing"]["course_us"]
    as_fast = mine <= SPEED_MARGIN * course
    return Verdict((fast if as_fast else slow).format(mine=mine, course=course, gbps=8.0 * n * n / mine / 1e3), as_fast)
