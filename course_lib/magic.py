"""``%%cuda_exercise NAME [--sanitize]``: the cell's CUDA C, checked by ``kernel_exercises.check``.

Load it in a notebook with ``%load_ext course_lib.magic``. The cell holds only CUDA C; the
magic prints what was checked (compile, resources, static checks; live: results at every size,
timing, the counts, and compute-sanitizer at the small sizes once the rest passed, or at every size
whatever the rest found with ``--sanitize``) and keeps the verdict in
``_cuda_exercise`` for code that wants it.
"""
from __future__ import annotations

from course_lib.exercises.kernel import checker as kernel_exercises
from course_lib.exercises.kernel.catalog import EXERCISES

USAGE = "usage: %%cuda_exercise NAME [--sanitize]   (exercises: " + ", ".join(EXERCISES) + ")"


def cuda_exercise(line: str, cell: str):
    args = line.split()
    names = [a for a in args if not a.startswith("--")]
    unknown = [a for a in args if a.startswith("--") and a != "--sanitize"]
    if len(names) != 1 or unknown:
        print(USAGE)
        return None
    try:
        verdict = kernel_exercises.check(names[0], cell, sanitize=True if "--sanitize" in args else None)
    except KeyError as exc:
        print(exc.args[0])
        return None
    print(verdict)
    return None


def load_ipython_extension(ipython) -> None:
    ipython.register_magic_function(cuda_exercise, magic_kind="cell", magic_name="cuda_exercise")
    # A verdict that is not yet "Correct." ends with `print(kernel_exercises.hint(NAME))`: that line works in the
    # next cell, since loading the magic puts the checker in the notebook's namespace under that name.
    ipython.push({"kernel_exercises": kernel_exercises})
