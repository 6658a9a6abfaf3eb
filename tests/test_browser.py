"""The calculators as a learner meets them: JupyterLab in headless Chromium.

Starts JupyterLab from this venv (COURSE_MODE=replay, random token, free localhost port,
log in test-artifacts/jupyterlab-server.log), opens a copy of a notebook, clicks
Run > Run All Cells, then moves the calculator's controls and checks that the rendered
answer follows the model in course_lib. Screenshots land in test-artifacts/.

Needs Chromium at /usr/bin/chromium (scripts/install_browser_deps.sh installs it): without
it the tests skip, except under CI=true, where they fail.

    .venv/bin/python -m pytest tests/test_browser.py -v -s
    .venv/bin/python -m pytest tests/test_browser.py -k minimal     # the fast smoke test only

Every notebook's calculator has a row in CALCULATORS. For each, the harness: runs all cells,
finds the calculator by a control label only it has, checks the answer against the course_lib
model (where the row has one), makes one learner move (a slider key, typing into a box + Enter,
a dropdown option or a toggle button) and checks that the answer changed and again equals the
model for the new input, screenshots the calculator, and fails on "Error displaying widget",
a "Loading widget..." left behind, or widget-model errors in the console or server log.

To add another notebook's calculator, append a CalculatorCase to CALCULATORS: the notebook,
a control label only that calculator has, the Move to make (slider/typed/choose/toggle), and
optionally a model check (a function that reads the controls off the page and returns
{CSS selector: text} from course_lib, passed to LabNotebook.expect_model) and a scenario.
"""
from __future__ import annotations

import re
import time

import pytest
from browser_support import (
    ARTIFACTS,
    NOTEBOOKS,
    WIDGET_UPDATE_TIMEOUT_S,
    CalculatorCase,
    LabNotebook,
    LabServer,
    choose,
    copy_notebook,
    require_chromium,
    slider,
    toggle,
    typed,
    write_notebook,
)

pytestmark = pytest.mark.browser

UPDATE_MS = WIDGET_UPDATE_TIMEOUT_S * 1000
SAVED_VIEW_WORDS = "its controls answer once this cell has run"   # course_lib.widgets.base.SAVED_VIEW_NOTE


# --------------------------------------------------------------------------- the roofline calculator

def roofline_expected(n: int, dtype: str) -> dict[str, str]:
    """What render_estimate shows for the lesson's B200, formatted as in course_lib/widgets.py."""
    from course_lib.models.roofline import square_gemm
    from course_lib.widgets.roofline import ROUND_B200

    e = square_gemm(n, dtype, ROUND_B200)
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

    from course_lib.widgets.roofline import CALC_DTYPES, ROUND_B200

    gpu = nb.control(calc, "widget-dropdown", "GPU")
    dtype = nb.control(calc, "widget-dropdown", "dtype")
    n_box = nb.control(calc, "widget-text", "N =")
    slider = nb.control(calc, "widget-hslider", "N")
    answer = calc.locator(".course-calc-answer")

    expect(gpu, "the GPU dropdown should start on the lesson's B200").to_have_value(ROUND_B200.name)
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

    # 3. Move the slider itself one step (keyboard on the handle: +1); the text box follows.
    before = answer.inner_text()
    nb.nudge_slider(calc, "N", "ArrowRight")
    expect(n_box, "the 'N =' box should follow the slider").to_have_value("513", timeout=UPDATE_MS)
    expect_roofline(calc, 513, "fp8", "moving the N slider one step right from 512")
    assert answer.inner_text() != before, "moving the slider did not change the answer"

    # 3b. A typed N is taken as typed: 750, the crossover the notebook names, stays 750.
    nb.type_into(calc, "N =", 750)
    expect_roofline(calc, 750, "fp8", "typing N = 750")
    expect(slider, "the slider follows a typed N without snapping it").to_have_attribute(
        "aria-valuenow", re.compile(r"^750(\.0*)?$"), timeout=UPDATE_MS)

    # 4. A bad N gives a message, not a traceback.
    nb.type_into(calc, "N =", 0)
    error = calc.locator(".course-calc-answer .course-calc-error")
    expect(error, "typing N = 0 should show .course-calc-error").to_be_visible(timeout=UPDATE_MS)
    expect(error).to_contain_text("N must be at least 1")
    expect(calc.locator(".course-intensity"), "no intensity should be shown for N = 0").to_have_count(0)


