"""The collective calculator (for notebook 14): a collective, a message size, a GPU count, a link bandwidth
(typed in, or a GPU's NVLink from the spec table) and a latency per step in; the α–β model's time out, split
into its latency and bandwidth terms, which of the two rules, nccl-tests' algorithm and bus bandwidths, and
the message size at which the two terms are equal."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.core.hardware import SPECS, GpuSpec
from course_lib.models import collectives
from course_lib.widgets.base import WRAP, _fmt_seconds, error_html, int_box, span, show

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
TYPED_IN = "typed in"


def _bytes(n: float) -> str:
    for unit in ("GiB", "MiB", "KiB"):
        if n >= UNITS[unit]:
            return f"{n / UNITS[unit]:,.4g} {unit}"
    return f"{n:,.4g} B"


def _rate(bytes_per_s: float | None) -> str:
    return "—" if bytes_per_s is None else f"{bytes_per_s / 1e9:,.1f} GB/s"


def link_presets(gpus=None) -> dict[str, float]:
    """Label → bytes/s per direction, for each GPU of the spec table with an NVLink figure."""
    return {f"{g.name}: NVLink, {g.nvlink_per_direction_bytes_per_s / 1e9:,.0f} GB/s each way "
            f"(datasheet: {g.nvlink_bidirectional_bytes_per_s / 1e9:,.0f} GB/s both ways)": g.nvlink_per_direction_bytes_per_s
            for g in (gpus or SPECS.values()) if g.nvlink_bidirectional_bytes_per_s}


def render_cost(c: collectives.CollectiveCost, link_source: str) -> str:
    name = c.collective.replace("_", "-")
    if c.ranks == 1:
        return (f'<div class="course-calc-result"><b>{name}</b> of {_bytes(c.message_bytes)} on one GPU: '
                f"{span('course-seconds', '0 s')}. One GPU has nothing to send: "
                "no latency, no bytes on a link.</div>")
    rows = [
        ("Steps (latencies paid in turn)", span("course-steps", f"{c.steps}")),
        ("Bytes each rank sends (and receives)", span("course-sent", _bytes(c.bytes_sent_per_rank))),
        ("Latency term: steps × α", span("course-latency", _fmt_seconds(c.latency_s))),
        ("Bandwidth term: bytes sent ÷ B", span("course-bandwidth", _fmt_seconds(c.bandwidth_s))),
        ("<b>Time</b>", f"<b>{span('course-seconds', _fmt_seconds(c.seconds))}</b>"),
        ("Larger term", span("course-dominant", c.dominant)),
        ("Algorithm bandwidth, S ÷ t", span("course-algbw", _rate(c.algbw_bytes_per_s))),
        (f"Bus bandwidth, algbw × {collectives.bus_bandwidth_factor(c.collective, c.ranks):.4g}",
         f"{span('course-busbw', _rate(c.busbw_bytes_per_s))} of the link's {_rate(c.link_bytes_per_s)}"),
        ("Size where the two terms are equal",
         span("course-crossover", "none: α is 0" if c.crossover_bytes is None else _bytes(c.crossover_bytes))),
    ]
    table = "".join(f"<tr><td>{label}</td><td>{value}</td></tr>" for label, value in rows)
    return (f'<div class="course-calc-result"><b>{name}</b> ({c.algorithm}) of {_bytes(c.message_bytes)} on '
            f"{c.ranks} GPUs, each with {_rate(c.link_bytes_per_s)} per direction ({html.escape(link_source)}) and "
            f"α = {_fmt_seconds(c.step_latency_s) if c.step_latency_s else '0'} a step"
            f'<table style="font-size:90%">{table}</table>'
            "<small>analytic: the α–β model (latency per step plus bytes over one direction's bandwidth); the bus "
            "bandwidth is nccl-tests' (doc/PERFORMANCE.md). α is an input: the notebook fits it to the recorded "
            "sweep. No contention, no protocol overhead, no NVLink multicast (off on the course's machines).</small>"
            "</div>")


class CollectiveCalculator:
    """Collective, size, GPUs, link and α → the α–β model's time, its two terms, algbw and busbw."""

    def __init__(self, gpus: list[GpuSpec] | None = None, collective: str = "all_reduce", size: float = 1.0,
                 unit: str = "GiB", ranks: int = 8, preset_gpu: str = "NVIDIA H200", step_latency_us: float = 5.0,
                 algorithm: str = "ring"):
        self.presets = link_presets(gpus)
        first = next((k for k in self.presets if k.startswith(preset_gpu + ":")), next(iter(self.presets)))
        self.collective = W.Dropdown(options=list(collectives.COLLECTIVES), value=collective, description="collective",
                                     layout=W.Layout(width="260px"))
        self.algorithm = W.ToggleButtons(options=list(collectives.ALGORITHMS), value=algorithm, description="algorithm")
        self.size = W.FloatText(value=size, description="message", layout=W.Layout(width="200px"))
        self.unit = W.Dropdown(options=list(UNITS), value=unit, layout=W.Layout(width="80px"))
        self.ranks = int_box("GPUs", ranks, "120px")
        self.preset = W.Dropdown(options=[*self.presets, TYPED_IN], value=first, description="link",
                                 layout=W.Layout(width="620px"))
        self.link_gbps = W.FloatText(value=self.presets[first] / 1e9, description="GB/s each way",
                                     layout=W.Layout(width="220px"), style={"description_width": "initial"})
        self.alpha_us = W.FloatText(value=step_latency_us, description="α, µs a step",
                                    layout=W.Layout(width="200px"), style={"description_width": "initial"})
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        self.preset.observe(self._preset_chosen, "value")
        self.link_gbps.observe(self._link_typed, "value")
        for w in (self.collective, self.algorithm, self.size, self.unit, self.ranks, self.alpha_us):
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.collective, self.algorithm], layout=W.Layout(**WRAP)),
                          W.HBox([self.size, self.unit, self.ranks, self.alpha_us], layout=W.Layout(**WRAP)),
                          W.HBox([self.preset, self.link_gbps], layout=W.Layout(**WRAP)), self.answer])
        self._refresh()

    def _preset_chosen(self, change):
        if change["new"] != TYPED_IN:
            self.link_gbps.value = self.presets[change["new"]] / 1e9   # refreshes through _link_typed
        else:
            self._refresh()

    def _link_typed(self, change):
        preset = self.presets.get(self.preset.value)
        if preset is not None and abs(preset / 1e9 - change["new"]) > 1e-9:
            self.preset.value = TYPED_IN                 # the number no longer is that GPU's
        self._refresh()

    @property
    def link_source(self) -> str:
        return "typed in" if self.preset.value == TYPED_IN else "datasheet: " + self.preset.value.split(":")[0]

    def compute(self) -> collectives.CollectiveCost:
        return collectives.predict(self.collective.value, self.size.value * UNITS[self.unit.value], self.ranks.value,
                                   self.link_gbps.value * 1e9, self.alpha_us.value * 1e-6, self.algorithm.value)

    def _refresh(self, change=None):
        try:
            self.answer.value = render_cost(self.compute(), self.link_source)
        except ValueError as exc:
            self.answer.value = error_html(str(exc))

    def _ipython_display_(self):
        show(self.ui)


def collective_calculator(**kw) -> CollectiveCalculator:
    """The collective calculator (default: a 1 GiB ring all-reduce on 8 GPUs over the H200's NVLink, α = 5 µs)."""
    return CollectiveCalculator(**kw)
