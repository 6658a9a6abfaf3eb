"""The fusion calculator: a tensor shape, a dtype, a GPU and a chain of elementwise ops in; the unfused
and fused plans side by side out (HBM bytes, launches, intensity, time bound, binding roof)."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.core.hardware import BYTES_PER_ELEMENT, SPECS, TERA, GpuSpec, spec
from course_lib.core.validate import whole_numbers
from course_lib.models import fusion
from course_lib.widgets.base import _fmt_seconds, check_fits, error_html, int_box, span, show

PRESET = "scale → bias → GELU → residual add"
IDENTICAL = "k identical ops"
STORAGE_DTYPES = ("fp32", "fp16", "bf16", "fp8")



def render_plans(chain: fusion.Chain, plans: fusion.Plans, compute_bound_k: int | None = None) -> str:
    """The answer panel: one row per quantity, one column per plan, then what fusion saves."""
    rows = [("HBM bytes", "bytes", lambda p: f"{p.bytes_moved:,.0f}"),
            ("Kernel launches", "launches", lambda p: f"{p.launches}"),
            ("FLOPs", "flop", lambda p: f"{p.flop:,.0f}"),
            ("Intensity (FLOP/byte)", "intensity", lambda p: f"{p.intensity:,.3g}"),
            ("Time bound max(F/C, Q/B)", "time", lambda p: _fmt_seconds(p.seconds)),
            ("Binding roof", "binding", lambda p: p.binding_roof)]
    body = "".join(
        f"<tr><td>{label}</td>"
        + "".join(f"<td>{span(f'course-{name}-{key}', value(plan))}</td>"
                  for name, plan in (("unfused", plans.unfused), ("fused", plans.fused)))
        + "</tr>" for label, key, value in rows)
    k_line = ("" if compute_bound_k is None else
              f"Identical ops of this cost make the fused chain compute-bound from "
              f"k = {span('course-compute-bound-k', f'{compute_bound_k:,}')}<br>")
    ops = " → ".join(html.escape(op.name) for op in chain.ops)
    return (
        f'<div class="course-calc-result"><b>{html.escape(plans.gpu)}</b>: {ops} over {chain.elements:,} elements '
        f'of {chain.in_bytes_per_element:g} B<table style="font-size:90%"><tr><th></th><th>unfused</th>'
        f"<th>fused</th></tr>{body}</table>"
        f"Bytes saved: {span('course-bytes-saved', f'{plans.bytes_saved:,.0f}')} "
        f"({span('course-seconds-saved', _fmt_seconds(plans.seconds_saved))} at full bandwidth)<br>"
        f"Speedup bound: {span('course-speedup', f'{plans.speedup_bound:.2f}')}×<br>{k_line}"
        f"<small>analytic: roofline bounds with the {plans.dtype} peak ({plans.peak_flop_per_s / TERA:,.1f} TFLOP/s, "
        f"elementwise math on CUDA cores) over {plans.bandwidth_bytes_per_s / TERA:,.2f} TB/s HBM, ridge "
        f"{span('course-ridge', f'{plans.ridge:,.1f}')} FLOP/byte; no launch overhead, caches or register "
        f"pressure</small></div>")



class FusionCalculator:
    """M × N elements of a dtype on a GPU, through the epilogue preset or k identical ops →
    both plans' bytes, launches, intensity and bound, and the bytes fusion saves."""

    def __init__(self, gpus: list[GpuSpec] | None = None, gpu: str = "NVIDIA H200", m: int = 4096,
                 n: int = 4096, dtype: str = "bf16", chain: str = PRESET, k: int = 4, flop_per_op: float = 1.0):
        self.gpus = {g.name: g for g in (gpus or SPECS.values())}
        self.gpu = W.Dropdown(options=list(self.gpus), value=spec(gpu).name, description="GPU",
                              layout=W.Layout(width="380px"))
        self.dtype = W.Dropdown(options=STORAGE_DTYPES, value=dtype, description="dtype",
                                layout=W.Layout(width="200px"))
        self.m, self.n = int_box("M", m), int_box("N", n)
        # each button wide enough for the preset's words (ToggleButtons' default width cuts them off)
        self.chain = W.ToggleButtons(options=[PRESET, IDENTICAL], value=chain, description="chain",
                                     style={"button_width": "270px"})
        self.k = int_box("k", k, "120px")
        self.flop_per_op = W.FloatText(value=flop_per_op, description="FLOPs/element per op",
                                       layout=W.Layout(width="240px"), style={"description_width": "initial"})
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        for w in (self.gpu, self.dtype, self.m, self.n, self.chain, self.k, self.flop_per_op):
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.gpu, self.dtype]), W.HBox([self.m, self.n]), self.chain,
                          W.HBox([self.k, self.flop_per_op]), self.answer])
        self._refresh()

    def compute(self) -> tuple[fusion.Chain, fusion.Plans, int | None]:
        """The chosen chain, its two plans, and (for k identical ops) the k where compute binds."""
        whole_numbers(M=self.m.value, N=self.n.value)
        elements, gpu = self.m.value * self.n.value, self.gpus[self.gpu.value]
        check_fits(f"A {self.m.value:,}×{self.n.value:,} {self.dtype.value} tensor and its output",
                   2 * elements * BYTES_PER_ELEMENT[self.dtype.value], gpu)
        if self.chain.value == PRESET:
            chain, k_star = fusion.scale_bias_gelu_residual(elements, self.dtype.value), None
        else:
            chain = fusion.elementwise_chain(self.k.value, elements, self.flop_per_op.value, self.dtype.value)
            k_star = (fusion.compute_bound_chain_length(self.flop_per_op.value, chain.in_bytes_per_element, gpu)
                      if self.flop_per_op.value > 0 else None)
        return chain, fusion.ledger(chain, gpu), k_star

    def _refresh(self, change=None):
        self.k.disabled = self.flop_per_op.disabled = self.chain.value == PRESET
        try:
            self.answer.value = render_plans(*self.compute())
        except ValueError as exc:
            self.answer.value = error_html(str(exc))

    def _ipython_display_(self):
        show(self.ui)


def fusion_calculator(**kw) -> FusionCalculator:
    """The fusion calculator over every GPU in the spec table (default: 4096 × 4096 bf16, the epilogue
    preset, an H200)."""
    return FusionCalculator(**kw)
