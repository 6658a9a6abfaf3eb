"""One check for every calculator's bad input: an impossible value shows the calculator's message in its answer
(not a traceback), and putting the good value back clears it."""
import html


def assert_message_then_recovers(calc, control: str, bad, says: str, answer=lambda calc: calc.answer.value) -> str:
    """Set ``control`` to ``bad``: the answer must carry the error style and ``says``; then restore the good value:
    the error must be gone. Returns the answer shown for the bad value (for checks of its own)."""
    box = getattr(calc, control)
    good = box.value
    box.value = bad
    shown = answer(calc)
    assert "course-calc-error" in shown and says in html.unescape(shown), shown
    box.value = good                                                   # and it recovers
    assert "course-calc-error" not in answer(calc), answer(calc)
    return shown
