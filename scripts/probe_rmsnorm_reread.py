"""The probes behind notebook 08's account of the re-read RMSNorm (rmsnorm_reread), kept so that the figures
08 quotes as "a probe, not in the record" can be measured again. On a GPU:

    python scripts/probe_rmsnorm_reread.py time [N ...]
        Variants of the kernel (below: its plan, with its choices as macros) timed call by call in turn beside the
        copy kernel and a static-shape torch.compile, as % of the copy, over 2^26 floats: the 8k reduction,
        launch-bound and per-load-policy variants, and the 32k chunked and many-blocks variants.

    ncu --csv --print-units base --clock-control none \
        --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,launch__registers_per_thread,\
smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct \
        -k regex:"probe|rmsnorm_reread|triton" python scripts/probe_rmsnorm_reread.py launch WHAT N
        One launch for Nsight Compute at rows of N floats. WHAT: course (the course's rmsnorm_reread),
        inductor (torch.compile's RMSNorm, static shapes; launched twice, profile the last), or a variant's
        macros, e.g. "VECS=2, CHUNKS=4, T=1024, BT=1024, BM=2, RED=1".

Macros: VECS float4 a thread a chunk, CHUNKS chunks (a loop), T threads, BT/BM __launch_bounds__ (BM = 0: none),
RED 0 every thread adds the 32 partials (block_all_reduce's way) or 1 warp 0 adds them (block_sum's), POL 1 an
L2 policy created at each load, PERSIST 1 a resident grid walking the rows, PREF 1 (with it) the block's next row
asked of the L2 (prefetch.global.L2::evict_last) once the current row's sum is known; GRP (with POL 0) the
second read in groups of GRP slots, all of a group's loads before its stores (without it each slot's store
waits on that slot's loads before the next slot's loads issue: one round trip per slot); CARVE (not a macro)
the kernel's preferred shared-memory carveout in percent, 0 leaving the most of the SM's on-chip memory to the L1.
"""
import sys

import numpy as np

from course_lib.core import cuda

