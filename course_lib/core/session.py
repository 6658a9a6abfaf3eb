"""What this session runs on: the mode, the GPU, the software stack, the GPU's clocks and power,
and what to do when something is missing. The first cell of every notebook calls ``banner()``;
every record's machine manifest comes from here.
"""
from __future__ import annotations

import datetime as dt
import importlib
import os
import subprocess
import sys
from dataclasses import dataclass, field

from course_lib.core import cuda, hardware, runtime, stored_run


def _version(module: str, attr: str = "__version__") -> str | None:
    try:
        return str(getattr(importlib.import_module(module), attr))
    except Exception:
        return None


def _fmt_cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def nvrtc_version() -> str | None:
    try:
        return cuda.installed_nvrtc_version()
    except Exception:
        return None


def _nvidia_smi(query: str) -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def utc_label(iso: str) -> str:
    """``2026-12-03T14:05:09Z`` as ``2026-12-03 14:05 UTC``: when a live output was measured."""
    return iso[:16].replace("T", " ") + " UTC"


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


GPU_STATE_QUERY = {"sm_mhz": "clocks.sm", "max_sm_mhz": "clocks.max.sm", "mem_mhz": "clocks.mem",
                   "power_w": "power.draw", "power_limit_w": "power.limit", "temperature_c": "temperature.gpu"}


def gpu_state() -> dict[str, float]:
    """The GPU's clock, power draw against its cap, and temperature now (nvidia-smi); empty without it."""
    line = _nvidia_smi(",".join(GPU_STATE_QUERY.values()))
    if not line:
        return {}
    values = [v.strip() for v in line.split(",")]
    return {k: float(v) for k, v in zip(GPU_STATE_QUERY, values) if v.replace(".", "", 1).isdigit()}


def clock_warning(state: dict[str, float], floor: float = 0.8) -> str | None:
    """A sentence when a measurement ran far below the maximum SM clock, else ``None``."""
    sm, top = state.get("sm_mhz"), state.get("max_sm_mhz")
    if sm and top and sm < floor * top:
        return (f"the SM clock was {sm:.0f} MHz, {100 * sm / top:.0f}% of its {top:.0f} MHz maximum, "
                "when this was measured: throughput figures are below what the card reaches at full clock")
    return None


@dataclass
class Environment:
    mode: str
    gpu: str | None
    compute_capability: str | None
    driver: str | None
    cuda_runtime: str | None
    nvrtc: str | None
    cupy: str | None
    torch: str | None
    clocks_mhz: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def environment() -> Environment:
    """Everything the self-check cell and a record's machine manifest need. Rendering a notebook from its
    stored run: the environment that run had (``notebook_run.stamp_run`` stores it)."""
    if runtime.mode() == "render":
        return Environment(**stored_run.stored()["environment"])
    env = Environment(mode=runtime.mode(), gpu=None, compute_capability=None, driver=None,
                      cuda_runtime=None, nvrtc=nvrtc_version(), cupy=_version("cupy"),
                      torch=_version("torch"))
    if sys.platform == "darwin" and (env.cupy is None or env.nvrtc is None):
        env.problems.append(
            "macOS has no CUDA: the course replays the recorded runs, and each kernel's registers and "
            "shared memory come from compiler reports recorded with NVRTC (labelled so).")
    else:
        if env.cupy is None:
            env.problems.append("CuPy is not installed: live mode needs it (pip install cupy-cuda12x).")
        if env.nvrtc is None:
            env.problems.append(
                "NVRTC could not be loaded, so kernels are not compiled here: their reports are the recorded "
                "ones. To compile, install the pinned nvidia-cuda-nvrtc-cu12 and cuda-bindings (make setup "
                "does), or a CUDA toolkit.")
    ok, why = runtime._probe_gpu()
    if env.cupy is not None:
        import cupy

        try:
            v = cupy.cuda.runtime.driverGetVersion()
            env.driver = _fmt_cuda_version(v) if v else None
        except Exception:
            env.driver = None
        try:
            env.cuda_runtime = _fmt_cuda_version(cupy.cuda.runtime.runtimeGetVersion())
        except Exception:
            env.cuda_runtime = None
        if env.mode == "live":
            info = hardware.detect()
            env.gpu, env.compute_capability = info.name, info.compute_capability
            smi = _nvidia_smi("driver_version,clocks.max.sm,clocks.max.mem,clocks.sm,clocks.mem")
            if smi:
                drv, *clk = [x.strip() for x in smi.split(",")]
                env.driver = f"{drv} (CUDA {env.driver})" if env.driver else drv
                keys = ("max_sm", "max_mem", "sm_now", "mem_now")
                env.clocks_mhz = {k: int(float(v)) for k, v in zip(keys, clk) if v.replace(".", "").isdigit()}
        elif env.mode == "replay" and os.environ.get("COURSE_MODE", "").lower() != "replay":
            env.problems.append(diagnose(why, env))
    return env


