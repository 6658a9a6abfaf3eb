"""Drive JupyterLab in headless Chromium for tests/test_browser.py.

A learner's view of the calculators: a real JupyterLab server (from this venv, on a free
localhost port with a random token), Debian's Chromium through Playwright, notebooks run
with Run > Run All Cells, widgets moved with the mouse and keyboard.

Nothing here edits the repository's notebooks: they are copied (outputs cleared) into a
temporary root directory that the server serves.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
ARTIFACTS = REPO / "test-artifacts"

CHROMIUM = Path("/usr/bin/chromium")
# Without the networking flags Chromium keeps trying to reach Google services, which a
# closed network refuses over and over.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
MAX_SCREENSHOT_HEIGHT = 4000     # a calculator's screenshot grows the viewport up to this

SERVER_START_TIMEOUT_S = 90
PAGE_LOAD_TIMEOUT_S = 90
KERNEL_IDLE_TIMEOUT_S = 90
RUN_ALL_TIMEOUT_S = 120          # every cell of a notebook in replay mode, on a 2-core machine
WIDGET_UPDATE_TIMEOUT_S = 20     # one control change -> kernel -> re-rendered answer

# Widget-model trouble, in the server log or the browser console.
WIDGET_ERROR_PATTERNS = re.compile(
    r"could not create (a )?model|model class|error displaying widget|class \S+ not found|model not found"
    r"|no version of module \S+ is registered", re.IGNORECASE)
CONSOLE_ERROR_PATTERNS = re.compile(
    r"widget|class \S+ not found|could not create (a )?model|no version of module \S+ is registered", re.IGNORECASE)


# --------------------------------------------------------------------------- Chromium

def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def require_chromium() -> str:
    """Path of Chromium, or skip (a learner's machine) / fail (CI=true) when it is missing."""
    if not CHROMIUM.exists():
        message = (f"browser test skipped: Chromium not found at {CHROMIUM}; install it "
                   "(Debian/Ubuntu: sudo apt-get install chromium) to enable it")
        if _ci():
            pytest.fail(message.replace("browser test skipped", "browser test cannot run in CI (CI=true)"),
                        pytrace=False)
        pytest.skip(message)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        message = f"browser test skipped: the playwright package is not importable ({exc}); run `make setup`"
        if _ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return str(CHROMIUM)


# --------------------------------------------------------------------------- notebooks

def copy_committed_notebook(src: Path, dest_dir: Path, data_dir: Path) -> Path:
    """The learner's copy of a committed notebook, made as ``make lab`` makes it
    (``scripts/learner_copy.py``: outputs and widget state kept, this Python's language_info, trusted
    in the Jupyter data dir ``data_dir``), under a name of its own in ``dest_dir``."""
    from nbformat.sign import NotebookNotary

    sys.path.insert(0, str(REPO / "scripts"))
    from learner_copy import learner_copy

    data_dir.mkdir(parents=True, exist_ok=True)
    copy = learner_copy(src, dest_dir / "learner-copy", NotebookNotary(data_dir=str(data_dir)))
    dest = dest_dir / f"as-committed-{src.name}"
    copy.replace(dest)
    return dest


def copy_notebook(src: Path, dest_dir: Path) -> Path:
    """Copy a notebook with its outputs, execution counts and saved widget state cleared.

    Cleared so that what the test sees after Run All can only come from this run's kernel.
    """
    import nbformat

    nb = nbformat.read(src, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.pop("widgets", None)
    dest = dest_dir / src.name
    nbformat.write(nb, dest)
    return dest


def write_notebook(path: Path, sources: list[str]) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, path)
    return path


# --------------------------------------------------------------------------- server

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# User settings for the test's JupyterLab: no news prompt (it covers the page and would try
# the internet), no update check, and every cell attached to the DOM so the whole notebook
# can be searched for widget errors.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


@dataclass
class LabServer:
    """A JupyterLab server from this venv, serving root_dir, logging to log_path."""

    root_dir: Path
    state_dir: Path
    log_path: Path
    token: str = field(default_factory=lambda: secrets.token_hex(24))
    port: int = 0
    proc: subprocess.Popen | None = None
    extra_settings: dict = field(default_factory=dict)   # more JupyterLab settings (the dark theme)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}/{path.lstrip('/')}{sep}token={self.token}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Isolated Jupyter config, data, settings and workspaces: a learner's ~/.jupyter or a
        # user-level kernelspec pointing at another Python must not change what is tested.
        for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                         ("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                         ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"), ("IPYTHONDIR", "ipython")):
            env[var] = str(self.state_dir / sub)
        env["COURSE_MODE"] = "replay"
        # The kernel runs in a temp dir: make sure it imports this checkout's course_lib.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        env.pop("JUPYTER_TOKEN", None)
        return env

    def _write_settings(self) -> None:
        for rel, values in {**LAB_SETTINGS, **self.extra_settings}.items():
            path = self.state_dir / "settings" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values, indent=2))

    def command(self) -> list[str]:
        return [sys.executable, "-m", "jupyterlab", "--no-browser",
                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root_dir}",
                "--ServerApp.allow_root=True",  # CI containers run as root
                "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.extension_manager=readonly"]  # no PyPI look-ups for the extension manager

    def start(self) -> "LabServer":
        self._write_settings()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_bytes(b"")  # this session's log only
        for attempt in range(3):  # a free port can be taken between free_port() and bind
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                shown = " ".join(self.command()).replace(self.token, "<token>")
                log.write(f"=== test_browser: starting {shown}\n".encode())
                log.flush()
                self.proc = subprocess.Popen(self.command(), cwd=self.root_dir, env=self.env(),
                                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
            if self._wait_ready():
                return self
            if "already in use" not in self.log_text():
                break
        tail = "\n".join(self.log_text().splitlines()[-40:])
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer {self.base_url}/api/status within "
                           f"{SERVER_START_TIMEOUT_S} s; log {self.log_path} ends:\n{tail}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=5) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.25)
        return False

    def api(self, method: str, path: str, timeout: float = 10):
        req = urllib.request.Request(f"{self.base_url}/{path.lstrip('/')}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_kernels_of(self, notebook_name: str) -> None:
        """End the sessions of one notebook (frees a core on a small machine)."""
        with contextlib.suppress(Exception):
            for s in self.api("GET", "api/sessions"):
                if Path(s.get("path", "")).name == notebook_name:
                    self.api("DELETE", f"api/sessions/{s['id']}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(Exception):
            self.api("POST", "api/shutdown")  # shuts the kernels down too
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)  # the server's own session: server and kernels
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, offset: int) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")


# --------------------------------------------------------------------------- one notebook in the browser

@dataclass(frozen=True)
class Move:
    """One thing a learner does to one control of a calculator.

    kind: "slider" (press the key ``value`` on the slider's handle, e.g. "ArrowRight"),
    "text" (type ``value`` into the box and press Enter), "select" (choose the option whose
    label is ``value`` in a dropdown), "toggle" (click the toggle button labelled ``value``).
    label: the control's description.
    """

    kind: str
    label: str
    value: object = "ArrowRight"

    def __str__(self) -> str:
        return {"slider": f"pressing {self.value} on the {self.label!r} slider",
                "text": f"typing {self.value} into the {self.label!r} box + Enter",
                "select": f"choosing {self.value!r} in the {self.label!r} dropdown",
                "toggle": f"clicking {self.value!r} of the {self.label!r} toggle buttons"}[self.kind]


def slider(label: str, key: str = "ArrowRight") -> Move:
    return Move("slider", label, key)


def typed(label: str, value) -> Move:
    return Move("text", label, value)


def choose(label: str, option: str) -> Move:
    return Move("select", label, option)


def toggle(label: str, button: str) -> Move:
    return Move("toggle", label, button)


@dataclass(frozen=True)
class CalculatorCase:
    """One calculator to drive: where it is, how to find it, what a learner does with it.

    anchor: the description (label) of a control that only this calculator has; it picks
    the output area holding the calculator, whatever its answer shows (even an error).
    move: the Move the generic check makes; the rendered answer must change after it.
    model: optional check that the rendered answer is the course_lib model's, called with
    (LabNotebook, calculator locator, what just happened) after Run All Cells and after the
    move; see LabNotebook.expect_model.
    scenario: optional learner steps with model checks, called with (LabNotebook, calculator locator).
    """

    id: str
    notebook: str
    anchor: str
    move: Move
    screenshot: str
    answer: str = ".course-calc-answer"
    model: Callable | None = None
    scenario: Callable | None = None
    impossible: "Move | None" = None     # a value no GPU allows: the answer must become a message


class LabNotebook:
    """One notebook opened in JupyterLab in its own browser page and workspace."""

    def __init__(self, browser, server: LabServer, notebook: Path, viewport: dict | None = None):
        self.server = server
        self.notebook = notebook
        self.viewport = viewport or VIEWPORT
        self.console: list[tuple[str, str]] = []
        self.context = browser.new_context(viewport=self.viewport)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.console.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.console.append(("pageerror", str(e))))
        self.log_offset = server.log_size()

    # ---- lifecycle
    def open(self) -> "LabNotebook":
        # A workspace of its own: the default workspace would re-open notebooks of earlier tests.
        workspace = f"test-{secrets.token_hex(4)}"
        self.page.goto(self.server.url(f"lab/workspaces/{workspace}/tree/{self.notebook.name}"),
                       timeout=PAGE_LOAD_TIMEOUT_S * 1000)
        self.page.locator(".jp-NotebookPanel .jp-Notebook").first.wait_for(timeout=PAGE_LOAD_TIMEOUT_S * 1000)
        self.wait_kernel_idle()
        return self

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.context.close()
        self.server.shutdown_kernels_of(self.notebook.name)

    # ---- state of the notebook
    def status_bar(self) -> str:
        return self.page.evaluate("() => document.querySelector('#jp-main-statusbar')?.innerText ?? ''")

    def dialogs(self) -> str:
        return " | ".join(self.page.locator(".jp-Dialog").all_inner_texts())

    def wait_kernel_idle(self, timeout_s: float = KERNEL_IDLE_TIMEOUT_S) -> None:
        # The toolbar's execution indicator says idle before any kernel is connected; the
        # status bar says "<kernel> | Idle" only once the kernel is up and idle.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if re.search(r"\|\s*Idle\b", self.status_bar()):
                return
            time.sleep(0.25)
        raise AssertionError(f"the kernel of {self.notebook.name} was not idle after {timeout_s:.0f} s; "
                             f"status bar: {self.status_bar()!r}; dialogs: {self.dialogs()!r}")

    def prompts(self) -> list[str]:
        return [t.strip() for t in self.page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]

    def tracebacks(self) -> list[str]:
        texts = self.page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
        # An error output renders as stderr whose text holds the traceback header.
        return [t for t in texts.all_inner_texts() if "Traceback" in t]

    def run_all_cells(self) -> None:
        """Run > Run All Cells, as a learner clicks it."""
        self.page.locator(".jp-NotebookPanel .jp-Notebook").first.click(position={"x": 5, "y": 5})
        self.page.locator(".lm-MenuBar-itemLabel").get_by_text("Run", exact=True).click()
        self.page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()

    def wait_all_cells_ran(self, timeout_s: float = RUN_ALL_TIMEOUT_S) -> None:
        """Until no cell is queued or running ([*]) and the kernel is idle, twice in a row."""
        deadline = time.monotonic() + timeout_s
        calm = 0
        while time.monotonic() < deadline:
            busy = any("*" in p for p in self.prompts())
            calm = 0 if busy or not re.search(r"\|\s*Idle\b", self.status_bar()) else calm + 1
            if calm >= 2:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"Run All Cells of {self.notebook.name} did not finish within {timeout_s:.0f} s; "
                                 f"prompts: {self.prompts()}; status bar: {self.status_bar()!r}")
        errors = self.tracebacks()
        assert not errors, f"a cell of {self.notebook.name} raised:\n" + "\n---\n".join(e[-3000:] for e in errors)

    # ---- calculators
    def calculator(self, case: CalculatorCase):
        """The output area holding the calculator, once its answer has rendered."""
        page = self.page
        calc = (page.locator(".jp-OutputArea-output")
                .filter(has=page.locator(case.answer))
                .filter(has=page.locator(".widget-label").get_by_text(case.anchor, exact=True))
                .first)
        try:
            calc.locator(case.answer).wait_for(state="visible", timeout=RUN_ALL_TIMEOUT_S * 1000)
        except Exception as exc:
            raise AssertionError(
                f"no calculator ({case.answer} next to a control {case.anchor!r}) rendered in "
                f"{self.notebook.name} within {RUN_ALL_TIMEOUT_S} s of Run All Cells; prompts: {self.prompts()}; "
                f"tracebacks: {self.tracebacks()}; widget errors on the page: {self.widget_errors_on_page()}; "
                f"status bar: {self.status_bar()!r}") from exc
        calc.scroll_into_view_if_needed()
        return calc

    CONTROL_INNER = {"widget-text": "input", "widget-dropdown": "select", "widget-hslider": ".noUi-handle",
                     "widget-toggle-buttons": "button"}

    def control(self, calc, kind: str, description: str):
        """A control of the calculator by its ipywidgets kind class and description label.

        kind: 'widget-text' (IntText/BoundedIntText/FloatText -> <input>), 'widget-dropdown'
        (-> <select>), 'widget-hslider' (-> the slider handle), 'widget-toggle-buttons' (-> its buttons).
        """
        box = calc.locator(f".{kind}").filter(
            has=self.page.locator(".widget-label").get_by_text(description, exact=True))
        inner = box.locator(self.CONTROL_INNER[kind])
        return inner if kind == "widget-toggle-buttons" else inner.first

    def read(self, calc, kind: str, description: str) -> str:
        """What a control shows now: a box's text, a dropdown's selected label, a slider's
        value, the active toggle button's text."""
        el = self.control(calc, kind, description)
        if kind == "widget-hslider":
            return el.get_attribute("aria-valuenow") or ""
        if kind == "widget-toggle-buttons":
            return el.and_(self.page.locator(".mod-active")).inner_text().strip()
        return el.input_value()  # a dropdown's <option> value is its label (its text has &nbsp; for spaces)

    def read_int(self, calc, description: str, kind: str = "widget-text") -> int:
        return int(float(self.read(calc, kind, description)))

    def type_into(self, calc, description: str, value) -> None:
        box = self.control(calc, "widget-text", description)
        box.fill(str(value))
        box.press("Enter")

    def nudge_slider(self, calc, description: str, key: str = "ArrowRight", times: int = 1) -> None:
        handle = self.control(calc, "widget-hslider", description)
        handle.focus()
        for _ in range(times):
            handle.press(key)

    def make(self, calc, move: Move) -> None:
        """Make a learner's move and wait until the control itself shows it."""
        from playwright.sync_api import expect

        timeout = WIDGET_UPDATE_TIMEOUT_S * 1000
        if move.kind == "slider":
            before = self.read(calc, "widget-hslider", move.label)
            self.nudge_slider(calc, move.label, str(move.value))
            expect(self.control(calc, "widget-hslider", move.label),
                   f"{move} should move the slider off {before}").not_to_have_attribute(
                "aria-valuenow", before, timeout=timeout)
        elif move.kind == "text":
            self.type_into(calc, move.label, move.value)
            expect(self.control(calc, "widget-text", move.label),
                   f"after {move} the box should read {move.value}").to_have_value(
                re.compile(rf"^{re.escape(str(move.value))}(\.0*)?$"), timeout=timeout)
        elif move.kind == "select":
            select = self.control(calc, "widget-dropdown", move.label)
            select.select_option(value=str(move.value))  # the label, with plain spaces
            deadline = time.monotonic() + WIDGET_UPDATE_TIMEOUT_S
            while self.read(calc, "widget-dropdown", move.label) != move.value:
                assert time.monotonic() < deadline, f"after {move} the dropdown does not show it"
                time.sleep(0.2)
        elif move.kind == "toggle":
            button = self.control(calc, "widget-toggle-buttons", move.label).get_by_text(str(move.value), exact=True)
            button.click()
            expect(button, f"after {move} that button should be active").to_have_class(
                re.compile(r"\bmod-active\b"), timeout=timeout)
        else:
            raise ValueError(f"unknown kind of move {move.kind!r}")

    def rendered(self, calc, selectors) -> dict[str, str | None]:
        """The text of each selector in the calculator's answer (None where it is absent)."""
        out = {}
        for sel in selectors:
            loc = calc.locator(sel)
            out[sel] = loc.first.inner_text().strip() if loc.count() else None
        return out

    def expect_model(self, calc, expected: Callable[[], dict[str, str]], after: str,
                     timeout_s: float = WIDGET_UPDATE_TIMEOUT_S) -> dict[str, str]:
        """Until the answer shows the model's value for the inputs the controls show now.

        expected() reads the controls from the page and returns {CSS selector: text} from the
        course_lib model; both sides are read again on every try, so a change still on its
        way through the kernel (an answer re-rendered before a box caught up) cannot fail it.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            try:  # a box caught mid-update (empty, say) reads as garbage for a moment
                want = expected()
                shown = self.rendered(calc, want)
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            if shown == want:
                return want
            if time.monotonic() > deadline:
                wrong = {k: {"model": v, "shown": shown[k]} for k, v in want.items() if shown[k] != v}
                answer = calc.locator(".course-calc-answer").inner_text()
                raise AssertionError(f"after {after}: the answer does not show the model's values within "
                                     f"{timeout_s:.0f} s: {wrong}\nanswer text:\n{answer[:1500]}")
            time.sleep(0.2)

    def answer_text(self, calc, case: CalculatorCase) -> str:
        return calc.locator(case.answer).inner_text()

    def wait_answer_changes(self, calc, case: CalculatorCase, before: str, what: str) -> str:
        deadline = time.monotonic() + WIDGET_UPDATE_TIMEOUT_S
        while time.monotonic() < deadline:
            now = self.answer_text(calc, case)
            if now != before:
                return now
            time.sleep(0.2)
        raise AssertionError(f"{case.id}: the answer did not change within {WIDGET_UPDATE_TIMEOUT_S} s "
                             f"after {what}; it still reads:\n{before}")

    # ---- problems
    def widget_errors_on_page(self) -> list[str]:
        hits = self.page.locator(".jp-OutputArea-output").filter(has_text=re.compile("Error displaying widget", re.I))
        return hits.all_inner_texts()

    def loading_widgets(self) -> list[str]:
        return self.page.locator(".jp-OutputArea-output").filter(
            has_text=re.compile(r"^\s*Loading widget", re.I)).all_inner_texts()

    def wait_widgets_settled(self, timeout_s: float = WIDGET_UPDATE_TIMEOUT_S) -> None:
        """Until no widget output still shows ipywidgets' "Loading widget..." placeholder.

        A view whose model is missing shows the placeholder for a moment, then "Error
        displaying widget: model not found": checking for errors earlier would miss it.
        """
        deadline = time.monotonic() + timeout_s
        while self.loading_widgets():
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.loading_widgets())} widget output(s) of {self.notebook.name} "
                                     f"still show 'Loading widget...' after {timeout_s:.0f} s")
            time.sleep(0.25)

    def assert_no_widget_errors(self) -> None:
        self.wait_widgets_settled()
        on_page = self.page.evaluate("() => document.body.innerText")
        problems = []
        if re.search("Error displaying widget", on_page, re.I):
            problems.append(f"the page shows 'Error displaying widget': {self.widget_errors_on_page()}")
        console = [f"[{t}] {m}" for t, m in self.console
                   if t in ("error", "pageerror") and CONSOLE_ERROR_PATTERNS.search(m)
                   or t == "warning" and WIDGET_ERROR_PATTERNS.search(m)]
        if console:
            problems.append("browser console:\n  " + "\n  ".join(console))
        log = [line for line in self.server.log_since(self.log_offset).splitlines()
               if WIDGET_ERROR_PATTERNS.search(line)]
        if log:
            problems.append(f"server log {self.server.log_path}:\n  " + "\n  ".join(log))
        assert not problems, f"widget errors in {self.notebook.name}:\n" + "\n".join(problems)

    def screenshot(self, locator, name: str) -> Path:
        """The whole of a calculator, however tall: the notebook scrolls inside its panel, so a
        calculator taller than the panel would come out cut off (with the toolbar over its top)."""
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / name
        box = locator.bounding_box()
        chrome = 300  # menu bar, tabs, notebook toolbar, status bar, margin
        if box and box["height"] + chrome > self.viewport["height"]:
            self.page.set_viewport_size({"width": self.viewport["width"],
                                         "height": min(int(box["height"]) + chrome, MAX_SCREENSHOT_HEIGHT)})
            locator.evaluate("e => e.scrollIntoView({block: 'center'})")
            self.page.wait_for_timeout(300)  # let JupyterLab lay the resized panel out
        try:
            locator.screenshot(path=str(path))
        finally:
            self.page.set_viewport_size(self.viewport)
        return path

    def failure_screenshot(self, name: str) -> Path | None:
        with contextlib.suppress(Exception):
            ARTIFACTS.mkdir(exist_ok=True)
            path = ARTIFACTS / name
            self.page.screenshot(path=str(path), full_page=True)
            return path
        return None


DARK_SETTINGS = {"@jupyterlab/apputils-extension/themes.jupyterlab-settings": {"theme": "JupyterLab Dark"}}
NARROW_VIEWPORT = {"width": 1024, "height": 900}
MIN_CONTRAST = 3.0   # WCAG's minimum for large text and UI components

# In the page: every visible element of the calculator whose text is cut off (scrollWidth past
# clientWidth on an element that hides overflow) or that reaches past the notebook's right edge,
# and every text whose colour has too little contrast with the background it is drawn on.
LAYOUT_PROBLEMS_JS = r"""
(calc, minContrast) => {
  const panel = calc.closest('.jp-NotebookPanel') || document.body;
  const right = panel.getBoundingClientRect().right;
  const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
                                .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = el => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) return c;
    }
    return [255, 255, 255];
  };
  const svgBackground = el => {   // the filled shape an SVG label sits on (pattern fills are grid lines)
    const b = el.getBoundingClientRect();
    const under = document.elementsFromPoint(b.x + b.width / 2, b.y + b.height / 2).find(e =>
      e !== el && ['rect', 'path', 'circle', 'polygon'].includes(e.tagName.toLowerCase())
      && rgb(getComputedStyle(e).fill).length >= 3 && !getComputedStyle(e).fill.startsWith('url'));
    return under ? rgb(getComputedStyle(under).fill) : background(el.closest('svg'));
  };
  const problems = [];
  for (const el of calc.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    const style = getComputedStyle(el);
    const label = (el.innerText || el.value || el.getAttribute('aria-label') || el.tagName).trim().slice(0, 40);
    if (box.right > right + 1) problems.push(`past the notebook's right edge by ${Math.round(box.right - right)} px: ${label}`);
    const hides = ['hidden', 'clip'].includes(style.overflowX) || style.textOverflow === 'ellipsis';
    const ownText = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    // text that overflows a box hiding it: a bare text element, or a box of words such as a checkbox's label
    // (its text beside the box's input), though not a slider's or a picture's box, which may overflow by design
    const words = el.children.length === 0 || ownText
      || ((el.innerText || '').trim() && !el.querySelector('input[type=range], .slider, svg, canvas, img, table, select'));
    if (hides && el.scrollWidth > el.clientWidth + 1 && words)
      problems.push(`text cut off (${el.scrollWidth} px in ${el.clientWidth}): ${label}`);
    const tag = el.tagName.toLowerCase();
    if ((ownText || tag === 'text') && style.visibility !== 'hidden') {
      const fg = rgb(tag === 'text' ? (style.fill || style.color) : style.color);
      const bg = tag === 'text' && el.closest('svg') ? svgBackground(el) : background(el);
      if (fg.length >= 3) {
        const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
        const ratio = (a + 0.05) / (b + 0.05);
        if (ratio < minContrast) problems.push(`contrast ${ratio.toFixed(1)}:1 for "${label}"`);
      }
    }
  }
  return [...new Set(problems)];
}
"""
