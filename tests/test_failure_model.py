"""The failure catalogue: numbering, families, where each is shown, the records it cites, and the quiz."""
import json
import re
from dataclasses import fields
from pathlib import Path

import pytest

from course_lib.exercises import failure_lab as quiz
from course_lib.labs import failure_lab as failure_records
from course_lib.models import failures
from course_lib.models.failures import FAILURES, FAMILIES, Failure

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RECORDS = ROOT / "data" / "recorded" / "h200"

BLOCKS = {"execution model": range(1, 6), "resources": range(6, 12), "memory and layout": range(12, 17),
          "tiling and fusion": range(17, 22), "roofline and measurement": range(22, 36)}


def _sentences(text: str) -> int:
    return len(re.findall(r"[.!?](?=\s|$)", text))


def _headings(stem: str) -> set[str]:
    lines = (NOTEBOOKS / f"{stem}.md").read_text(encoding="utf-8").splitlines()
    return {m.group(1).strip() for ln in lines if (m := re.match(r"^#{2,3} (.+)$", ln))}


def test_families_are_the_five_in_order():
    assert FAMILIES == ("execution model", "resources", "memory and layout", "tiling and fusion",
                        "roofline and measurement")


def test_thirty_five_failures_numbered_in_order_and_in_their_family_blocks():
    assert len(FAILURES) == 35
    assert [f.number for f in FAILURES] == list(range(1, 36))
    assert all(isinstance(f, Failure) for f in FAILURES)
    for family, numbers in BLOCKS.items():
        assert [f.number for f in failures.by_family(family)] == list(numbers), family
    assert {f.family for f in FAILURES} == set(FAMILIES)


def test_failures_are_frozen():
    with pytest.raises(Exception):
        FAILURES[0].number = 2


def test_texts_are_one_mistake_sentence_and_a_short_explanation():
    for f in FAILURES:
        assert _sentences(f.mistake) == 1 and f.mistake.endswith("."), (f.number, f.mistake)
        assert 2 <= _sentences(f.explanation) <= 4, (f.number, f.explanation)
        assert f.explanation.endswith("."), f.number
    assert len({f.mistake for f in FAILURES}) == 35
    assert len({f.explanation for f in FAILURES}) == 35


def test_no_text_mentions_source_documents():
    for f in FAILURES:
        for field in fields(f):
            value = getattr(f, field.name)
            for text in (value,) if isinstance(value, str) else value if isinstance(value, tuple) else ():
                assert "seed" not in text.lower(), (f.number, field.name)
                assert "lesson" not in text.lower(), (f.number, field.name)
                assert "review" not in text.lower(), (f.number, field.name)


def test_every_notebook_and_section_exists():
    placed = [f for f in FAILURES if f.notebook is not None]
    assert len(placed) >= 30
    for f in FAILURES:
        if f.notebook is None:
            assert f.section is None and f.record is None and f.case is None, f.number
            continue
        assert (NOTEBOOKS / f"{f.notebook}.md").is_file(), (f.number, f.notebook)
        assert f.section in _headings(f.notebook), (f.number, f.notebook, f.section)


def test_at_least_twenty_are_demonstrated_by_a_recorded_case_that_exists():
    shown = failures.demonstrated()
    assert len(shown) >= 20
    assert shown == [f for f in FAILURES if f.record and f.case]
    for f in FAILURES:
        assert (f.record is None) == (f.case is None), f.number
        if f.record is not None:
            assert f.notebook is not None, f.number
    for f in shown:
        path = RECORDS / f"{f.record}.json"
        assert path.is_file(), (f.number, f.record)
        names = [c["name"] for c in json.loads(path.read_text(encoding="utf-8"))["cases"]]
        assert f.case in names, (f.number, f.record, f.case)


def test_the_record_choices_the_course_relies_on():
    assert failures.failure(25).record == "timing.measuring_correctly"
    assert failures.failure(26).case.startswith("first call")
    assert failures.failure(10).record == "occupancy.register_spill"
    assert failures.failure(3).record == "warps.block_order"
    assert failures.failure(32).record == "waves.n_sweep"
    assert failures.failure(12).record == "coalescing.strided_copy"
    assert failures.failure(20).record.startswith("fusion.")


