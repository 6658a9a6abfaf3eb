"""Try notebook 10's kernels and their -D variants on a Hopper GPU, quickly, without recording.

    python scripts/tune_hopper.py check     # every rung at edge shapes against float64
    python scripts/tune_hopper.py check_variants  # VARIANTS at the edge shapes against float64
    python scripts/tune_hopper.py time      # VARIANTS against cuBLAS, interleaved, at TIMED_SHAPES
    python scripts/tune_hopper.py profiled  # the first six VARIANTS once at 4096^3, for ncu
    python scripts/tune_hopper.py sanitized [I ...]  # VARIANTS (or VARIANTS[I]) once at three edge shapes, for compute-sanitizer
    python scripts/tune_hopper.py ceilings  # wgmma and mma.sync instruction ceilings
    python scripts/tune_hopper.py pitfalls  # the release-before-wait and descriptor-swizzle variants

Each part is its own process: a variant that traps (a bounded mbarrier wait) takes its CUDA
context down with it, not the other parts. What it prints is for choosing the defaults in
kernels/hopper_gemm.cu; the numbers the notebook shows come from the recorded experiments.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_lib.labs import hopper_gemm as lab_hopper  # noqa: E402
from course_lib.launch import hopper_gemm as hg  # noqa: E402
from course_lib.launch.operands import bf16_bits_to_float32  # noqa: E402


def check() -> None:
    import cupy

    for m, n, k in lab_hopper.EDGE_SHAPES + [[4096, 4096, 4096], [2048, 2048, 16384]]:
        a, b, _, _ = hg.operands(m, n, k, 5)
        exact = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64).T
        scale = float(cupy.abs(exact).max())
        for r in hg.RUNGS:
            c = hg.nan_output(m, n)
            try:
                hg.run(r, a, b, c)
                err = float(cupy.abs(bf16_bits_to_float32(c) - exact).max()) / scale
            except Exception as exc:  # noqa: BLE001
                print(f"{r.kernel} {m}x{n}x{k}: {type(exc).__name__}: {exc}"[:300])
                raise
            print(f"{r.kernel:22s} {m}x{n}x{k}: max err / max|C| = {err:.2e} {'ok' if err < 2 ** -7 else 'WRONG'}")


# (kernel, defines, blocks of a persistent grid, or None for one per SM).
CLUSTER_RELEASE = {"HG_REMOTE_RELEASE_CLUSTER": 1}
INFLIGHT = {"HG_INFLIGHT": 1}
VARIANTS = [
    ("hgemm_5_persistent", {}, None), ("hgemm_6_cluster", {}, None), ("hgemm_6_cluster", CLUSTER_RELEASE, None),
    ("hgemm_7_tma_store", {}, None), ("hgemm_7_tma_store", {}, 128), ("hgemm_7_tma_store", INFLIGHT, None),
    ("hgemm_7_tma_store", INFLIGHT, 128), ("hgemm_6_cluster", {}, 128),
]
TIMED_SHAPES = ([4096, 4096, 4096], [8192, 8192, 8192], [4096, 4096, 4160], [6144, 6144, 6144], [8192, 1024, 8192],
                [2304, 2304, 2304], [4096, 4096, 4096])


def check_variants() -> None:
    """Every variant at the edge shapes against float64, before any is timed."""
    import cupy

    for m, n, k in lab_hopper.EDGE_SHAPES + [[4096, 4096, 4160]]:
        a, b, _, _ = hg.operands(m, n, k, 5)
        exact = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64).T
        scale = max(float(cupy.abs(exact).max()), 1e-30)
        for kernel, d, blocks in VARIANTS:
            c = hg.nan_output(m, n)
            hg.run(kernel, a, b, c, d, blocks=blocks)
            err = float(cupy.abs(bf16_bits_to_float32(c) - exact).max()) / scale
            ok = err < 2 ** -7
            print(f"check {kernel} {d} {blocks} {m}x{n}x{k}: {err:.2e} {'ok' if ok else 'WRONG'}")
            if not ok:
                raise AssertionError(f"{kernel} {d} wrong at {m}x{n}x{k}")


def time() -> None:
    import torch

    from course_lib.core.timing import benchmark_interleaved

    for m, n, k in TIMED_SHAPES:
        a, b, ta, tb = hg.operands(m, n, k, 7)
        outs = [hg.nan_output(m, n) for _ in VARIANTS]
        ref = torch.mm(ta, tb.t()).float()
        for (kernel, d, smem), c in zip(VARIANTS, outs):
            hg.run(kernel, a, b, c, d, blocks=smem)
        calls = [lambda: torch.mm(ta, tb.t())] + [
            lambda v=v, c=c: hg.run(v[0], a, b, c, v[1], blocks=v[2]) for v, c in zip(VARIANTS, outs)]
        times = benchmark_interleaved(calls, 20)
        flop = 2.0 * m * n * k
        lib = times[0].median_s
        print(f"--- {m}x{n}x{k}: cuBLAS {lib * 1e6:.1f} us, {flop / lib / 1e12:.0f} TFLOP/s")
        for (kernel, d, smem), t, c in zip(VARIANTS, times[1:], outs):
            got = torch.as_tensor(bf16_bits_to_float32(c), device="cuda")
            err = float((got - ref).abs().max() / ref.abs().max())
            print(f"{kernel:20s} {str(d) + (f' {smem} blocks' if smem else ''):36s} {t.median_s * 1e6:9.1f} us {flop / t.median_s / 1e12:6.0f} TFLOP/s "
                  f"{100 * lib / t.median_s:5.1f}% of cuBLAS  err {err:.1e}")


def profiled() -> None:
    """Each variant launched once at 4096^3, for ncu."""
    import cupy

    a, b, _, _ = hg.operands(4096, 4096, 4096, 7)
    c = hg.nan_output(4096, 4096)
    for kernel, d, blocks in VARIANTS[:6]:
        hg.run(kernel, a, b, c, d, blocks=blocks)
    cupy.cuda.Device().synchronize()


def sanitized() -> None:
    """VARIANTS once at small edge shapes (both of rung 7's stores, a half-empty last pair), for compute-sanitizer."""
    import cupy

    chosen = [VARIANTS[int(i)] for i in sys.argv[2:]] or VARIANTS   # indices into VARIANTS, or all
    for m, n, k in ((256, 512, 320), (129, 257, 200), (1, 8, 8)):
        a, b, _, _ = hg.operands(m, n, k, 71)
        for kernel, d, blocks in chosen:
            hg.run(kernel, a, b, hg.nan_output(m, n), d, blocks=blocks)
    cupy.cuda.Device().synchronize()


def ceilings() -> None:
    from course_lib.measure import experiments

    for c in experiments.run("hopper.ceilings", samples=20).cases:
        print(f"{c.name:36s} {c.flop_per_s / 1e12:6.0f} TFLOP/s  regs {c.launch['registers']}")
    for wg in (1, 3):
        for c in experiments.run("hopper.ceilings", samples=20, warpgroups=wg, shapes=[256]).cases[:1]:
            print(f"{wg} warpgroups: {c.name:36s} {c.flop_per_s / 1e12:6.0f} TFLOP/s")
    for bps in (1, 4):
        c = experiments.run("hopper.ceilings", samples=20, shapes=[], mma_blocks_per_sm=bps).cases[-1]
        print(f"mma.sync {bps} blocks/SM of 256: {c.flop_per_s / 1e12:6.0f} TFLOP/s")


def pitfalls() -> None:
    import cupy

    m = n = k = 4096
    a, b, ta, tb = hg.operands(m, n, k, 9)
    exact = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64).T
    tol = 2 ** -7 * float(cupy.abs(exact).max())
    for kernel, d in (("hgemm_5_persistent", {"HG_RELEASE_BEFORE_WAIT": 1}), ("hgemm_4_wide", {"HG_RELEASE_BEFORE_WAIT": 1}),
                      ("hgemm_5_persistent", {"HG_SWIZZLE_DESC": 0})):
        wrong_runs, worst = 0, 0
        for trial in range(10):
            c = hg.nan_output(m, n)
            hg.run(kernel, a, b, c, d)
            bad = int((cupy.abs(bf16_bits_to_float32(c) - exact) > tol).sum())
            wrong_runs += bad > 0
            worst = max(worst, bad)
        print(f"{kernel} {d}: {wrong_runs}/10 runs wrong, at most {worst} wrong outputs")


if __name__ == "__main__":
    {"check": check, "check_variants": check_variants, "time": time, "profiled": profiled,
     "sanitized": sanitized, "ceilings": ceilings, "pitfalls": pitfalls}[sys.argv[1]]()
