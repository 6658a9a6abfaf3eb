"""Which mode the course runs in, the software stack's versions, and plain-words diagnosis.

``live``: a usable CUDA GPU; experiments run now. ``replay``: no GPU (or
``COURSE_MODE=replay``); experiments return recorded measurements.
"""
from __future__ import annotations

import functools
import importlib
import os
import subprocess
from dataclasses import dataclass, field


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
    return os.environ.get("COURSE_MODE", "").lower() != "replay" and _probe_gpu()[0]


def mode() -> str:
    """``"live"`` or ``"replay"``. ``COURSE_MODE=replay`` forces replay on a GPU machine."""
    forced = os.environ.get("COURSE_MODE", "").lower()
    if forced not in ("", "live", "replay"):
        raise ValueError(f"COURSE_MODE={forced!r}: use 'live', 'replay' or leave it unset")
    if forced == "live" and not _probe_gpu()[0]:
        raise RuntimeError(f"COURSE_MODE=live but no GPU can be used: {_probe_gpu()[1]}")
    return "live" if gpu_available() else "replay"


def _version(module: str, attr: str = "__version__") -> str | None:
    try:
        return str(getattr(importlib.import_module(module), attr))
    except Exception:
        return None


def _fmt_cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def nvrtc_version() -> str | None:
    try:
        from .cuda import nvrtc_version as v
        return v()
    except Exception:
        return None


def _nvidia_smi(query: str) -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


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
    """Everything the self-check cell and a record's machine manifest need."""
    env = Environment(mode=mode(), gpu=None, compute_capability=None, driver=None,
                      cuda_runtime=None, nvrtc=nvrtc_version(), cupy=_version("cupy"),
                      torch=_version("torch"))
    if env.cupy is None:
        env.problems.append("CuPy is not installed: live mode needs it (pip install cupy-cuda12x).")
    if env.nvrtc is None:
        env.problems.append(
            "NVRTC could not be loaded, so kernels cannot be compiled. Install the pinned "
            "nvidia-cuda-nvrtc-cu12 and cuda-bindings (make setup does), or a CUDA toolkit.")
    ok, why = _probe_gpu()
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
            from .hardware import detect

            info = detect()
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


def banner() -> Environment:
    """The first cell of every notebook: mode, GPU, versions, and what is wrong if anything is."""
    env = environment()
    if env.mode == "live":
        print(f"LIVE mode: measuring on {env.gpu} (compute capability {env.compute_capability}) now.")
    else:
        from .experiments import replay_gpu

        why = " (COURSE_MODE=replay)" if os.environ.get("COURSE_MODE") else " (no usable GPU here)"
        print(f"REPLAY mode{why}: measurements are replayed from data/recorded/{replay_gpu()}/, "
              "each labelled with the GPU and date it was recorded on.")
    for label, value in (("GPU", env.gpu), ("compute capability", env.compute_capability),
                         ("driver", env.driver), ("CUDA runtime (CuPy's)", env.cuda_runtime),
                         ("NVRTC", env.nvrtc), ("CuPy", env.cupy), ("PyTorch", env.torch)):
        print(f"  {label:22s} {value or '—'}")
    for p in env.problems:
        print("  note:", p)
    return env
