"""Host launcher of ``kernels/pipeline.cu`` (notebook 09's kernels): pointer chasing, the streaming sum of
squares by synchronous loads, cp.async and TMA bulk-copy stages, the warp-specialized kernel and its
trace, the small proxy-race kernels, the bf16 GEMM with and without its proxy fence; and their smoke launch."""
from __future__ import annotations

import numpy as np

from course_lib.core import cuda
from course_lib.core.hardware import detect
from course_lib.launch.gemm_bf16 import NO_PROXY_FENCE, PROXY_FENCE
from course_lib.launch.operands import bf16_bits_to_float32, bf16_tolerance, random_operand, to_bf16_bits, torch_view
from course_lib.measure.evidence import Check
from course_lib.measure.smoke import covers

FAMILY = "pipeline"


THREADS = 256                 # stream_* kernels (PL_THREADS)


TILE_BYTES = THREADS * 4 * 16 # a pipelined tile: PL_VECS = 4 float4s per thread


SYNC_BYTES_PER_THREAD = 16    # stream_sync: one float4 in flight per thread


SPEC_WARPS = 1 + 4            # producer + consumers (stream_specialized)


SPEC_TILE_BYTES = 4 * 32 * 8 * 16


TRACE_TILES = 64              # SP_TRACE_TILES


LINE_BYTES = 128


BULK_MIN_CC = 9.0


EVENTS = ("issue", "land", "math start", "math end")


def options(stages: int | None = None, trace: bool = False) -> tuple[str, ...]:
    """The NVRTC -D options of a variant: ``PL_STAGES`` (default 4) and ``PL_TRACE``."""
    opts = () if stages is None else (f"-DPL_STAGES={int(stages)}",)
    return opts + (("-DPL_TRACE=1",) if trace else ())


def family(stages: int | None = None, trace: bool = False, arch: str | None = None):
    return cuda.compile_family(FAMILY, arch, options(stages, trace))


def function(name: str, stages: int | None = None, trace: bool = False, smem: int = 0):
    fn = family(stages, trace).function(name)
    if smem > fn.max_dynamic_shared_size_bytes:
        fn.max_dynamic_shared_size_bytes = smem   # opt in beyond the default 48 KiB
    return fn


def device():
    info = detect()
    if info is None:
        raise RuntimeError("no GPU in use: notebook 09's kernels need one (replay shows what was recorded)")
    return info


def require_bulk_copies(compute_capability) -> None:
    if float(compute_capability) < BULK_MIN_CC:
        raise RuntimeError(f"TMA bulk copies and mbarrier byte counts need compute capability {BULK_MIN_CC}+ "
                           f"(Hopper); this GPU is {compute_capability}. cp.async (8.0+) runs here: "
                           "use kernel='stream_cp_async'.")


