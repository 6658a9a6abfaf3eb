"""Draw a committed notebook again, with no GPU, from the live run stored with it.

    python -m course_lib.render notebooks/04_coalescing.ipynb ...   # re-render and write (make render)
    python -m course_lib.render --check [notebooks/...]             # re-render and compare; write nothing

A committed notebook is a render of (its code, today's library, its stored run): every output is what
today's code draws from the results, the device, the software and the live-only values (a kernel
exercise's runs, Nsight Compute's counts) that the notebook's last live GPU run stored in its metadata
(``course_run``, see ``core.stored_run``). A change to how results are shown (a table's columns, a
figure, a checker's message) is rendered here and lands with no GPU. A change to what is measured (an
experiment's parameters, a kernel exercise's cell, the code that runs a kernel) cannot be rendered:
the cell raises ``NotInStoredRun``, named in the error, and the notebook needs a live run
(``make gpu-test NOTEBOOKS=...``), whose outputs are then re-rendered here before they are committed.

Rendering is deterministic (widget ids numbered in order, no execution times, the inline backend's
PNGs), so ``--check`` (and ``tests/test_render.py``) compares every output of every code cell exactly:
text, HTML, figures and calculators. Each notebook renders in a kernel of its own.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_lib.core import stored_run
from course_lib.widgets.base import SAVED_VIEW_CLASS, SAVED_VIEW_NOTE

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
TIMEOUT_S = 600


@contextlib.contextmanager
def _render_environment(path: Path):
    """The kernel inherits these: render mode, this notebook's stored run, and the inline backend's figures
    (a test process's ``MPLBACKEND=Agg`` would leave every figure out of the page)."""
    saved = dict(os.environ)
    os.environ.update({"COURSE_MODE": "render", stored_run.NOTEBOOK_ENV: str(path.resolve())})
    os.environ.pop("MPLBACKEND", None)
    os.environ.pop(stored_run.LOG_ENV, None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def number_widgets(nb) -> None:
    """Replace the random ids ipywidgets gives its models with ids numbered in a fixed order, in the outputs
    and in the saved widget state alike, so that two renders are byte for byte the same. The order: each
    view in page order, then the models it refers to (``IPY_MODEL_<id>``) as its state names them."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    order = [o["data"][WIDGET_VIEW]["model_id"] for c in nb.cells if c.cell_type == "code"
             for o in c.get("outputs", []) if WIDGET_VIEW in o.get("data", {})]
    order = list(dict.fromkeys(order))
    for model in order:   # grows as it goes: a breadth-first walk of the references
        for ref in re.findall(r"IPY_MODEL_([0-9a-f]{32})", json.dumps(state.get(model, {}), sort_keys=True)):
            if ref not in order:
                order.append(ref)
    unreached = [i for i in state if i not in order]   # none in practice; ordered by their content
    order += sorted(unreached, key=lambda i: json.dumps(state[i], sort_keys=True))
    mapping = {old: f"{n:032x}" for n, old in enumerate(order, start=1)}
    if not mapping:
        return
    pattern = re.compile("|".join(map(re.escape, mapping)))
    renamed = nbformat.from_dict(json.loads(pattern.sub(lambda m: mapping[m.group(0)], json.dumps(nb))))
    nb.clear()
    nb.update(renamed)


def mark_saved_views(nb) -> None:
    """Write the saved-view note into every calculator's note in the saved widget state: opened without a
    kernel, a calculator says that it answers only once its cell has run (a kernel's copy stays empty)."""
    for model in nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {}).values():
        if SAVED_VIEW_CLASS in model.get("state", {}).get("_dom_classes", ()):
            model["state"]["value"] = SAVED_VIEW_NOTE


def render(path: Path, timeout_s: int = TIMEOUT_S):
    """The notebook at ``path`` executed in render mode: a new notebook node, ``path`` untouched."""
    import matplotlib.font_manager  # noqa: F401  (builds or repairs matplotlib's font cache here, so that no
    #                                  kernel prints its notice or a missing font's warning into a cell's output)

    nb = nbformat.read(path, as_version=4)
    run = copy.deepcopy(nb.metadata.get("course_run"))
    with _render_environment(path):
        NotebookClient(nb, timeout=timeout_s, kernel_name="python3", store_widget_state=True, record_timing=False,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    nb.metadata["course_run"] = run   # the run's stamp, unchanged: the page is still that run's
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
    number_widgets(nb)
    mark_saved_views(nb)
    return nb


def merge_streams(outputs: list) -> list:
    """Consecutive prints to one stream as one output. How the kernel batches them into messages depends on
    timing (a busy machine splits what an idle one sends at once), so the page keeps them joined."""
    merged = []
    for o in outputs:
        if (o.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                and merged[-1]["name"] == o["name"]):
            merged[-1] = dict(merged[-1], text=merged[-1]["text"] + o["text"])
        else:
            merged.append(o)
    return merged


def _outputs(cell) -> list[dict]:
    return [{k: v for k, v in o.items() if k != "execution_count"} for o in merge_streams(cell.get("outputs", []))]


def differences(committed, rendered) -> list[str]:
    """Each code cell whose outputs differ between the committed notebook and its render, with the first
    difference in it (the output and, for text, the line; a figure's PNG is named, not printed)."""
    code_a = [c for c in committed.cells if c.cell_type == "code"]
    code_b = [c for c in rendered.cells if c.cell_type == "code"]
    if len(code_a) != len(code_b):
        return [f"{len(code_a)} code cells committed, {len(code_b)} rendered"]
    found = []
    for n, (a, b) in enumerate(zip(code_a, code_b), start=1):
        outs_a, outs_b = _outputs(a), _outputs(b)
        if outs_a != outs_b:
            found.append(f"code cell {n} (`{a.source.splitlines()[0] if a.source else ''}`): "
                         + _first_output_difference(outs_a, outs_b))
    if committed.metadata.get("widgets") != rendered.metadata.get("widgets"):
        found.append("the calculators' saved widget state differs")
    return found


def _first_output_difference(outs_a: list[dict], outs_b: list[dict]) -> str:
    kinds = lambda outs: [o.get("output_type") for o in outs]  # noqa: E731
    for i, (oa, ob) in enumerate(zip(outs_a, outs_b), start=1):
        if oa == ob:
            continue
        for key in sorted(set(oa.get("data", {})) | set(ob.get("data", {}))) or ["text"]:
            va = oa.get("data", {}).get(key, oa.get(key))
            vb = ob.get("data", {}).get(key, ob.get(key))
            if va != vb:
                return f"output {i}, {key}: " + _describe(key, va, vb)
        return f"output {i}: {_short(oa)} ≠ {_short(ob)}"
    return f"{len(outs_a)} outputs committed {kinds(outs_a)}, {len(outs_b)} rendered {kinds(outs_b)}"


def _describe(key: str, a, b) -> str:
    """The first difference of two outputs of one MIME type: for text, its line and the few characters around it."""
    if key.startswith("image/"):
        return "the figure differs" if a and b else ("a figure is missing" if not b else "an extra figure")
    ta = "".join(a) if isinstance(a, list) else str(a)
    tb = "".join(b) if isinstance(b, list) else str(b)
    at = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
    line, start = ta[:at].count("\n") + 1, max(ta.rfind("\n", 0, at) + 1, at - 40)
    return f"line {line}: committed {ta[start:at + 40]!r}, rendered {tb[start:at + 40]!r}"


def _short(o: dict) -> str:
    return repr(o)[:200]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.render", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook")
    parser.add_argument("--check", action="store_true", help="compare with the committed outputs; write nothing")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    failed = 0
    for path in paths:
        try:
            rendered = render(path)
        except Exception as exc:  # noqa: BLE001  (a cell's error, named: NotInStoredRun says a GPU run is due)
            why = f"{exc.ename}: {exc.evalue}" if hasattr(exc, "ename") else f"{type(exc).__name__}: {exc}"
            print(f"{path.name}: not rendered: {why}", file=sys.stderr)
            failed += 1
            continue
        if args.check:
            diffs = differences(nbformat.read(path, as_version=4), rendered)
            print(f"{path.name}: " + (f"STALE in {len(diffs)} place(s):\n  " + "\n  ".join(diffs) if diffs
                                      else "every output is today's render"))
            failed += bool(diffs)
        else:
            nbformat.write(rendered, path)
            print(f"{path.name}: rendered from its run of {rendered.metadata['course_run']['executed_at']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
