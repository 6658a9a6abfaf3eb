"""What a live measurement is doing while it runs: one tqdm bar per experiment that steps with each
timing and each profiler run and names it.

In a notebook the bar is a line of text in the running cell's output, updated in place; not tqdm's
widget, which would leave a closed widget in the saved notebook with no state behind it. In a
terminal it is tqdm's usual line on stderr, and nothing when stderr is not a terminal. The bar clears itself when the experiment ends
(``leave=False``), so the tables and figures after it are what stays. Replay never creates one;
``COURSE_PROGRESS=0`` turns it off.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

_bar = None


def _wanted() -> bool:
    if os.environ.get("COURSE_PROGRESS", "1") == "0":
        return False
    try:
        import tqdm  # noqa: F401
    except ImportError:   # an environment without tqdm measures the same, without the bar
        return False
    return True


class _CellLine:
    """A file for tqdm that shows its latest line in one display area of the running cell."""

    def __init__(self):
        from IPython.display import display

        self._handle = display({"text/plain": ""}, raw=True, display_id=True)

    def write(self, text: str) -> None:
        self._handle.update({"text/plain": text.replace("\r", "").strip()}, raw=True)

    def flush(self) -> None:
        pass


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


@contextmanager
def measuring(label: str):
    """Around one live experiment. Nested experiments (one calling another) share the outer bar."""
    global _bar
    if _bar is not None or not _wanted():
        yield
        return
    from tqdm import tqdm

    # disable=None: in a terminal whose stderr is no TTY (a log, a pipe), tqdm stays silent instead of
    # writing a carriage-return update ten times a second into it.
    bar = tqdm(desc=label, unit=" step", leave=False, file=_CellLine() if _in_notebook() else None,
               bar_format="{desc}: {n_fmt} steps, {elapsed} {postfix}", disable=None)
    if bar.disable:
        yield
        return
    _bar = bar
    try:
        yield
    finally:
        _bar.close()
        _bar = None


def step(what: str) -> None:
    """One step of the current experiment (a timing, a profile), named; nothing outside one."""
    if _bar is not None:
        _bar.set_postfix_str(what, refresh=False)
        _bar.update()


def current_label() -> str | None:
    """The running bar's description and last step, for tests and messages."""
    return None if _bar is None else f"{_bar.desc}: {_bar.postfix}"
