"""Calculator of notebook 02: launch geometry (who owns which tile, which lane loads what). Bad input
shows a message, never a traceback."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.models import launch_geometry as lg
from course_lib.widgets.base import MUTED_TEXT, WRAP, error_html, int_box, span, show


class LaunchGeometryCalculator:
    """C[M, N] = A[M, K] · B[K, N], each block owning a BM × BN tile: the grid, the tile a program
    id owns, and for one warp the element, offset, address and mask of every lane's load."""

    def __init__(self, m: int = 1000, n: int = 700, k: int = 300, block_m: int = 64, block_n: int = 64,
                 block_k: int = 32, threads: int = 256):
        self.m, self.n, self.k = int_box("M", m, "130px"), int_box("N", n, "130px"), int_box("K", k, "130px")
        self.bm, self.bn, self.bk = int_box("BM", block_m, "120px"), int_box("BN", block_n, "120px"), int_box("BK", block_k, "120px")
        self.operand = W.ToggleButtons(options=["A", "B"], value="A", description="operand",
                                       style={"button_width": "50px"})
        self.stride_row = int_box("row stride", k, "170px")
        self.stride_col = int_box("column stride", 1, "170px")
        self.pid = int_box("program id", 0, "150px")
        self.stage = int_box("stage (k0 = stage·BK)", 0, "210px")
        self.threads = int_box("threads/block", threads, "170px")
        self.warp = int_box("warp", 0, "120px")
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        self.operand.observe(self._operand_changed, "value")
        self.k.observe(self._size_changed, "value")
        self.n.observe(self._size_changed, "value")
        for w in (self.m, self.n, self.k, self.bm, self.bn, self.bk, self.stride_row, self.stride_col, self.pid,
                  self.stage, self.threads, self.warp):
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.m, self.n, self.k, self.bm, self.bn, self.bk], layout=W.Layout(**WRAP)),
                          W.HBox([self.operand, self.stride_row, self.stride_col], layout=W.Layout(**WRAP)),
                          W.HBox([self.pid, self.stage, self.threads, self.warp], layout=W.Layout(**WRAP)),
                          self.answer])
        self._refresh()

    def _operand_changed(self, change):
        # Row-major by default: A's row stride is K, B's is N.
        self.stride_row.value = self.k.value if change["new"] == "A" else self.n.value
        self.stride_col.value = 1
        self._refresh()

    def _size_changed(self, change):
        # A row-major row stride follows its size (K for A, N for B) unless the learner typed another.
        follows = self.k if self.operand.value == "A" else self.n
        if change["owner"] is follows and self.stride_row.value == change["old"]:
            self.stride_row.value = change["new"]

    def compute(self):
        grid = lg.tile_grid(self.m.value, self.n.value, self.bm.value, self.bn.value)
        tile, trace = lg.operand_trace(self.operand.value, self.m.value, self.n.value, self.k.value, self.bm.value,
                                       self.bn.value, self.bk.value, self.stride_row.value, self.stride_col.value,
                                       self.pid.value, self.stage.value, self.warp.value, self.threads.value)
        return grid, tile, trace

    def _refresh(self, change=None):
        try:
            grid, tile, trace = self.compute()
        except ValueError as exc:
            self.answer.value = error_html(str(exc))
            return
        self.answer.value = render_geometry(grid, tile, trace, self.operand.value, self.stage.value * self.bk.value)

    def _ipython_display_(self):
        show(self.ui)


def render_geometry(grid: lg.TileGrid, tile: lg.ProgramTile, trace: list[lg.LaneAccess], operand: str,
                    k0: int) -> str:
    s = lg.summarize(trace)
    rows = []
    for a in trace:
        colour = {"loads": "", "masked (past the edge)": "background:#fde2e1;color:#222",
              "idle (no element)": f"color:{MUTED_TEXT}"}
        cells = [a.lane, a.thread, "—" if a.element is None else a.element,
                 "—" if a.local_row is None else f"({a.local_row}, {a.local_col})",
                 "—" if a.row is None else f"({a.row}, {a.col})",
                 "—" if a.offset_elements is None else f"{a.offset_elements:,}",
                 "—" if a.address_bytes is None else f"{a.address_bytes:,}", a.status]
        rows.append(f'<tr style="{colour[a.status]}">' + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
                    + "</tr>")
    head = "".join(f'<th style="padding:0 8px">{h}</th>' for h in ("lane", "thread", "tile element", "local (row, col)",
                                             f"{operand} (row, col)", "offset (elements)", "byte address", ""))
    edge = (f"an edge tile: {tile.valid_rows} × {tile.valid_cols} of its {tile.block_m} × {tile.block_n} "
            f"outputs are inside C, {tile.masked_elements:,} masked" if tile.is_edge else "an interior tile")
    return (
        f'<div class="course-calc-result">'
        f"Grid: {span('course-grid-m', grid.tiles_m)} × {span('course-grid-n', grid.tiles_n)} = "
        f"<b>{span('course-blocks', f'{grid.blocks:,}')}</b> blocks; the tiles cover "
        f"{grid.issued_elements:,} outputs of which {100 * grid.tile_edge_efficiency:.1f}% are inside C<br>"
        f"Program id {tile.pid} → pid_m = {span('course-pid-m', tile.pid_m)}, pid_n = "
        f"{span('course-pid-n', tile.pid_n)}; it owns C[{span('course-m0', tile.m0)}:{tile.m0 + tile.block_m}, "
        f"{span('course-n0', tile.n0)}:{tile.n0 + tile.block_n}], {edge}<br>"
        f"Stage k0 = {k0}: this warp's lanes load {span('course-loading', s.loading)}, "
        f"{span('course-masked', s.masked)} masked, {span('course-idle', s.idle)} idle; "
        f"{s.bytes_requested} bytes requested in {span('course-sectors', s.sectors)} 32-byte sectors"
        f'<details style="margin-top:4px"><summary>the warp lane by lane (32 rows: open to read)</summary>'
        f'<table style="font-size:85%;margin-top:4px"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
        f"</tbody></table></details><small>analytic: launch_geometry from the sizes and strides above</small></div>")


def launch_geometry_calculator(**kw) -> LaunchGeometryCalculator:
    return LaunchGeometryCalculator(**kw)
