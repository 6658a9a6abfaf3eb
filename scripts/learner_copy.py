"""The learner's working copy of the course (what `make lab` opens): each committed notebook copied into
work/, its `language_info` and kernelspec set to this installation's (the H200 run recorded its own,
and JupyterLab would otherwise rewrite them when the kernel starts, marking the notebook unsaved the
moment it is opened),
and signed as trusted, so the calculators are drawn from their saved widget state on open.

    python scripts/learner_copy.py WORK_DIR
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.sign import NotebookNotary

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def language_info() -> dict:
    """What an IPython kernel on this Python reports about its language (ipykernel's ``language_info``)."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info, version=sys.version.split()[0])


def kernelspec(name: str = "python3") -> dict:
    """The notebook's kernelspec as this installation names it (JupyterLab rewrites a different one)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(name)
    return {"display_name": spec.display_name, "language": spec.language, "name": name}


def learner_copy(src: Path, dest_dir: Path, notary: NotebookNotary | None = None) -> Path:
    nb = nbformat.read(src, as_version=4)
    nb.metadata["language_info"] = language_info()
    nb.metadata["kernelspec"] = kernelspec()
    (notary or NotebookNotary()).sign(nb)
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / src.name
    nbformat.write(nb, dest)
    return dest


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    notary = NotebookNotary()
    for src in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        learner_copy(src, Path(argv[0]), notary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
