"""What keeps notebook 12's grouped decode kernel (``decode_grouped_g4``) at 2–3× its HBM floor? Variants of its
main loop, compiled with NVRTC and timed interleaved with the course kernel and a plain copy of the same bytes
(the floor), each checked against the course kernel's output first:

    U=2 P=0          the course kernel's loop (two trips' K and V loaded, then used)
    U=4 P=0          four trips loaded before any is used: twice the bytes in flight per warp
    U=2 P=1          software-pipelined: the next trips' K and V are loaded before this trip's math
    U=4 P=1          both (161 registers: 3 resident blocks of 128 threads)

Hypotheses it tests: (a) too few bytes in flight while a warp computes (P=1 and U=4 remove that);
(b) too few resident warps (MINB). If neither moves the time toward the floor, the math (shuffles, exp, unpacking)
is the limiter: then ncu's issue-slot and pipe metrics decide.

Beside them, entry points of the family itself, compiled with its tile macros overridden (-D, as the LOOP variants
are): the tensor-core kernel ``decode_grouped_g4_mma`` (the group's heads as the rows of an m16 tile, Q·Kᵀ and P·V
on mma.sync, each warp streaming its own tiles through cp.async), at its own split rule (one wave of resident
blocks, from the occupancy model of this GPU):

    mma                      the file's macros, launched by the launcher (run_decode(engine="mma"))
    mma STAGES=2             one tile in flight a warp while it multiplies one (64 KiB a block: 3 blocks an SM)
    mma WARPS=2              two warps a block (48 KiB: 4 blocks an SM)
    mma TILE=32 STAGES=2     32-token tiles: half the softmax and barrier overhead a token (1 block an SM)

On a GPU:

    python scripts/probe_decode_attention.py             # batch 8 and 32 at 8k, batch 1 at 32k
"""
import sys

import numpy as np

from course_lib.core import cuda, timing
from course_lib.core.hardware import detect
from course_lib.launch import decode_attention as decode
from course_lib.launch.operands import bf16_bits_to_float32
from course_lib.models import occupancy

