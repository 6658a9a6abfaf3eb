"""Bring each notebook in line with its MyST Markdown text source, through jupytext.

    python scripts/sync_notebooks.py [notebooks/NN_name.md ...]    # text -> .ipynb (make sync)
    python scripts/sync_notebooks.py --to-text [notebooks/NN_name.ipynb ...]

jupytext's own ``--sync`` keeps a cell's outputs when its source changed and drops notebook
metadata that is not in the text (the widget state, the record of the GPU run). The course's
rule is stricter: committed outputs are the render of the stored GPU run, so a code cell whose
source changed loses its outputs here until ``make render`` draws them again from that run (or,
where the render says the run cannot answer the changed cell, a live run: ``make gpu-test``).
Prose edits keep every output. A new ``NN_name.md`` gets its notebook, with no outputs yet.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import jupytext
import nbformat

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
# A reference solution's code and output start collapsed in JupyterLab (a click opens them), so a
# learner meets the exercise before its answer.
COLLAPSED = {"jupyter": {"source_hidden": True, "outputs_hidden": True}}
# A kernel exercise's cell shows the learner's code; its recorded verdict (which names the defects the
# starter has) starts collapsed.
VERDICT_COLLAPSED = {"jupyter": {"outputs_hidden": True}}
# A cell right after a paragraph that asks for a prediction ("**Predict first.** Before you run the next
# cell, ...") shows its code; its recorded output, the answer, starts collapsed like a verdict.
PREDICTION_ANSWER_COLLAPSED = VERDICT_COLLAPSED
_ASKS_FOR_A_PREDICTION = re.compile(r"^\*\*Predict(?: first| before|\*\* first|\*\* before)")


def prediction_answer_cells(cells) -> list:
    """The code cell right after each paragraph that asks the learner to predict before running it."""
    return [after for before, after in zip(cells, cells[1:])
            if before["cell_type"] == "markdown" and after["cell_type"] == "code"
            and _ASKS_FOR_A_PREDICTION.match("".join(before["source"]).split("\n\n")[-1].lstrip())]


def reference_solution_blocks(cells) -> list[list]:
    """The code cells of each "Reference solution" block: from that paragraph to the next heading or exercise."""
    blocks, current = [], None
    for c in cells:
        src = "".join(c["source"])
        if c["cell_type"] == "markdown":
            if "Reference solution" in src:
                current = []
                blocks.append(current)
            elif src.lstrip().startswith(("#", "**")) or "write-it-yourself" in src:
                current = None
            continue
        if current is not None:
            current.append(c)
    return blocks


def text_to_notebook(md: Path) -> list[str]:
    """Write ``md``'s notebook; return the first line of each code cell that lost its outputs."""
    ipynb = md.with_suffix(".ipynb")
    new = jupytext.read(md, fmt="md:myst")
    old = nbformat.read(ipynb, as_version=4) if ipynb.exists() else None
    ran: dict[str, list] = {}
    for cell in old.cells if old else []:
        if cell.cell_type == "code":
            ran.setdefault(cell.source, []).append(cell)
    stale = []
    old_cells = old.cells if old else []
    for i, cell in enumerate(new.cells):
        cell.metadata = {}
        if i < len(old_cells) and old_cells[i].cell_type == cell.cell_type:
            cell.id = old_cells[i].id  # stable ids keep the notebook's diff to what changed
        if cell.cell_type != "code":
            continue
        previous = ran.get(cell.source)
        if previous:
            kept = previous.pop(0)
            cell.outputs, cell.execution_count = kept.outputs, kept.execution_count
        else:
            cell.outputs, cell.execution_count = [], None
            if cell.source.strip():
                stale.append(cell.source.strip().splitlines()[0])
    for cell in new.cells:
        if cell.cell_type == "code" and cell.source.startswith("%%cuda_exercise"):
            cell.metadata = nbformat.from_dict(VERDICT_COLLAPSED)
    for cell in prediction_answer_cells(new.cells):
        cell.metadata = nbformat.from_dict(PREDICTION_ANSWER_COLLAPSED)
    for block in reference_solution_blocks(new.cells):
        for cell in block:
            cell.metadata = nbformat.from_dict(COLLAPSED)
    new.metadata = old.metadata if old else nbformat.from_dict(
        {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}})
    nbformat.write(new, ipynb)
    return stale


def notebook_to_text(ipynb: Path) -> None:
    jupytext.write(nbformat.read(ipynb, as_version=4), ipynb.with_suffix(".md"), fmt="md:myst")


def main(argv: list[str]) -> int:
    to_text = "--to-text" in argv
    paths = [Path(a) for a in argv if not a.startswith("--")]
    if to_text:
        for ipynb in paths or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
            notebook_to_text(ipynb.with_suffix(".ipynb"))
            print("wrote", ipynb.with_suffix(".md"))
        return 0
    needs_render = {}
    for md in paths or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.md")):
        md = md.with_suffix(".md")
        stale = text_to_notebook(md)
        print("synced", md.with_suffix(".ipynb"), f"({len(stale)} code cells without outputs)" if stale else "")
        if stale:
            needs_render[md.with_suffix(".ipynb")] = stale
    for ipynb, cells in needs_render.items():
        print(f"\n{ipynb.name}: these code cells are new or changed, so their outputs were removed. Render the "
              f"notebook from its stored GPU run before committing it (make render NOTEBOOKS={ipynb}); if the render "
              "says a cell needs a GPU run, run it live (make gpu-test NOTEBOOKS=...) and render again:")
        for first_line in cells:
            print("   ", first_line)
    return 1 if needs_render else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
