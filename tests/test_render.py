"""Every committed notebook is the render of (its code, today's library, its stored GPU run).

``course_lib.render`` executes a notebook with no GPU against the run stored in its metadata and compares
every output, text, HTML, figures and calculators, with the committed one. These tests render all of them,
and show that the comparison catches what it exists for: a table column renamed in a lab, a figure
changed, a checker's message changed after the run, an output spliced in from another run; and that what
no stored run can answer (a changed kernel, an experiment never measured) says that the cell needs a GPU run.

``tests/data/04_coalescing_h100.ipynb`` is notebook 04 as run live on an H100 (2026-12-07): a stored run that
holds the kernel exercises' runs and Nsight Compute's counts, so its verdicts render from them. (That run was
made just before the banner's time was stored as a value; its ``banner time`` was added from the banner the
run printed.)"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from course_lib import render
from course_lib.core import runtime, stored_run

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
H100_04 = ROOT / "tests" / "data" / "04_coalescing_h100.ipynb"


def rerendered(path: Path):
    try:
        return render.render(path)
    except Exception as exc:  # noqa: BLE001  (a cell's error: its name and value say what to do)
        why = f"{exc.ename}: {exc.evalue}" if hasattr(exc, "ename") else f"{type(exc).__name__}: {exc}"
        pytest.fail(f"{path.name} does not render from its stored run: {why}", pytrace=False)


@pytest.mark.parametrize("path", [*NOTEBOOKS, H100_04], ids=lambda p: p.name)
def test_every_output_is_the_render_of_the_stored_run(path):
    found = render.differences(nbformat.read(path, as_version=4), rerendered(path))
    assert not found, (f"{path.name}: {len(found)} output(s) are not what today's code draws from the stored run; "
                       f"the first: {found[0]}. Re-render it (make render NOTEBOOKS=notebooks/{path.name}); where the "
                       "render says a cell needs a GPU run, run it live (make gpu-test).")


def test_every_notebook_stores_the_run_its_page_shows():
    for path in NOTEBOOKS:
        run = nbformat.read(path, as_version=4).metadata.get("course_run")
        assert run and run["format"] == stored_run.FORMAT, f"{path.name}: no stored run in the current layout"
        assert run["gpu"].startswith("NVIDIA") and run["device"]["name"] == run["gpu"], path.name
        assert run["results"] and all(r["machine"]["gpu"] == run["gpu"] for r in run["results"]), path.name
        assert {"banner time"} <= {v["key"] for v in run["values"]}, path.name


# --------------------------------------------------------------------------- what the comparison catches

@pytest.fixture
def edited_library(tmp_path, monkeypatch):
    """A copy of course_lib to edit: the rendering kernel imports it first (PYTHONPATH), with the repo's data."""
    copy = tmp_path / "lib"
    shutil.copytree(ROOT / "course_lib", copy / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "data").symlink_to(ROOT / "data")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH")])))

    def edit(relative: str, old: str, new: str) -> None:
        f = copy / "course_lib" / relative
        text = f.read_text()
        assert text.count(old) == 1, f"{relative}: the text to edit is not there once"
        f.write_text(text.replace(old, new))
    return edit


def committed_copy(tmp_path, source: Path) -> Path:
    path = tmp_path / source.name
    shutil.copy(source, path)
    return path


def stale(path: Path) -> list[str]:
    return render.differences(nbformat.read(path, as_version=4), rerendered(path))


def test_a_column_renamed_in_a_lab_is_caught(tmp_path, edited_library):
    edited_library("labs/coalescing.py", '"read back B": c.extra.get("granularity_read_back")',
                   '"granularity read back B": c.extra.get("granularity_read_back")')
    found = stale(committed_copy(tmp_path, ROOT / "notebooks" / "04_coalescing.ipynb"))
    assert len(found) == 1 and found[0].startswith("code cell 9") and "<th>granularity read back B" in found[0], found


def test_a_changed_figure_is_caught(tmp_path, edited_library):
    edited_library("labs/coalescing.py", 'ax.plot(strides, blocks, "^:", label=',
                   'ax.plot(strides, blocks, "v:", label=')
    found = stale(committed_copy(tmp_path, ROOT / "notebooks" / "04_coalescing.ipynb"))
    assert [f for f in found if "image/png: the figure differs" in f] == found and len(found) == 1, found