LOOP = r'''
#ifndef U
#define U 2
#endif
#ifndef P
#define P 0
#endif
#ifndef MINB
#define MINB 1
#endif
extern "C" __global__ __launch_bounds__(THREADS, MINB) void decode_probe(
    const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
    float* __restrict__ partial, float* __restrict__ stats, int T, float scale_log2) {
    constexpr int G = 4;
    const int split = blockIdx.x, splits = gridDim.x, hkv = blockIdx.y, hkvs = gridDim.y, b = blockIdx.z;
    const int B = gridDim.z, hq0 = hkv * G, Hq = hkvs * G;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = lane >> 4, d0 = 8 * (lane & 15);
    const long long chunk = ((((long long)T + splits - 1) / splits + 2 * WARPS - 1) / (2 * WARPS)) * (2 * WARPS);
    const long long t0 = split * chunk, t1 = min((long long)T, t0 + chunk);
    const long long head_off = ((long long)b * hkvs + hkv) * (long long)T * HEAD_DIM;
    const bf16_raw* kh = k + head_off;
    const bf16_raw* vh = v + head_off;
    float qr[G][8], acc[G][8], m[G], l[G];
    #pragma unroll
    for (int g = 0; g < G; ++g) {
        unpack8(*reinterpret_cast<const uint4*>(q + ((long long)b * Hq + hq0 + g) * HEAD_DIM + d0), qr[g]);
        #pragma unroll
        for (int j = 0; j < 8; ++j) { qr[g][j] *= scale_log2; acc[g][j] = 0.f; }
        m[g] = NEG_INF; l[g] = 0.f;
    }
    const long long step = (long long)U * 2 * WARPS;
    uint4 kr[U], vr[U];                      // raw 16-byte words: unpacked only when used
    auto load = [&](long long pair) {
        #pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long t = pair + u * 2 * WARPS + half;
            if (t < t1) {
                kr[u] = *reinterpret_cast<const uint4*>(kh + t * HEAD_DIM + d0);
                vr[u] = *reinterpret_cast<const uint4*>(vh + t * HEAD_DIM + d0);
            } else { kr[u] = make_uint4(0, 0, 0, 0); vr[u] = kr[u]; }
        }
    };
    long long pair = t0 + 2 * warp;
    if (P) load(pair);
    for (; pair < t1; pair += step) {
        uint4 kc[U], vc[U];
        if (P) {
            #pragma unroll
            for (int u = 0; u < U; ++u) { kc[u] = kr[u]; vc[u] = vr[u]; }
            if (pair + step < t1) load(pair + step);
        } else {
            load(pair);
            #pragma unroll
            for (int u = 0; u < U; ++u) { kc[u] = kr[u]; vc[u] = vr[u]; }
        }
        #pragma unroll
        for (int u = 0; u < U; ++u) {
            const bool valid = pair + u * 2 * WARPS + half < t1;
            float kx[8], vx[8];
            unpack8(kc[u], kx);
            unpack8(vc[u], vx);
            #pragma unroll
            for (int g = 0; g < G; ++g) {
                float s = 0.f;
                #pragma unroll
                for (int j = 0; j < 8; ++j) s = fmaf(qr[g][j], kx[j], s);
                #pragma unroll
                for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
                if (valid) {
                    if (s > m[g]) {
                        const float corr = fast_exp2(m[g] - s);
                        l[g] *= corr;
                        #pragma unroll
                        for (int j = 0; j < 8; ++j) acc[g][j] *= corr;
                        m[g] = s;
                    }
                    const float p = fast_exp2(s - m[g]);
                    l[g] += p;
                    #pragma unroll
                    for (int j = 0; j < 8; ++j) acc[g][j] = fmaf(p, vx[j], acc[g][j]);
                }
            }
        }
    }
    __shared__ float s_acc[STREAMS][G][HEAD_DIM];
    __shared__ float s_ml[STREAMS][G][2];
    const int stream = 2 * warp + half;
    #pragma unroll
    for (int g = 0; g < G; ++g) {
        #pragma unroll
        for (int j = 0; j < 8; ++j) s_acc[stream][g][d0 + j] = acc[g][j];
        if ((lane & 15) == 0) { s_ml[stream][g][0] = m[g]; s_ml[stream][g][1] = l[g]; }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * HEAD_DIM; i += THREADS) {
        const int g = i / HEAD_DIM, d = i % HEAD_DIM;
        float mx = NEG_INF;
        #pragma unroll
        for (int s = 0; s < STREAMS; ++s) mx = fmaxf(mx, s_ml[s][g][0]);
        float o = 0.f, sum = 0.f;
        if (mx != NEG_INF) {
            #pragma unroll
            for (int s = 0; s < STREAMS; ++s) {
                const float w = exp2f(s_ml[s][g][0] - mx);
                o = fmaf(w, s_acc[s][g][d], o);
                sum = fmaf(w, s_ml[s][g][1], sum);
            }
        }
        const long long row = ((long long)split * B + b) * Hq + hq0 + g;
        partial[row * HEAD_DIM + d] = o;
        if (d == 0) { stats[2 * row] = mx; stats[2 * row + 1] = sum; }
    }
}
'''
VARIANTS = {"U=2 P=0": {}, "U=4 P=0": {"U": 4}, "U=2 P=1": {"P": 1}, "U=4 P=1": {"U": 4, "P": 1}}
SHAPES = ((8, 8192), (32, 8192), (1, 32768))   # (batch, context), Llama 3 8B: 8 KV heads of 4 query heads
# Entry points of the family itself: (entry point, tile macros for -D); the launcher runs the first as it is.
FAMILY_VARIANTS = {"mma": ("decode_grouped_g4_mma", {}),
                   "mma STAGES=2": ("decode_grouped_g4_mma", {"DEC_MMA_STAGES": 2}),
                   "mma WARPS=2": ("decode_grouped_g4_mma", {"DEC_MMA_WARPS": 2}),
                   "mma TILE=32 STAGES=2": ("decode_grouped_g4_mma", {"DEC_MMA_TILE": 32, "DEC_MMA_STAGES": 2})}


def build(defines: dict):

    source = cuda.source(decode.FAMILY) + LOOP
    cubin, log = cuda.compile_source(source, cuda.device_arch(), "decode_probe.cu",
                                     tuple(f"-D{k}={v}" for k, v in defines.items()))
    regs = cuda.parse_ptxas_report(log, cuda.device_arch()).get("decode_probe")
    return cuda.load_cubin(cubin).get_function("decode_probe"), regs


def build_entry(entry: str, defines: dict):
    """An entry point of the family compiled with its macros overridden, its ptxas report, and its launch:
    (function, report, threads, dynamic shared bytes, resident blocks an SM on this GPU)."""
    family = cuda.compile_family(decode.FAMILY, cuda.device_arch(), cuda.defines_to_options(defines))
    fn, report = family.function(entry), family.resources[entry]
    threads, smem = decode.mma_threads(defines), decode.mma_smem_bytes(4, defines)
    if fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem
    blocks = decode.mma_blocks_per_sm(4, occupancy.budget_from_device(detect()), report.registers, defines)
    return fn, report, threads, smem, blocks