def roofline_model(nb: LabNotebook, calc, after: str) -> None:
    from course_lib.widgets.roofline import CALC_DTYPES, ROUND_B200

    def expected():
        gpu = nb.read(calc, "widget-dropdown", "GPU")
        assert gpu == ROUND_B200.name, f"the roofline model check covers the lesson's B200 only, not {gpu!r}"
        dtype = dict(CALC_DTYPES)[nb.read(calc, "widget-dropdown", "dtype")]
        return roofline_expected(nb.read_int(calc, "N ="), dtype)

    nb.expect_model(calc, expected, after)


def error_expected(exc: Exception) -> dict[str, str]:
    """What error_html (course_lib/widgets.py) shows for a model's ValueError."""
    return {".course-calc-error": f"⚠ {exc}"}


# --------------------------------------------------------------------------- 02: launch geometry

GEOMETRY_BOXES = {"m": "M", "n": "N", "k": "K", "bm": "BM", "bn": "BN", "bk": "BK", "stride_row": "row stride",
                  "stride_col": "column stride", "pid": "program id", "stage": "stage (k0 = stage·BK)",
                  "threads": "threads/block", "warp": "warp"}


def geometry_model(nb: LabNotebook, calc, after: str) -> None:
    """render_geometry's spans (course_lib/widgets/threads_warps.py) from course_lib.models.launch_geometry."""
    from course_lib.models import launch_geometry as lg

    def expected():
        v = {key: nb.read_int(calc, label) for key, label in GEOMETRY_BOXES.items()}
        operand = nb.read(calc, "widget-toggle-buttons", "operand")
        try:
            grid = lg.tile_grid(v["m"], v["n"], v["bm"], v["bn"])
            tile, trace = lg.operand_trace(operand, v["m"], v["n"], v["k"], v["bm"], v["bn"], v["bk"],
                                           v["stride_row"], v["stride_col"], v["pid"], v["stage"], v["warp"],
                                           v["threads"])
        except ValueError as exc:
            return error_expected(exc)
        w = lg.summarize(trace)
        return {".course-grid-m": str(grid.tiles_m), ".course-grid-n": str(grid.tiles_n),
                ".course-blocks": f"{grid.blocks:,}", ".course-pid-m": str(tile.pid_m),
                ".course-pid-n": str(tile.pid_n), ".course-m0": str(tile.m0), ".course-n0": str(tile.n0),
                ".course-loading": str(w.loading), ".course-masked": str(w.masked), ".course-idle": str(w.idle),
                ".course-sectors": str(w.sectors)}

    nb.expect_model(calc, expected, after)


def geometry_scenario(nb: LabNotebook, calc) -> None:
    """Switch to operand B (its row stride becomes N), then type a program id past the grid."""
    from playwright.sync_api import expect

    from course_lib.models import launch_geometry as lg

    n = nb.read_int(calc, "N")
    nb.make(calc, toggle("operand", "B"))
    expect(nb.control(calc, "widget-text", "row stride"),
           "choosing operand B should set the row stride to N (row-major B is K × N)").to_have_value(
        str(n), timeout=UPDATE_MS)
    geometry_model(nb, calc, "choosing operand B")
    blocks = lg.tile_grid(nb.read_int(calc, "M"), n, nb.read_int(calc, "BM"), nb.read_int(calc, "BN")).blocks
    nb.make(calc, typed("program id", blocks))      # one past the last block: a message, not a traceback
    expect(calc.locator(".course-calc-error"), f"program id {blocks} should show .course-calc-error").to_contain_text(
        f"program id must be between 0 and {blocks - 1}", timeout=UPDATE_MS)
    geometry_model(nb, calc, f"typing program id {blocks}")


# --------------------------------------------------------------------------- 03: residency / occupancy

