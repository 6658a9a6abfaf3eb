from course_lib.exercises import roofline, your_gpu
from course_lib.measure.evidence import Case


def test_ridge_check():
    assert roofline.check_ridge("h100-sxm", "bf16", 295).correct
    assert not roofline.check_ridge("h100-sxm", "bf16", 250).correct
    assert "prefixes" in roofline.check_ridge("h100-sxm", "bf16", 0.295)
    assert not roofline.check_ridge("h100-sxm", "bf16", None).correct
    assert not roofline.check_ridge("h100-sxm", "bf16", "lots").correct


def _working(q: "roofline.GemmQuestion", roof: str) -> dict:
    b = {"bf16": 2, "fp8": 1, "fp32": 4}[q.dtype]
    flop, moved = 2 * q.m * q.n * q.k, b * (q.m * q.k + q.k * q.n + q.m * q.n)
    return {"flop": flop, "bytes": moved, "intensity": flop / moved, "roof": roof}


def test_binding_roof_check_wants_the_working_not_only_the_label():
    labels = {q: roofline.binding_roof(q) for q in roofline.BINDING_QUESTIONS}
    assert list(labels.values()) == ["memory", "compute", "memory", "compute"]   # the datasheets' verdicts
    right = {q: _working(roofline.BINDING_QUESTIONS[q], labels[q]) for q in labels}
    assert roofline.check_binding_roof(right).correct
    # Labels alone, even the right ones, pass nothing: the check wants F, Q and the intensity too.
    verdict = roofline.check_binding_roof(labels)
    assert not verdict.correct and "not answered" in verdict
    assert not roofline.check_binding_roof({q: {"roof": a} for q, a in labels.items()}).correct
    # A flipped label behind right numbers is named for that shape only.
    q = next(iter(right))
    flipped = right | {q: right[q] | {"roof": "compute"}}
    verdict = roofline.check_binding_roof(flipped)
    assert not verdict.correct and verdict.count("roof:") == 1 and q in verdict
    # The usual slips: C left out of the bytes, fp8 counted at 2 bytes, the intensity of the wrong pair.
    no_c = right | {q: right[q] | {"bytes": right[q]["bytes"] - 2 * 64 * 4096}}
    assert "bytes:" in roofline.check_binding_roof(no_c)
    fp8 = next(k for k, v in roofline.BINDING_QUESTIONS.items() if v.dtype == "fp8")
    assert "bytes:" in roofline.check_binding_roof(right | {fp8: right[fp8] | {"bytes": 2 * right[fp8]["bytes"]}})
    assert "intensity:" in roofline.check_binding_roof(right | {q: right[q] | {"intensity": 1 / right[q]["intensity"]}})
    assert not roofline.check_binding_roof({}).correct
    assert not roofline.check_binding_roof("compute").correct


def test_crossover_check():
    assert roofline.check_crossover("h200", "fp8", 618).correct
    assert not roofline.check_crossover("h200", "fp8", 206).correct


def test_bandwidth_check():
    case = Case("c", {}, "k", [1e-3] * 20, 0, 3e9, {})
    assert your_gpu.check_bandwidth(case, 3000).correct
    assert not your_gpu.check_bandwidth(case, 3).correct


def test_timing_prediction_needs_all_three_and_rejects_a_host_timer_scaled_with_the_size():
    from course_lib.measure import experiments

    timing, copies = experiments.run("timing.measuring_correctly"), experiments.run("machine.copy_bandwidth")
    big = [c for c in timing.cases if c.params["sizes"] > 1e6]
    events = next(c for c in big if c.name.startswith("CUDA events, GPU held"))
    host = next(c for c in big if c.name.startswith("host timer, no sync"))
    copy = copies.case("course copy_vec4")
    # worked out by hand from the cases, not by the checker's own function
    right = {"events µs": 2 * events.median_s * 1e6, "host timer µs": host.median_s * 1e6,
             "smallest n": copy.bandwidth_bytes_per_s * host.median_s / 12}
    assert your_gpu.check_timing_prediction(events, host, copy, right).correct
    assert your_gpu.check_timing_prediction(events, host, copy, {**right, "events µs": 2.1 * events.median_s * 1e6}).correct
    # the answers the page prints are not the answers asked for
    assert not your_gpu.check_timing_prediction(events, host, copy, {**right, "events µs": events.median_s * 1e6}).correct
    scaled = your_gpu.check_timing_prediction(events, host, copy, {**right, "host timer µs": 2 * host.median_s * 1e6})
    assert not scaled.correct and "wait for the work" in scaled
    assert not your_gpu.check_timing_prediction(events, host, copy, {**right, "smallest n": 2 ** 25}).correct
    assert not your_gpu.check_timing_prediction(events, host, copy, {**right, "smallest n": None}).correct
    assert not your_gpu.check_timing_prediction(events, host, copy, {}).correct
    assert not your_gpu.check_timing_prediction(events, host, copy, "events").correct


def test_binding_questions_are_shapes_the_notebook_does_not_show():
    notebook = (__import__("pathlib").Path(__file__).parent.parent / "notebooks" / "01_roofline.md").read_text()
    for question in roofline.BINDING_QUESTIONS:
        assert question not in notebook.split("## Exercises")[0]
    # the fp8 B200 shape is the trap: fp8 doubles the ridge and the intensity alike, and it stays memory-bound
    assert roofline.binding_roof("fp8 GEMM M=256, N=K=8192 on a B200") == "memory"


def test_intensity_limit_check():
    assert roofline.check_intensity_limit(4096, 4096, "bf16", 2048).correct
    assert roofline.check_intensity_limit(4096, 4096, "bf16", 2040).correct
    wrong = roofline.check_intensity_limit(4096, 4096, "bf16", 1365.33)   # the M = 4096 row the page prints
    assert not wrong.correct and "M = 4096" in wrong
    assert not roofline.check_intensity_limit(4096, 4096, "bf16", 4096).correct
    assert not roofline.check_intensity_limit(4096, 4096, "bf16", None).correct
    assert not roofline.check_intensity_limit(4096, 4096, "bf16", "large").correct


def test_m_crossover_check():
    # solved by hand: M = b·K·N / (2NK / ridge − b(N + K)), ridge = 989.4 / 4.8
    ridge = 989.4e12 / 4.8e12
    want = 2 * 4096 * 4096 / (2 * 4096 * 4096 / ridge - 2 * 8192)
    assert 228 < want < 231
    assert roofline.check_m_crossover("h200", "bf16", 4096, 4096, want).correct
    assert roofline.check_m_crossover("h200", "bf16", 4096, 4096, 229).correct
    square = roofline.check_m_crossover("h200", "bf16", 4096, 4096, 618)   # the square crossover
    assert not square.correct and "square" in square
    assert not roofline.check_m_crossover("h200", "bf16", 4096, 4096, 206).correct   # the ridge itself
    assert not roofline.check_m_crossover("h200", "bf16", 4096, 4096, None).correct
    # a layer too thin ever to be compute-bound: no M suffices
    assert roofline.m_crossover("h200", "bf16", 64, 64) == float("inf")
    assert not roofline.check_m_crossover("h200", "bf16", 64, 64, 1000).correct
    assert roofline.check_m_crossover("h200", "bf16", 64, 64, "never").correct
