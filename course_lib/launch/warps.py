"""Host launcher of ``kernels/warps.cu`` (notebook 02's kernels): the tile-owner launch that records when
and where each block started, and the divergence kernel in each of its modes, with their references;
the launches that profile them; and the family's smoke launch."""
from __future__ import annotations

from course_lib.core import cuda
from course_lib.measure.smoke import covers
from course_lib.models import launch_geometry as lg

BLOCK = 256
MODE_LABELS = list(lg.DIVERGENCE_MODES)


# --------------------------------------------------------------------------- tile ownership and start order

def block_order_buffers(m: int, n: int, block_m: int, block_n: int):
    import cupy

    grid = lg.tile_grid(m, n, block_m, block_n)
    if block_m * block_n > 1024:
        raise ValueError(f"a {block_m}×{block_n} tile needs {block_m * block_n} threads; a block has at most 1024")
    bufs = {"owner": cupy.full((m, n), -1, dtype=cupy.int32), "ticket": cupy.empty(grid.blocks, dtype=cupy.int32),
            "smid": cupy.empty(grid.blocks, dtype=cupy.int32),
            "start": cupy.empty(grid.blocks, dtype=cupy.uint64), "counter": cupy.zeros(1, dtype=cupy.uint32)}
    return grid, bufs


def owner_reference(grid: lg.TileGrid):
    import cupy

    rows = cupy.arange(grid.m, dtype=cupy.int32)[:, None] // grid.block_m
    cols = cupy.arange(grid.n, dtype=cupy.int32)[None, :] // grid.block_n
    return rows * grid.tiles_n + cols


def block_order_launch(m: int, n: int, block_m: int, block_n: int, spin_ns: int):
    """(tile grid, buffers, CUDA grid, block, run): one block per output tile, each spinning ``spin_ns``."""
    import cupy

    grid, b = block_order_buffers(m, n, block_m, block_n)
    fn = cuda.kernel("warps", "tile_owner_order")
    g, blk = (grid.blocks,), (block_m * block_n,)
    args = (b["owner"], b["ticket"], b["smid"], b["start"], b["counter"], cupy.int32(m), cupy.int32(n),
            cupy.int32(block_m), cupy.int32(block_n), cupy.int32(spin_ns))
    return grid, b, g, blk, lambda: fn(g, blk, args)


# --------------------------------------------------------------------------- divergence

def path_map(mode: lg.DivergenceMode, x):
    """Each thread's path (−1: skips the work), the way the kernel picks it."""
    import cupy

    t = cupy.arange(x.size, dtype=cupy.int64)
    lane, warp = t % 32, t // 32
    if mode.path is None:
        return (x > 0.5).astype(cupy.int32)
    table = {0: 0 * t, 1: warp % 2, 2: lane % 2, 3: warp % 4, 4: lane % 4,
             5: cupy.where(warp % 2 == 1, -1, 0), 6: cupy.where(lane % 2 == 1, -1, 0)}
    return table[mode.mode].astype(cupy.int32)


def divergence_reference(x, iters: int):
    """Each of the four maps applied ``iters`` times in float64, for every element."""
    import cupy

    maps = (lambda v: 0.999 * v + 0.001, lambda v: v * v - 0.25, lambda v: 0.75 - 0.5 * v, lambda v: 0.5 - v * v)
    out = []
    for f in maps:
        v = x.astype(cupy.float64)
        for _ in range(iters):
            v = f(v)
        out.append(v)
    return out


def divergence_expected(paths, x, refs):
    """Each element's expected output: its path's reference, or its input where it skips the work."""
    import cupy

    ref = cupy.where(paths == -1, x.astype(cupy.float64), 0.0)
    for p, r in enumerate(refs):
        ref = cupy.where(paths == p, r, ref)
    return ref


def divergence_launches(n: int, iters: int, modes: list[str]):
    """(input, output, grid, block, [(label, mode, run, args)]): one launch per divergence mode."""
    import cupy

    bad = [m for m in modes if m not in lg.DIVERGENCE_MODES]
    if bad:
        raise ValueError(f"unknown divergence modes {bad}; known: {MODE_LABELS}")
    if iters % 8:
        raise ValueError(f"iters must be a multiple of 8 (the kernel's loops are unrolled by 8), got {iters}")
    rng = cupy.random.default_rng(2)
    x = rng.random(n, dtype=cupy.float32)
    out = cupy.empty_like(x)
    fn = cuda.kernel("warps", "divergence")
    grid, block = ((n + BLOCK - 1) // BLOCK,), (BLOCK,)
    launches = []
    for label in modes:
        mode = lg.DIVERGENCE_MODES[label]
        args = (out, x, cupy.int64(n), cupy.int32(iters), cupy.int32(mode.mode))
        launches.append((label, mode, (lambda args=args: fn(grid, block, args)), args))
    return x, out, grid, block, launches


def profile_divergence(n: int, iters: int, modes: list[str]) -> None:
    """What runs under ncu for ``warps.divergence``: each mode's launch once, in case order."""
    import cupy

    *_, launches = divergence_launches(n, iters, modes)
    for *_, run, _ in launches:
        run()
    cupy.cuda.Device().synchronize()


# --------------------------------------------------------------------------- smoke launches (sanitizer)

@covers("warps", "tile_owner_order", "divergence")
def warps_smoke() -> None:
    import cupy

    for m, n, bm, bn in ((5, 7, 4, 4), (33, 17, 16, 8)):
        grid, b, *_, run = block_order_launch(m, n, bm, bn, 0)
        run()
        if not bool((b["owner"] == owner_reference(grid)).all()):
            raise AssertionError(f"warps.tile_owner_order: wrong owner map for {m}×{n} in {bm}×{bn} tiles")
    n, iters = 1000, 16
    x, out, grid, block, launches = divergence_launches(n, iters, MODE_LABELS)
    refs = divergence_reference(x, iters)
    for label, mode, run, _ in launches:
        out.fill(float("nan"))
        run()
        ref = divergence_expected(path_map(mode, x), x, refs)
        if not float(cupy.abs(out - ref).max()) < 1e-4:
            raise AssertionError(f"warps.divergence wrong for mode {label!r}")