def diagnose(why: str, env: Environment) -> str:
    """Turn a CuPy/driver failure into what a learner should do."""
    low = why.lower()
    if env.driver is None and "nvrtc" not in low:
        # CUDA reports "insufficient driver" when there is no driver at all.
        return ("No NVIDIA driver or GPU was found, so the course replays recorded measurements. "
                "That is expected on a laptop. On a GPU machine, check that `nvidia-smi` works.")
    if "insufficientdriver" in low or "driver version is insufficient" in low:
        return (f"The NVIDIA driver (CUDA {env.driver}) is older than CuPy's CUDA runtime "
                f"({env.cuda_runtime}). Update the driver, or install the CuPy wheel that matches it "
                "(cupy-cuda11x for a CUDA 11 driver).")
    if "nvrtc" in low or ".h: no such file" in low or "cannot open source file" in low:
        return ("CuPy cannot find NVRTC or the CUDA headers. Install the pinned "
                "nvidia-cuda-nvrtc-cu12 (make setup does) or set CUDA_PATH to a CUDA toolkit.")
    if ("nodevice" in low or "no cuda-capable device" in low or "libcuda" in low
            or "no usable cuda driver" in low or "reports no gpu" in low):
        return ("No NVIDIA driver or GPU was found, so the course replays recorded measurements. "
                "That is expected on a laptop. On a GPU machine, check that `nvidia-smi` works.")
    return f"The GPU could not be used ({why}); the course falls back to replay."


def _enable_colab_widgets() -> bool:
    """On Colab, turn on its custom widget manager so the calculators (ipywidgets 8) can draw."""
    import sys

    if "google.colab" not in sys.modules:
        return False
    try:
        from google.colab import output
        output.enable_custom_widget_manager()
    except (ImportError, AttributeError):
        return False
    return True


def banner() -> Environment:
    """The first cell of every notebook: mode, GPU, versions, and what is wrong if anything is."""
    if _enable_colab_widgets():
        print("Colab: its custom widget manager is on, so the calculators can draw.")
    env = environment()
    if env.mode == "live":
        # Rendered from the stored run, the banner is that run's: the time it printed, every output below from it.
        started = stored_run.capture("banner time", now_utc)
        print(f"LIVE mode: measured on {env.gpu} (compute capability {env.compute_capability}), "
              f"{utc_label(started)}.\n  Every output below comes from that run. Running this notebook "
              "measures again: on your GPU (live), or shows the recorded run (replay, no GPU).")
    else:
        why = " (COURSE_MODE=replay)" if os.environ.get("COURSE_MODE") else " (no usable GPU here)"
        print(f"REPLAY mode{why}: measurements are replayed from data/recorded/{runtime.replay_gpu()}/, "
              "each labelled with the GPU and date it was recorded on.")
    for label, value in (("GPU", env.gpu), ("compute capability", env.compute_capability),
                         ("driver", env.driver), ("CUDA runtime (CuPy's)", env.cuda_runtime),
                         ("NVRTC", env.nvrtc), ("CuPy", env.cupy), ("PyTorch", env.torch)):
        print(f"  {label:22s} {value or '—'}")
    for p in env.problems:
        print("  note:", p)
    return env