SRC = r'''
#ifndef VECS
#define VECS 2
#endif
#ifndef BT
#define BT 1024
#endif
#ifndef BM
#define BM 2
#endif
#ifndef RED
#define RED 0
#endif
#ifndef POL
#define POL 0
#endif
#ifndef CHUNKS
#define CHUNKS 1
#endif
#ifndef PERSIST
#define PERSIST 0   // 1: a resident grid (SMs x BM blocks) walks rows blockIdx.x, + gridDim.x, ...
#endif
#ifndef PREF
#define PREF 0      // 1 (with PERSIST): after the reduction, ask the L2 for this block's next row
#endif
#ifndef GRP
#define GRP 0       // > 0: the second read in groups of GRP slots, every load of a group before its stores
#endif
#if BM > 0
#define BOUNDS __launch_bounds__(BT, BM)
#else
#define BOUNDS
#endif
#include "l2_hints.cuh"   // l2_policy<KEEP>, load4_hinted<KEEP>: the course kernel's own hinted loads
__device__ __forceinline__ float reduce(float v, float* s) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int o = 16; o; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
#if RED == 0
  __syncthreads();
  if (lane == 0) s[warp] = v;
  __syncthreads();
  v = s[0];
  for (int w = 1; w < warps; ++w) v += s[w];
  return v;
#else
  if (lane == 0) s[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? s[lane] : 0.f;
    for (int o = 16; o; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) s[32] = v;
  }
  __syncthreads();
  return s[32];
#endif
}
extern "C" __global__ void BOUNDS probe(float* __restrict__ out, const float* __restrict__ in,
                                       const float* __restrict__ w, int n, float eps, int rows) {
  __shared__ float s[33];
#if PERSIST
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
  __syncthreads();   // s[] of the last row is read
#else
  { const int row = blockIdx.x;
#endif
  const float* x = in + (size_t)row * n; float* y = out + (size_t)row * n;
  float sq = 0.f;
  {
#if POL == 0
    const unsigned long long k = l2_policy<true>();
#endif
#pragma unroll 1
    for (int c = 0; c < CHUNKS; ++c) {
    float4 v[VECS];
#pragma unroll
    for (int j = 0; j < VECS; ++j) {
#if POL == 1
      const unsigned long long k = l2_policy<true>();
#endif
      const int e = 4 * ((c * VECS + j) * blockDim.x + threadIdx.x);
      v[j] = e < n ? load4_hinted<true>(x + e, k) : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < VECS; ++j) sq += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
  }
  const float r = rsqrtf(reduce(sq, s) / n + eps);
#if PREF
  if (row + gridDim.x < rows) {
    const float* next = in + (size_t)(row + gridDim.x) * n;
    for (int e = 32 * threadIdx.x; e < n; e += 32 * blockDim.x)   // one 128-byte line a thread a step
      asm volatile("prefetch.global.L2::evict_last [%0];" :: "l"(next + e));
  }
#endif
#if POL == 0
  const unsigned long long d = l2_policy<false>();
#endif
#if GRP > 0
  // Loads at a clamped address (always inside the row, so never guarded) and only the stores guarded: no
  // branch splits a group, so its loads all issue before its first store waits on one of them.
#pragma unroll 1
  for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
  for (int j0 = 0; j0 < VECS; j0 += GRP) {
    float4 v[GRP], g[GRP];
#pragma unroll
    for (int k = 0; k < GRP; ++k) {
      const int e = min(4 * ((c * VECS + j0 + k) * (int)blockDim.x + (int)threadIdx.x), n - 4);
      v[k] = load4_hinted<false>(x + e, d);
      g[k] = *reinterpret_cast<const float4*>(w + e);
    }
#pragma unroll
    for (int k = 0; k < GRP; ++k) {
      const int e = 4 * ((c * VECS + j0 + k) * blockDim.x + threadIdx.x);
      if (e < n) *reinterpret_cast<float4*>(y + e) = make_float4(v[k].x * r * g[k].x, v[k].y * r * g[k].y,
                                                                 v[k].z * r * g[k].z, v[k].w * r * g[k].w);
    }
  }
#else
#pragma unroll 1
  for (int c = 0; c < CHUNKS; ++c)
#pragma unroll
  for (int j = 0; j < VECS; ++j) {
#if POL == 1
    const unsigned long long d = l2_policy<false>();
#endif
    const int e = 4 * ((c * VECS + j) * blockDim.x + threadIdx.x);
    if (e < n) {
      const float4 v = load4_hinted<false>(x + e, d), g = *reinterpret_cast<const float4*>(w + e);
      *reinterpret_cast<float4*>(y + e) = make_float4(v.x * r * g.x, v.y * r * g.y, v.z * r * g.z, v.w * r * g.w);
    }
  }
#endif
  }
}
'''
ELEMENTS = 1 << 26
TIMED = {
    8192: [dict(VECS=2, T=1024, BT=1024, BM=2), dict(VECS=2, T=1024, BT=1024, BM=2, RED=1),
           dict(VECS=2, T=1024, BM=0), dict(VECS=2, T=1024, BT=1024, BM=2, POL=1),
           dict(VECS=4, T=512, BT=512, BM=4, RED=1), dict(VECS=2, T=1024, BT=1024, BM=2, RED=1, PERSIST=1),
           dict(VECS=2, T=1024, BT=1024, BM=2, RED=1, PERSIST=1, PREF=1), dict(VECS=4, T=512, BT=512, BM=3, RED=1),
           dict(VECS=2, CHUNKS=2, T=512, BT=512, BM=3, RED=1), dict(VECS=2, T=1024, BT=1024, BM=2, RED=1, GRP=2)],
    16384: [dict(VECS=4, T=1024, BT=1024, BM=2, RED=1), dict(VECS=2, CHUNKS=2, T=1024, BT=1024, BM=2, RED=1),
            dict(VECS=4, T=1024, BT=1024, BM=2, RED=1, GRP=2)],
    32768: [dict(VECS=8, T=1024, BT=1024, BM=1), dict(VECS=8, T=1024, BT=1024, BM=1, RED=1),
            dict(VECS=2, CHUNKS=4, T=1024, BT=1024, BM=2, RED=1), dict(VECS=4, CHUNKS=4, T=512, BT=512, BM=4, RED=1),
            dict(VECS=8, T=1024, BT=1024, BM=1, RED=1, PERSIST=1),
            dict(VECS=8, T=1024, BT=1024, BM=1, RED=1, PERSIST=1, PREF=1),
            dict(VECS=2, CHUNKS=4, T=1024, BT=1024, BM=1, RED=1), dict(VECS=4, CHUNKS=2, T=1024, BT=1024, BM=1, RED=1),
            dict(VECS=1, CHUNKS=8, T=1024, BT=1024, BM=1, RED=1),
            dict(VECS=8, T=1024, BT=1024, BM=1, RED=1, CARVE=0), dict(VECS=8, T=1024, BT=1024, BM=1, RED=1, CARVE=100),
            dict(VECS=2, CHUNKS=4, T=1024, BT=1024, BM=2, RED=1, CARVE=0),
            dict(VECS=8, T=1024, BT=1024, BM=1, RED=1, PERSIST=1, CARVE=0),
            dict(VECS=8, T=1024, BT=1024, BM=1, RED=1, GRP=2), dict(VECS=8, T=1024, BT=1024, BM=1, RED=1, GRP=4),
            dict(VECS=8, T=1024, BT=1024, BM=1, RED=1, GRP=4, CARVE=0)],
}


