"""Tiny helpers shared by the notebook builder scripts (scripts/build_*.py)."""
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