def residency_model(nb: LabNotebook, calc, after: str) -> None:
    """render_residency's spans (course_lib/widgets/occupancy.py) from course_lib.models.occupancy, for the
    SMs the calculator offers in replay mode (the lesson's SM and the spec table; not "custom")."""
    from course_lib.core.hardware import KIB
    from course_lib.models import occupancy as occ

    budgets = {b.name: b for b in (occ.ILLUSTRATIVE_SM, *occ.spec_budgets())}

    def expected():
        budget = budgets[nb.read(calc, "widget-dropdown", "SM")]
        smem_kib = float(nb.read(calc, "widget-text", "shared memory/block (KiB)"))
        try:
            if smem_kib < 0:
                raise ValueError(f"shared memory per block cannot be negative (got {smem_kib} KiB)")
            r = occ.residency(budget, nb.read_int(calc, "threads/block"), nb.read_int(calc, "registers/thread"),
                              int(round(smem_kib * KIB)))
        except ValueError as exc:
            return error_expected(exc)
        out = {".course-resident-blocks": str(r.resident_blocks), ".course-binding": r.limiter,
               ".course-active-warps": str(r.active_warps), ".course-occupancy": f"{100 * r.occupancy:.1f}%"}
        for limit, value in r.limits.items():
            out[f'.course-limit[data-limit="{limit}"]'] = "no limit" if value is None else str(value)
        return out

    nb.expect_model(calc, expected, after)


def residency_scenario(nb: LabNotebook, calc) -> None:
    """Pick a real SM (allocation granularity applies), then a course kernel (NVRTC fills its resources)."""
    from playwright.sync_api import expect

    nb.make(calc, choose("SM", "NVIDIA H200"))
    residency_model(nb, calc, "choosing SM NVIDIA H200")
    before = nb.read(calc, "widget-text", "registers/thread")
    nb.make(calc, choose("kernel", "transpose.transpose_tiled"))
    expect(calc.locator(".widget-html").filter(has_text="NVRTC for"),
           "choosing a kernel should show what NVRTC reports for it").to_be_visible(timeout=UPDATE_MS)
    expect(nb.control(calc, "widget-text", "registers/thread"),
           "choosing a kernel should fill registers/thread from NVRTC").not_to_have_value(before, timeout=UPDATE_MS)
    residency_model(nb, calc, "choosing kernel transpose.transpose_tiled")


# --------------------------------------------------------------------------- 04: sectors

def sector_model(nb: LabNotebook, calc, after: str) -> None:
    """render_sectors' spans (course_lib/widgets/coalescing.py) from course_lib.models.memory."""
    from course_lib.models import memory
    from course_lib.widgets.coalescing import SectorCalculator

    pattern_of, size_of = dict(SectorCalculator.PATTERNS), dict(SectorCalculator.SIZES)

    def expected():
        b = size_of[nb.read(calc, "widget-dropdown", "element")]
        try:
            c = memory.sector_count(memory.warp_addresses(
                pattern_of[nb.read(calc, "widget-dropdown", "pattern")], b, stride=nb.read_int(calc, "stride"),
                offset_bytes=nb.read_int(calc, "offset (B)"), shift=nb.read_int(calc, "shift"),
                active_lanes=nb.read_int(calc, "active lanes", "widget-hslider"), seed=nb.read_int(calc, "seed")), b)
        except ValueError as exc:
            return error_expected(exc)
        return {".course-sectors": str(c.n_sectors), ".course-fetched": f"{c.fetched_bytes:,}",
                ".course-lines": str(c.n_lines), ".course-requested": f"{c.requested_bytes:,}",
                ".course-active": str(c.active_lanes), ".course-efficiency": f"{100 * c.efficiency:.1f}"}

    nb.expect_model(calc, expected, after)


def sector_scenario(nb: LabNotebook, calc) -> None:
    """Unit stride, then shift the whole warp by 4 bytes: one more sector."""
    nb.make(calc, choose("pattern", "unit stride"))
    sector_model(nb, calc, "choosing pattern 'unit stride'")
    nb.make(calc, typed("offset (B)", 4))
    sector_model(nb, calc, "typing offset 4 B")


# --------------------------------------------------------------------------- 05: banks

