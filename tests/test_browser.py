"""The calculators as a learner meets them: JupyterLab in headless Chromium.

Starts JupyterLab from this venv (COURSE_MODE=replay, random token, free localhost port,
log in test-artifacts/jupyterlab-server.log), opens a copy of a notebook, clicks
Run > Run All Cells, then moves the calculator's controls and checks that the rendered
answer follows the model in course_lib. Screenshots land in test-artifacts/.

Needs Chromium at /usr/bin/chromium (scripts/install_browser_deps.sh installs it): without
it the tests skip, except under CI=true, where they fail.

    .venv/bin/python -m pytest tests/test_browser.py -v -s
    .venv/bin/python -m pytest tests/test_browser.py -k minimal     # the fast smoke test only

To add another notebook's calculator, append a CalculatorCase to CALCULATORS: the notebook,
a control label only that calculator has, a slider to nudge, and optionally a scenario.
"""
from __future__ import annotations

import re

import pytest

from browser_support import (ARTIFACTS, NOTEBOOKS, WIDGET_UPDATE_TIMEOUT_S, CalculatorCase, LabNotebook,
                             LabServer, copy_notebook, require_chromium, write_notebook)

pytestmark = pytest.mark.browser

UPDATE_MS = WIDGET_UPDATE_TIMEOUT_S * 1000


# --------------------------------------------------------------------------- the roofline calculator

def roofline_expected(n: int, dtype: str) -> dict[str, str]:
    """What render_estimate shows for the lesson's B200, formatted as in course_lib/widgets.py."""
    from course_lib.roofline import square_gemm
    from course_lib.widgets import LESSON_B200

    e = square_gemm(n, dtype, LESSON_B200)
    return {".course-intensity": f"{e.bound.intensity:,.1f}",
            ".course-ridge": f"{e.ridge:,.1f}",
            ".course-binding": e.bound.binding_roof,
            ".course-crossover": f"{e.crossover_n:,.0f}"}


def expect_roofline(calc, n: int, dtype: str, after: str) -> None:
    from playwright.sync_api import expect

    for selector, text in roofline_expected(n, dtype).items():
        expect(calc.locator(selector),
               f"after {after}: {selector} should show the model's value for N={n}, {dtype}").to_have_text(
            text, timeout=UPDATE_MS)


def roofline_scenario(nb: LabNotebook, calc) -> None:
    """Type N, pick a dtype, move the slider, type a bad N: the answer follows the model."""
    from playwright.sync_api import expect

    from course_lib.widgets import CALC_DTYPES, LESSON_B200

    gpu = nb.control(calc, "widget-dropdown", "GPU")
    dtype = nb.control(calc, "widget-dropdown", "dtype")
    n_box = nb.control(calc, "widget-text", "N =")
    slider = nb.control(calc, "widget-hslider", "N")
    answer = calc.locator(".course-calc-answer")

    expect(gpu, "the GPU dropdown should start on the lesson's B200").to_have_value(LESSON_B200.name)
    # The initial answer, for whatever N and dtype the notebook starts the calculator with.
    n0 = int(n_box.input_value())
    dtype_of_label = dict(CALC_DTYPES)
    d0 = dtype_of_label[dtype.input_value()]
    expect_roofline(calc, n0, d0, f"Run All Cells (N={n0}, {d0})")
    initial_intensity = calc.locator(".course-intensity").inner_text()

    # 1. Type N = 512 into the text box and press Enter; the slider follows.
    nb.type_into(calc, "N =", 512)
    expect_roofline(calc, 512, d0, "typing N = 512 into the 'N =' box")
    expect(slider, "the N slider should follow the text box").to_have_attribute(
        "aria-valuenow", re.compile(r"^512(\.0*)?$"), timeout=UPDATE_MS)
    if n0 != 512:
        assert calc.locator(".course-intensity").inner_text() != initial_intensity

    # 2. Pick fp8 in the dtype dropdown.
    dtype.select_option(label="fp8")
    expect_roofline(calc, 512, "fp8", "choosing dtype fp8")

    # 3. Move the slider itself one step (keyboard on the handle: +16); the text box follows.
    before = answer.inner_text()
    nb.nudge_slider(calc, "N", "ArrowRight")
    expect(n_box, "the 'N =' box should follow the slider").to_have_value("528", timeout=UPDATE_MS)
    expect_roofline(calc, 528, "fp8", "moving the N slider one step right from 512")
    assert answer.inner_text() != before, "moving the slider did not change the answer"

    # 4. A bad N gives a message, not a traceback.
    nb.type_into(calc, "N =", 0)
    error = calc.locator(".course-calc-answer .course-calc-error")
    expect(error, "typing N = 0 should show .course-calc-error").to_be_visible(timeout=UPDATE_MS)
    expect(error).to_contain_text("N must be at least 1")
    expect(calc.locator(".course-intensity"), "no intensity should be shown for N = 0").to_have_count(0)


