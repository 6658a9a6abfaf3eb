"""Calculator of notebook 04: one warp's sectors. Bad input gets a message."""
from __future__ import annotations

import ipywidgets as W

from course_lib.models import memory
from course_lib.widgets.base import MUTED_TEXT, error_html, gap_row, rows_with_gaps, show

_MAX_ROWS = 14


def render_sectors(c: memory.SectorCount) -> str:
    """The warp's bytes on 128-byte lines of four 32-byte sectors, and the sector count."""
    cell = 4                                        # bytes per drawn cell
    per_line = c.line_bytes // cell
    owner: dict[int, list[int]] = {}
    for lane, a in enumerate(c.addresses_bytes):
        if a is None:
            continue
        for x in range(a // cell, (a + c.element_bytes - 1) // cell + 1):
            owner.setdefault(x, []).append(lane)
    touched = set(c.sectors)
    rows = []
    for r in rows_with_gaps(list(c.lines), _MAX_ROWS):
        if not isinstance(r, int):
            rows.append(gap_row(r, "line", per_line))
            continue
        tds = [f'<td style="font-size:10px;color:{MUTED_TEXT};padding-right:4px;text-align:right">'
               f"byte {r * c.line_bytes:,}</td>"]
        for k in range(per_line):
            x = r * per_line + k
            sector = x * cell // c.sector_bytes
            lanes = owner.get(x, [])
            bg = "#4c72b0" if lanes else ("#f3c99b" if sector in touched else "#f4f4f4")
            first_cell = len(lanes) == 1 and c.addresses_bytes[lanes[0]] // cell == x
            label = str(lanes[0]) if first_cell else ""
            edge = "2px solid #333" if (k * cell) % c.sector_bytes == 0 else "1px solid #ddd"
            tds.append(f'<td title="bytes {x * cell}-{x * cell + cell - 1}, sector {sector}'
                       f'{", lanes " + ",".join(map(str, lanes)) if lanes else ""}" '
                       f'style="width:13px;height:16px;background:{bg};border-left:{edge};color:white;'
                       f'font-size:8px;text-align:center;padding:0">{label}</td>')
        rows.append("<tr>" + "".join(tds) + "</tr>")
    grid = f'<table style="border-collapse:collapse;margin:4px 0">{"".join(rows)}</table>'
    legend = ('<small><span style="background:#4c72b0;color:white">&nbsp;requested&nbsp;</span> '
              '<span style="background:#f3c99b;color:#222">&nbsp;fetched, unused&nbsp;</span> '
              '<span style="background:#f4f4f4;color:#222">&nbsp;not fetched&nbsp;</span>; thick lines: 32-byte sector '
              "boundaries; each row is one 128-byte line</small>")
    return (f'<div class="course-calc-result">{grid}{legend}<br>'
            f'Sectors touched: <b class="course-sectors">{c.n_sectors}</b> '
            f'(<span class="course-fetched">{c.fetched_bytes:,}</span> bytes fetched) in '
            f'<span class="course-lines">{c.n_lines}</span> line(s) of 128 bytes<br>'
            f'Requested: <span class="course-requested">{c.requested_bytes:,}</span> bytes by '
            f'<span class="course-active">{c.active_lanes}</span> active lanes<br>'
            f'Efficiency (requested ÷ fetched): <b class="course-efficiency">{100 * c.efficiency:.1f}</b>%<br>'
            "<small>analytic: the first-order sector model (course_lib.models.memory.sector_count), at the request "
            "boundary. A neighbouring warp may still find an over-fetched sector in L1 or L2, so DRAM traffic can "
            "be lower.</small></div>")


class SectorCalculator:
    """One warp's global-memory access: element size, pattern, stride, offset, active lanes → sectors."""

    PATTERNS = [("unit stride", "unit"), ("strided", "strided"), ("shifted (lane i reads i + shift)", "shifted"),
                ("permuted (unit, shuffled lanes)", "permuted"), ("random gather", "random")]
    SIZES = [("1 B (int8, fp8)", 1), ("2 B (bf16, fp16)", 2), ("4 B (fp32)", 4), ("8 B (float2)", 8),
             ("16 B (float4)", 16)]

    def __init__(self, pattern: str = "unit", element_bytes: int = 4, stride: int = 2, offset_bytes: int = 0,
                 shift: int = 1, active_lanes: int = 32, seed: int = 0):
        style = {"description_width": "90px"}
        self.pattern = W.Dropdown(options=self.PATTERNS, value=pattern, description="pattern", style=style,
                                  layout=W.Layout(width="330px"))
        self.element_bytes = W.Dropdown(options=self.SIZES, value=element_bytes, description="element",
                                        style=style, layout=W.Layout(width="250px"))
        self.stride = W.IntText(value=stride, description="stride", style=style, layout=W.Layout(width="170px"))
        self.offset = W.IntText(value=offset_bytes, description="offset (B)", style=style,
                                layout=W.Layout(width="170px"))
        self.shift = W.IntText(value=shift, description="shift", style=style, layout=W.Layout(width="170px"))
        self.lanes = W.IntSlider(value=active_lanes, min=1, max=32, description="active lanes", style=style)
        self.seed = W.IntText(value=seed, description="seed", style=style, layout=W.Layout(width="170px"))
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        for w in (self.pattern, self.element_bytes, self.stride, self.offset, self.shift, self.lanes, self.seed):
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.pattern, self.element_bytes]),
                          W.HBox([self.stride, self.shift, self.offset]),
                          W.HBox([self.lanes, self.seed]), self.answer])
        self._refresh()

    def count(self) -> memory.SectorCount:
        b = self.element_bytes.value
        addrs = memory.warp_addresses(self.pattern.value, b, stride=self.stride.value, offset_bytes=self.offset.value,
                                      shift=self.shift.value, active_lanes=self.lanes.value, seed=self.seed.value)
        return memory.sector_count(addrs, b)

    def _refresh(self, change=None):
        p = self.pattern.value
        self.stride.disabled = p != "strided"
        self.shift.disabled = p != "shifted"
        self.seed.disabled = p not in ("permuted", "random")
        try:
            c = self.count()
        except ValueError as exc:
            self.answer.value = error_html(str(exc))
            return
        self.answer.value = render_sectors(c)

    def _ipython_display_(self):
        show(self.ui)