def bank_model(nb: LabNotebook, calc, after: str) -> None:
    """render_banks' spans (course_lib/widgets/shared_memory.py) from course_lib.models.memory."""
    from course_lib.models import memory
    from course_lib.widgets.shared_memory import BankCalculator

    pattern_of, size_of = dict(BankCalculator.PATTERNS), dict(BankCalculator.SIZES)

    def expected():
        b = size_of[nb.read(calc, "widget-dropdown", "word")]
        try:
            r = memory.bank_conflicts(memory.shared_addresses(
                pattern_of[nb.read(calc, "widget-dropdown", "pattern")], b, stride=nb.read_int(calc, "stride"),
                pitch=nb.read_int(calc, "row pitch (elements)"), index=nb.read_int(calc, "row / col"),
                active_lanes=nb.read_int(calc, "active lanes", "widget-hslider"), seed=nb.read_int(calc, "seed")), b)
        except ValueError as exc:
            return error_expected(exc)
        return {".course-wavefronts": str(r.wavefronts), ".course-ideal": str(r.ideal_wavefronts),
                ".course-ways": str(r.ways), ".course-degree": f"{r.conflict_degree:.2f}"}

    nb.expect_model(calc, expected, after)


def bank_scenario(nb: LabNotebook, calc) -> None:
    """The lesson's fix: pad the row pitch to 33 and the column read is conflict-free; then 8-byte words."""
    from playwright.sync_api import expect

    nb.make(calc, typed("row pitch (elements)", 33))
    bank_model(nb, calc, "typing row pitch 33")
    if nb.read(calc, "widget-dropdown", "pattern") == "column of the tile" and \
            nb.read(calc, "widget-dropdown", "word") == "4 B (float)":
        expect(calc.locator(".course-wavefronts"), "a padded column of 4-byte words is one wavefront").to_have_text("1")
    nb.make(calc, choose("word", "8 B (double, float2)"))
    bank_model(nb, calc, "choosing 8-byte words")


# --------------------------------------------------------------------------- 06: GEMM tiles

TILE_BOXES = {"bm": "B_M", "bn": "B_N", "bk": "B_K", "stages": "stages", "threads": "threads",
              "outputs": "outputs/thread", "registers": "registers (0 = estimate)"}


def tile_model(nb: LabNotebook, calc, after: str) -> None:
    """render_tile's spans (course_lib/widgets_tiling.py) from course_lib.models.tiling, for the spec-table GPUs."""
    from course_lib.core.hardware import KIB, SPECS
    from course_lib.models import tiling

    gpus = {g.name: g for g in SPECS.values()}

    def expected():
        v = {key: nb.read_int(calc, label) for key, label in TILE_BOXES.items()}
        try:
            e = tiling.tile_estimate(v["bm"], v["bn"], v["bk"], v["stages"], nb.read(calc, "widget-dropdown", "dtype"),
                                     v["threads"], v["outputs"], gpus[nb.read(calc, "widget-dropdown", "GPU")],
                                     registers_per_thread=v["registers"] or None)
        except ValueError as exc:
            return error_expected(exc)
        out = {".course-stage-flop": f"{e.stage_flop:,}", ".course-stage-bytes": f"{e.stage_bytes:,.0f}",
               ".course-l2-intensity": f"{e.l2_intensity:,.1f}", ".course-smem-intensity": f"{e.smem_intensity:,.2f}",
               ".course-staging": f"{e.staging_bytes / KIB:,.1f} KiB",
               ".course-accumulator": f"{e.accumulator_bytes / KIB:,.1f} KiB",
               ".course-acc-regs": str(e.accumulator_registers_per_thread),
               ".course-registers": str(e.registers_per_thread),
               ".course-blocks": "—" if e.residency is None else str(e.residency.resident_blocks),
               ".course-fits": "fits" if e.fits else "does not fit"}
        if e.residency is not None:
            out[".course-occupancy"] = f"{100 * e.residency.occupancy:.1f}%"
        return out

    nb.expect_model(calc, expected, after)


def tile_scenario(nb: LabNotebook, calc) -> None:
    """The same tile on a T4 (64 KiB of shared memory per block): it still fits at 2 stages."""
    nb.make(calc, choose("GPU", "NVIDIA T4"))
    tile_model(nb, calc, "choosing GPU NVIDIA T4")


# --------------------------------------------------------------------------- 07: waves

WAVE_BOXES = {"m": "M", "n": "N", "bm": "BM", "bn": "BN", "split": "split-K", "resident": "resident blocks/SM"}