def chase_chain(footprint_bytes: int, seed: int = 0):
    """A random cycle through every 128-byte line of a ``footprint_bytes`` buffer: element 32·i holds
    the index of the next line's first element. Returns (chain, order), order the lines in cycle order."""
    import cupy

    lines = footprint_bytes // LINE_BYTES
    if lines < 2:
        raise ValueError(f"a footprint of {footprint_bytes} B holds fewer than two 128-byte lines")
    order = cupy.asarray(np.random.default_rng(seed).permutation(lines).astype(np.uint32))
    chain = cupy.zeros(lines * (LINE_BYTES // 4), dtype=cupy.uint32)
    chain[order * 32] = cupy.roll(order, -1) * 32
    return chain, order


def chase_hops(footprint_bytes: int, l2_bytes: int, min_hops: int = 1 << 15, max_hops: int = 1 << 19) -> int:
    """Hops per launch. A footprint that fits in the L2 gets twice its lines (up to ``max_hops``), so
    the warm-up launches have touched every line before timing starts; a larger one misses anyway
    (the walk continues from launch to launch and meets lines the cache has long evicted)."""
    lines = footprint_bytes // LINE_BYTES
    return int(min(max_hops, max(min_hops, 2 * lines))) if footprint_bytes <= l2_bytes else min_hops


def run_chase(kernel: str, chain, hops: int, cursor) -> None:
    """One thread, ``hops`` dependent loads, starting where the last launch stopped (``cursor``, a
    one-element uint32 array), so consecutive launches walk on instead of repeating one path."""
    cuda.kernel(FAMILY, kernel)((1,), (1,), (chain, np.int64(hops), cursor))


def chase_check(kernel: str, chain, order, hops: int) -> dict:
    """From line 0, ``hops`` hops must end on the line ``hops`` places later in cycle order."""
    import cupy

    cursor = cupy.zeros(1, dtype=cupy.uint32)
    run_chase(kernel, chain, hops, cursor)
    start = int(cupy.nonzero(order == 0)[0][0])
    want = int(order[(start + hops) % order.size]) * 32
    return {"reference": "the cycle's order, walked on the host", "max_abs_err": float(abs(int(cursor[0]) - want)),
            "tolerance": 0.0, "passed": int(cursor[0]) == want}


def stream_smem(kernel: str, stages: int) -> int:
    return 0 if kernel == "stream_sync" else stages * TILE_BYTES


def run_stream(kernel: str, x, partial, blocks: int, stages: int = 4, proxy_fence: bool = True) -> None:
    """The sum of squares of ``x`` (float32) by ``blocks`` persistent blocks; one float per block in ``partial``."""
    smem = stream_smem(kernel, stages)
    fn = function(kernel, None if kernel == "stream_sync" else stages, smem=smem)
    args = (x, np.int64(x.size), partial) + ((np.int32(int(proxy_fence)),) if kernel == "stream_bulk" else ())
    fn((blocks,), (THREADS,), args, shared_mem=smem)


def sum_squares_check(partial, want: float, rtol: float = 1e-4) -> dict:
    got = float(partial.astype(np.float64).sum())
    return Check("float64 sum of squares", abs(got - want), rtol * abs(want)).to_json()


def run_specialized(x, partial, stages: int, work: int, trace=None, header=None, traced_blocks: int = 0,
                    blocks: int | None = None, release_after_math: bool = False) -> None:
    """The warp-specialized kernel on one block per SM (``blocks`` to change that); traced when
    ``trace`` and ``header`` are given (``traced_blocks`` x TRACE_TILES x 4 and x 5 uint64).
    ``release_after_math`` keeps each slot until its math is done (one stage: the serial loop)."""
    import cupy

    if x.size % 4:
        raise ValueError(f"stream_specialized reads whole float4s: {x.size} floats is not a multiple of 4")
    traced = trace is not None
    smem = stages * SPEC_TILE_BYTES
    fn = function("stream_specialized", stages, traced, smem)
    threads = 32 * (SPEC_WARPS + int(traced))
    blocks = blocks or device().sm_count
    null = cupy.zeros(1, dtype=cupy.uint64)
    fn((blocks,), (threads,), (x, np.int64(x.size), partial, np.int32(work), np.int32(int(release_after_math)),
                               trace if traced else null, header if traced else null, np.int32(traced_blocks)),
       shared_mem=smem)


def specialized_reference(x, work: int) -> float:
    """Σ f(x) with f = ``work`` steps of x → 0.999·x + 0.001, in float64 (closed form)."""
    a, b = 0.999, 0.001
    xd = x.astype(np.float64)
    return float((xd * a ** work + b * (1 - a ** work) / (1 - a)).sum())


RACE_KERNELS = ("proxy_store_race", "proxy_refill_race")


RACE_WORDS = 1024


def run_race(kernel: str, threads: int, blocks: int, rounds: int, fence: bool) -> tuple[int, int]:
    """One launch of a small proxy-race kernel: (wrong values, values checked). For the store race a
    value is a word the TMA stored; for the refill race, one thread's reads in one round."""
    import cupy

    fn = cuda.kernel(FAMILY, kernel)
    if kernel == "proxy_store_race":
        out = cupy.full((blocks, rounds, RACE_WORDS), -1.0, dtype=cupy.float32)
        fn((blocks,), (threads,), (out, np.int32(rounds), np.int32(fence)))
        want = cupy.arange(rounds, dtype=cupy.float32)[None, :, None] * 3 + 1
        return int((out != want).sum()), out.size
    src = cupy.concatenate([cupy.ones(RACE_WORDS, cupy.float32), cupy.full(RACE_WORDS, 2.0, cupy.float32)])
    bad = cupy.zeros(1, dtype=cupy.uint32)
    fn((blocks,), (threads,), (src, bad, np.int32(rounds), np.int32(fence)))
    return int(bad.get()[0]), blocks * threads * rounds


def run_fence_gemm(n: int, fence: bool) -> None:
    """One TMA GEMM with or without the proxy fence, checked: what compute-sanitizer runs."""
    import cupy
    import torch

    a, b = to_bf16_bits(random_operand((n, n), 21)), to_bf16_bits(random_operand((n, n), 22))
    c = cupy.full((n, n), 0xFFFF, dtype=cupy.uint16)
    (PROXY_FENCE if fence else NO_PROXY_FENCE).run(a, b, c, "tma")
    ref = cupy.asarray(torch.mm(torch_view(a), torch_view(b)).float())
    err = float(cupy.abs(bf16_bits_to_float32(c) - ref).max())
    print(f"n={n} fence={fence} max error {err:.4g} (tolerance {bf16_tolerance(ref):.4g})")


@covers(FAMILY, "chase_l1", "chase_l2", "stream_sync", "stream_cp_async", "stream_bulk", "stream_specialized",
        *RACE_KERNELS)
def pipeline_smoke() -> None:
    """Every pipeline kernel at edge sizes (one element, tails, partial tiles), checked."""
    import cupy

    for kernel in ("chase_l1", "chase_l2"):
        chain, order = chase_chain(64 << 10, seed=1)
        for hops in (1, 5, 1000):
            chk = chase_check(kernel, chain, order, hops)
            if not chk["passed"]:
                raise AssertionError(f"{kernel} ended on the wrong line after {hops} hops")
    info = device()
    bulk = float(info.compute_capability) >= BULK_MIN_CC
    rng = cupy.random.default_rng(4)
    partial = cupy.empty(8, dtype=cupy.float32)
    for n in (1, 3, 4, 5, 1021, 4096 + 7, 3 * 1024 * 4 + 2, 7 * 4096 * 4 + 9):
        x = rng.random(n, dtype=cupy.float32)
        want = float((x.astype(cupy.float64) ** 2).sum())
        runs = [("stream_sync", 1), ("stream_sync", 3)] + [("stream_cp_async", s) for s in (1, 2, 3, 5)]
        runs += [("stream_bulk", s) for s in (1, 2, 3)] if bulk else []
        for kernel, s in runs:
            for blocks in (1, 3):
                partial.fill(np.nan)
                run_stream(kernel, x, partial[:blocks], blocks, s)
                if not sum_squares_check(partial[:blocks], want)["passed"]:
                    raise AssertionError(f"{kernel} ({s} stages, {blocks} blocks) wrong at n = {n}")
    if not bulk:
        print("skip stream_specialized: needs compute capability 9.0+")
        return
    for n in (4, 1024 * 4 * 8 + 4, 3 * SPEC_TILE_BYTES // 4 + 12):
        x = rng.random(n, dtype=cupy.float32)
        want = specialized_reference(x, 5)
        for s, traced, late in ((1, False, True), (1, True, False), (2, True, True), (3, False, False)):
            partial.fill(np.nan)
            trace = cupy.zeros(2 * TRACE_TILES * len(EVENTS), dtype=cupy.uint64) if traced else None
            header = cupy.zeros(2 * 5, dtype=cupy.uint64) if traced else None
            run_specialized(x, partial[:2], s, 5, trace, header, 2, blocks=2, release_after_math=late)
            if not sum_squares_check(partial[:2], want)["passed"]:
                raise AssertionError(f"stream_specialized ({s} stages, traced={traced}) wrong at n = {n}")
    for kernel in RACE_KERNELS:   # with the fence, a small race kernel is right at any block shape
        for threads, blocks in ((32, 1), (256, 2)):
            wrong, _ = run_race(kernel, threads, blocks, 3, True)
            if wrong:
                raise AssertionError(f"{kernel} with the fence: {wrong} wrong values ({threads} threads, {blocks} blocks)")
