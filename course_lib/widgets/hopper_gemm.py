"""The Hopper tile calculator (notebook 10): a wgmma tile (BM × BN × BK), the ring's stages, the consumer
warpgroups and a GPU in; shared memory per block and whether it fits, registers per consumer thread, blocks
per SM, and the FLOPs per byte the block reads from L2 and from shared memory out."""
from __future__ import annotations

import html

import ipywidgets as W

from course_lib.core.hardware import SPECS, GpuSpec, spec
from course_lib.models import hopper
from course_lib.widgets.base import OK_TEXT, WRAP, error_html, int_box, span, show

SETMAXNREG = ("on", "off")
EPILOGUE = ("registers", "TMA store")   # rungs 3-6 store from registers; rung 7 stages the tile for the TMA


def _rows(rows: list[tuple[str, str]]) -> str:
    return "".join(f"<tr><td>{label}</td><td>{value}</td></tr>" for label, value in rows)


def render_budget(t: hopper.TileBudget, peak_flop_per_s: float | None) -> str:
    """The answer panel for one tile budget (the tests read its spans)."""
    r = t.residency
    if t.setmaxnreg:
        registers = (f"{span('course-launch-regs', t.launch_registers)} per thread at launch (the even share for "
                     f"{r.resident_blocks} block(s) per SM); setmaxnreg gives the producer {t.producer_regs} and each "
                     f"consumer up to {span('course-consumer-ceiling', t.consumer_ceiling)}")
    else:
        registers = (f"{span('course-launch-regs', t.launch_registers)} per thread, every thread alike "
                     f"(no setmaxnreg)")
    l2_rate = ""
    if peak_flop_per_s:
        l2_rate = (f"; at the datasheet's {peak_flop_per_s / 1e12:,.0f} TFLOP/s the blocks together would read "
                   f"{span('course-l2-rate', f'{peak_flop_per_s / t.l2_flop_per_byte / 1e12:,.1f} TB/s')} from L2")
    stage = f" + {t.output_stage_bytes:,} B output stage" if t.output_stage_bytes else ""
    table = _rows([
        ("Block", f"{t.threads} threads: 1 producer warpgroup + {t.consumers} consumer warpgroup(s), each consumer "
                  f"{t.block_m // t.consumers} rows × {t.block_n}; {t.wgmmas_per_k16} wgmma m64n{t.block_n}k16 "
                  f"per k16 step"),
        ("Shared memory per block", f"{span('course-smem', f'{t.smem_per_block_bytes:,}')} B = {t.stages} × "
                                    f"({t.slot_bytes:,} B slot + {hopper.BARRIER_BYTES_PER_SLOT} B barriers){stage} + "
                                    f"{hopper.ALIGN_SLACK:,} B alignment slack: "
                                    f'<span style="color:{OK_TEXT}">✔ {span("course-fits", "fits")}</span> on '
                                    f"{html.escape(t.gpu)}"),
        ("fp32 accumulators per consumer thread", span("course-acc-regs", t.accumulator_registers)),
        ("Registers a consumer thread needs", f"about {span('course-consumer-regs', t.consumer_registers)} "
                                              f"(accumulators + {hopper.OTHER_REGISTERS} others: an estimate from "
                                              "the compile report; the compiler decides)"),
        ("Registers", registers),
        ("Blocks per SM", f"{span('course-blocks', r.resident_blocks)}, limited by "
                          f"{span('course-limiter', r.limiter)}"),
        ("From L2 (what the TMA brings)", f"{span('course-l2-intensity', f'{t.l2_flop_per_byte:,.1f}')} FLOP/byte, "
                                          f"{span('course-l2-bytes', f'{1 / t.l2_flop_per_byte:.4f}')} byte/FLOP"
                                          f"{l2_rate}"),
        ("From shared memory (what the wgmmas read)",
         f"{span('course-smem-intensity', f'{t.smem_flop_per_byte:,.1f}')} FLOP/byte, "
         f"{span('course-smem-bytes', f'{1 / t.smem_flop_per_byte:.4f}')} byte/FLOP (each m64 wgmma reads its "
         f"64 rows of A and all {t.block_n} of B)"),
    ])
    return (f'<div class="course-calc-result"><table style="font-size:90%">{table}</table>'
            f"<small>analytic: the kernel's shared-memory layout, setmaxnreg's arithmetic and the occupancy model "
            f"(notebook 03) with {html.escape(t.gpu)}'s spec-table limits; no cluster sharing</small></div>")


class HopperTileCalculator:
    """A wgmma tile, stages, consumer warpgroups, setmaxnreg and a GPU → shared memory, registers, blocks per SM,
    FLOP per byte from L2 and from shared memory."""

    def __init__(self, gpus: list[GpuSpec] | None = None, gpu: str = "NVIDIA H200", block_m: int = 128,
                 block_n: int = 256, block_k: int = 64, stages: int = 4, consumers: int = 2, setmaxnreg: bool = True,
                 tma_store: bool = False):
        self.gpus = {g.name: g for g in (gpus or SPECS.values())}
        self.gpu = W.Dropdown(options=list(self.gpus), value=spec(gpu).name, description="GPU",
                              layout=W.Layout(width="380px"))
        # Plain integer boxes: an impossible value reaches the model, which says what is wrong with it.
        self.block_m, self.block_n = int_box("BM", block_m, "120px"), int_box("BN", block_n, "120px")
        self.block_k, self.stages = int_box("BK", block_k, "120px"), int_box("stages", stages, "130px")
        self.consumers = int_box("consumer warpgroups", consumers, "200px")
        self.setmaxnreg = W.ToggleButtons(options=list(SETMAXNREG), value=SETMAXNREG[0 if setmaxnreg else 1],
                                          description="setmaxnreg", style={"button_width": "60px"})
        self.epilogue = W.ToggleButtons(options=list(EPILOGUE), value=EPILOGUE[1 if tma_store else 0],
                                        description="epilogue", style={"button_width": "90px"})
        self.answer = W.HTML()
        self.answer.add_class("course-calc-answer")
        self.controls = (self.gpu, self.block_m, self.block_n, self.block_k, self.stages, self.consumers,
                         self.setmaxnreg, self.epilogue)
        for w in self.controls:
            w.observe(self._refresh, "value")
        self.ui = W.VBox([W.HBox([self.block_m, self.block_n, self.block_k, self.stages], layout=W.Layout(**WRAP)),
                          W.HBox([self.consumers, self.setmaxnreg, self.epilogue], layout=W.Layout(**WRAP)),
                          W.HBox([self.gpu]), self.answer])
        self._refresh()

    def budget(self) -> hopper.TileBudget:
        return hopper.tile_budget(self.gpus[self.gpu.value], self.block_m.value, self.block_n.value,
                                  self.block_k.value, self.stages.value, self.consumers.value,
                                  self.setmaxnreg.value == SETMAXNREG[0], tma_store=self.epilogue.value == EPILOGUE[1])

    def _refresh(self, change=None):
        try:
            t = self.budget()
        except ValueError as exc:
            self.answer.value = error_html(str(exc))
            return
        self.answer.value = render_budget(t, self.gpus[self.gpu.value].peak_flop_per_s.get("bf16"))

    def _ipython_display_(self):
        show(self.ui)


def hopper_tile_calculator(**kw) -> HopperTileCalculator:
    """Notebook 10's calculator over every GPU in the spec table (default: rung 5's 128×256×64 tile, 4 stages,
    2 consumer warpgroups, setmaxnreg, on an H200)."""
    return HopperTileCalculator(**kw)