def main() -> int:
    import cupy

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    print(detect().name, sms, "SMs")
    built = {name: build(d) for name, d in VARIANTS.items()}
    for name, (_, regs) in built.items():
        print(f"  {name:16s} {regs}")
    mma = {name: build_entry(entry, d) for name, (entry, d) in FAMILY_VARIANTS.items()}
    for name, (_, report, threads, smem, blocks) in mma.items():
        print(f"  {name:22s} {report.registers} registers, {threads} threads, {smem // 1024} KiB, {blocks} blocks an SM")
    for batch, context in SHAPES:
        q, k, v, out = decode.operands(batch, 8, 4, context, seed=1)
        splits = decode.run_decode(q, k, v, out, 4)
        want = bf16_bits_to_float32(out)   # the course kernel's output, as numbers (not bit patterns)
        partial = cupy.empty((splits, batch * 32, decode.HEAD_DIM), cupy.float32)
        stats = cupy.empty((splits, batch * 32, 2), cupy.float32)
        scale = np.float32(decode.HEAD_DIM ** -0.5 * 1.4426950408889634)
        calls = {"course kernel": lambda: decode.run_decode(q, k, v, out, 4, splits=splits)}
        for name, (fn, _) in built.items():
            def run(fn=fn):
                fn((splits, 8, batch), (decode.THREADS,), (q, k, v, partial, stats, np.int32(context), scale))
                cuda.kernel(decode.FAMILY, "decode_combine")((batch * 32,), (decode.HEAD_DIM,),
                                                              (partial, stats, out, np.int32(batch * 32), np.int32(splits)))
            out.fill(0)
            run()
            err = float(cupy.abs(bf16_bits_to_float32(out) - want).max())
            if not err <= 1e-2:
                print(f"  {name}: WRONG, max error {err}")
                continue
            calls[name] = run
        launcher_splits = decode.mma_splits_for(batch, 8, context, sms, mma["mma"][4])
        calls[f"mma via run_decode ({launcher_splits} splits)"] = lambda: decode.run_decode(q, k, v, out, 4, engine="mma")
        for name, (fn, _, threads, smem, blocks) in mma.items():
            if name == "mma":
                continue   # the launcher's launch of it is timed above
            mma_splits = decode.mma_splits_for(batch, 8, context, sms, blocks, decode.mma_tokens_per_round(
                FAMILY_VARIANTS[name][1]))
            mma_partial = cupy.empty((mma_splits, batch * 32, decode.HEAD_DIM), cupy.float32)
            mma_stats = cupy.empty((mma_splits, batch * 32, 2), cupy.float32)

            def run(fn=fn, threads=threads, smem=smem, s=mma_splits, p=mma_partial, st=mma_stats):
                fn((s, 8, batch), (threads,), (q, k, v, p, st, np.int32(context), scale), shared_mem=smem)
                cuda.kernel(decode.FAMILY, "decode_combine")((batch * 32,), (decode.HEAD_DIM,),
                                                              (p, st, out, np.int32(batch * 32), np.int32(s)))
            calls[f"{name} ({mma_splits} splits)"] = run
        for name in [n for n in calls if n.startswith("mma")]:
            out.fill(0)
            calls[name]()
            # The tensor cores round the softmax weights to bf16: held to the launcher's tolerance for that, twice.
            err, tol = decode.max_error(out, want.astype(cupy.float64), v)
            if not err <= 2 * tol:
                print(f"  {name}: WRONG, max error {err:.3g} (2 x tolerance {2 * tol:.3g})")
                del calls[name]
        kv = cupy.concatenate([k.ravel(), v.ravel()])
        dst = cupy.empty_like(kv)
        calls["copy of K and V (floor x2: read + write)"] = lambda: dst.__setitem__(slice(None), kv)
        times = timing.benchmark_interleaved(list(calls.values()), samples=timing.MIN_SAMPLES)
        floor = times[-1].median_s / 2   # a copy reads and writes the cache: one read takes about half
        print(f"batch {batch}, context {context}, splits {splits}: floor (half a copy) {floor * 1e6:.1f} us")
        for name, t in zip(calls, times):
            print(f"  {name:42s} {t.median_s * 1e6:8.1f} us  {t.median_s / floor:5.2f}x floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