def build(macros: dict):
    """The variant kernel and its threads per block."""
    import cupy

    macros = dict(macros)
    threads = macros.pop("T")
    options = (tuple(f"-D{k}={v}" for k, v in macros.items())
               + (f"--gpu-architecture={cuda.target_arch()}", "-std=c++17"))
    code = cuda.paste_headers(SRC, "probe_rmsnorm_reread")
    return cupy.RawModule(code=code, options=options).get_function("probe"), threads


def operands(n: int):
    import cupy

    rows = ELEMENTS // n
    x = cupy.random.default_rng(n).standard_normal((rows, n), dtype=cupy.float32)
    w = cupy.random.default_rng(1).random(n, dtype=cupy.float32) + 0.5
    return x, w, cupy.empty_like(x)


def variant_call(macros: dict, x, w, out):
    import cupy

    macros = dict(macros)
    carveout = macros.pop("CARVE", None)
    fn, threads = build(macros)
    if carveout is not None:   # the share of the SM's L1/shared memory asked for as shared memory (0: most L1)
        fn.preferred_shared_memory_carveout = carveout
    rows, n = x.shape
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    blocks = min(rows, sms * max(1, macros.get("BM", 1))) if macros.get("PERSIST") else rows   # every block resident
    return lambda: fn((blocks,), (threads,), (out, x, w, np.int32(n), np.float32(1e-6), np.int32(rows)))


def inductor_call(x, w):
    import torch

    tx, tw = torch.as_tensor(x, device="cuda"), torch.as_tensor(w, device="cuda")
    torch._dynamo.reset()
    compiled = torch.compile(lambda t, g: torch.nn.functional.rms_norm(t, (t.shape[-1],), g, eps=1e-6), dynamic=False)
    compiled(tx, tw)
    return lambda: compiled(tx, tw)


def time_variants(lengths: list[int]) -> None:
    import cupy

    from course_lib.core.timing import benchmark_interleaved
    from course_lib.launch.elementwise import geometry
    from course_lib.launch.fusion import RowPlan, run_rmsnorm

    copy = cuda.kernel("elementwise", "copy_vec4")
    for n, variants in TIMED.items():
        if lengths and n not in lengths:
            continue
        x, w, out = operands(n)
        xd = x.astype(cupy.float64)
        want = xd / cupy.sqrt((xd ** 2).mean(1, keepdims=True) + 1e-6) * w
        grid, block = geometry("copy_vec4", x.size)
        calls = {"copy": lambda: copy(grid, block, (out, x, np.int64(x.size))), "torch.compile": inductor_call(x, w),
                 "course rmsnorm_reread": lambda: run_rmsnorm(out, x, w, RowPlan.REREAD)}
        for v in [None, *variants]:   # None: the course kernel
            call = calls["course rmsnorm_reread"] if v is None else variant_call(v, x, w, out)
            out.fill(np.nan)
            call()
            err = float(cupy.abs(out - want).max())
            if not err < 1e-4:
                raise AssertionError(f"{v or 'the course kernel'} at n = {n} is wrong by {err:.3g}")
            if v is not None:
                calls[str(v)] = call
        times = benchmark_interleaved(list(calls.values()), 20)
        for label, t in zip(calls, times):
            share = 100 * times[0].median_s / t.median_s
            print(f"n={n:6d} {share:6.1f}% of the copy  {t.median_s * 1e6:8.1f} us  {label}")


def launch_once(what: str, n: int) -> None:
    import cupy

    from course_lib.launch.fusion import RowPlan, run_rmsnorm

    x, w, out = operands(n)
    if what == "course":
        run_rmsnorm(out, x, w, RowPlan.REREAD)
    elif what == "inductor":
        inductor_call(x, w)()
    else:
        macros = dict(item.split("=") for item in what.replace(" ", "").split(","))
        variant_call({k: int(v) for k, v in macros.items()}, x, w, out)()
    cupy.cuda.Device().synchronize()


if __name__ == "__main__":
    if sys.argv[1:2] == ["time"]:
        time_variants([int(a) for a in sys.argv[2:]])
    elif sys.argv[1:2] == ["launch"] and len(sys.argv) == 4:
        launch_once(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