def wave_model(nb: LabNotebook, calc, after: str) -> None:
    """render_waves' spans (course_lib/widgets_waves.py) from course_lib.models.waves, for the spec-table GPUs."""
    from course_lib.core.hardware import SPECS
    from course_lib.models import waves

    sms = {g.name: g.sm_count for g in SPECS.values()}

    def expected():
        v = {key: nb.read_int(calc, label) for key, label in WAVE_BOXES.items()}
        try:
            q = waves.quantize(v["m"], v["n"], v["bm"], v["bn"], sms[nb.read(calc, "widget-dropdown", "GPU")],
                               v["resident"], v["split"])
        except ValueError as exc:
            return error_expected(exc)
        s = q.schedule
        return {".course-tiles": f"{q.grid.tiles:,}", ".course-blocks": f"{s.blocks:,}",
                ".course-waves": f"{s.waves:,}", ".course-last-wave": f"{s.last_wave_blocks:,}",
                ".course-useful": f"{100 * q.useful_fraction:.2f}%"}

    nb.expect_model(calc, expected, after)


def wave_scenario(nb: LabNotebook, calc) -> None:
    """Past a cliff: N = 4288 adds a fifth wave at 2 blocks per SM; then split-K 4 on a small output."""
    nb.make(calc, typed("N", 4288))
    wave_model(nb, calc, "typing N 4288")
    nb.make(calc, typed("M", 768))
    nb.make(calc, typed("N", 768))
    nb.make(calc, typed("split-K", 4))
    wave_model(nb, calc, "typing M = N = 768 and split-K 4")


# --------------------------------------------------------------------------- 10: the Hopper tile budget

HOPPER_BOXES = {"bm": "BM", "bn": "BN", "bk": "BK", "stages": "stages", "consumers": "consumer warpgroups"}


def hopper_model(nb: LabNotebook, calc, after: str) -> None:
    """render_budget's spans (course_lib/widgets/hopper_gemm.py) from course_lib.models.hopper, for the spec-table GPUs."""
    from course_lib.core.hardware import SPECS
    from course_lib.models import hopper

    gpus = {g.name: g for g in SPECS.values()}

    def expected():
        v = {key: nb.read_int(calc, label) for key, label in HOPPER_BOXES.items()}
        try:
            t = hopper.tile_budget(gpus[nb.read(calc, "widget-dropdown", "GPU")], v["bm"], v["bn"], v["bk"],
                                   v["stages"], v["consumers"],
                                   nb.read(calc, "widget-toggle-buttons", "setmaxnreg") == "on")
        except ValueError as exc:
            return error_expected(exc)
        out = {".course-smem": f"{t.smem_per_block_bytes:,}", ".course-fits": "fits",
               ".course-acc-regs": str(t.accumulator_registers), ".course-consumer-regs": str(t.consumer_registers),
               ".course-launch-regs": str(t.launch_registers), ".course-blocks": str(t.residency.resident_blocks),
               ".course-limiter": t.residency.limiter, ".course-l2-intensity": f"{t.l2_flop_per_byte:,.1f}",
               ".course-smem-intensity": f"{t.smem_flop_per_byte:,.1f}"}
        if t.setmaxnreg:
            out[".course-consumer-ceiling"] = str(t.consumer_ceiling)
        return out

    nb.expect_model(calc, expected, after)


def hopper_scenario(nb: LabNotebook, calc) -> None:
    """Rung 3's row (BN 128, no setmaxnreg: 90 registers), a B200, which has no wgmma (a message), and back."""
    from playwright.sync_api import expect

    nb.make(calc, typed("BN", 128))
    nb.make(calc, toggle("setmaxnreg", "off"))
    hopper_model(nb, calc, "typing BN 128, setmaxnreg off")
    expect(calc.locator(".course-launch-regs"), "rung 3's choice launches at 90 registers").to_have_text("90")
    nb.make(calc, choose("GPU", "NVIDIA B200"))
    expect(calc.locator(".course-calc-error"), "a B200 has no wgmma").to_contain_text("tcgen05", timeout=UPDATE_MS)
    nb.make(calc, choose("GPU", "NVIDIA H200"))
    nb.make(calc, typed("BN", 256))
    nb.make(calc, toggle("setmaxnreg", "on"))
    hopper_model(nb, calc, "back to rung 5's choice on the H200")


