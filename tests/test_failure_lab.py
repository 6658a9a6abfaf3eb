"""Notebook 11 without a GPU: the capstone's checks, the quiz widget, and the record's analysis."""

import html

import pytest

from course_lib.exercises import failure_lab as failure_checks
from course_lib.exercises.failure_lab import (
    CLEARED,
    SUSPECTS,
    check_diagnosis,
    check_lower_bound,
    mystery_lower_bound_s,
)
from course_lib.exercises.kernel import catalog
from course_lib.labs import failure_lab as lf
from course_lib.measure import experiments
from course_lib.models import failures
from course_lib.widgets.failure_lab import LETTERS, failure_quiz


@pytest.fixture(autouse=True)
def replay(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "replay")


@pytest.fixture(scope="module")
def mystery():
    import os
    os.environ["COURSE_MODE"] = "replay"
    return experiments.run("failures.mystery")


def test_the_diagnosis_needs_every_defect_and_no_innocent_suspect():
    assert check_diagnosis(set(catalog.MYSTERY_DEFECTS)).correct
    assert check_diagnosis({d.upper() for d in catalog.MYSTERY_DEFECTS}).correct
    partial = check_diagnosis({"too little parallelism", "edges"})
    assert not partial.correct and "3 still hidden" in partial
    assert "local memory" not in partial and "uncoalesced" not in partial      # the hidden ones are not named
    framed = check_diagnosis(set(catalog.MYSTERY_DEFECTS) | {"bank conflicts"})
    assert not framed.correct and "1 of your 6 suspects are innocent" in framed
    everyone = check_diagnosis(set(SUSPECTS))          # naming every suspect learns nothing
    assert not everyone.correct and not any(d in everyone for d in catalog.MYSTERY_DEFECTS + tuple(CLEARED))
    solved = check_diagnosis(set(catalog.MYSTERY_DEFECTS))
    assert all(f"{name}: {why}" in solved for name, why in CLEARED.items())   # the innocent explained at the end
    assert not check_diagnosis(None).correct
    unknown = check_diagnosis({"cosmic rays"})
    assert not unknown.correct and "cosmic rays" in unknown
    assert set(SUSPECTS) == set(catalog.MYSTERY_DEFECTS) | set(CLEARED)


def test_the_lower_bound_is_the_compulsory_bytes_at_the_copy_bandwidth_of_the_same_run(mystery):
    copy = next(c for c in mystery.cases if c.kernel == "elementwise.copy_vec4")
    rows, cols = mystery.params["shape"]
    want = (2 * rows * cols * 4 + cols * 4) / (copy.bytes / copy.median_s)
    assert mystery_lower_bound_s(mystery) == pytest.approx(want)
    assert check_lower_bound(mystery, want).correct
    assert not check_lower_bound(mystery, 2 * want).correct
    assert "microseconds" in check_lower_bound(mystery, want * 1e6)
    assert not check_lower_bound(mystery, None).correct


def test_the_record_holds_what_the_notebook_says(mystery):
    rows = {r["kernel"]: r for r in lf.diagnosis_rows(mystery)}
    given, solution = rows[lf.AS_GIVEN], rows[lf.SOLUTION]
    assert given["blocks"] == 64 and given["SM busy (avg/max cycles)"] < 0.6
    assert 16 <= given["sectors per load request"] <= 17          # 32 for x, 1 for the broadcast weight
    assert given["local sectors (ld+st)"] > 1e6 and given["% of copy"] < 15
    assert solution["blocks"] == 2048 and solution["SM busy (avg/max cycles)"] > 0.9
    assert solution["local sectors (ld+st)"] == 0 and 65 <= solution["% of copy"] <= 85
    assert rows[lf.LOCAL_ROW]["median (µs)"] > rows[lf.SCALAR_FIX]["median (µs)"]
    assert rows["course rmsnorm_one_pass"]["% of copy"] > solution["% of copy"]
    host = lf.diagnosis_rows(mystery, only=(lf.AS_GIVEN,), with_host_timer=True)
    assert len(host) == 2 and host[1]["% of copy"] > 100                  # the colleague's impossible number
    multiple, one_more = lf.edge_rows(mystery)
    assert multiple["floats written past the end"] == 0 and one_more["floats written past the end"] > 0
    lines = lf.sanitizer_lines(mystery)
    assert any("Invalid __global__" in ln for ln in lines[f"memcheck: {lf.AS_GIVEN}"])
    assert any("0 errors" in ln for ln in lines[f"memcheck: {lf.SOLUTION}"])
    assert any("Race reported" in ln for ln in lines["racecheck of notebook 05's transpose, no barrier"])


def test_the_quiz_widget_checks_the_chosen_letter_and_shows_the_evidence():
    quiz = failure_quiz("resources")
    assert [n for _, n in quiz.number.options] == [f.number for f in failures.by_family("resources")]
    quiz.number.value = 7
    right = LETTERS[failure_checks.choices(7).index(failures.failure(7).explanation)]
    wrong = next(x for x in LETTERS if x != right)
    quiz.answer.value = wrong
    quiz._check()
    assert quiz.verdict.value.startswith("<p>✘") and "misreading" in quiz.verdict.value
    assert "Right" not in quiz.verdict.value
    offered = quiz.options.value
    assert all(html.escape(m) in offered for m in failures.failure(7).misreadings)
    quiz.answer.value = right
    quiz._check()
    assert "✔ Right" in quiz.verdict.value and "occupancy.register_spill" in quiz.verdict.value
    assert 'href="03_occupancy.ipynb#' in quiz.verdict.value
    quiz._show()
    quiz._check()
    assert "Not answered" in quiz.verdict.value
    quiz.family.value = "roofline and measurement"
    assert quiz.number.value == 22 and "Mistake 22" in quiz.mistake.value
    with pytest.raises(ValueError, match="unknown family"):
        failure_quiz("caching")


