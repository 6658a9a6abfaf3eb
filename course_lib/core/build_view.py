"""A kernel's source as one build sees it, for reading in a notebook: the branches that build's macros
decide are folded away, the rest is left exactly as written. Pure text; no compiler.

One ``.cu`` file often serves several notebooks through ``-D`` switches (the bf16 GEMM is notebook 06's
kernel, 07's split-K and persistent grids, and 08's fused epilogue). ``fold_build`` drops:

* ``#if`` / ``#else`` / ``#endif`` blocks whose condition names only the given macros and integers;
* C++ ``if (...) { ... }`` blocks and one-line ``if (...) statement;`` whose condition has a top-level
  ``&&`` term that the macros make false (``if (TC_SCHEDULED && gridDim.y > 1)`` with TC_SCHEDULED 0).

A condition with anything else in it (a variable, ``__CUDA_ARCH__``, ``defined(...)``) is kept as written,
so what is shown is always a superset of what that build compiles.
"""
from __future__ import annotations

import re
_KNOWN_EXPR = re.compile(r"^[\sA-Z0-9_()!=<>&|]*$")


def _known_value(expr: str, values: dict[str, int]):
    """The value of a C condition made only of ``values``' macros and integers; None when anything else
    (a variable, __CUDA_ARCH__, defined(...)) is in it."""
    names = set(re.findall(r"[A-Za-z_]\w*", expr))
    if not names <= set(values) or not _KNOWN_EXPR.match(expr):
        return None
    py = re.sub(r"!(?!=)", " not ", expr).replace("&&", " and ").replace("||", " or ")
    return bool(eval(py, {"__builtins__": {}}, dict(values)))   # only macro names and integers reach here


def _false_condition(cond: str, values: dict[str, int]) -> bool:
    """True when ``cond`` is false whatever its unknown parts are: one of its top-level && terms is known false."""
    depth, terms, start = 0, [], 0
    for i, ch in enumerate(cond):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and cond.startswith("&&", i):
            terms.append(cond[start:i])
            start = i + 2
    terms.append(cond[start:])
    if "||" in cond and len(terms) == 1:
        return _known_value(cond, values) is False
    return any(_known_value(t.strip(), values) is False for t in terms)


def fold_build(source: str, values: dict[str, int]) -> str:
    """``source`` as one build sees it, for reading: the ``#if`` blocks and the C++ ``if`` statements whose
    condition ``values`` (macro -> value) decides are kept or dropped; everything else is left as written."""
    lines = source.splitlines()
    out, stack = [], []          # one (value, decided) per open #if: decided when the macros settle it
    for line in lines:
        s = line.strip()
        m = re.match(r"#\s*if\s+(.*)$", s)
        if m and not s.startswith(("#ifdef", "#ifndef")):
            v = _known_value(m.group(1), values)
            stack.append((v, v is not None))
            if v is None:
                out.append(line)
            continue
        if s.startswith(("#ifdef", "#ifndef")):
            stack.append((None, False))
            out.append(line)
            continue
        if s.startswith("#else") and stack:
            v, decided = stack[-1]
            if decided:
                stack[-1] = (not v, True)
            else:
                out.append(line)
            continue
        if s.startswith("#endif") and stack:
            _, decided = stack.pop()
            if not decided:
                out.append(line)
            continue
        if any(decided and not v for v, decided in stack):
            continue
        out.append(line)
    return _drop_false_ifs(out, values)


def _drop_false_ifs(lines: list[str], values: dict[str, int]) -> str:
    """The C++ ``if`` blocks and one-line ``if`` statements the macros make false, dropped; a block that
    ends in ``} else {`` is kept whole."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*if \((.*)\)\s*(\{)?\s*(//.*)?$", line)
        single = re.match(r"\s*if \((.*?)\) [^{].*;\s*(//.*)?$", line)
        if m and m.group(2) and _false_condition(m.group(1), values):
            depth, j = lines[i].count("{") - lines[i].count("}"), i + 1
            while j < len(lines) and not (depth == 1 and lines[j].lstrip().startswith("}")):   # its closing line
                depth += lines[j].count("{") - lines[j].count("}")
                j += 1
            if j < len(lines) and lines[j].strip() == "}":
                i = j + 1
                continue
        elif single and _false_condition(single.group(1), values):
            i += 1
            continue
        out.append(line)
        i += 1
    # an #if left with nothing inside it
    text = "\n".join(out)
    return re.sub(r"\n[ \t]*#if [^\n]*\n[ \t]*#endif[^\n]*", "", text)