# Each row: a notebook's calculator. The generic part (run all, find, nudge the slider, look
# for widget errors, screenshot) runs for every row; scenario adds learner steps with model checks.
CALCULATORS = [
    CalculatorCase(id="01_roofline", notebook="01_roofline.ipynb", anchor="N =", slider="N",
                   screenshot="roofline_calculator.png", scenario=roofline_scenario),
]

# The tiny notebook of the smoke test: the widget on its own, outside any lesson notebook.
MINIMAL = CalculatorCase(id="minimal", notebook="minimal_calculator.ipynb", anchor="N =", slider="N",
                         screenshot="minimal_calculator.png", scenario=roofline_scenario)
MINIMAL_SOURCES = ["from course_lib.widgets import roofline_calculator",
                   "calc = roofline_calculator(); calc"]


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def chromium() -> str:
    return require_chromium()


@pytest.fixture(scope="module")
def lab_server(chromium, tmp_path_factory, request):
    root = tmp_path_factory.mktemp("lab-root")
    server = LabServer(root_dir=root, state_dir=tmp_path_factory.mktemp("lab-state"),
                       log_path=ARTIFACTS / "jupyterlab-server.log")
    request.addfinalizer(server.stop)
    return server.start()


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    from browser_support import CHROMIUM_ARGS

    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
    except Exception:
        pw.stop()
        raise
    yield b
    b.close()
    pw.stop()


# --------------------------------------------------------------------------- the harness

def drive_calculator(browser, server: LabServer, notebook_path, case: CalculatorCase) -> None:
    nb = LabNotebook(browser, server, notebook_path)
    try:
        nb.open()
        nb.run_all_cells()
        calc = nb.calculator(case)          # waits for the answer to render
        nb.wait_all_cells_ran()             # every cell ran, none raised
        if case.scenario is not None:
            case.scenario(nb, calc)
        before = nb.answer_text(calc, case)
        nb.nudge_slider(calc, case.slider, "ArrowRight")
        nb.wait_answer_changes(calc, case, before, f"moving the {case.slider!r} slider one step")
        shot = nb.screenshot(calc, case.screenshot)
        print(f"\n{case.id}: screenshot {shot}")
        nb.assert_no_widget_errors()
        noise = [f"[{t}] {m}" for t, m in nb.console if t in ("error", "warning", "pageerror")]
        if noise:  # not widget trouble (that failed above), but worth seeing with -s
            print(f"{case.id}: other browser console errors/warnings:\n  " + "\n  ".join(noise))
    except BaseException:
        shot = nb.failure_screenshot(f"{case.id}-failure.png")
        print(f"\n{case.id} failed; page screenshot: {shot}; server log: {server.log_path}")
        print("browser console:\n  " + "\n  ".join(f"[{t}] {m}" for t, m in nb.console))
        raise
    finally:
        nb.close()


def lab(request) -> tuple:
    """(browser, server), after the Chromium check.

    The check runs in the test itself, not in a fixture, so that a missing Chromium under
    CI=true reports as a FAILED test (a fixture would report an ERROR), and a learner's
    machine without Chromium reports SKIPPED before any server starts.
    """
    require_chromium()
    return request.getfixturevalue("browser"), request.getfixturevalue("lab_server")


@pytest.mark.parametrize("case", CALCULATORS, ids=lambda c: c.id)
def test_calculator_in_notebook(request, case: CalculatorCase):
    browser, server = lab(request)
    src = NOTEBOOKS / case.notebook
    assert src.exists(), f"{src.relative_to(NOTEBOOKS.parent)} does not exist (the browser test drives its calculator)"
    copy = copy_notebook(src, server.root_dir)  # the repository's notebook is never touched
    drive_calculator(browser, server, copy, case)


def test_calculator_renders_in_minimal_notebook(request):
    """Smoke test: a two-cell notebook that only displays the calculator."""
    browser, server = lab(request)
    nb = write_notebook(server.root_dir / MINIMAL.notebook, MINIMAL_SOURCES)
    drive_calculator(browser, server, nb, MINIMAL)
