"""One small, checked launch of every course kernel: what compute-sanitizer runs.

    python -m course_lib.sanitize            # run every smoke launch (needs a GPU)
    python -m course_lib.sanitize --list     # which kernels each smoke launch covers

Each host launcher in ``course_lib/launch/`` (and a lab that still launches its own kernels)
registers a smoke function for the kernels it owns with
``course_lib.measure.smoke.covers``; the test suite checks that every kernel in
``course_lib/kernels/`` is covered, so a new kernel cannot skip the sanitizer.
Smoke launches use CuPy only (no PyTorch), at sizes that exercise edge masks.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Callable

from course_lib import launch
from course_lib.measure.experiments import all_experiments
from course_lib.measure.smoke import SMOKE


def registry() -> dict[tuple[str, str], Callable[[], None]]:
    for mod in pkgutil.iter_modules(launch.__path__):   # every host launcher registers its family's smoke launch
        importlib.import_module(f"{launch.__name__}.{mod.name}")
    all_experiments()  # imports every lab, for the smoke launches labs still hold
    return SMOKE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.sanitize", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    reg = registry()
    if args.list:
        for (family, kernel), fn in sorted(reg.items()):
            print(f"{family}.{kernel}: {fn.__module__}.{fn.__name__}")
        return 0
    import cupy

    done = set()
    for (family, kernel), fn in sorted(reg.items()):
        if fn in done:
            continue
        fn()
        cupy.cuda.Device().synchronize()
        done.add(fn)
        print(f"ok  {fn.__module__}.{fn.__name__}: " +
              ", ".join(f"{f}.{k}" for (f, k), g in sorted(reg.items()) if g is fn))
    # CuPy keeps random-generator states and freed blocks for reuse; hand them back before exit.
    import gc

    cupy.random.reset_states()
    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()
    print(f"{len(reg)} kernels launched and checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
