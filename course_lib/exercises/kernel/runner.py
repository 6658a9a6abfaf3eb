"""The child process of ``kernel_exercises.check``: load a learner's cubin, run the cases function
the check names at its sizes, print one JSON line.

    python -m course_lib.exercises.kernel.runner '{"cases": "MODULE:FUNCTION", "kernel": NAME,
        "sizes": [...], "cubin": PATH, "time_it": true, "launch": {...}, "reference_cubin": PATH, "reference_launch": {...}}'

With ``reference_cubin`` (the exercise's hidden reference solution), once the learner's kernel has
passed every size and been timed, the same cases function runs the reference at the last size and
its time joins the learner's (``timing["reference_us"]``, and the course kernel's time in that run): the
bar a correct kernel's speed is held to. The learner's result is printed first, so a reference that
fails or runs out of time leaves it standing. With ``"profile": true`` it launches the kernel once at the
timed size through the cases function's ``profile`` and prints nothing more: the checker runs it under ncu.

``cases`` is where the exercise's own cases function lives (``KernelExercise.live``, or a
fix-the-kernel check's), so the runner holds no table of exercises. It runs apart from the notebook
so that a kernel that hangs can be stopped and one that faults takes only this process's CUDA
context with it.
"""
from __future__ import annotations

import importlib
import json
import sys

from course_lib.exercises.kernel import cases as kernel_cases
from course_lib.exercises.kernel.cases import warm_up


def cases_address(fn) -> str:
    """How the child finds a cases function: ``module:qualified name``."""
    return f"{fn.__module__}:{fn.__qualname__}"


def resolve(address: str):
    module, _, name = address.partition(":")
    return getattr(importlib.import_module(module), name)


def main(spec_json: str) -> int:
    import cupy

    spec = json.loads(spec_json)
    if spec.get("no_pool"):   # under compute-sanitizer
        cupy.cuda.set_allocator(None)   # one cudaMalloc per array, so memcheck sees each array's true end
        kernel_cases.EXACT_INPUTS = True   # and no room past the inputs: a read past them is reported, not absorbed
    cases = resolve(spec["cases"])
    fn = cupy.RawModule(path=spec["cubin"]).get_function(spec["kernel"])
    warm_up()
    getattr(cases, "warm_up", lambda: None)()   # what only this exercise's cases compile (its ``warm_up``)
    print("READY", flush=True)   # the parent's time limit starts here: it is the kernel's, not Python's
    if spec.get("profile"):   # one launch at the timed size, under Nsight Compute (the checker's byte count)
        cases.profile(fn, **spec.get("launch", {}))
        cupy.cuda.Device().synchronize()
        return 0
    try:
        result = cases(fn, tuple(spec["sizes"]), spec.get("time_it", True), **spec.get("launch", {}))
    except Exception as exc:  # noqa: BLE001  (a learner's kernel can fail any way: report it)
        result = {"cases": [], "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result), flush=True)   # the learner's verdict stands whatever the reference does next
    if "timing" in result and spec.get("reference_cubin"):
        print(REFERENCE, flush=True)   # the parent gives the reference a time limit of its own
        try:
            reference = cupy.RawModule(path=spec["reference_cubin"]).get_function(spec["kernel"])
            timed = cases(reference, tuple(spec["sizes"][-1:]), True, **spec.get("reference_launch", {}))
            if "timing" not in timed:
                raise RuntimeError(timed.get("error") or next((f"it failed its own check at {c['size']}: {c['first_wrong']}"
                                                              for c in timed.get("cases", []) if not c["passed"]),
                                                             "it was not timed"))
            result["timing"]["reference_us"] = timed["timing"]["yours_us"]
            result["timing"]["reference_course_us"] = timed["timing"]["course_us"]
        except Exception as exc:  # noqa: BLE001  (no bar then: the learner's own results still stand)
            result["timing"]["reference_error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(result), flush=True)
    return 0


REFERENCE = "REFERENCE"   # the line between the learner's result and the reference's timing


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
