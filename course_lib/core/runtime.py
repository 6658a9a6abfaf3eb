"""Which mode the course runs in: the bottom layer, importing nothing of the course.

``live``: a usable CUDA GPU; experiments measure on it. ``replay``: no GPU (or
``COURSE_MODE=replay``); experiments return the measurements recorded on
``replay_gpu()`` (``COURSE_REPLAY_GPU``, default the H200). ``render`` (``COURSE_MODE=render``, set by
``make render`` and the test that re-renders every notebook): no GPU is touched; the page is drawn as
its live run drew it, from the run stored with the notebook (``core.stored_run``).
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

# The package and the repository it sits in: kernels/ beside the layers, data/ beside the package.
PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = PACKAGE_DIR.parent

DEFAULT_REPLAY_GPU = "h200"


@functools.lru_cache(maxsize=1)
def _probe_gpu() -> tuple[bool, str]:
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return False, f"CuPy could not be imported ({exc.__class__.__name__}: {exc})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"CuPy found no usable CUDA driver or GPU ({exc})"
    if n == 0:
        return False, "the CUDA driver reports no GPU"
    try:
        cupy.zeros(1).sum().item()  # a real launch: catches a driver too old for the wheel
    except Exception as exc:
        return False, f"a test kernel failed to run ({exc})"
    return True, "ok"


def gpu_available() -> bool:
    return os.environ.get("COURSE_MODE", "").lower() not in ("replay", "render") and _probe_gpu()[0]


def mode() -> str:
    """``"live"``, ``"replay"`` or ``"render"``. ``COURSE_MODE=replay`` forces replay on a GPU machine."""
    forced = os.environ.get("COURSE_MODE", "").lower()
    if forced not in ("", "live", "replay", "render"):
        raise ValueError(f"COURSE_MODE={forced!r}: use 'live', 'replay', 'render' or leave it unset")
    if forced == "render":
        return "render"
    if forced == "live" and not _probe_gpu()[0]:
        raise RuntimeError(f"COURSE_MODE=live but no GPU can be used: {_probe_gpu()[1]}")
    return "live" if gpu_available() else "replay"


def shows_gpu_run() -> bool:
    """Whether the page shows a run on a GPU: measured now (live) or the notebook's stored live run
    (render). Code that differs between a GPU's run and the recorded replay asks this, not ``mode()``."""
    return mode() in ("live", "render")


def replay_gpu() -> str:
    """The slug of the recorded GPU that replay mode reads (``data/recorded/<slug>/``)."""
    return os.environ.get("COURSE_REPLAY_GPU", DEFAULT_REPLAY_GPU)
