"""Notebook 01's roofline calculator: any GPU and dtype, a GEMM of any shape (square, or M × N × K: M = 1 is
a matrix-vector product), the bound and what sets it."""
from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass

import ipywidgets as W

from course_lib.core.hardware import BYTES_PER_ELEMENT, SPECS, TERA, GpuSpec, replace_peaks
from course_lib.models import roofline
from course_lib.widgets.base import _fmt_seconds, check_fits, error_html, int_box, show

CUSTOM = "custom (type the roofs)"


CALC_DTYPES = [("fp32", "fp32"), ("fp16 / bf16", "fp16"), ("fp8", "fp8"), ("fp4", "fp4")]
# Below this a roofline bound says little about the time: starting one kernel costs a few microseconds
# (notebook 00's held pair of a tiny vector add).
LAUNCH_SCALE_S = 5e-6


@dataclass(frozen=True)
class GemmEstimate:
    """The calculator's answer for C[M,N] = A[M,K]·B[K,N] on one GPU in one dtype."""

    m: int
    n: int
    k: int
    dtype: str
    gpu: str
    bound: roofline.RooflineBound
    ridge: float
    crossover_n: float | None   # the square crossover, shown for square shapes only

    @property
    def square(self) -> bool:
        return self.m == self.n == self.k

    @property
    def attainable_flop_per_s(self) -> float:
        return self.bound.flop / self.bound.seconds


def gemm(m: int, n: int, k: int, dtype: str, gpu: GpuSpec) -> GemmEstimate:
    """2MNK FLOPs at the dtype's peak against b·(MK + KN + MN) bytes at the GPU's bandwidth."""
    if dtype not in BYTES_PER_ELEMENT:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(BYTES_PER_ELEMENT)}")
    peak, b, bw = gpu.peak(dtype), BYTES_PER_ELEMENT[dtype], gpu.hbm_bandwidth_bytes_per_s
    bound = roofline.time_lower_bound(roofline.gemm_flop(m, n, k), roofline.gemm_compulsory_bytes(m, n, k, b), peak, bw)
    square = m == n == k
    return GemmEstimate(m, n, k, dtype, gpu.name, bound, roofline.ridge_point(peak, bw),
                        roofline.square_gemm_crossover_n(peak, bw, b) if square else None)


BAR_PX = 360   # the longer time's bar; the other is drawn in proportion, so the ratio of the widths is the ratio of the times


def _bars(compute_s: float, memory_s: float) -> str:
    longest = max(compute_s, memory_s)
    rows = []
    for label, t, colour in (("compute", compute_s, "#4c72b0"), ("move A, B, C", memory_s, "#dd8452")):
        width = BAR_PX * t / longest
        rows.append(f'<div style="display:flex;align-items:center;margin:2px 0">'
                    f'<span style="width:110px;flex:none">{label}</span>'
                    f'<span class="course-bar" style="background:{colour};height:16px;width:{width:.1f}px;flex:none;'
                    f'display:inline-block"></span>'
                    f'<span style="margin-left:6px">{_fmt_seconds(t)}</span></div>')
    return "".join(rows)


