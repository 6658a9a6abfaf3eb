"""Calculators for notebooks 02 and 03: launch geometry (who owns which tile, which lane loads what)
and SM residency (how many blocks fit, which limit binds). Bad input shows a message, never a traceback."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.core import cuda, runtime
from course_lib.core.hardware import KIB, detect
from course_lib.labs.occupancy import contract_block_threads
from course_lib.models import launch_geometry as lg
from course_lib.models import occupancy as occ
from course_lib.widgets.base import MUTED_TEXT, WRAP, error_html, int_box, span

CUSTOM = "custom SM (type its limits)"
TYPED = "(type the kernel's resources)"


# --------------------------------------------------------------------------- notebook 02

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
        from IPython.display import display

        display(self.ui)


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


# --------------------------------------------------------------------------- notebook 03

class ResidencyCalculator:
    """Threads, registers and shared memory of a block on one SM → resident blocks from each
    limit, the limit that binds, active warps and occupancy."""

    def __init__(self, budgets: list[occ.SmBudget] | None = None, threads: int = 256, registers: int = 64,
                 smem_kib: float = 48.0, kernels: list[str] | None = None):
        budgets = budgets if budgets is not None else [occ.ILLUSTRATIVE_SM, *occ.spec_budgets()]
        self.budgets = {b.name: b for b in budgets}
        self.gpu = W.Dropdown(options=[*self.budgets, CUSTOM], description="SM",
                              layout=W.Layout(width="460px"))
        self.kernel = W.Dropdown(options=[TYPED, *(kernels if kernels is not None else _course_kernels())],
                                 description="kernel", layout=W.Layout(width="460px"))
        self.threads = int_box("threads/block", threads, "170px")
        self.registers = int_box("registers/thread", registers, "170px")
        self.smem_kib = W.FloatText(value=smem_kib, description="shared memory/block (KiB)",
                                    layout=W.Layout(width="250px"), style={"description_width": "initial"})
        self.c_threads = int_box("threads/SM", 2048, "150px")
        self.c_warps = int_box("warps/SM", 64, "140px")
        self.c_blocks = int_box("blocks/SM", 32, "140px")
        self.c_regs = int_box("registers/SM", 65536, "190px")
        self.c_smem = W.FloatText(value=164.0, description="smem/SM (KiB)", layout=W.Layout(width="190px"),
                                  style={"description_width": "initial"})
        self.note = W.HTML()
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        self.kernel.observe(self._kernel_chosen, "value")
        self.gpu.observe(self._kernel_chosen, "value")  # another SM is another arch: ask NVRTC again
        for w in (self.gpu, self.threads, self.registers, self.smem_kib, self.c_threads, self.c_warps,
                  self.c_blocks, self.c_regs, self.c_smem):
            w.observe(self._refresh, "value")
        self.custom_box = W.HBox([self.c_threads, self.c_warps, self.c_blocks, self.c_regs, self.c_smem])
        self.ui = W.VBox([self.gpu, self.kernel, W.HBox([self.threads, self.registers, self.smem_kib]),
                          self.custom_box, self.note, self.answer])
        self._refresh()

    def selected_budget(self) -> occ.SmBudget:
        if self.gpu.value != CUSTOM:
            return self.budgets[self.gpu.value]
        smem = int(round(self.c_smem.value * KIB))
        return occ.custom_budget(max_threads_per_sm=self.c_threads.value, max_warps_per_sm=self.c_warps.value,
                                 max_blocks_per_sm=self.c_blocks.value, registers_per_sm=self.c_regs.value,
                                 smem_per_sm_bytes=smem, max_smem_per_block_bytes=smem)

    def _kernel_chosen(self, change=None):
        """Fill registers and shared memory from what NVRTC reports for the chosen kernel."""
        if self.kernel.value == TYPED:
            self.note.value = ""
            return

        family, name = self.kernel.value.split(".", 1)
        try:
            b = self.selected_budget()
            arch = b.arch or cuda.target_arch()
            res = cuda.resources(family, name, arch)
        except (ValueError, cuda.CompileError) as exc:
            self.note.value = error_html(str(exc))
            return
        threads = contract_block_threads(family, name)
        with self.answer.hold_trait_notifications():
            if threads:
                self.threads.value = threads
            self.registers.value = res.registers
            self.smem_kib.value = res.static_smem_bytes / KIB
        spill = (f", spills {res.spill_store_bytes} B stored / {res.spill_load_bytes} B loaded" if res.spills
                 else ", no spills")
        self.note.value = (f"<small>NVRTC for {arch}: {res.registers} registers/thread, "
                           f"{res.static_smem_bytes} B static shared memory{spill}; block size from the "
                           f"kernel's launch contract{'' if threads else ' (symbolic there: type it)'}. "
                           f"Add any dynamic shared memory to the field.</small>")
        self._refresh()

    def compute(self) -> occ.Residency:
        smem = self.smem_kib.value
        if smem is None or smem < 0:
            raise ValueError(f"shared memory per block cannot be negative (got {smem} KiB)")
        return occ.residency(self.selected_budget(), self.threads.value, self.registers.value,
                             int(round(smem * KIB)))

    def _refresh(self, change=None):
        custom = self.gpu.value == CUSTOM
        self.custom_box.layout.display = None if custom else "none"
        try:
            r = self.compute()
        except ValueError as exc:
            self.answer.value = error_html(str(exc))
            return
        self.answer.value = render_residency(r, self.selected_budget())

    def _ipython_display_(self):
        from IPython.display import display

        display(self.ui)


def _course_kernels() -> list[str]:
    return [f"{f}.{k}" for f in cuda.families() for k in cuda.kernel_names(f)]


def _bar(active: int, total: int) -> str:
    width = 100 * active / total
    return (f'<div style="width:420px;height:14px;background:#eee;margin:4px 0">'
            f'<div style="width:{width:.1f}%;height:14px;background:#4c72b0"></div></div>')


def render_residency(r: occ.Residency, b: occ.SmBudget) -> str:
    labels = {"threads": f"threads: ⌊{b.max_threads_per_sm} / {r.threads_per_block}⌋",
              "warps": f"warps: ⌊{b.max_warps_per_sm} / {r.warps_per_block}⌋",
              "registers": (f"registers: {r.registers_per_warp_allocated:,} per warp allocated"
                            if r.limit_registers is not None else "registers: none used"),
              "shared memory": (f"shared memory: {r.smem_per_block_allocated_bytes:,} B per block allocated"
                                if r.limit_smem is not None else "shared memory: none used"),
              "blocks": "blocks: the architecture's cap"}
    rows = []
    for key, value in r.limits.items():
        style = ' style="font-weight:bold"' if key in r.binding else ""
        shown = "no limit" if value is None else value
        rows.append(f"<tr{style}><td>{html.escape(labels[key])}</td>"
                    f'<td class="course-limit" data-limit="{key}">{shown}</td></tr>')
    return (
        f'<div class="course-calc-result" data-binding="{html.escape(r.limiter)}">'
        f"<b>{html.escape(b.name)}</b>: {r.threads_per_block} threads/block ({r.warps_per_block} warps), "
        f"{r.registers_per_thread} registers/thread, {occ.fmt_bytes(r.smem_per_block_bytes)} shared memory/block"
        f'<table style="font-size:90%"><thead><tr><th style="text-align:left">resource: its ceiling</th>'
        f'<th>blocks it allows</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f"Resident blocks per SM: <b>{span('course-resident-blocks', r.resident_blocks)}</b>, limited by "
        f"<b>{span('course-binding', r.limiter)}</b><br>"
        f"Active warps: {span('course-active-warps', r.active_warps)} of {r.max_warps_per_sm}; occupancy "
        f"<b>{span('course-occupancy', f'{100 * r.occupancy:.1f}%')}</b>{_bar(r.active_warps, r.max_warps_per_sm)}"
        f"<small>analytic: occupancy model, {html.escape(b.source)}</small></div>")


def residency_calculator(include_device: bool = True, **kw) -> ResidencyCalculator:
    """The notebook-03 calculator: the worked example's SM, every spec-table GPU, and this GPU when live."""
    budgets = [occ.ILLUSTRATIVE_SM, *occ.spec_budgets()]
    if include_device:
        if runtime.mode() == "live":
            try:
                budgets.insert(1, occ.budget_from_device(detect()))
            except ValueError:
                pass  # a card without known allocation rules: the custom entry still works
    return ResidencyCalculator(budgets, **kw)


def launch_geometry_calculator(**kw) -> LaunchGeometryCalculator:
    return LaunchGeometryCalculator(**kw)