def _anchor_rule(heading: str) -> str:
    return re.sub(r"[^\w-]", "", heading.lower().replace(" ", "-"))


def test_link_uses_jupyter_anchors():
    f = failures.failure(22)
    assert failures.link(f) == ("[10_hopper_gemm · The ceiling `mma.sync` cannot pass]"
                                "(10_hopper_gemm.ipynb#the-ceiling-mmasync-cannot-pass)")
    for f in FAILURES:
        text = failures.link(f)
        if f.notebook is None:
            assert text is None
            continue
        m = re.fullmatch(r"\[(.+) · (.+)\]\((\w+)\.ipynb#([\w-]+)\)", text)
        assert m, text
        assert m.group(1) == f.notebook == m.group(3)
        assert m.group(2) == f.section
        assert m.group(4) == _anchor_rule(f.section)
    assert failures.link(Failure(99, "resources", "m.", "e. e.", None, None, None, None, None, ("a.", "b."))) is None


def test_lookup_errors():
    for bad in (0, 36, -1):
        with pytest.raises(ValueError, match="failures are numbered 1-35"):
            failures.failure(bad)
    assert failures.failure(1).number == 1 and failures.failure(35).number == 35
    with pytest.raises(ValueError) as err:
        failures.by_family("caching")
    for family in FAMILIES:
        assert family in str(err.value)


def test_quiz_right_answer():
    for f in FAILURES:
        v = quiz.check_answer(f.number, f.family)
        assert v.correct, f.number
        assert v.startswith("Correct")
        assert f.explanation in v
        if f.notebook is not None:
            assert failures.link(f) in v
    assert quiz.check_answer(9, "  Resources ").correct


def test_quiz_wrong_answer_gives_a_hint_not_the_answer():
    for f in FAILURES:
        wrong = next(x for x in FAMILIES if x != f.family)
        v = quiz.check_answer(f.number, wrong)
        assert not v.correct, f.number
        assert "Correct" not in v
        assert f.mistake in v
        assert f.explanation not in v
        for family in FAMILIES:
            assert family in v


def test_quiz_unknown_family_lists_the_allowed_ones():
    for guess in ("caching", "", "memory"):
        v = quiz.check_answer(12, guess)
        assert not v.correct
        assert "Correct" not in v
        for family in FAMILIES:
            assert f'"{family}"' in v
    v = quiz.check_answer(12, None)
    assert not v.correct
    with pytest.raises(ValueError):
        quiz.check_answer(36, "resources")


def test_module_is_pure():
    source = (ROOT / "course_lib" / "models" / "failures.py").read_text(encoding="utf-8")
    assert not re.search(r"^\s*(import|from)\s+(cupy|torch|json|pathlib)\b", source, re.M)


def test_every_contrast_is_a_case_of_the_same_record_and_not_the_case_itself():
    for f in FAILURES:
        if f.contrast is None:
            continue
        assert f.record is not None, f.number
        names = [c["name"] for c in json.loads((RECORDS / f"{f.record}.json").read_text(encoding="utf-8"))["cases"]]
        assert f.contrast in names and f.contrast != f.case, (f.number, f.contrast)
    assert sum(f.contrast is not None for f in FAILURES) >= 20