# Each row: a notebook's calculator. The generic part (run all, find, check the model, make the
# move, check the answer changed and follows the model, look for widget errors, screenshot) runs
# for every row; scenario adds learner steps (before the move) with model checks.
CALCULATORS = [
    CalculatorCase(id="01_roofline", notebook="01_roofline.ipynb", anchor="N =", move=slider("N"),
                   screenshot="roofline_calculator.png", model=roofline_model, scenario=roofline_scenario,
                   impossible=typed("N =", 10 ** 11)),
    CalculatorCase(id="02_launch_geometry", notebook="02_threads_warps.ipynb", anchor="program id",
                   move=typed("program id", 175), screenshot="launch_geometry_calculator.png",
                   model=geometry_model, scenario=geometry_scenario, impossible=typed("program id", -5)),
    CalculatorCase(id="03_residency", notebook="03_occupancy.ipynb", anchor="registers/thread",
                   move=typed("registers/thread", 128), screenshot="residency_calculator.png",
                   model=residency_model, scenario=residency_scenario, impossible=typed("registers/thread", 999)),
    CalculatorCase(id="04_sectors", notebook="04_coalescing.ipynb", anchor="offset (B)",
                   move=slider("active lanes", "ArrowLeft"), screenshot="sector_calculator.png",
                   model=sector_model, scenario=sector_scenario, impossible=typed("offset (B)", -4)),
    CalculatorCase(id="05_banks", notebook="05_shared_memory.ipynb", anchor="row pitch (elements)",
                   move=slider("active lanes", "ArrowLeft"), screenshot="bank_calculator.png",
                   model=bank_model, scenario=bank_scenario, impossible=typed("row pitch (elements)", 0)),
    # 5 stages on the T4 of the scenario: 80 KiB of staging, over its 64 KiB: "does not fit".
    CalculatorCase(id="06_tiles", notebook="06_gemm_ladder.ipynb", anchor="outputs/thread",
                   move=typed("stages", 5), screenshot="tile_calculator.png",
                   model=tile_model, scenario=tile_scenario, impossible=typed("stages", 0)),
    CalculatorCase(id="07_waves", notebook="07_waves.ipynb", anchor="resident blocks/SM",
                   move=typed("resident blocks/SM", 3), screenshot="wave_calculator.png",
                   model=wave_model, scenario=wave_scenario, impossible=typed("resident blocks/SM", 10 ** 11)),
    CalculatorCase(id="08_fusion", notebook="08_fusion.ipynb", anchor="FLOPs/element per op",
                   move=typed("N", 2048), screenshot="fusion_calculator.png", impossible=typed("M", 10 ** 11)),
    CalculatorCase(id="09_pipeline", notebook="09_async_pipelines.ipynb", anchor="load latency µs",
                   move=typed("compute µs", 3.0), screenshot="pipeline_calculator.png",
                   impossible=typed("load µs", -1)),
    # 5 slots of a 128×256×64 tile take 241 KiB, over the 227 KiB an H200 block may use: "does not fit".
    CalculatorCase(id="10_hopper_tile", notebook="10_hopper_gemm.ipynb", anchor="consumer warpgroups",
                   move=typed("stages", 3), screenshot="hopper_tile_calculator.png",
                   model=hopper_model, scenario=hopper_scenario, impossible=typed("stages", 5)),
    # batch 0 is no phase at all: the atlas answers with a message.
    CalculatorCase(id="12_layer_atlas", notebook="12_transformer_layer.ipynb",
                   anchor="tokens (prefill) / KV length (decode)", move=typed("batch", 64),
                   screenshot="layer_atlas_calculator.png", impossible=typed("batch", 0)),
]

# The tiny notebook of the smoke test: the widget on its own, outside any lesson notebook.
MINIMAL = CalculatorCase(id="minimal", notebook="minimal_calculator.ipynb", anchor="N =", move=slider("N"),
                         screenshot="minimal_calculator.png", model=roofline_model, scenario=roofline_scenario)
