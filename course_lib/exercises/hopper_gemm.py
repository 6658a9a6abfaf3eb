"""Notebook 10's exercise checks: a wgmma descriptor written by hand, a setmaxnreg plan, and which
design change a measurement shows costing the most. A verdict says which parts of an answer are right,
never the answer to a part that is not."""
from __future__ import annotations

import functools
import operator

from course_lib.exercises.base import Verdict
from course_lib.labs.hopper_gemm import _ablation_rows as ablation_rows
from course_lib.labs.hopper_gemm import is_control
from course_lib.models import hopper

# Addresses a K-major, 1024-aligned tile and its k16 steps (+32 bytes) can start at.
DESCRIPTOR_PROBES = (0x0, 0x400, 0x8020, 0x10040, 0x2A060, 0x3FC00)


def check_descriptor(fn) -> Verdict:
    """Exercise: ``fn(address)`` returns the 64-bit descriptor of a K-major, 128-byte swizzled tile
    at that shared-memory address (8-row groups 1,024 bytes apart)."""
    if fn is None:
        return Verdict("Not answered yet: write the function and pass it in.", False)
    if fn is hopper.smem_descriptor:
        return Verdict("That is the course's own function: write yours from the bit layout.", False)
    for addr in DESCRIPTOR_PROBES:
        want = hopper.smem_descriptor(addr)
        try:
            got = fn(addr)
        except Exception as exc:  # noqa: BLE001  (a learner's function may fail any way)
            return Verdict(f"Your function raised {type(exc).__name__}: {exc} for address {addr:#x}.", False)
        if isinstance(got, bool) or not isinstance(got, int) or not 0 <= got < 1 << 64:
            return Verdict(f"Not quite at address {addr:#x}: your function returned {got!r}, not a 64-bit integer.", False)
        if got != want:
            return Verdict(f"Not quite at address {addr:#x}: " + _fields_right(got, want) + ".", False)
    return Verdict(f"Correct for all {len(DESCRIPTOR_PROBES)} addresses: start / 16 in bits 0-13, 1 in the "
                   "leading offset, 1024 / 16 = 64 in the stride offset, mode 1 (128-byte) in bits 62-63.", True)


_FIELDS = {"start address (bits 0-13)": 0x3FFF, "leading byte offset (bits 16-29)": 0x3FFF << 16,
           "stride byte offset (bits 32-45)": 0x3FFF << 32, "swizzle mode (bits 62-63)": 3 << 62}
_FIELD_BITS = functools.reduce(operator.or_, _FIELDS.values())


def _fields_right(got: int, want: int) -> str:
    """Which of a descriptor's fields are right: each field named right or wrong, never its value."""
    marks = [f"{name} {'right' if got & mask == want & mask else 'wrong'}" for name, mask in _FIELDS.items()]
    if got & ~_FIELD_BITS:
        marks.append("bits set outside these fields")
    return "; ".join(marks)


def best_consumer_registers(consumer_warpgroups: int = 2, producer_regs: int = 24) -> int:
    """The most registers setmaxnreg can give each consumer thread with one producer warpgroup at
    ``producer_regs``."""
    best = 0
    for regs in range(hopper.SETMAXNREG_RANGE[0], hopper.SETMAXNREG_RANGE[1] + 1, 8):
        if hopper.register_plan(producer_regs, regs, consumer_warpgroups).fits:
            best = regs
    return best


def check_register_plan(producer_regs, consumer_regs) -> Verdict:
    """Exercise: setmaxnreg counts for one producer and two consumer warpgroups that fit the registers
    the block holds from launch and give the consumers as many as possible."""
    if producer_regs is None or consumer_regs is None:
        return Verdict("Not answered yet: give both counts.", False)
    try:
        plan = hopper.register_plan(producer_regs, consumer_regs)
    except ValueError as exc:
        return Verdict(str(exc), False)
    if not plan.fits:
        return Verdict(f"{plan.total:,} registers: more than the {plan.pool:,} the block holds from launch "
                       f"({plan.threads} threads × {plan.launch_regs}). setmaxnreg.inc only takes registers "
                       "that .dec gave back, so the consumers would wait for them forever.", False)
    best = best_consumer_registers(2, producer_regs)
    if consumer_regs < best:
        return Verdict(f"It fits ({plan.total:,} registers), but with this producer count the consumers could "
                       "have more.", False)
    if producer_regs > hopper.SETMAXNREG_RANGE[0]:
        return Verdict(f"It fits ({plan.total:,}), but a producer that only issues copies needs few registers: "
                       "what it gives up, the consumers can have.", False)
    return Verdict(f"Correct: 128 × {producer_regs} + 256 × {consumer_regs} = {plan.total:,} ≤ {plan.pool:,}, "
                   f"the {plan.threads} threads × {plan.launch_regs} registers the block holds from launch; "
                   "setmaxnreg moves them from the producer to the consumers.", True)


def design_changes(result, shape_label: str) -> list[str]:
    """The ablations of ``hopper.ablations`` at a shape that change a design choice, by name (not the builds
    they are compared with, and not a control such as a launch held to one block per SM)."""
    return [r["variant"] for r in ablation_rows(result) if r["shape"] == shape_label and r["time change %"] is not None
            and not is_control(r["variant"])]


def check_costliest(result, shape_label: str, answer) -> Verdict:
    """Exercise: the design change (an ablation of ``hopper.ablations`` that is not a control) that slowed
    its kernel the most at a shape, predicted before the ablation table. Right or wrong; the measurement
    is shown only with a right answer."""

    changes = set(design_changes(result, shape_label))
    rows = [r for r in ablation_rows(result) if r["shape"] == shape_label and r["variant"] in changes]
    if not rows:
        return Verdict(f"{result.experiment} has no ablations at {shape_label}.", False)
    if answer is None:
        return Verdict("Not answered yet: name one of the design changes printed above.", False)
    names = [r["variant"] for r in rows]
    if answer not in names:
        return Verdict(f"Answer with one of: {'; '.join(names)}.", False)
    worst = max(rows, key=lambda r: r["time change %"])
    if answer != worst["variant"]:
        return Verdict(f"Not this one: at least one other design change cost more at {shape_label}.", False)
    return Verdict(f"Correct: {worst['variant']}, {worst['time change %']:+.1f}% ({result.provenance}).", True)