def test_evidence_reads_the_recorded_medians_and_compares_like_with_like():
    text = failure_records.evidence(failures.failure(25))
    record = json.loads((RECORDS / "timing.measuring_correctly.json").read_text(encoding="utf-8"))
    samples = {c["name"]: sorted(c["samples_s"]) for c in record["cases"]}
    host = samples["host timer, no synchronize, n=16777216"]
    events = samples["CUDA events, GPU held, n=16777216"]
    median = lambda s: (s[len(s) // 2] + s[(len(s) - 1) // 2]) / 2  # noqa: E731
    assert text.startswith(f"recorded on NVIDIA H200, {record['recorded_at'][:10]}")
    assert f"{median(host) * 1e6:,.1f} µs" in text and f"{median(events) * 1e6:,.1f} µs" in text
    assert f"{median(host) / median(events):.2f}× the time for the same work" in text
    # different work (mma.sync against wgmma over other FLOP counts): rates, no time ratio
    ceilings = failure_records.evidence(failures.failure(22))
    assert "TFLOP/s" in ceilings and "× the time" not in ceilings
    assert failure_records.evidence(failures.failure(11)) is None
    assert all(failure_records.evidence(f) for f in failures.demonstrated())


def test_every_failure_has_two_misreadings_of_its_own_mistake():
    explanations = {f.explanation for f in FAILURES}
    every = [m for f in FAILURES for m in f.misreadings]
    assert len(set(every)) == len(every) == 70                  # no misreading is shared or repeated
    for f in FAILURES:
        assert isinstance(f.misreadings, tuple) and len(f.misreadings) == 2, f.number
        first, second = f.misreadings
        assert first != second, f.number
        for m in f.misreadings:
            assert isinstance(m, str) and m.strip() == m and m.endswith("."), (f.number, m)
            assert m not in explanations, (f.number, m)             # not the right answer, nor another's
            assert 2 <= _sentences(m) <= 4, (f.number, m)
            assert 0.4 <= len(m) / len(f.explanation) <= 2.5, (f.number, len(m), len(f.explanation))


def test_length_does_not_give_the_right_explanation_away():
    longest = [f.number for f in FAILURES if len(f.explanation) > max(map(len, f.misreadings))]
    shortest = [f.number for f in FAILURES if len(f.explanation) < min(map(len, f.misreadings))]
    assert len(longest) <= len(FAILURES) // 2, longest
    assert len(shortest) <= len(FAILURES) // 2, shortest


def test_choices_are_the_explanation_and_its_two_misreadings_in_a_fixed_order():
    positions = set()
    for f in FAILURES:
        options = quiz.choices(f.number)
        assert sorted(options) == sorted([f.explanation, *f.misreadings]), f.number
        assert options.count(f.explanation) == 1, f.number
        assert options == quiz.choices(f.number)          # the same order every time
        positions.add(options.index(f.explanation))
    assert positions == {0, 1, 2}                         # the right one is not always in the same place
    with pytest.raises(ValueError):
        quiz.choices(36)


def test_check_choice_rejects_each_misreading_and_accepts_the_explanation():
    for f in FAILURES:
        right = quiz.check_choice(f.number, f.explanation)
        assert right.correct and right.startswith(f"Right. {f.explanation}")
        if f.notebook:
            assert failures.link(f) in right
        for wrong in f.misreadings:
            v = quiz.check_choice(f.number, wrong)
            assert not v.correct, (f.number, wrong)
            assert "misreading of this mistake" in v
            assert "same family" not in v and "Right" not in v
            assert f.explanation not in v and wrong not in v
            assert all(m not in v for m in f.misreadings)
    assert not quiz.check_choice(5, None).correct
    assert "not one of the three" in quiz.check_choice(5, failures.failure(30).explanation)
    assert "not one of the three" in quiz.check_choice(5, failures.failure(6).misreadings[0])
    assert "Measured: recorded on" in quiz.check_choice(25, failures.failure(25).explanation)
    assert "(Not measured in this course.)" in quiz.check_choice(16, failures.failure(16).explanation)


@pytest.mark.parametrize("number, says", [
    (1, "64 kernels launched against 1"), (2, "through 132 SMs"), (3, "started before the block one below them"),
    (4, "2 tiles per block"), (13, "the same access pattern at twice the working set"), (19, "wrong in 10 of 10 runs"),
    (23, "against the datasheet's 4.8 TB/s"), (24, "never crossed HBM"), (27, "splitK"), (28, "warps active 14.0%"),
    (29, "MHz maximum"), (30, "cudnn"), (33, "never crossed HBM"),
    (15, "strides (0, 1) over 32,768 B"),
])
def test_evidence_shows_the_number_that_decides_the_mistake(number, says):
    text = failure_records.evidence(failures.failure(number))
    assert "Deciding number:" in text and says in text, text


def test_failures_15_24_and_33_are_demonstrated_and_none_is_both_cited_and_unmeasured():
    shown = {f.number for f in failures.demonstrated()}
    assert {15, 24, 33} <= shown
    assert {r["#"] for r in failures.undemonstrated_rows()} == {11, 16, 35}