class RooflineCalculator:
    """A GEMM in a dtype on a GPU: time to compute against time to move the matrices. Square (M = N = K,
    N from the slider or typed) by default; untick "square" to type M and K as well."""

    def __init__(self, gpus: list[GpuSpec] | None = None, n: int = 4096, dtype: str = "fp16"):
        self.gpus = {g.name: g for g in (gpus or [ROUND_B200, *SPECS.values()])}
        self.gpu = W.Dropdown(options=[*self.gpus, CUSTOM], description="GPU", layout=W.Layout(width="420px"))
        self.dtype = W.Dropdown(options=CALC_DTYPES, value=dtype, description="dtype")
        # step 1: a typed N is taken as typed (a coarser step would snap 750 to 736)
        self.n_slider = W.IntSlider(value=min(max(n, 16), 16384), min=16, max=16384, step=1, description="N",
                                    continuous_update=False, layout=W.Layout(width="420px"))
        self.n = W.IntText(value=n, description="N =", layout=W.Layout(width="180px"))
        self.square = W.Checkbox(value=True, description="square (M = K = N)", indent=False,
                                 layout=W.Layout(width="180px"))
        self.m = int_box("M =", n, "130px")
        self.k = int_box("K =", n, "130px")
        self.peak_tflops = W.FloatText(value=2000.0, description="peak TFLOP/s", disabled=True,
                                       style={"description_width": "initial"})   # the whole label, not "peak TFL…"
        self.bandwidth_tbps = W.FloatText(value=8.0, description="HBM TB/s", disabled=True)
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        self.n_slider.observe(self._slider_moved, "value")
        for w in (self.gpu, self.dtype, self.n, self.square, self.m, self.k, self.peak_tflops, self.bandwidth_tbps):
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.gpu, self.dtype]), W.HBox([self.n_slider, self.n]),
                          W.HBox([self.square, self.m, self.k]),
                          W.HBox([self.peak_tflops, self.bandwidth_tbps]), self.answer])
        self._refresh()

    def _slider_moved(self, change):
        self.n.value = change["new"]

    def selected_gpu(self) -> GpuSpec:
        if self.gpu.value != CUSTOM:
            return self.gpus[self.gpu.value]
        for label, v in (("peak", self.peak_tflops.value), ("HBM bandwidth", self.bandwidth_tbps.value)):
            if not v > 0:
                raise ValueError(f"{label} must be positive; you typed {v}. A GPU with no {label} runs nothing.")
        peak = self.peak_tflops.value * TERA
        typed = replace_peaks(ROUND_B200, name="custom GPU", key="custom", bandwidth=self.bandwidth_tbps.value * TERA,
                              peaks={d: peak for _, d in CALC_DTYPES}, source="typed in")
        return dataclasses.replace(typed, memory_bytes=None)   # its memory was not typed in

    def shape(self) -> tuple[int, int, int]:
        """(M, N, K): N for all three while "square" is ticked."""
        n = self.n.value
        return (n, n, n) if self.square.value else (self.m.value, n, self.k.value)

    def estimate(self) -> GemmEstimate:
        m, n, k = self.shape()
        for name, v in (("N", n), ("M", m), ("K", k)):
            if v < 1:
                raise ValueError(f"{name} must be at least 1 (a matrix with {name} = {v} has no elements)")
        gpu = self.selected_gpu()
        what = f"A, B and C at N = {n:,}" if m == n == k else f"A, B and C at M = {m:,}, N = {n:,}, K = {k:,}"
        check_fits(what, (m * k + k * n + m * n) * BYTES_PER_ELEMENT[self.dtype.value], gpu, self.gpus.values())
        return gemm(m, n, k, self.dtype.value, gpu)

    def _show_roofs(self) -> None:
        """The greyed boxes show the chosen GPU's own roofs (for the chosen dtype), not stale ones."""
        g = self.gpus[self.gpu.value]
        self._syncing = True
        try:
            if self.dtype.value in g.peak_flop_per_s:
                self.peak_tflops.value = round(g.peak(self.dtype.value) / TERA, 1)
            self.bandwidth_tbps.value = round(g.hbm_bandwidth_bytes_per_s / TERA, 3)
        finally:
            self._syncing = False

    def _refresh(self, change=None):
        if getattr(self, "_syncing", False):
            return
        custom = self.gpu.value == CUSTOM
        self.peak_tflops.disabled = self.bandwidth_tbps.disabled = not custom
        if not custom:
            self._show_roofs()
        if 16 <= self.n.value <= 16384 and self.n_slider.value != self.n.value:
            self.n_slider.value = self.n.value
        self.m.disabled = self.k.disabled = self.square.value
        if self.square.value and (self.m.value, self.k.value) != (self.n.value, self.n.value):
            self._syncing = True   # the greyed M and K show the square shape
            try:
                self.m.value = self.k.value = self.n.value
            finally:
                self._syncing = False
        try:
            e = self.estimate()
        except ValueError as exc:
            self.answer.value = error_html(str(exc).replace("peak_flop_per_s", "peak").replace(
                "bandwidth_bytes_per_s", "bandwidth"))
            return
        self.answer.value = render_estimate(e)

    def _ipython_display_(self):
        show(self.ui)


def render_estimate(e: GemmEstimate) -> str:
    b = e.bound
    verdict = ("compute-bound: the math sets the time" if b.binding_roof == "compute"
               else "memory-bound: moving the matrices sets the time")
    if e.square:
        shape = f"N = {e.n:,}"
    else:
        shape = f"M = {e.m:,}, N = {e.n:,}, K = {e.k:,}"
        if 1 in (e.m, e.n):
            shape += " (a matrix-vector product)"
    crossover = (f'Crossover: memory binds below N ≈ <span class="course-crossover">{e.crossover_n:,.0f}</span><br>'
                 if e.crossover_n is not None else "")
    launch = ("" if b.seconds >= LAUNCH_SCALE_S else
              '<small class="course-launch-note">This bound is shorter than the few microseconds it takes to '
              "start one kernel (notebook 00): at this size the launch, not the roofline, sets the time.</small><br>")
    return (
        f'<div class="course-calc-result" data-binding="{b.binding_roof}">'
        f"<b>{html.escape(e.gpu)}</b>, {e.dtype}, {shape}<br>"
        f"{_bars(b.compute_seconds, b.memory_seconds)}"
        f'Arithmetic intensity: <span class="course-intensity">{b.intensity:,.1f}</span> FLOP/byte '
        f'against a ridge of <span class="course-ridge">{e.ridge:,.1f}</span> FLOP/byte<br>'
        f'Binding roof: <b class="course-binding">{b.binding_roof}</b> ({verdict})<br>'
        f'Lower bound on time: <span class="course-time">{_fmt_seconds(b.seconds)}</span>; '
        f"attainable {e.attainable_flop_per_s / TERA:,.1f} TFLOP/s<br>"
        f"{launch}{crossover}"
        f"<small>analytic: roofline model from the {html.escape(e.gpu)} numbers</small></div>")


def roofline_calculator(extra_gpus: list[GpuSpec] = (), **kw) -> RooflineCalculator:
    """The notebook-01 calculator over the round-number B200, the spec table, and any extra GPUs (measured ceilings)."""
    return RooflineCalculator([ROUND_B200, *SPECS.values(), *extra_gpus], **kw)


ROUND_B200 = replace_peaks(SPECS["b200"], name="B200 (round numbers: 2 PFLOP/s, 8 TB/s)", key="b200-lesson",
                            bandwidth=8e12, peaks={"fp32": 2e15 / 30, "fp16": 2e15, "bf16": 2e15,
                                                   "fp8": 4e15, "fp4": 8e15},
                            source="round numbers: ~2 PFLOP/s fp16 over ~8 TB/s; fp8 and fp4 double each step; "
                                   "fp32 on CUDA cores about 30x lower")
