"""Calculator of notebook 05: one warp's shared-memory banks, and the one-line description of a pattern.
Bad input gets a message."""
from __future__ import annotations

import ipywidgets as W

from course_lib.models import memory
from course_lib.widgets.base import MUTED_TEXT, error_html, gap_row, rows_with_gaps, show

_PHASE_COLOURS = ["#4c72b0", "#55a868", "#8172b2", "#937860"]


def render_banks(r: memory.BankCount) -> str:
    """Banks 0-31 across, 4-byte word rows down; each lane's word(s) coloured by the phase that serves it."""
    cells: dict[int, list[tuple[int, int]]] = {}          # word -> [(lane, phase)]
    for lane, a in enumerate(r.addresses_bytes):
        if a is None:
            continue
        for w in range(a // 4, (a + r.access_bytes - 1) // 4 + 1):
            cells.setdefault(w, []).append((lane, lane // r.lanes_per_phase))
    # a word conflicts when its bank serves another distinct word in the same phase
    busy: dict[tuple[int, int], set[int]] = {}
    for w, users in cells.items():
        for _, ph in users:
            busy.setdefault((ph, w % memory.BANKS), set()).add(w)
    head = "".join(f'<th style="font-size:8px;font-weight:normal;color:{MUTED_TEXT};width:15px">{b}</th>'
                   for b in range(memory.BANKS))
    rows = [f'<tr><td style="font-size:9px;color:{MUTED_TEXT}">bank →</td>{head}</tr>']
    for row in rows_with_gaps(sorted({w // memory.BANKS for w in cells}), memory.WARP_SIZE, gaps=False):
        if not isinstance(row, int):
            rows.append(gap_row(row, "row", memory.BANKS))
            continue
        tds = [f'<td style="font-size:9px;color:{MUTED_TEXT};padding-right:4px;text-align:right">word {row * 32:,}</td>']
        for b in range(memory.BANKS):
            w = row * memory.BANKS + b
            users = cells.get(w, [])
            if not users:
                tds.append('<td style="height:15px;background:#f4f4f4;border:1px solid #fff"></td>')
                continue
            ph = users[0][1]
            conflict = any(len(busy[(p, b)]) > 1 for _, p in users)
            label = str(users[0][0]) if len(users) == 1 else f"{len(users)}×"
            border = "2px solid #c44e52" if conflict else "1px solid #fff"
            lanes = ", ".join(str(lane) for lane, _ in users)
            tds.append(f'<td title="word {w}, bank {b}, lanes {lanes}" style="height:15px;text-align:center;'
                       f'font-size:8px;color:white;background:{_PHASE_COLOURS[ph % 4]};border:{border}">{label}</td>')
        rows.append("<tr>" + "".join(tds) + "</tr>")
    grid = f'<table style="border-collapse:collapse;margin:4px 0">{"".join(rows)}</table>'
    colours = ", ".join(f'<span style="color:{_PHASE_COLOURS[i % 4]}">lanes {i * r.lanes_per_phase}-'
                        f'{(i + 1) * r.lanes_per_phase - 1}</span>'
                        for i in range(memory.WARP_SIZE // r.lanes_per_phase))
    if r.paired:   # a paired 8-byte load is served by the whole warp at once: this, not the 4-byte sentence
        phases = (f"Every lane reads the same {r.access_bytes} bytes as lane n ^ "
                  f"{memory.paired_lanes(r.addresses_bytes)}, so two lanes share one returned register and the "
                  f"load is served {r.lanes_per_phase} lanes at a time ({colours}): at least "
                  f"{r.ideal_wavefronts} wavefronts instead of {2 * r.ideal_wavefronts} (NVIDIA's rule for "
                  "16-byte loads, measured for 8-byte ones by banks.wide_probe; stores do not pair).")
    elif r.lanes_per_phase < memory.WARP_SIZE:
        phases = (f"{r.access_bytes}-byte accesses are served {r.lanes_per_phase} lanes at a time "
                  f"({colours}): 128 bytes per wavefront, so at least {r.ideal_wavefronts} wavefronts even "
                  "without a conflict.")
    else:
        phases = "The whole warp is served in one phase (32 lanes x 4 bytes = 128 bytes)."
    return (f'<div class="course-calc-result">{grid}<small>Cell = one 4-byte word, labelled with the lane that '
            "reads it (n× = n lanes, one broadcast read); only rows that are touched are drawn. Red border: the bank must serve another word in the same "
            f"phase (a conflict). {phases}</small><br>"
            f'Wavefronts for this request: <b class="course-wavefronts">{r.wavefronts}</b> '
            f'(minimum <span class="course-ideal">{r.ideal_wavefronts}</span>)<br>'
            f'Conflict: <span class="course-ways">{r.ways}</span>-way; '
            f'<b class="course-degree">{r.conflict_degree:.2f}</b>× the minimum time<br>'
            "<small>analytic: the bank model (course_lib.models.memory.bank_conflicts): 32 banks of 4 bytes, one distinct "
            "word per bank per wavefront, same-word reads broadcast, accesses wider than 4 bytes split into "
            "128-byte phases as NVIDIA GPUs since Volta do, 16-byte loads whose lanes n and n ^ 1 (or n ^ 2) "
            "share addresses per half-warp, 8-byte loads whose lanes n and n ^ 1 do per warp.</small></div>")


class BankCalculator:
    """One warp's shared-memory access to a tile: pattern, word size, row pitch (padding), swizzle → wavefronts."""

    PATTERNS = [("row of the tile", "row"), ("column of the tile", "column"),
                ("column, XOR-swizzled tile", "swizzled column"), ("strided (flat array)", "strided"),
                ("broadcast (one word)", "broadcast"),
                ("lane groups share a word (lane i reads i // stride)", "grouped"),
                ("repeating (lane i reads i % stride)", "repeating"), ("random", "random")]
    SIZES = [("4 B (float)", 4), ("8 B (double, float2)", 8), ("16 B (float4), a load", 16)]

    def __init__(self, pattern: str = "column", access_bytes: int = 4, pitch: int = 32, stride: int = 2,
                 index: int = 0, active_lanes: int = 32, seed: int = 0):
        style = {"description_width": "90px"}
        self.pattern = W.Dropdown(options=self.PATTERNS, value=pattern, description="pattern", style=style,
                                  layout=W.Layout(width="330px"))
        self.access_bytes = W.Dropdown(options=self.SIZES, value=access_bytes, description="word", style=style,
                                       layout=W.Layout(width="260px"))
        self.pitch = W.IntText(value=pitch, description="row pitch (elements)", style={"description_width": "initial"},
                               layout=W.Layout(width="210px"))
        self.stride = W.IntText(value=stride, description="stride", style=style, layout=W.Layout(width="170px"))
        self.index = W.IntText(value=index, description="row / col", style=style, layout=W.Layout(width="170px"))
        self.lanes = W.IntSlider(value=active_lanes, min=1, max=32, description="active lanes", style=style)
        self.seed = W.IntText(value=seed, description="seed", style=style, layout=W.Layout(width="170px"))
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        for w in (self.pattern, self.access_bytes, self.pitch, self.stride, self.index, self.lanes, self.seed):
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.pattern, self.access_bytes]),
                          W.HBox([self.pitch, self.index, self.stride]),
                          W.HBox([self.lanes, self.seed]), self.answer])
        self._refresh()

    def count(self) -> memory.BankCount:
        b = self.access_bytes.value
        addrs = memory.shared_addresses(self.pattern.value, b, stride=self.stride.value, pitch=self.pitch.value,
                                        index=self.index.value, active_lanes=self.lanes.value, seed=self.seed.value)
        return memory.bank_conflicts(addrs, b)

    def _refresh(self, change=None):
        p = self.pattern.value
        self.stride.disabled = p not in ("strided", "grouped", "repeating")
        self.pitch.disabled = p in ("strided", "broadcast", "grouped", "repeating")
        self.seed.disabled = p != "random"
        try:
            r = self.count()
        except ValueError as exc:
            self.answer.value = error_html(str(exc))
            return
        self.answer.value = render_banks(r)

    def _ipython_display_(self):
        show(self.ui)


def describe_pattern(r: memory.BankCount) -> str:
    """One line of text for a bank count: for notebook cells whose output nbval checks."""
    return (f"{r.access_bytes} B, {r.lanes_per_phase} lanes per phase: {r.wavefronts} wavefront(s), minimum "
            f"{r.ideal_wavefronts}, {r.ways}-way -> {r.conflict_degree:.2f}x")


def banks_line(r: memory.BankCount) -> str:
    """Each lane's first bank, as text."""
    return " ".join(f"{b[0]:2d}" if b else " -" for b in r.lane_banks)
