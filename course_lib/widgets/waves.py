"""The wave calculator: a GEMM shape, a tile and a GPU in; tiles, waves and the useful share of the
SM time out, with the output drawn tile by tile in the colour of the wave that runs it."""
from __future__ import annotations

import html
from itertools import groupby

import ipywidgets as W

from course_lib.core.hardware import SPECS, GpuSpec, spec
from course_lib.figures.plots import PALETTE
from course_lib.models import occupancy, waves
from course_lib.widgets.base import check_fits, error_html, ink_on, int_box, span, show

MAX_DRAWN_TILES = 64          # per side: beyond this the SVG grows heavy and the squares unreadable
DRAWING_PX = 448
N_SLIDER_MAX = 16384



def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _colour(wave: int) -> str:
    return PALETTE[(wave - 1) % len(PALETTE)]


def render_grid(q: waves.Quantization, cap: int = MAX_DRAWN_TILES) -> str:
    """An SVG of the tile grid (at most ``cap`` × ``cap`` tiles): one rectangle per run of tiles of a row
    that share a wave, pale strips over the padding of the edge tiles, and a legend."""
    g = q.grid
    rows, cols = min(g.tiles_m, cap), min(g.tiles_n, cap)
    cell = max(4, min(28, DRAWING_PX // max(rows, cols)))
    width, height = cols * cell, rows * cell
    shapes, labelled = [], set()
    for r in range(rows):
        col = 0
        for wave, run in groupby(range(cols), key=lambda c: waves.wave_of_tile(q, r, c)):
            span = len(list(run))
            shapes.append(f'<rect class="course-tile-run" data-wave="{wave}" x="{col * cell}" y="{r * cell}" '
                          f'width="{span * cell}" height="{cell}" fill="{_colour(wave)}"/>')
            if cell >= 12 and span * cell >= 24 and wave not in labelled:   # name each wave where it starts
                labelled.add(wave)
                shapes.append(f'<text x="{(col + span / 2) * cell}" y="{(r + 0.5) * cell}" '
                              f'font-size="{cell * 0.6:.0f}" fill="{ink_on(_colour(wave))}" text-anchor="middle" '
                              f'dominant-baseline="central">{wave}</text>')
            col += span
    used_m, used_n = g.tile_extent(g.tiles_m - 1, g.tiles_n - 1)
    if cols == g.tiles_n and used_n < g.block_n:           # right edge column, all drawn rows
        x = (cols - 1 + used_n / g.block_n) * cell
        shapes.append(f'<rect class="course-padding" x="{x:.1f}" y="0" width="{width - x:.1f}" height="{height}" '
                      f'fill="#fff" fill-opacity="0.7"/>')
    if rows == g.tiles_m and used_m < g.block_m:           # bottom edge row, up to the right strip
        y = (rows - 1 + used_m / g.block_m) * cell
        right = width if cols < g.tiles_n or used_n == g.block_n else (cols - 1 + used_n / g.block_n) * cell
        shapes.append(f'<rect class="course-padding" x="0" y="{y:.1f}" width="{right:.1f}" height="{height - y:.1f}" '
                      f'fill="#fff" fill-opacity="0.7"/>')
    grid_lines = (f'<defs><pattern id="course-tile-lines" width="{cell}" height="{cell}" patternUnits="userSpaceOnUse">'
                  f'<path d="M {cell} 0 L 0 0 0 {cell}" fill="none" stroke="#fff" stroke-width="1"/></pattern></defs>'
                  f'<rect width="{width}" height="{height}" fill="url(#course-tile-lines)"/>') if cell >= 6 else ""
    svg = (f'<svg class="course-wave-grid" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}">{"".join(shapes)}{grid_lines}</svg>')
    first, last = waves.wave_of_tile(q, 0, 0), waves.wave_of_tile(q, rows - 1, cols - 1)
    legend = " ".join(f'<span style="background:{_colour(w)};color:{ink_on(_colour(w))};padding:0 4px">wave {w}</span>'
                      for w in range(first, min(last, first + len(PALETTE) - 1) + 1))
    if last - first >= len(PALETTE):
        legend += f" (colours repeat every {len(PALETTE)} waves)"
    capped = (f'<div class="course-capped">Drawing the first {rows} × {cols} of the {g.tiles_m:,} × {g.tiles_n:,} '
              f"tiles; the rest lies beyond the drawing.</div>"
              if (rows, cols) != (g.tiles_m, g.tiles_n) else "")
    return (f"{svg}<div>{legend}</div>{capped}<small>One square per {g.block_m} × {g.block_n} tile of C, "
            f"coloured by the wave that finishes it (blocks start in launch order, tiles row-major, split-K slices "
            f"outermost; the course's bf16 kernel walks its tiles in groups of 8 block rows instead, which moves "
            f"tiles between waves but not how many each wave has); pale strips are padding outside the "
            f"{g.m:,} × {g.n:,} output.</small>")


def _times(q: waves.Quantization, tile_us: float | None) -> tuple[str, str]:
    """The two models' predicted times, in tiles (one tile's full K loop on one SM) and, given the µs
    such a tile costs, in µs."""
    s, tiles = q.schedule, (q.slot_model_tiles, q.busiest_sm_tiles)
    unit = [f"{t:,.3g} tile{'s' if t != 1 else ''}" for t in tiles]
    if tile_us:
        unit = [f"{u} × {tile_us:g} µs = {span(cls, f'{t * tile_us:,.1f} µs')}"
                for u, t, cls in zip(unit, tiles, ("course-slot-us", "course-round-us"))]
    plural = lambda n, word: f"{n:,} {word}{'s' if n != 1 else ''}"  # noqa: E731
    return (f"{plural(s.waves, 'wave')} × {plural(s.resident_blocks_per_sm, 'block')} per SM ÷ split-K "
            f"{q.grid.split_k} = {unit[0]}",
            f"{plural(s.sm_rounds, 'round')} ÷ split-K {q.grid.split_k} = {unit[1]}")


def render_waves(q: waves.Quantization, k: int, gpu: str, tile_us: float | None = None) -> str:
    """The answer panel: the numbers as a table, then the drawing."""
    g, s = q.grid, q.schedule
    slot_time, round_time = _times(q, tile_us)
    rows = [
        ("Tile grid", f"{g.tiles_m:,} × {g.tiles_n:,} = {span('course-tiles', f'{g.tiles:,}')} tiles"),
        ("Blocks (tiles × split-K)", f"{g.tiles:,} × {g.split_k} = {span('course-blocks', f'{g.blocks:,}')}"),
        ("Tile-edge efficiency", f"{span('course-tile-edge', _pct(g.tile_edge_efficiency))} "
                                 f"({g.m:,}·{g.n:,} of {g.issued_m:,}·{g.issued_n:,} issued)"),
        ("Slots per wave (SMs × resident)",
         f"{s.sm_count} × {s.resident_blocks_per_sm} = {span('course-slots', f'{s.slots:,}')}"),
        ("Waves", span("course-waves", f"{s.waves:,}")),
        ("Blocks in the last wave", f"{span('course-last-wave', f'{s.last_wave_blocks:,}')} of {s.slots:,}"),
        ("Last-wave fill", span("course-last-fill", _pct(s.last_wave_fill))),
        ("Wave efficiency", f"{span('course-wave-efficiency', _pct(s.wave_efficiency))} "
                            f"({s.blocks:,} blocks in {s.waves * s.slots:,} slots)"),
        ("<b>Useful fraction of the SM time</b>", f"<b>{span('course-useful', _pct(q.useful_fraction))}</b> "
                                                  f"(tile-edge × wave efficiency)"),
        ("SM rounds (blocks ÷ SMs, rounded up)",
         f"{span('course-sm-rounds', f'{s.sm_rounds:,}')}: the most blocks one SM runs, the grid spread over "
         f"the SMs first"),
        ("<b>Useful fraction, SM-round model</b>",
         f"<b>{span('course-round-useful', _pct(q.sm_round_useful_fraction))}</b> (tile-edge × "
         f"{s.blocks:,} blocks in {s.sm_rounds * s.sm_count:,} SM-rounds)"),
        ("Time, slot model", slot_time),
        ("Time, SM-round model", round_time),
        ("FLOPs needed (2·M·N·K)", span("course-useful-flop", f"{g.useful_flop(k):,}")),
        ("FLOPs issued, padding included", span("course-issued-flop", f"{g.issued_flop(k):,}")),
    ]
    table = "".join(f"<tr><td>{label}</td><td>{value}</td></tr>" for label, value in rows)
    return (f'<div class="course-calc-result"><b>{html.escape(gpu)}</b>: C[{g.m:,} × {g.n:,}], K = {k:,}, '
            f'{g.block_m} × {g.block_n} tiles<table style="font-size:90%">{table}</table>'
            f"{render_grid(q)}<br><small>analytic: first-order tile and wave model (equal-length blocks, "
            f"waves back to back). The slot model pays every wave in full; the SM-round model takes an SM's "
            f"rate to be the same with one block as with several, so a block alone on its SM finishes in a "
            f"round, and a tile's time is what one tile's K loop costs an SM (notebook 07 measures which of "
            f"the two the course's kernel follows).</small></div>")



class WaveCalculator:
    """M, N, K, the tile, split-K, resident blocks per SM and a GPU → tiles, waves, the two
    quantization losses, and the tile grid coloured by wave."""

    def __init__(self, gpus: list[GpuSpec] | None = None, gpu: str = "NVIDIA H200", m: int = 4096, n: int = 4096,
                 k: int = 4096, block_m: int = 128, block_n: int = 128, split_k: int = 1,
                 resident_blocks_per_sm: int = 1, tile_us: float = 0.0):
        self.gpus = {g.name: g for g in (gpus or SPECS.values())}
        self.gpu = W.Dropdown(options=list(self.gpus), value=spec(gpu).name, description="GPU",
                              layout=W.Layout(width="380px"))
        self.m, self.n, self.k = int_box("M", m), int_box("N", n), int_box("K", k)
        self.n_slider = W.IntSlider(value=min(max(n, 1), N_SLIDER_MAX), min=1, max=N_SLIDER_MAX, description="N",
                                    continuous_update=False, layout=W.Layout(width="460px"))
        self.block_m, self.block_n = int_box("BM", block_m, "120px"), int_box("BN", block_n, "120px")
        self.split_k = int_box("split-K", split_k, "130px")
        self.resident = int_box("resident blocks/SM", resident_blocks_per_sm, "190px")
        self.tile_us = W.BoundedFloatText(value=tile_us, min=0.0, max=1e6, step=1.0, description="µs per tile",
                                          layout=W.Layout(width="190px"))
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        self.n_slider.observe(self._slider_moved, "value")
        for w in (self.gpu, self.m, self.n, self.k, self.block_m, self.block_n, self.split_k, self.resident,
                  self.tile_us):
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.gpu, self.resident]), W.HBox([self.m, self.n, self.k]), self.n_slider,
                          W.HBox([self.block_m, self.block_n, self.split_k, self.tile_us]), self.answer])
        self._refresh()

    def _slider_moved(self, change):
        self.n.value = change["new"]

    def compute(self) -> waves.Quantization:
        gpu = self.gpus[self.gpu.value]
        most = occupancy.rules_for(gpu.compute_capability).max_blocks_per_sm
        if self.resident.value > most:
            raise ValueError(f"resident blocks/SM = {self.resident.value:,}: an SM of compute capability "
                             f"{gpu.compute_capability} ({gpu.name}) holds at most {most} blocks at once")
        m, n, k = self.m.value, self.n.value, self.k.value
        if min(m, n, k) > 0:
            check_fits(f"A, B and C of a {m:,}×{n:,}×{k:,} bf16 GEMM", 2 * (m * k + k * n + m * n), gpu)
        return waves.quantize(m, n, self.block_m.value, self.block_n.value, gpu.sm_count, self.resident.value,
                              self.split_k.value)

    def _refresh(self, change=None):
        if 1 <= self.n.value <= N_SLIDER_MAX:
            self.n_slider.value = self.n.value
        try:
            self.answer.value = render_waves(self.compute(), self.k.value, self.gpu.value, self.tile_us.value or None)
        except ValueError as exc:
            self.answer.value = error_html(str(exc))

    def _ipython_display_(self):
        show(self.ui)


def wave_calculator(**kw) -> WaveCalculator:
    """The wave calculator over every GPU in the spec table (default: a 4096² GEMM, 128 × 128 tiles, an H200)."""
    return WaveCalculator(**kw)
