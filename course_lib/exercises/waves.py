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
