"""Notebook 07's exercise checks: predict a launch's waves and tail, pad a size to the tile."""
from __future__ import annotations

from course_lib.exercises.base import Verdict
from course_lib.models import waves


def check_waves(m: int, n: int, tile: tuple[int, int], sm_count: int, resident: int, answer) -> Verdict:
    """Exercise: ``answer = (waves, blocks in the last wave)`` for an m x n output on ``tile``."""
    if answer is None:
        return Verdict("Not answered yet: replace None with (waves, blocks in the last wave).", False)
    s = waves.quantize(m, n, tile[0], tile[1], sm_count, resident).schedule
    want = (s.waves, s.last_wave_blocks)
    try:
        got = tuple(int(v) for v in answer)
    except (TypeError, ValueError):
        return Verdict("Give two whole numbers: (waves, blocks in the last wave).", False)
    if got == want:
        return Verdict(f"Correct: {s.blocks} blocks on {s.slots} slots run in {s.waves} waves; the last holds "
                       f"{s.last_wave_blocks} blocks, {100 * s.last_wave_fill:.1f}% of the slots.", True)
    hint = (f" The grid has {s.blocks} blocks (tiles are rounded up on each edge) and the GPU runs "
            f"{sm_count} SMs × {resident} = {s.slots} at once.")
    return Verdict(f"Not quite: you gave {got}.{hint}", False)


def check_padding(size: int, tile: int, answer) -> Verdict:
    """Exercise: the smallest multiple of ``tile`` that holds ``size``."""
    if answer is None:
        return Verdict("Not answered yet: replace None with the padded size.", False)
    want = waves.pad_to_tile(size, tile).padded
    if answer == want:
        return Verdict(f"Correct: {size:,} pads to {want:,}, {want - size} extra rows, so every tile is full "
                       "and the kernel needs no edge masks.", True)
    if isinstance(answer, int) and answer % tile == 0 and answer > want:
        return Verdict(f"{answer:,} is a multiple of {tile} but not the smallest one that holds {size:,}.", False)
    return Verdict(f"Not quite: {answer} is not the smallest multiple of {tile} that is at least {size:,}.", False)


SPLIT_BASELINE = "split_k: course 128x128, one tile per block"


def sm_round_split_time_s(result, split_k: int) -> float:
    """The SM-round model's time for split-K ``split_k`` at the remedies' split-K shape: the measured
    one-tile-per-block baseline (its blocks fit one round, each a whole tile's K loop) times the busiest
    SM's work, SM rounds ÷ split-K. The fp32 workspace and the reduction kernel are left out."""
    base = result.case(SPLIT_BASELINE)
    e = base.extra
    sms = e["slots"] // e["resident_blocks_per_sm"]
    if -(-e["blocks"] // sms) != 1:
        raise ValueError("the baseline must fit one SM round to serve as a round's time")
    m, n, _ = e["shape"]
    q = waves.quantize(m, n, *e["tile"], sms, e["resident_blocks_per_sm"], split_k)
    return base.median_s * q.busiest_sm_tiles


def check_split_time(result, split_k: int, answer_us) -> Verdict:
    """Exercise: predict split-K ``split_k``'s time in µs with the SM-round model, from the baseline's
    measured time; the verdict then sets the prediction beside the measurement."""
    if answer_us is None:
        return Verdict("Not answered yet: replace None with your predicted time in µs.", False)
    want = sm_round_split_time_s(result, split_k) * 1e6
    base = result.case(SPLIT_BASELINE)
    e = base.extra
    sms = e["slots"] // e["resident_blocks_per_sm"]
    blocks = e["blocks"] * split_k
    try:
        got = float(answer_us)
    except (TypeError, ValueError):
        return Verdict("Give a number of µs.", False)
    if abs(got - want) > 0.03 * want:
        if abs(got - want * 1e-6) <= 0.03 * want * 1e-6:
            return Verdict("That is the right time in seconds; the check wants µs.", False)
        return Verdict(f"Not quite: {blocks} blocks on {sms} SMs is {-(-blocks // sms)} SM round(s), each block "
                       f"1/{split_k} of the K loop, and the baseline's {e['blocks']} blocks took one round of a whole "
                       f"K loop in {base.median_s * 1e6:.1f} µs.", False)
    measured = result.case(f"split_k: course 128x128, split-K {split_k}").median_s * 1e6
    why = ("the fp32 workspace and the reduction kernel, which the model leaves out, are part of the gap"
           if measured > want else
           "faster than the model, which takes an SM's rate to be the same with one block as with two; the "
           "persistent grids above measured two blocks sharing an SM getting through their tiles faster than one alone")
    return Verdict(f"Correct: the SM-round model predicts {want:.1f} µs ({-(-blocks // sms)} round(s) × 1/{split_k} "
                   f"of {base.median_s * 1e6:.1f} µs). Measured: {measured:.1f} µs, {measured / want:.2f}× the "
                   f"prediction: {why} ({result.provenance}).", True)
