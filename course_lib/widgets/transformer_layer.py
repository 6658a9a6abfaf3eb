"""The layer atlas calculator (for notebook 12): a model shape, a phase (prefill or decode), the batch,
the sequence or KV length and a GPU in; every op of one decoder layer out, with its FLOPs, compulsory
bytes, intensity, roofline floor, binding roof and share of the layer's floor; and, under them, the output
head (once per model, so outside the layer's floor) and the whole model's floor, every layer and the head."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.core.hardware import BYTES_PER_ELEMENT, SPECS, GpuSpec, spec
from course_lib.models import transformer
from course_lib.models.transformer import MODELS, ModelShape, Phase
from course_lib.widgets.base import WRAP, _fmt_seconds, error_html, int_box, span, show

DTYPE = "bf16"


def memory_note(shape: ModelShape, phase: Phase, gpu: GpuSpec) -> str:
    """A warning when the whole model's weights and this phase's KV cache exceed the GPU's memory."""
    b = BYTES_PER_ELEMENT[DTYPE]
    need = shape.parameters() * b + phase.batch * phase.context * shape.kv_bytes_per_token(DTYPE)
    if not gpu.memory_bytes or need <= gpu.memory_bytes:
        return ""
    return (f'<div class="course-calc-warning" style="color:var(--jp-warn-color1, #8a5a00)">⚠ the weights and the KV '
            f"cache take {need / 1e9:,.0f} GB, more than the {gpu.memory_bytes / 1e9:,.0f} GB of {html.escape(gpu.name)}:"
            " on one GPU this batch does not fit. The floors below are what it would cost if it did.</div>")


def render_atlas(shape: ModelShape, phase: Phase, gpu: GpuSpec, replicated_kv: bool = False) -> str:
    rows = transformer.atlas(shape, phase, gpu, DTYPE, replicated_kv)
    shares = transformer.time_shares(rows)
    body = "".join(
        f'<tr data-op="{html.escape(r.op.name)}"><td>{html.escape(r.op.name)}</td>'
        f"<td>{r.op.flop / 1e9:,.3g}</td><td>{r.op.bytes / 1e6:,.4g}</td><td>{r.op.intensity:,.3g}</td>"
        f"<td>{_fmt_seconds(r.seconds)}</td><td class=\"course-binding\">{r.bound.binding_roof}</td>"
        f"<td>{100 * share:.1f}%</td></tr>" for r, share in zip(rows, shares))
    total = sum(r.seconds for r in rows)
    memory_bound = sum(s for r, s in zip(rows, shares) if r.bound.binding_roof == "memory")
    head = transformer.output_head(shape, phase, DTYPE)
    head_bound = head.bound(gpu)
    # The output head runs once per model, not per layer: shown under the layer's ops, outside its floor.
    head_row = (f'<tr data-once-per-model="{html.escape(head.name)}" style="font-style:italic">'
                f"<td>{html.escape(head.name)}</td><td>{head.flop / 1e9:,.3g}</td><td>{head.bytes / 1e6:,.4g}</td>"
                f"<td>{head.intensity:,.3g}</td><td>{_fmt_seconds(head_bound.seconds)}</td>"
                f"<td>{head_bound.binding_roof}</td><td>once per model</td></tr>")
    where = (f"{phase.batch} × {phase.tokens:,} tokens" if phase.name == "prefill"
             else f"{phase.batch} × 1 token over {phase.context:,} cached")
    return (
        f'<div class="course-calc-result">{memory_note(shape, phase, gpu)}'
        f"<b>{html.escape(shape.name)}</b>, one layer, {phase.name} ({where}), {DTYPE}, on "
        f"<b>{html.escape(gpu.name)}</b>{' with K and V replicated per query head' if replicated_kv else ''}"
        f'<table style="font-size:90%"><tr><th>op</th><th>GFLOP</th><th>MB</th><th>FLOP/B</th><th>floor</th>'
        f"<th>roof</th><th>share</th></tr>{body}{head_row}</table>"
        f"Layer floor: {span('course-layer-floor', _fmt_seconds(total))}; "
        f"memory-bound ops: {span('course-memory-share', f'{100 * memory_bound:.0f}%')} of it; "
        f"all {shape.layers} layers and the output head: "
        f"{span('course-model-floor', _fmt_seconds(shape.layers * total + head_bound.seconds))}<br>"
        f"<small>analytic: compulsory bytes at the HBM boundary and the {DTYPE} tensor-core peak (fp32 for "
        f"elementwise ops and norms) of the {html.escape(gpu.name)} datasheet; no launch cost, caches or "
        f"overlap between ops. The output head (modelled: the last token of each sequence onto the vocabulary) "
        f"runs once per model, so it is outside the layer's floor and shares</small></div>")


class LayerAtlasCalculator:
    """Model, phase, batch, length and GPU → the operation atlas of one decoder layer."""

    def __init__(self, gpus: list[GpuSpec] | None = None, gpu: str = "NVIDIA H200", model: str = "Llama 3 8B",
                 phase: str = "decode", batch: int = 1, length: int = 4096):
        self.gpus = {g.name: g for g in (gpus or SPECS.values())}
        self.gpu = W.Dropdown(options=list(self.gpus), value=spec(gpu).name, description="GPU",
                              layout=W.Layout(width="320px"))
        self.model = W.Dropdown(options=list(MODELS), value=model, description="model", layout=W.Layout(width="260px"))
        self.phase = W.ToggleButtons(options=list(transformer.PHASES), value=phase, description="phase")
        self.batch = int_box("batch", batch)
        self.length = int_box("tokens (prefill) / KV length (decode)", length, "320px")
        # A checkbox's label takes the box's width (300 px by default) and clips past it: give it room for its words.
        self.replicated = W.Checkbox(value=False, description="replicate K and V per query head (no grouped path)",
                                     indent=False, layout=W.Layout(width="auto"))
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        for w in (self.gpu, self.model, self.phase, self.batch, self.length, self.replicated):
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.model, self.gpu], layout=W.Layout(**WRAP)), self.phase,
                          W.HBox([self.batch, self.length], layout=W.Layout(**WRAP)), self.replicated, self.answer])
        self._refresh()

    def current_phase(self) -> Phase:
        if self.phase.value == "prefill":
            return transformer.prefill(self.batch.value, self.length.value)
        return transformer.decode(self.batch.value, self.length.value)

    def _refresh(self, change=None):
        try:
            self.answer.value = render_atlas(MODELS[self.model.value], self.current_phase(),
                                             self.gpus[self.gpu.value], self.replicated.value)
        except ValueError as exc:
            self.answer.value = error_html(str(exc))

    def _ipython_display_(self):
        show(self.ui)


def layer_atlas_calculator(**kw) -> LayerAtlasCalculator:
    return LayerAtlasCalculator(**kw)