def test_a_checker_message_changed_after_the_run_is_caught(tmp_path, edited_library):
    # The verdict is drawn by today's checker from the kernel runs stored with the run.
    edited_library("exercises/kernel/checker.py", 'lines.append(f"  {size}: correct")',
                   'lines.append(f"  {size}: right")')
    found = stale(committed_copy(tmp_path, H100_04))
    assert found and all("cuda_exercise" in f or "kernel_exercises" in f for f in found), found
    assert "right" in found[0]


def test_an_output_spliced_from_another_run_is_caught(tmp_path):
    # The strided-copy table of the H100's run, put in place of the H200's: the page no longer renders its run.
    path = committed_copy(tmp_path, ROOT / "notebooks" / "04_coalescing.ipynb")
    nb, other = nbformat.read(path, as_version=4), nbformat.read(H100_04, as_version=4)
    code, other_code = ([c for c in n.cells if c.cell_type == "code"] for n in (nb, other))
    code[5].outputs = other_code[5].outputs
    nbformat.write(nb, path)
    found = stale(path)
    assert len(found) == 1 and found[0].startswith("code cell 6"), found


def test_a_changed_kernel_needs_a_gpu_run(tmp_path):
    path = committed_copy(tmp_path, H100_04)
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("%%cuda_exercise"))
    cell.source += "\n// an edit after the run"
    nbformat.write(nb, path)
    with pytest.raises(Exception, match="NotInStoredRun.*kernel source changed since the run.*needs a GPU run"):
        render.render(path)


def test_an_experiment_never_measured_needs_a_gpu_run(tmp_path):
    path = committed_copy(tmp_path, ROOT / "notebooks" / "04_coalescing.ipynb")
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if 'experiments.run("coalescing.l2_fetch")' in c.source)
    cell.source = cell.source.replace('experiments.run("coalescing.l2_fetch")',
                                      'experiments.run("coalescing.l2_fetch", n=12345)')
    nbformat.write(nb, path)
    with pytest.raises(Exception, match="NotInStoredRun.*has no coalescing.l2_fetch.*Run it live on a GPU"):
        render.render(path)


def test_render_numbers_widgets_in_page_order():
    nb = nbformat.v4.new_notebook()
    view = lambda i: {"output_type": "display_data", "metadata": {},  # noqa: E731
                      "data": {render.WIDGET_VIEW: {"model_id": i, "version_major": 2, "version_minor": 0}}}
    a, b, child = "a" * 32, "b" * 32, "c" * 32
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[view(b)]), nbformat.v4.new_code_cell("y", outputs=[view(a)])]
    nb.metadata["widgets"] = {render.WIDGET_STATE: {"state": {a: {"children": [f"IPY_MODEL_{child}"]}, b: {},
                                                              child: {}}}}
    render.number_widgets(nb)
    assert nb.cells[0].outputs[0]["data"][render.WIDGET_VIEW]["model_id"] == f"{1:032x}"
    state = nb.metadata["widgets"][render.WIDGET_STATE]["state"]
    assert state[f"{2:032x}"] == {"children": [f"IPY_MODEL_{3:032x}"]} and set(state) == {f"{n:032x}" for n in (1, 2, 3)}


# --------------------------------------------------------------------------- the stored run itself

