"""The GPU's SM clock, power draw and temperature, sampled through NVML while a timing runs.

A GPU at its power cap lowers its clock under a long tensor-core load, so the same kernel can run
10-20% slower from one moment to the next. A figure measured that way is not the kernel's: the
harness (``timing``) samples the GPU during every timing, and ``summary`` marks one whose clock fell
below ``POWER_LIMITED_FRACTION`` of the maximum as power-limited. NVML comes with the driver; its
Python binding is ``nvidia-ml-py`` (``import pynvml``). Without either, ``GpuMonitor`` records why.
"""
from __future__ import annotations

import statistics
import threading

POWER_LIMITED_FRACTION = 0.9   # an SM clock below 90% of its maximum during a timing marks it
PERIOD_S = 0.005


def _nvml():
    import pynvml

    pynvml.nvmlInit()
    return pynvml


class GpuMonitor:
    """``with GpuMonitor() as m: ...`` samples every ``PERIOD_S`` on a thread; ``m.summary()`` after."""

    def __init__(self, device_index: int | None = None):
        self._samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.unavailable: str | None = None
        try:
            self._pynvml = _nvml()
            if device_index is None:
                import cupy

                device_index = cupy.cuda.Device().id
            self._handle = self._pynvml.nvmlDeviceGetHandleByIndex(device_index)
            self.max_sm_mhz = float(self._pynvml.nvmlDeviceGetMaxClockInfo(self._handle, self._pynvml.NVML_CLOCK_SM))
            self.power_limit_w = self._pynvml.nvmlDeviceGetEnforcedPowerLimit(self._handle) / 1000
        except Exception as exc:   # noqa: BLE001  (no binding, no driver, no permission: all say why)
            self.unavailable = (f"NVML unavailable ({type(exc).__name__}: {exc}); install nvidia-ml-py "
                                "to record the clock and power during each timing")

    def _read(self) -> tuple[float, float, float]:
        nv = self._pynvml
        return (float(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_SM)),
                nv.nvmlDeviceGetPowerUsage(self._handle) / 1000,
                float(nv.nvmlDeviceGetTemperature(self._handle, nv.NVML_TEMPERATURE_GPU)))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._samples.append(self._read())
            except Exception as exc:   # noqa: BLE001
                self.unavailable = f"NVML stopped answering: {type(exc).__name__}: {exc}"
                return
            self._stop.wait(PERIOD_S)

    def __enter__(self) -> "GpuMonitor":
        if self.unavailable is None:
            self._samples.append(self._read())
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._samples.append(self._read())

    def summary(self) -> dict:
        """Min, median and max of the SM clock (MHz), power (W) and temperature (°C) over the samples,
        the maximum clock and power limit, and ``power_limited``; or ``{"unavailable": why}``."""
        if self.unavailable is not None or not self._samples:
            return {"unavailable": self.unavailable or "no NVML samples"}
        return summarise(self._samples, self.max_sm_mhz, self.power_limit_w)


def summarise(samples: list[tuple[float, float, float]], max_sm_mhz: float, power_limit_w: float) -> dict:
    out: dict = {"samples": len(samples), "max_sm_mhz": max_sm_mhz, "power_limit_w": round(power_limit_w, 1)}
    for i, name in enumerate(("sm_mhz", "power_w", "temperature_c")):
        values = [s[i] for s in samples]
        out[name] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    out["power_limited"] = out["sm_mhz"]["min"] < POWER_LIMITED_FRACTION * max_sm_mhz
    return out


def power_limited(gpu: dict | None) -> bool:
    """Whether a timing's GPU summary (``Case.extra["gpu_during"]``) says the clock fell under the mark."""
    return bool(gpu and gpu.get("power_limited"))


def clock_label(gpu: dict | None) -> str:
    """A table cell: the lowest SM clock during the timing, flagged when it was power-limited."""
    if not gpu or "sm_mhz" not in gpu:
        return "not sampled"
    low = gpu["sm_mhz"]["min"]
    mark = " power-limited" if gpu.get("power_limited") else ""
    return f"{low:.0f} MHz ({100 * low / gpu['max_sm_mhz']:.0f}%){mark}"

