"""Notebook 06's exercise checks. Each returns a Verdict and never raises on a wrong answer."""
from __future__ import annotations

import random

from course_lib.core.hardware import spec
from course_lib.exercises.base import Verdict
from course_lib.models import tiling

# sgemm_reg2d / sgemm_vec4: a 128x128 tile per block of 256 threads, 8x8 outputs per thread,
# threads laid out 16 x 16 over the tile (kernels/gemm_fp32.cu).
REG2D_BLOCK = 128
REG2D_THREAD_TILE = 8


def reg2d_owner(block_row: int, block_col: int, tid: int, i: int, j: int) -> tuple[int, int]:
    """The (row, col) of C that accumulator acc[i][j] of thread `tid` in block (block_row, block_col) holds."""
    per_row = REG2D_BLOCK // REG2D_THREAD_TILE
    trow, tcol = tid // per_row, tid % per_row
    return (block_row * REG2D_BLOCK + trow * REG2D_THREAD_TILE + i,
            block_col * REG2D_BLOCK + tcol * REG2D_THREAD_TILE + j)


def check_tile_index(fn) -> Verdict:
    """Exercise: write fn(block_row, block_col, tid, i, j) -> (row, col) for the 2-D register-tiled kernel."""
    if fn is None:
        return Verdict("Not answered yet: define your function and pass it in.", False)
    if not callable(fn):
        return Verdict("Pass a function: fn(block_row, block_col, tid, i, j) -> (row, col).", False)
    rng = random.Random(6)
    probes = [(0, 0, 0, 0, 0), (0, 0, 1, 0, 0), (0, 0, 16, 0, 0), (0, 0, 0, 7, 3), (2, 5, 255, 7, 7)]
    probes += [(rng.randrange(64), rng.randrange(64), rng.randrange(256), rng.randrange(8), rng.randrange(8))
               for _ in range(200)]
    for p in probes:
        want = reg2d_owner(*p)
        try:
            got = tuple(fn(*p))
        except Exception as exc:  # the learner's code: report, never raise
            return Verdict(f"Your function raised {exc.__class__.__name__}: {exc} for "
                           f"(block_row, block_col, tid, i, j) = {p}.", False)
        if got != want:
            hint = ""
            if p[2] in (1, 16):
                hint = (" Consecutive tids move along a row of threads: tid % 16 picks the column group, "
                        "tid // 16 the row group.")
            return Verdict(f"Not quite: for (block_row, block_col, tid, i, j) = {p} you gave {got}, "
                           f"the kernel writes C{want}.{hint}", False)
    return Verdict(f"Correct: your mapping matches the kernel for all {len(probes)} probes.", True)


TILE_CHOICE_RULES = {"gpu": "l4", "dtype": "bf16", "min_stages": 3, "min_l2_intensity": 64.0,
                     "min_resident_blocks": 2}


def check_tile_choice(choice) -> Verdict:
    """Exercise: a bf16 tile for an NVIDIA L4 with >= 3 stages, stage intensity >= 64 FLOP/byte and
    at least 2 resident blocks per SM (registers estimated by the model).

    ``choice``: dict with block_m, block_n, block_k, stages, threads, outputs_per_thread.
    """
    rules = TILE_CHOICE_RULES
    keys = ("block_m", "block_n", "block_k", "stages", "threads", "outputs_per_thread")
    if choice is None:
        return Verdict("Not answered yet: fill in the dict.", False)
    if not isinstance(choice, dict) or any(k not in choice for k in keys):
        return Verdict(f"Answer with a dict with keys {', '.join(keys)}.", False)
    if any(choice[k] is None for k in keys):
        return Verdict("Not answered yet: replace every None with a number.", False)
    gpu = spec(rules["gpu"])
    try:
        e = tiling.tile_estimate(*(choice[k] for k in keys[:4]), rules["dtype"], choice["threads"],
                                 choice["outputs_per_thread"], gpu)
    except ValueError as exc:
        return Verdict(f"That is not a valid tile: {exc}", False)
    wrong = []
    if not e.fits:
        wrong.append("it does not fit: " + "; ".join(e.problems))
    if e.stages < rules["min_stages"]:
        wrong.append(f"{e.stages} stage(s): at least {rules['min_stages']} are asked for, to keep loads in flight")
    if e.l2_intensity < rules["min_l2_intensity"]:
        wrong.append(f"stage intensity {e.l2_intensity:.1f} FLOP/byte is under {rules['min_l2_intensity']:.0f}: "
                     "a larger B_M and B_N raise it")
    if e.residency is not None and e.residency.resident_blocks < rules["min_resident_blocks"]:
        wrong.append(f"only {e.residency.resident_blocks} block(s) per SM (limited by {e.residency.limiter}); "
                     f"{gpu.name} has {gpu.smem_per_sm_bytes // 1024} KiB of shared memory per SM")
    if wrong:
        return Verdict("Not yet:\n  " + "\n  ".join(wrong), False)
    return Verdict(f"Correct: {e.block_m}x{e.block_n}x{e.block_k}, {e.stages} stages = "
                   f"{e.staging_bytes / 1024:.0f} KiB per block, {e.residency.resident_blocks} blocks per SM, "
                   f"{e.l2_intensity:.0f} FLOP/byte.", True)
