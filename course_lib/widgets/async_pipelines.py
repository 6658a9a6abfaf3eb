"""The pipeline calculator: load, compute and store times, a latency, a stage count and an issue order in;
the serial and the pipelined schedule out, drawn as two timelines, with what the stages cost in shared memory
and blocks."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.core.hardware import BYTES_PER_ELEMENT, SPECS, GpuSpec, spec
from course_lib.figures.plots import PALETTE
from course_lib.models import occupancy, pipeline
from course_lib.models.occupancy import fmt_bytes
from course_lib.models.tiling import TILE_DTYPES
from course_lib.widgets.base import WRAP, _fmt_seconds, error_html, ink_on, int_box, span, show

US = 1e-6
# The pipelined loop's issue order (``pipeline.schedule_times``'s issue_after_landing), as the menu names it.
ORDERS = {"refill a slot when its math ends (TMA ring)": False,
          "wait for a tile, then issue the next (cp.async)": True}
LABEL_PX = 64             # the unit names left of the timeline
TIMELINE_PX = 560
ROW_PX = 26



def _stages(n: int) -> str:
    return f"{n} stage" + "s" * (n > 1)


def render_timeline(events: tuple[pipeline.Event, ...], load_s: float, lanes: int, scale_s: float,
                    title: str) -> str:
    """An SVG with one row per unit and one box per iteration, coloured by iteration, ``scale_s`` wide.
    A load's box is its transfer; a thin line carries it on to where its tile lands, one lane per stage
    buffer so tiles in flight together do not hide each other."""
    def x(t: float) -> float:
        return LABEL_PX + TIMELINE_PX * t / scale_s

    # Labels and the axis take the theme's text colour (currentColor), so they read on a dark theme too.
    shapes = [f'<text x="0" y="{(row + 0.5) * ROW_PX}" font-size="12" dominant-baseline="central" '
              f'fill="currentColor">{unit}</text>' for row, unit in enumerate(pipeline.UNITS)]
    in_flight: list[str] = []
    for e in events:
        row = pipeline.UNITS.index(e.unit)
        busy_end = e.start_s + load_s if e.unit == "load" else e.end_s
        colour = PALETTE[e.iteration % len(PALETTE)]
        x0, width, y = x(e.start_s), x(busy_end) - x(e.start_s), row * ROW_PX + 3
        shapes.append(f'<rect class="course-pipe-box" data-unit="{e.unit}" data-iteration="{e.iteration}" '
                      f'x="{x0:.2f}" y="{y}" width="{width:.2f}" height="{ROW_PX - 6}" fill="{colour}" '
                      f'stroke="#fff"><title>{e.unit} {e.iteration}: {_fmt_seconds(e.start_s)} to '
                      f'{_fmt_seconds(e.end_s)}</title></rect>')
        if width >= 14:
            shapes.append(f'<text x="{x0 + width / 2:.2f}" y="{y + ROW_PX / 2 - 3}" font-size="10" fill="{ink_on(colour)}" '
                          f'text-anchor="middle" dominant-baseline="central">{e.iteration}</text>')
        if e.end_s > busy_end:
            ly = ROW_PX - 2 - 3 * (e.iteration % lanes)
            in_flight.append(f'<line class="course-in-flight" x1="{x(busy_end):.2f}" x2="{x(e.end_s):.2f}" '
                             f'y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"/>')
    shapes += in_flight                           # on top of the boxes they run past
    end = events[-1].end_s
    axis_y = 3 * ROW_PX + 12
    shapes.append(f'<line x1="{LABEL_PX}" x2="{x(end):.2f}" y1="{3 * ROW_PX + 2}" y2="{3 * ROW_PX + 2}" '
                  f'stroke="currentColor"/><text x="{x(end):.2f}" y="{axis_y}" font-size="11" text-anchor="end" '
                  f'fill="currentColor">'
                  f'{_fmt_seconds(end)}</text>')
    width, height = LABEL_PX + TIMELINE_PX + 4, axis_y + 4
    return (f"<div><b>{html.escape(title)}</b></div>"
            f'<svg class="course-pipe-timeline" xmlns="http://www.w3.org/2000/svg" width="100%" '
            f'style="max-width:{width}px" viewBox="0 0 {width} {height}">{"".join(shapes)}</svg>')


def _rows(rows: list[tuple[str, str]]) -> str:
    return "".join(f"<tr><td>{label}</td><td>{value}</td></tr>" for label, value in rows)


def render_stage_cost(stages: int, stage_bytes: int, r: occupancy.Residency) -> str:
    """Rows of the answer table: the shared memory the stages take and the blocks it leaves."""
    return _rows([
        ("Shared memory per stage (A and B tiles)", span("course-stage-smem", fmt_bytes(stage_bytes))),
        (f"× {_stages(stages)}", span("course-smem", fmt_bytes(r.smem_per_block_bytes))),
        ("Resident blocks per SM", f"{span('course-resident', str(r.resident_blocks))}, "
                                   f"limited by {span('course-limiter', r.limiter)}"),
    ])


def render_pipeline(s: pipeline.Schedule, cost_rows: str) -> str:
    """The answer panel: times, speedup, what covers the loads, the stage cost, then both timelines."""
    exact = ("exact: the serial loop" if s.stages == 1 else "exact: the loads are covered" if s.covered
             else "an upper bound: the stage buffers set the pace")
    order = ("tile i issued once tile i − S + 1 has landed and its buffer is free" if s.issue_after_landing
             else "a stage buffer free once the math on its tile ends")
    verdict = ("one stage: the loop is synchronous" if s.stages == 1 else
               "covered" if s.covered else f"not covered: {s.stages_needed} stages needed")
    speedup = span("course-speedup", f"{s.speedup:.2f}×")
    bound = span("course-speedup-bound", f"{s.speedup_bound:.2f}×")
    table = _rows([
        ("Serial, n × (L + c + s)", span("course-serial-time", _fmt_seconds(s.serial_s))),
        (f"Pipelined, {_stages(s.stages)}", f"<b>{span('course-pipelined-time', _fmt_seconds(s.pipelined_s))}</b>"),
        ("L + c + s + (n − 1) × beat", f"{span('course-predicted', _fmt_seconds(s.predicted_s))} ({exact})"),
        ("Beat: time per iteration in the long run", span("course-beat", _fmt_seconds(s.beat_s))),
        ("Speedup", f"{speedup} (never more than (L + c + s) / max(l, c, s) = {bound})"),
        ("Stages to cover the loads", f"{span('course-stages-needed', str(s.stages_needed))} ({verdict})"),
    ]) + cost_rows
    return (f'<div class="course-calc-result"><table style="font-size:90%">{table}</table>'
            f"{render_timeline(s.serial, s.load_s, 1, s.serial_s, 'Serial')}"
            f"{render_timeline(s.pipelined, s.load_s, s.stages, s.serial_s, f'Pipelined, {_stages(s.stages)}')}"
            f"<div><small>Same time scale for both. A box is a unit busy on one iteration, coloured by iteration; "
            f"a thin line after a load is its tile still in flight. analytic: earliest-start schedule, one "
            f"iteration at a time per unit, {order}.</small></div></div>")


def _float(label: str, value: float) -> W.FloatText:
    return W.FloatText(value=value, description=label, layout=W.Layout(width="190px"),
                       style={"description_width": "initial"})



class PipelineCalculator:
    """Per-tile load, compute and store times (µs), a load latency, iterations, stages and the issue order → both schedules
    as timelines, their times and speedup; a tile, dtype, block shape and GPU → what the stages cost."""

    def __init__(self, gpus: list[GpuSpec] | None = None, gpu: str = "NVIDIA H200", load_us: float = 1.0,
                 compute_us: float = 1.5, store_us: float = 0.5, latency_us: float = 2.5, iterations: int = 8,
                 stages: int = 2, block_m: int = 128, block_n: int = 128, block_k: int = 64, dtype: str = "bf16",
                 threads_per_block: int = 128, registers_per_thread: int = 128, issue_after_landing: bool = False):
        self.gpus = {g.name: g for g in (gpus or SPECS.values())}
        self.gpu = W.Dropdown(options=list(self.gpus), value=spec(gpu).name, description="GPU",
                              layout=W.Layout(width="380px"))
        self.load, self.compute_time = _float("load µs", load_us), _float("compute µs", compute_us)
        self.store, self.latency = _float("store µs", store_us), _float("load latency µs", latency_us)
        self.iterations = W.IntSlider(value=iterations, min=1, max=32, description="iterations",
                                      continuous_update=False)
        self.stages = W.IntSlider(value=stages, min=1, max=8, description="stages", continuous_update=False)
        self.order = W.Dropdown(options=list(ORDERS), value=next(k for k, v in ORDERS.items() if v == issue_after_landing),
                                description="order", layout=W.Layout(width="420px"))
        self.block_m, self.block_n, self.block_k = int_box("BM", block_m, "130px"), int_box("BN", block_n, "130px"), int_box("BK", block_k, "130px")
        self.dtype = W.Dropdown(options=list(TILE_DTYPES), value=dtype, description="dtype",
                                layout=W.Layout(width="160px"))
        self.threads = int_box("threads/block", threads_per_block, "160px")
        self.registers = int_box("registers/thread", registers_per_thread, "170px")
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        for w in (self.gpu, self.load, self.compute_time, self.store, self.latency, self.iterations, self.stages, self.order,
                  self.block_m, self.block_n, self.block_k, self.dtype, self.threads, self.registers):
            w.observe(self._refresh, "value")
        rows = ([self.load, self.compute_time, self.store, self.latency], [self.iterations, self.stages, self.order],
                [self.block_m, self.block_n, self.block_k, self.dtype], [self.gpu, self.threads, self.registers])
        self.ui = W.VBox([*(W.HBox(r, layout=W.Layout(**WRAP)) for r in rows), self.answer])
        self._refresh()

    def compute(self) -> pipeline.Schedule:
        return pipeline.schedule_times(self.load.value * US, self.compute_time.value * US, self.store.value * US,
                                       self.iterations.value, self.stages.value, latency_s=self.latency.value * US,
                                       issue_after_landing=ORDERS[self.order.value])

    def stage_cost(self) -> str:
        stage_bytes = pipeline.stage_smem_bytes(self.block_m.value, self.block_n.value, self.block_k.value,
                                                BYTES_PER_ELEMENT[self.dtype.value])
        r = pipeline.residency_with_stages(self.gpus[self.gpu.value], self.threads.value, self.registers.value,
                                           self.stages.value, stage_bytes)
        return render_stage_cost(self.stages.value, stage_bytes, r)

    def _refresh(self, change=None):
        try:
            s = self.compute()
        except ValueError as exc:
            self.answer.value = error_html(str(exc))
            return
        try:
            cost = self.stage_cost()
        except ValueError as exc:        # the timing still stands; only the stages do not fit this GPU
            cost = f'<tr><td colspan="2">{error_html(str(exc))}</td></tr>'
        self.answer.value = render_pipeline(s, cost)

    def _ipython_display_(self):
        show(self.ui)


def pipeline_calculator(**kw) -> PipelineCalculator:
    """The pipeline calculator over every GPU in the spec table (default: 8 iterations, 2 stages,
    128 × 128 × 64 bf16 tiles on an H200)."""
    return PipelineCalculator(**kw)
