from course_lib.exercises import roofline, your_gpu
from course_lib.measure.evidence import Case


def test_ridge_check():
    assert roofline.check_ridge("h100-sxm", "bf16", 295).correct
    assert not roofline.check_ridge("h100-sxm", "bf16", 250).correct
    assert "prefixes" in roofline.check_ridge("h100-sxm", "bf16", 0.295)
    assert not roofline.check_ridge("h100-sxm", "bf16", None).correct
    assert not roofline.check_ridge("h100-sxm", "bf16", "lots").correct


def test_binding_roof_check():
    right = {q: roofline.binding_roof(q) for q in roofline.BINDING_QUESTIONS}
    assert set(right.values()) == {"memory", "compute"}
    assert roofline.check_binding_roof(right).correct
    flipped = {q: {"memory": "compute", "compute": "memory"}[a] for q, a in right.items()}
    assert not roofline.check_binding_roof(flipped).correct
    one_wrong = dict(right)
    q = next(iter(one_wrong))
    one_wrong[q] = "memory" if right[q] == "compute" else "compute"
    verdict = roofline.check_binding_roof(one_wrong)
    assert not verdict.correct and "1 of the" in verdict and q not in verdict   # how many, not which
    assert not roofline.check_binding_roof({}).correct
    assert not roofline.check_binding_roof("compute").correct


def test_crossover_check():
    assert roofline.check_crossover("h200", "fp8", 618).correct
    assert not roofline.check_crossover("h200", "fp8", 206).correct


def test_bandwidth_check():
    case = Case("c", {}, "k", [1e-3] * 20, 0, 3e9, {})
    assert your_gpu.check_bandwidth(case, 3000).correct
    assert not your_gpu.check_bandwidth(case, 3).correct


def test_timing_sanity_needs_both_bandwidths_and_the_possible_one():
    from course_lib.measure import experiments

    timing, copies = experiments.run("timing.measuring_correctly"), experiments.run("machine.copy_bandwidth")
    big = [c for c in timing.cases if c.params["sizes"] > 1e6]
    events = next(c for c in big if c.name.startswith("CUDA events, GPU held"))
    host = next(c for c in big if c.name.startswith("host timer, no sync"))
    copy = copies.case("course copy_vec4")
    right = {"events GB/s": events.bytes / events.median_s / 1e9, "host timer GB/s": host.bytes / host.median_s / 1e9,
             "possible": "events"}
    assert your_gpu.check_timing_sanity(events, host, copy, right).correct
    assert not your_gpu.check_timing_sanity(events, host, copy, {**right, "possible": "host timer"}).correct
    assert not your_gpu.check_timing_sanity(events, host, copy, {**right, "events GB/s": 1.0}).correct
    assert not your_gpu.check_timing_sanity(events, host, copy, {}).correct
    assert not your_gpu.check_timing_sanity(events, host, copy, {**right, "possible": "both"}).correct
