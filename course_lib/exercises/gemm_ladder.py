"""Notebook 06's exercise checks. Each returns a Verdict and never raises on a wrong answer."""
from __future__ import annotations

import random

from course_lib.core.hardware import spec
from course_lib.exercises.base import Verdict
from course_lib.models import memory, tiling

# sgemm_reg2d / sgemm_vec4: a 128x128 tile per block of 256 threads, 8x8 outputs per thread,
# threads laid out 16 x 16 over the tile (kernels/gemm_fp32.cu).
REG2D_BLOCK = 128
REG2D_THREAD_TILE = 8
QUADRANT = REG2D_BLOCK // 2     # the exercise's layout: a 4x4 sub-tile in each 64x64 quadrant
SUB = REG2D_THREAD_TILE // 2


def reg2d_owner(block_row: int, block_col: int, tid: int, i: int, j: int) -> tuple[int, int]:
    """The (row, col) of C that accumulator acc[i][j] of thread `tid` in block (block_row, block_col)
    holds in step 5's kernel (printed on the page: the exercise asks for another layout)."""
    per_row = REG2D_BLOCK // REG2D_THREAD_TILE
    trow, tcol = tid // per_row, tid % per_row
    return (block_row * REG2D_BLOCK + trow * REG2D_THREAD_TILE + i,
            block_col * REG2D_BLOCK + tcol * REG2D_THREAD_TILE + j)


def quadrant_owner(block_row: int, block_col: int, tid: int, i: int, j: int) -> tuple[int, int]:
    """The exercise's layout: the same block and thread grid as step 5, but thread tid's 8x8 outputs are
    four 4x4 sub-tiles, one per 64x64 quadrant of the block tile; acc[i][j] lies in quadrant
    (i // 4, j // 4), at (i % 4, j % 4) of the thread's sub-tile; in each quadrant the sub-tiles form a
    16x16 grid with consecutive tids along a row."""
    per_row = QUADRANT // SUB
    trow, tcol = tid // per_row, tid % per_row
    return (block_row * REG2D_BLOCK + (i // SUB) * QUADRANT + trow * SUB + i % SUB,
            block_col * REG2D_BLOCK + (j // SUB) * QUADRANT + tcol * SUB + j % SUB)


def check_tile_index(fn) -> Verdict:
    """Exercise: write fn(block_row, block_col, tid, i, j) -> (row, col) for the quadrant layout."""
    if fn is None:
        return Verdict("Not answered yet: define your function and pass it in.", False)
    if not callable(fn):
        return Verdict("Pass a function: fn(block_row, block_col, tid, i, j) -> (row, col).", False)
    rng = random.Random(6)
    probes = [(0, 0, 0, 0, 0), (0, 0, 1, 0, 0), (0, 0, 16, 0, 0), (0, 0, 0, 4, 0), (0, 0, 0, 0, 5),
              (0, 0, 0, 7, 3), (2, 5, 255, 7, 7)]
    probes += [(rng.randrange(64), rng.randrange(64), rng.randrange(256), rng.randrange(8), rng.randrange(8))
               for _ in range(200)]
    answers = {}
    for p in probes:
        try:
            answers[p] = tuple(fn(*p))
        except Exception as exc:  # the learner's code: report, never raise
            return Verdict(f"Your function raised {exc.__class__.__name__}: {exc} for "
                           f"(block_row, block_col, tid, i, j) = {p}.", False)
    if all(answers[p] == reg2d_owner(*p) for p in probes):
        return Verdict("Not quite: that is step 5's layout, where a thread's 8x8 outputs are one contiguous "
                       "block. Here they are four 4x4 sub-tiles, one in each 64x64 quadrant.", False)
    for p in probes:
        want, got = quadrant_owner(*p), answers[p]
        if got != want:
            hint = ""
            if p[2] in (1, 16):
                hint = (" Consecutive tids move along a row of threads: tid % 16 picks the column group, "
                        "tid // 16 the row group.")
            elif p[3] >= SUB or p[4] >= SUB:
                hint = " i // 4 and j // 4 pick the quadrant, 64 rows or columns apart."
            return Verdict(f"Not quite: for (block_row, block_col, tid, i, j) = {p} you gave {got}, "
                           f"the layout puts it at C{want}.{hint}", False)
    return Verdict(f"Correct: your mapping matches the layout for all {len(probes)} probes.", True)


def layout_loads(owner=quadrant_owner, warp: int = 0, k: int = 0) -> list[tuple[int, ...]]:
    """Byte addresses of one warp's float4 shared loads at one k, for a thread layout ``owner``: the A
    tile stored transposed, As[k][m] (128 floats per k), and B as Bs[k][n]; each thread reads the 4
    consecutive rows (columns) of each of its sub-tiles as one float4."""
    loads = []
    for i in range(0, REG2D_THREAD_TILE, SUB):
        loads.append(tuple(4 * (k * REG2D_BLOCK + owner(0, 0, 32 * warp + lane, i, 0)[0]) for lane in range(32)))
    for j in range(0, REG2D_THREAD_TILE, SUB):
        loads.append(tuple(4 * (k * REG2D_BLOCK + owner(0, 0, 32 * warp + lane, 0, j)[1]) for lane in range(32)))
    return loads


def layout_wavefronts(owner=quadrant_owner) -> int:
    """Shared wavefronts of one warp's loads per k (the bank model with 16-byte pairing); the same for
    every warp of the block, which the function checks."""
    per_warp = {sum(memory.bank_conflicts(a, 16).wavefronts for a in layout_loads(owner, w)) for w in range(8)}
    assert len(per_warp) == 1, per_warp
    return per_warp.pop()


def check_layout_wavefronts(answer) -> Verdict:
    """Exercise: the shared wavefronts one warp's float4 loads of A and B take per k in the quadrant layout."""
    if answer is None:
        return Verdict("Not answered yet: replace None with a whole number of wavefronts.", False)
    if isinstance(answer, bool) or not isinstance(answer, int):
        return Verdict(f"Answer with a whole number of wavefronts, not {answer!r}.", False)
    want = layout_wavefronts()
    a_loads = layout_loads()[:2]
    a_wf = sum(memory.bank_conflicts(a, 16).wavefronts for a in a_loads)
    if answer == want:
        return Verdict(f"Correct: {want} wavefronts per warp and k: the two A reads take {a_wf // 2} each (lanes "
                       f"0-15 read one float4, lanes 16-31 another, so neighbouring lanes are paired), the two B "
                       f"reads {(want - a_wf) // 2} each (16 consecutive float4s, no pairing, no conflict).", True)
    hint = ""
    if answer == 4 * len(layout_loads()):
        hint = (" Four per float4 load is the rule without pairing: look at which lanes of a warp read the same "
                "A address (notebook 05's rule for 16-byte loads).")
    elif answer < want:
        hint = " A 16-byte load takes at least 2 wavefronts, and at least 4 when neighbouring lanes are not paired."
    elif answer > want:
        hint = " Check the B reads: 16 consecutive float4s, 8 per quarter-warp, fill 128 bytes without a conflict."
    return Verdict(f"Not yet: {answer} is not what the bank model counts for this layout.{hint}", False)


TILE_CHOICE_RULES = {"gpu": "l4", "dtype": "bf16", "min_stages": 4, "min_l2_intensity": 64.0,
                     "min_resident_blocks": 2}


def check_tile_choice(choice) -> Verdict:
    """Exercise: a bf16 tile for an NVIDIA L4 with >= 4 stages, stage intensity >= 64 FLOP/byte and
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
