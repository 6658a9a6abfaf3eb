"""Notebook 08's exercise checks: a chain's saved bytes and bound, and which plan a measurement favours."""
from __future__ import annotations

from course_lib.exercises.base import Verdict, _close
from course_lib.models import fusion


def check_bytes_saved(chain: fusion.Chain, gpu: str, answer) -> Verdict:
    """Exercise: ``answer = (Q_saved in bytes, the fused plan's lower bound in µs)`` for ``chain``."""
    if answer is None:
        return Verdict("Not answered yet: replace None with (bytes saved, fused bound in µs).", False)
    plans = fusion.ledger(chain, gpu)
    want_bytes, want_us = plans.bytes_saved, plans.fused.seconds * 1e6
    try:
        got_bytes, got_us = answer
    except (TypeError, ValueError):
        return Verdict("Give two numbers: (bytes saved, fused bound in µs).", False)
    ok_bytes, ok_us = _close(got_bytes, want_bytes, 0.01), _close(got_us, want_us, 0.03)
    if ok_bytes and ok_us:
        return Verdict(f"Correct: fusing saves {want_bytes:,.0f} B ({len(chain.ops) - 1} intermediates, each written "
                       f"and read once), and the fused plan needs at least {want_us:.1f} µs on {plans.gpu}.", True)
    hints = []
    if not ok_bytes:
        hints.append("each intermediate between two kernels is written once and read once: 2·|Z|·b per boundary")
    if not ok_us:
        hints.append("the fused kernel still reads its inputs and writes its output once: time ≥ bytes / bandwidth")
    return Verdict(f"Not quite: {'; '.join(hints)}.", False)


def check_faster(result, op: str, n: int, answer) -> Verdict:
    """Exercise: which of the course's two softmax or RMSNorm plans ("one pass" or "two pass") was
    faster at row length ``n`` in ``result`` (a prediction, checked against the measurement)."""
    if answer not in ("one pass", "two pass"):
        return Verdict('Answer "one pass" or "two pass".', False)
    cs = {c.params["plan"]: c for c in result.cases if c.params["op"] == op and c.params["n"] == n}
    if not cs:
        return Verdict(f"{result.experiment} has no {op} rows of {n}: pick one of {result.params['row_lengths']}.", False)
    one, two = cs["course one pass"], cs["course two pass"]
    want = "one pass" if one.median_s < two.median_s else "two pass"
    told = (f"{op}, rows of {n:,}: one pass {one.median_s * 1e6:.0f} µs, two passes {two.median_s * 1e6:.0f} µs "
            f"({result.provenance}).")
    if answer == want:
        return Verdict(f"Correct. {told}", True)
    return Verdict(f"Not this time. {told} Look at the one-pass kernel's spills in the compile report.", False)
