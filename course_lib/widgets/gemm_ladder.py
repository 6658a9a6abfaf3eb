"""The tile calculator (notebook 06): a GEMM tile choice in, its costs and whether it fits out."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.core.hardware import KIB, SPECS, GpuSpec
from course_lib.models import tiling
from course_lib.widgets.base import ERROR_TEXT, OK_TEXT, WRAP, error_html, span, show

ESTIMATE = 0   # the registers box: 0 means "estimate it"



def render_tile(e: tiling.TileEstimate) -> str:
    """The answer panel for one estimate (also used by the tests to know what must be shown)."""
    tm, tn = e.thread_tile
    regs = (f"{span('course-registers', str(e.registers_per_thread))} "
            f"({'estimated: accumulators + fragments + an allowance; the compiler decides' if e.registers_estimated else 'as typed'})")
    if e.residency is not None:
        r = e.residency
        resident = (f"{span('course-blocks', str(r.resident_blocks))} blocks per SM "
                    f"(limited by {html.escape(r.limiter)}), {r.active_warps} warps, occupancy "
                    f"{span('course-occupancy', f'{100 * r.occupancy:.1f}%')}")
    else:
        resident = span("course-blocks", "—") + " (the tile does not launch)"
    if e.fits:
        verdict = (f'<div class="course-tile-fits" style="color:{OK_TEXT}">✔ {span("course-fits", "fits")} '
                   f"on {html.escape(e.gpu)}</div>")
    else:
        items = "".join(f"<li>{html.escape(p)}</li>" for p in e.problems)
        verdict = (f'<div class="course-calc-error" style="color:{ERROR_TEXT}">✘ '
                   f'{span("course-fits", "does not fit")} on {html.escape(e.gpu)}:<ul>{items}</ul></div>')
    return (
        f'<div class="course-calc-result" data-fits="{str(e.fits).lower()}">'
        f"<b>{e.block_m}×{e.block_n}×{e.block_k}</b> tile, {e.dtype}, {e.stages} stage(s), {e.threads} threads, "
        f"{e.outputs_per_thread} outputs per thread ({tm}×{tn})<br>"
        f"One stage: {span('course-stage-flop', f'{e.stage_flop:,}')} FLOPs on "
        f"{span('course-stage-bytes', f'{e.stage_bytes:,.0f}')} bytes of A and B<br>"
        f"Stage intensity against L2 (what a block loads): {span('course-l2-intensity', f'{e.l2_intensity:,.1f}')} FLOP/byte "
        f"(2·B_M·B_N / (b·(B_M+B_N)))<br>"
        f"Intensity against shared memory: {span('course-smem-intensity', f'{e.smem_intensity:,.2f}')} FLOP/byte "
        f"(each thread reads {tm}+{tn} values per k for {2 * tm * tn} FLOPs)<br>"
        f"Shared-memory staging: {span('course-staging', f'{e.staging_bytes / KIB:,.1f} KiB')} "
        f"({e.staging_bytes:,.0f} bytes)<br>"
        f"fp32 accumulator tile: {span('course-accumulator', f'{e.accumulator_bytes / KIB:,.1f} KiB')}, "
        f"{span('course-acc-regs', str(e.accumulator_registers_per_thread))} registers per thread<br>"
        f"Registers per thread: {regs}<br>Residency: {resident}{verdict}"
        f"<small>analytic: the tiling and occupancy models, {html.escape(e.gpu)}'s spec-table limits</small></div>")


class TileCalculator:
    """Block tile, stages, dtype, threads and outputs per thread → intensities, bytes, registers, residency."""

    def __init__(self, gpus: list[GpuSpec] | None = None, gpu: str = "h200", block_m: int = 128, block_n: int = 128,
                 block_k: int = 32, stages: int = 2, dtype: str = "bf16", threads: int = 256,
                 outputs_per_thread: int = 64):
        self.gpus = {g.name: g for g in (gpus or list(SPECS.values()))}
        self.gpu = W.Dropdown(options=list(self.gpus), value=SPECS[gpu].name, description="GPU",
                              layout=W.Layout(width="380px"))
        self.dtype = W.Dropdown(options=list(tiling.TILE_DTYPES), value=dtype, description="dtype")
        # Plain integer boxes: an impossible value reaches the model, which says what is wrong with it,
        # instead of a bounded box clamping it silently.
        def box(value: int, description: str) -> W.IntText:
            return W.IntText(value=value, description=description, layout=W.Layout(width="200px"),
                             style={"description_width": "initial"})

        self.block_m, self.block_n, self.block_k = box(block_m, "B_M"), box(block_n, "B_N"), box(block_k, "B_K")
        self.stages = box(stages, "stages")
        self.threads = box(threads, "threads")
        self.outputs = box(outputs_per_thread, "outputs/thread")
        self.registers = box(ESTIMATE, "registers (0 = estimate)")
        self.registers.layout.width = "240px"
        self.registers.tooltip = "registers per thread from the compiler's report; 0 = let the calculator estimate"
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        self.controls = (self.gpu, self.dtype, self.block_m, self.block_n, self.block_k, self.stages, self.threads,
                         self.outputs, self.registers)
        for w in self.controls:
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.gpu, self.dtype]),
                          W.HBox([self.block_m, self.block_n, self.block_k], layout=W.Layout(**WRAP)),
                          W.HBox([self.stages, self.threads, self.outputs], layout=W.Layout(**WRAP)),
                          W.HBox([self.registers]),
                          self.answer])
        self._refresh()

    def estimate(self) -> tiling.TileEstimate:
        if self.registers.value < 0:
            raise ValueError(f"registers per thread cannot be negative (you typed {self.registers.value}); "
                             "type the compiler's count, or 0 to estimate")
        regs = self.registers.value or None
        return tiling.tile_estimate(self.block_m.value, self.block_n.value, self.block_k.value, self.stages.value,
                                    self.dtype.value, self.threads.value, self.outputs.value,
                                    self.gpus[self.gpu.value], registers_per_thread=regs)

    def _refresh(self, change=None):
        try:
            e = self.estimate()
        except ValueError as exc:
            self.answer.value = error_html(str(exc))
            return
        self.answer.value = render_tile(e)

    def _ipython_display_(self):
        show(self.ui)


def tile_calculator(**kw) -> TileCalculator:
    """Notebook 06's calculator, over every GPU in the spec table (default: the worked example's 128×128×32 bf16 tile)."""
    return TileCalculator(**kw)
