"""Tiny helpers shared by the notebook builder scripts (scripts/build_*.py).

Every builder ends with ``build({...})``, which understands two command-line forms:

    python scripts/build_NN.py [NN ...]                 # rewrite the notebooks, without outputs
    python scripts/build_NN.py --keep-outputs [NN ...]  # prose-only edit: keep each code cell's outputs
                                                        # (and the widget state); refuse if code changed
"""
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def md(text):
    return new_markdown_cell(text.strip("\n"))


def code(text):
    return new_code_cell(text.strip("\n"))


def write(name, cells):
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    path = NOTEBOOKS / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    print("wrote", path)


def rewrite_prose(name, cells):
    """Rebuild ``name`` from ``cells`` keeping the outputs of its code cells, which must be unchanged:
    committed outputs come from a live GPU run, so a changed code cell means running it again there."""
    path = NOTEBOOKS / name
    old = nbformat.read(path, as_version=4)
    outputs = {c.source: (c.get("outputs", []), c.get("execution_count")) for c in old.cells if c.cell_type == "code"}
    missing = [c.source.splitlines()[0] for c in cells if c.cell_type == "code" and c.source not in outputs]
    if missing:
        raise SystemExit(f"{name}: code cells changed, run them on a GPU again: {missing}")
    for c in cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = outputs[c.source]
    old.cells = cells
    nbformat.write(old, path)
    print("rewrote prose of", path)


def build(notebooks: dict, argv=None):
    """Write each ``{file name: cells}``; the file names' two-digit prefixes select a subset."""
    argv = sys.argv[1:] if argv is None else argv
    chosen = [a for a in argv if not a.startswith("--")]
    for name, cells in notebooks.items():
        if chosen and name[:2] not in chosen:
            continue
        if "--keep-outputs" in argv:
            rewrite_prose(name, cells)
        else:
            write(name, cells)
