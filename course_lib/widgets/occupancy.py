"""Calculator of notebook 03: SM residency (how many blocks fit, which limit binds). Bad input shows a
message, never a traceback."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.core import cuda, runtime
from course_lib.core.hardware import KIB, detect
from course_lib.labs.occupancy import contract_block_threads
from course_lib.models import occupancy as occ
from course_lib.widgets.base import error_html, int_box, span, show

CUSTOM = "custom SM (type its limits)"
TYPED = "(type the kernel's resources)"


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
        show(self.ui)


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
        if runtime.shows_gpu_run():
            try:
                budgets.insert(1, occ.budget_from_device(detect()))
            except ValueError:
                pass  # a card without known allocation rules: the custom entry still works
    return ResidencyCalculator(budgets, **kw)