def rendering_a_run_with(values: list[dict], path: Path, monkeypatch) -> None:
    """Render mode, reading a notebook at ``path`` whose stored run holds ``values`` and no results."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["course_run"] = {"format": stored_run.FORMAT, "executed_at": "then", "results": [], "values": values}
    path.write_text(json.dumps(nb))
    monkeypatch.setenv("COURSE_MODE", "render")
    monkeypatch.setenv(stored_run.NOTEBOOK_ENV, str(path))


def test_capture_logs_live_and_answers_in_order_when_rendering(tmp_path, monkeypatch):
    log = tmp_path / "run.jsonl"
    monkeypatch.setenv(stored_run.LOG_ENV, str(log))
    monkeypatch.setenv("COURSE_MODE", "replay")   # not rendering: compute runs (live would too) and is logged
    assert stored_run.capture("k", lambda: 1, {"src": "a"}) == 1
    assert stored_run.capture("k", lambda: 2, {"src": "a"}) == 2
    results, values = stored_run.split_log(log.read_text().splitlines())
    assert results == [] and [v["value"] for v in values] == [1, 2]

    rendering_a_run_with(values, tmp_path / "nb.ipynb", monkeypatch)
    boom = lambda: pytest.fail("rendering must not compute")  # noqa: E731
    assert [stored_run.capture("k", boom, {"src": "a"}) for _ in range(2)] == [1, 2]
    with pytest.raises(stored_run.NotInStoredRun, match="once more than its stored GPU run"):
        stored_run.capture("k", boom, {"src": "a"})


def test_a_value_from_other_code_is_refused_and_a_stored_exception_raised_again(tmp_path, monkeypatch):
    class Closed(Exception):
        pass

    values = [{"key": "v", "inputs": {"src": "old"}, "value": 1},
              {"key": "count", "inputs": {}, "raised": "Closed", "message": "counters closed"}]
    rendering_a_run_with(values, tmp_path / "nb2.ipynb", monkeypatch)
    with pytest.raises(stored_run.NotInStoredRun, match="src changed since"):
        stored_run.capture("v", lambda: 0, {"src": "new"})
    with pytest.raises(Closed, match="counters closed"):
        stored_run.capture("count", lambda: 0, raises=(Closed,))
    assert runtime.mode() == "render" and runtime.shows_gpu_run() and not runtime.gpu_available()



def test_a_saved_calculator_says_it_answers_only_once_its_cell_has_run():
    from course_lib.widgets.base import SAVED_VIEW_CLASS, SAVED_VIEW_NOTE, saved_view_note

    assert saved_view_note().value == "" and SAVED_VIEW_CLASS in saved_view_note()._dom_classes   # a kernel's copy
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        state = nb.metadata.get("widgets", {}).get(render.WIDGET_STATE, {}).get("state", {})
        views = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if render.WIDGET_VIEW in o.get("data", {})]
        notes = [m for m in state.values() if SAVED_VIEW_CLASS in m["state"].get("_dom_classes", ())]
        assert len(notes) == len(views), f"{path.name}: {len(views)} calculators, {len(notes)} saved-view notes"
        assert all(m["state"]["value"] == SAVED_VIEW_NOTE for m in notes), path.name


def test_a_models_column_is_todays_model_not_the_one_stored_with_the_run():
    # The stored run keeps the model its cases were measured beside (extra["model"]); a page shows today's.
    from course_lib.labs import coalescing as lab
    from course_lib.measure.experiments import Result

    nb = nbformat.read(ROOT / "notebooks" / "04_coalescing.ipynb", as_version=4)
    record = next(r for r in nb.metadata["course_run"]["results"] if r["experiment"] == "coalescing.strided_copy")
    result = Result.from_record(record, "live")
    today = [row["sectors per read"] for row in lab.copy_rows(result, 4e12)]
    for c in result.cases:
        c.extra["model"] = dict(c.extra["model"], read_sectors_per_request=-1, read_efficiency=0.5)
    assert [row["sectors per read"] for row in lab.copy_rows(result, 4e12)] == today and -1 not in today


def test_prints_split_by_a_busy_kernel_compare_as_one_output():
    one = [{"output_type": "stream", "name": "stdout", "text": "a\nb\n"}]
    two = [{"output_type": "stream", "name": "stdout", "text": "a\n"}, {"output_type": "stream", "name": "stdout", "text": "b\n"}]
    committed, rendered = nbformat.v4.new_notebook(), nbformat.v4.new_notebook()
    committed.cells = [nbformat.v4.new_code_cell("print('a'); print('b')", outputs=[nbformat.from_dict(o) for o in one])]
    rendered.cells = [nbformat.v4.new_code_cell("print('a'); print('b')", outputs=[nbformat.from_dict(o) for o in two])]
    assert render.differences(committed, rendered) == []
    rendered.cells[0].outputs[1]["text"] = "c\n"
    assert render.differences(committed, rendered)
