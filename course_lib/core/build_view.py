"""A kernel's source as one build sees it, for reading in a notebook: the branches that build's macros
decide are folded away, the rest is left exactly as written. Pure text; no compiler.

One ``.cu`` file often serves several notebooks through ``-D`` switches (the bf16 GEMM is notebook 06's
kernel, 07's split-K and persistent grids, and 08's fused epilogue). ``fold_build`` drops:

* ``#if`` / ``#else`` / ``#endif`` blocks whose condition names only the given macros and integers;
* C++ ``if (...) { ... }`` blocks and one-line ``if (...) statement;`` whose condition has a top-level
  ``&&`` term that the macros make false (``if (TC_SCHEDULED && gridDim.y > 1)`` with TC_SCHEDULED 0).

A parameter or argument list whose last entries sat in a dropped ``#if`` keeps its closing ``)`` (or ``) {``,
``);``) on a line of its own in the source; the view joins it to the line before.

A condition with anything else in it (a variable, ``__CUDA_ARCH__``, ``defined(...)``) is kept as written,
so what is shown is always a superset of what that build compiles.
"""
from __future__ import annotations

import re
_KNOWN_EXPR = re.compile(r"^[\sA-Z0-9_()!=<>&|]*$")
_IF = re.compile(r"#\s*if\b\s*(.*)$")          # #if, not #ifdef or #ifndef
_OPENS = re.compile(r"#\s*if")                   # every directive that opens a block
_CLOSER = re.compile(r"^\s*\)\s*(\{|;)?\s*$")      # a line that only closes a parameter or argument list


def _known_value(expr: str, values: dict[str, int]):
    """The value of a C condition made only of ``values``' macros and integers; None when anything else
    (a variable, __CUDA_ARCH__, defined(...), a bitwise & or |, whose precedence Python does not share) is in it."""
    names = set(re.findall(r"[A-Za-z_]\w*", expr))
    if not names <= set(values) or not _KNOWN_EXPR.match(expr) or re.search(r"(?<![&|])[&|](?![&|])", expr):
        return None
    py = re.sub(r"!(?!=)", " not ", expr).replace("&&", " and ").replace("||", " or ")
    return bool(eval(py, {"__builtins__": {}}, dict(values)))   # only macro names and integers reach here


def _top_level(cond: str, op: str) -> list[str]:
    """``cond`` split at the ``op`` that stand outside every parenthesis."""
    depth, terms, start = 0, [], 0
    for i, ch in enumerate(cond):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and cond.startswith(op, i):
            terms.append(cond[start:i])
            start = i + len(op)
    return terms + [cond[start:]]


def _false_condition(cond: str, values: dict[str, int]) -> bool:
    """True when ``cond`` is false whatever its unknown parts are: with no top-level ``||``, one of its
    top-level ``&&`` terms is known false; with one, the whole condition is known and false."""
    if len(_top_level(cond, "||")) > 1:
        return _known_value(cond, values) is False
    return any(_known_value(t.strip(), values) is False for t in _top_level(cond, "&&"))


def _chains_with_elif(lines: list[str]) -> set[int]:
    """The line numbers of the #if directives whose chain has an #elif: those are left as written."""
    open_at, found = [], set()
    for i, line in enumerate(lines):
        s = line.strip()
        if _OPENS.match(s):
            open_at.append(i)
        elif s.startswith("#elif") and open_at:
            found.add(open_at[-1])
        elif s.startswith("#endif") and open_at:
            open_at.pop()
    return found


def fold_build(source: str, values: dict[str, int]) -> str:
    """``source`` as one build sees it, for reading: the ``#if`` blocks and the C++ ``if`` statements whose
    condition ``values`` (macro -> value) decides are kept or dropped; everything else is left as written."""
    lines = source.splitlines()
    with_elif = _chains_with_elif(lines)
    out, stack = [], []          # one (value, decided) per open #if: decided when the macros settle it
    folded_since_kept = False    # a decided directive or a dropped line since the last line kept
    for i, line in enumerate(lines):
        s = line.strip()
        dropping = any(decided and not v for v, decided in stack)   # inside a branch this build leaves out
        m = _IF.match(s)
        if m or _OPENS.match(s):
            v = _known_value(m.group(1), values) if m and i not in with_elif else None
            stack.append((v, v is not None))
            if v is None and not dropping:
                out.append(line)
            folded_since_kept |= v is not None
            continue
        if s.startswith(("#else", "#elif", "#endif")) and stack:
            v, decided = stack[-1]   # an undecided block adds nothing to `dropping`: it is the enclosing blocks'
            if s.startswith("#endif"):
                stack.pop()
            elif decided:            # #else of a decided block (a chain with #elif is never decided)
                stack[-1] = (not v, True)
            if not decided and not dropping:
                out.append(line)
            folded_since_kept |= decided
            continue
        if dropping:
            folded_since_kept = True
            continue
        if folded_since_kept and _CLOSER.match(line) and out and "//" not in out[-1]:   # a list's ")" after a folded tail
            out[-1] += line.strip()
        else:
            out.append(line)
        folded_since_kept = False
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
