"""The failure quiz: pick a family and a mistake, choose the explanation that fits, and see the
explanation, the recorded measurement behind it and the notebook section that shows it."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.exercises import failure_lab as quiz
from course_lib.labs import failure_lab as failure_records
from course_lib.models import failures
from course_lib.widgets.base import saved_view_note

LETTERS = ("A", "B", "C")


class FailureQuiz(W.VBox):
    def __init__(self, family: str = failures.FAMILIES[0]):
        self.family = W.Dropdown(options=list(failures.FAMILIES), value=family, description="family",
                                 layout=W.Layout(width="360px"))
        self.number = W.Dropdown(description="mistake", layout=W.Layout(width="200px"))
        self.mistake = W.HTML()
        self.options = W.HTML()
        self.answer = W.RadioButtons(options=LETTERS, value=None, description="answer")
        self.check = W.Button(description="Check", button_style="primary")
        self.verdict = W.HTML()
        self.family.observe(lambda _: self._fill_numbers(), "value")
        self.number.observe(lambda _: self._show(), "value")
        self.check.on_click(lambda _: self._check())
        super().__init__([saved_view_note(), W.HBox([self.family, self.number]), self.mistake, self.options,
                          W.HBox([self.answer, self.check]), self.verdict])
        self._fill_numbers()

    def _fill_numbers(self) -> None:
        self.number.options = [(f"{f.number}", f.number) for f in failures.by_family(self.family.value)]
        self.number.value = self.number.options[0][1]
        self._show()

    def _show(self) -> None:
        if self.number.value is None:
            return
        f = failures.failure(self.number.value)
        self.mistake.value = (f"<p><b>Mistake {f.number}.</b> {html.escape(f.mistake)}</p>"
                              "<p>Which explanation fits it?</p>")
        self.options.value = "".join(f"<p><b>{letter}.</b> {html.escape(text)}</p>"
                                     for letter, text in zip(LETTERS, quiz.choices(f.number)))
        self.answer.value = None
        self.verdict.value = ""

    def _check(self) -> None:
        number = self.number.value
        chosen = None if self.answer.value is None else quiz.choices(number)[LETTERS.index(self.answer.value)]
        v = quiz.check_choice(number, chosen)
        if not v.correct:
            self.verdict.value = f"<p>✘ {html.escape(str(v))}</p>"
            return
        f = failures.failure(number)
        shown, href = failure_records.evidence(f), failures.href(f)
        self.verdict.value = (f"<p>✔ Right. {html.escape(f.explanation)}</p>"
                              + (f"<p><b>Measured:</b> {html.escape(shown)}</p>" if shown else
                                 "<p>Not measured in this course.</p>")
                              + (f'<p>Shown in <a href="{href}" target="_blank">{html.escape(f.notebook)}'
                                 + (f" · {html.escape(f.section)}" if f.section else "") + "</a>.</p>" if href else ""))


def failure_quiz(family: str = failures.FAMILIES[0]) -> FailureQuiz:
    if family not in failures.FAMILIES:
        raise ValueError(f"unknown family {family!r}: choose one of {', '.join(failures.FAMILIES)}")
    return FailureQuiz(family)