MINIMAL_SOURCES = ["from course_lib.widgets.roofline import roofline_calculator",
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
    from browser_support import CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

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
    (ARTIFACTS / f"{case.id}-failure.png").unlink(missing_ok=True)  # from an earlier failed run
    nb = LabNotebook(browser, server, notebook_path)
    try:
        nb.open()
        nb.run_all_cells()
        calc = nb.calculator(case)          # waits for the answer to render
        nb.wait_all_cells_ran()             # every cell ran, none raised
        nb.wait_widgets_settled()
        assert calc.locator(".course-saved-view").filter(has_text=SAVED_VIEW_WORDS).count() == 0, (
            f"{case.id}: the saved-view note still shows after the cell ran")
        if case.model is not None:
            case.model(nb, calc, "Run All Cells")
        if case.scenario is not None:
            case.scenario(nb, calc)
        before = nb.answer_text(calc, case)
        nb.make(calc, case.move)
        nb.wait_answer_changes(calc, case, before, str(case.move))
        if case.model is not None:
            case.model(nb, calc, str(case.move))
        shot = nb.screenshot(calc, case.screenshot)
        if case.impossible is not None:
            before = nb.answer_text(calc, case)
            nb.make(calc, case.impossible)
            nb.wait_answer_changes(calc, case, before, str(case.impossible))
            assert calc.locator(".course-calc-error").count() == 1, (
                f"{case.id}: {case.impossible} gave no message: {nb.answer_text(calc, case)!r}")
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


@pytest.mark.parametrize("case", CALCULATORS, ids=lambda c: c.id)
def test_calculator_drawn_on_open_before_anything_runs(request, case: CalculatorCase):
    """The committed notebook, trusted as make lab trusts it, opened and not run: the calculator is
    drawn from its saved widget state, not shown as the text of a widget's repr."""
    from browser_support import copy_committed_notebook

    browser, server = lab(request)
    copy = copy_committed_notebook(NOTEBOOKS / case.notebook, server.root_dir, server.state_dir / "data")
    nb = LabNotebook(browser, server, copy)
    try:
        nb.open()
        calc = nb.calculator(case)                       # the saved answer, visible with no cell run
        assert "VBox(children=" not in nb.page.locator(".jp-Notebook").inner_text()
        # ...and it says that it answers only once its cell has run (the controls of a saved copy do nothing)
        from playwright.sync_api import expect
        expect(calc.locator(".course-saved-view").filter(has_text=SAVED_VIEW_WORDS).first).to_be_visible()
        nb.screenshot(calc, f"on-open-{case.screenshot}")
        nb.wait_widgets_settled()
        time.sleep(2)   # what restoring the widgets would change has changed by now
        dirty = nb.page.locator(".jp-NotebookPanel.jp-mod-dirty, .lm-TabBar-tab.jp-mod-dirty").count()
        assert not dirty, f"{case.notebook} is marked unsaved just by being opened"
    finally:
        nb.close()


@pytest.fixture(scope="module")
def dark_lab_server(chromium, tmp_path_factory, request):
    from browser_support import DARK_SETTINGS

    root = tmp_path_factory.mktemp("lab-root-dark")
    server = LabServer(root_dir=root, state_dir=tmp_path_factory.mktemp("lab-state-dark"),
                       log_path=ARTIFACTS / "jupyterlab-server-dark.log", extra_settings=DARK_SETTINGS)
    request.addfinalizer(server.stop)
    return server.start()


@pytest.mark.parametrize("case", CALCULATORS, ids=lambda c: c.id)
def test_calculator_readable_in_the_dark_theme_at_1024_px(request, case: CalculatorCase):
    """JupyterLab's dark theme, a 1024 px window with the file browser open: no control cut off or
    past the notebook's edge, and every label legible against what it is drawn on."""
    from browser_support import LAYOUT_PROBLEMS_JS, MIN_CONTRAST, NARROW_VIEWPORT

    require_chromium()
    browser, server = request.getfixturevalue("browser"), request.getfixturevalue("dark_lab_server")
    copy = copy_notebook(NOTEBOOKS / case.notebook, server.root_dir)
    nb = LabNotebook(browser, server, copy, viewport=NARROW_VIEWPORT)
    try:
        nb.open()
        if not nb.page.locator("#filebrowser").is_visible():   # the learner's usual layout: files on the left
            nb.page.locator('.jp-SideBar [data-id="filebrowser"]').first.click()
            nb.page.locator("#filebrowser").wait_for(state="visible", timeout=UPDATE_MS)
        nb.run_all_cells()
        calc = nb.calculator(case)
        nb.wait_widgets_settled()
        calc.scroll_into_view_if_needed()
        problems = calc.evaluate(LAYOUT_PROBLEMS_JS, MIN_CONTRAST)
        nb.screenshot(calc, f"dark-1024-{case.screenshot}")
        assert not problems, f"{case.id} in the dark theme at 1024 px:\n  " + "\n  ".join(problems)
    finally:
        nb.close()