def test_the_compile_report_comes_from_the_record_where_nvrtc_is_missing(mystery, monkeypatch):
    here = lf.compile_report(mystery)
    assert "4,096 B stack frame" in here and "recorded" not in here
    def no_nvrtc(*args):
        raise ValueError("Not compiled: NVRTC's Python bindings are missing")
    monkeypatch.setattr(type(lf.MYSTERY_RMS_NORM), "resources", no_nvrtc)
    recorded = lf.compile_report(mystery)
    assert "4,096 B stack frame" in recorded and "NVRTC is not installed here" in recorded


def test_family_scenarios_accept_the_right_families_and_reveal_no_scenario_when_wrong():
    from course_lib.exercises.failure_lab import FAMILY_SCENARIOS, check_families
    from course_lib.models.failures import FAMILIES

    right = dict(FAMILY_SCENARIOS)
    assert check_families(right).correct
    assert not check_families(None).correct and not check_families({}).correct
    one_wrong = {**right, next(iter(right)): "execution model"}
    verdict = check_families(one_wrong)
    assert not verdict.correct and f"{len(right) - 1} of {len(right)}" in verdict
    assert not any(s[:30] in verdict for s in FAMILY_SCENARIOS)   # which one is wrong stays unsaid
    assert "Not a family" in check_families({**right, next(iter(right)): "memory"})
    assert not check_families({s: f for s, f in list(right.items())[:2]}).correct
    assert set(FAMILY_SCENARIOS.values()) == set(FAMILIES)   # every family is asked about


LIVE_VERDICT = """Compiled for sm_90 (13.0): 31 registers/thread, 0 B static shared memory, no spills.
  ✔ too little parallelism: 2,048 blocks
  1×1: correct
  3×1025: correct
  257×1000: correct
  1000×33: correct
  9×256 (values ×0.0001): correct
  4097×1024: correct
  16384×1024: correct
  77×4099: correct
  5×9001: correct
  33×1024 (in, weight and out 4 bytes past 16-byte alignment): correct
  ✔ Counted by Nsight Compute: the global loads asked for 268.5 MB in 8,390,656 sectors of 32 B (268.5 MB), so they use 100.0% of each sector they touch (sm__sass_data_bytes_mem_global_op_ld over 32 × l1tex__t_sectors_pipe_lsu_mem_global_op_ld).
Timed at 16384×4096: yours 209.7 µs, the course's fusion.rmsnorm_one_pass 135.0 µs for the same bytes (medians of 20, CUDA events, GPU held).
  ✔ compute-sanitizer memcheck at 1×1, 3×1025, 257×1000: no errors.
  ✔ compute-sanitizer racecheck at 1×1, 3×1025, 257×1000: no errors.
Correct."""


def test_the_publish_gate_keeps_a_replayed_fix_unmeasured(mystery):
    from course_lib.exercises.failure_lab import GATES, publish_gate

    rows = publish_gate(LIVE_VERDICT, mystery)          # replay mode: nothing measured here
    assert [r["gate"] for r in rows] == list(GATES)
    assert {r["status"] for r in rows[4:]} == {"not measured"}
    assert all(r["status"] == "passes" for r in rows[:4])


def test_the_publish_gate_passes_a_live_fix_and_fails_what_is_missing(mystery, monkeypatch):
    from course_lib.core import runtime
    from course_lib.exercises.failure_lab import publish_gate

    monkeypatch.setattr(runtime, "mode", lambda: "live")
    assert all(r["status"] == "passes" for r in publish_gate(LIVE_VERDICT, mystery))
    no_sanitizer = "\n".join(ln for ln in LIVE_VERDICT.splitlines() if "compute-sanitizer" not in ln)
    assert [r["status"] for r in publish_gate(no_sanitizer, mystery)].count("fails") == 1
    too_fast = LIVE_VERDICT.replace("yours 209.7 µs", "yours 10.1 µs")          # under the bound: a wrong timer
    last = publish_gate(too_fast, mystery)[-1]
    assert last["status"] == "fails" and "below the bound" in last["evidence"]
    wrong = LIVE_VERDICT.replace("77×4099: correct", "77×4099: WRONG. row 3")
    assert publish_gate(wrong, mystery)[5]["status"] == "fails"


def test_the_models_cell_judges_the_learners_numbers_and_models_them_not_the_answer():
    from course_lib.core.hardware import spec
    from course_lib.exercises.failure_lab import check_models

    gpu = spec("NVIDIA H200")
    assert not check_models(gpu, None, None).correct
    right = check_models(gpu, 64, [4 * 1024 * t for t in range(32)])
    assert right.correct and "68 SMs with no block" in right and "32 sectors for 128 useful bytes" in right
    coalesced = check_models(gpu, 64, [4 * t for t in range(32)])   # the template's old default: one row per warp
    assert not coalesced.correct and "✔ right: the blocks" in coalesced and "✘ not right: the 32 addresses" in coalesced
    assert "4 sectors for 128 useful bytes" in coalesced          # the model of what was entered, not of the answer
    assert "cannot take that" in check_models(gpu, 64, [0, 4])
