from course_lib import exercises
from course_lib.evidence import Case


def test_ridge_check():
    assert exercises.check_ridge("h100-sxm", "bf16", 295).correct
    assert not exercises.check_ridge("h100-sxm", "bf16", 250).correct
    assert "prefixes" in exercises.check_ridge("h100-sxm", "bf16", 0.295)
    assert not exercises.check_ridge("h100-sxm", "bf16", None).correct
    assert not exercises.check_ridge("h100-sxm", "bf16", "lots").correct


def test_binding_roof_check():
    right = {q: exercises.binding_roof(q) for q in exercises.BINDING_QUESTIONS}
    assert set(right.values()) == {"memory", "compute"}
    assert exercises.check_binding_roof(right).correct
    flipped = {q: {"memory": "compute", "compute": "memory"}[a] for q, a in right.items()}
    assert not exercises.check_binding_roof(flipped).correct
    assert not exercises.check_binding_roof({}).correct
    assert not exercises.check_binding_roof("compute").correct


def test_crossover_check():
    assert exercises.check_crossover("h200", "fp8", 618).correct
    assert not exercises.check_crossover("h200", "fp8", 206).correct


def test_bandwidth_check():
    case = Case("c", {}, "k", [1e-3] * 20, 0, 3e9, {})
    assert exercises.check_bandwidth(case, 3000).correct
    assert not exercises.check_bandwidth(case, 3).correct
