"""Exercise checks. Each returns a short verdict and never raises on a wrong answer."""
from __future__ import annotations


class Verdict(str):
    """A string that notebooks print; ``.correct`` tells tests the outcome."""

    correct: bool

    def __new__(cls, text: str, correct: bool):
        obj = super().__new__(cls, text)
        obj.correct = correct
        return obj

    def __repr__(self) -> str:
        return str(self)


def item_marks(marks) -> str:
    """One line per item of an answer, each said right or not right (never what the right value is):
    ``marks`` is (what the item is, whether it is right) pairs."""
    return "\n".join(f"  {'✔ right' if ok else '✘ not right'}: {what}" for what, ok in marks)


def _close(got, want: float, rel: float) -> bool:
    try:
        return abs(float(got) - want) <= rel * abs(want)
    except (TypeError, ValueError):
        return False


