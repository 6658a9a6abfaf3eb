// Notebook 12's decode attention: one new query token per sequence attends to a KV cache of T tokens,
// with grouped-query attention (G query heads share one K and V head), in bf16 with fp32 arithmetic.
//
// Layouts (bf16 as raw 16-bit words):
//   Q        [B, Hq, 128]         the new token's queries, Hq = G * Hkv
//   K, V     [B, Hkv, T, 128]     the cache, token-major: one token's head row is 256 contiguous bytes
//            [B, Hkv, 128, T]     with the _dmajor kernels: dimension-major (a transposed cache)
//   out      [B, Hq, 128]
//   partial  [splits, B, Hq, 128] fp32, and stats [splits, B, Hq, 2] (running max, sum), for the combine
//
// Split-K over the cache ("flash decoding"): grid (splits, Hkv, B), 128 threads. Each block reads its
// slice of the cache once for all G query heads of its KV head (the grouped path: each KV byte is
// read once per group, not once per query head). In a warp, lanes 0-15 take one token and lanes
// 16-31 the next; each lane loads 8 dimensions (16 bytes), so one load instruction covers two whole
// token rows (512 contiguous bytes). A running softmax (max and sum, base 2) folds each score in as it
// comes, rescaling the sums only when a score is a new maximum. decode_combine merges the splits. Any T >= 1, any splits >= 1 (empty splits are harmless).

#include "online_softmax.cuh"   // HEAD_DIM, NEG_INF, bf16_raw, bf16_lo/hi, unpack8, to_bf16 (a NaN stays a NaN)

#define THREADS 128
#define WARPS (THREADS / 32)
#define STREAMS (2 * WARPS)        // token streams in a block: two per warp

// 2^x by the SFU's approximation (about 2 ulp; -inf gives 0): the scores are already in base 2.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// A lane's 8 dimensions of token t: one 16-byte load (token-major) or eight strided 2-byte loads
// (dimension-major, 2T bytes apart: each lands in its own sector).
template <bool DMAJOR>
__device__ __forceinline__ void load8(const bf16_raw* __restrict__ head, long long T, long long t, int d0, float* x) {
    if (!DMAJOR) {
        unpack8(*reinterpret_cast<const uint4*>(head + t * HEAD_DIM + d0), x);
    } else {
        #pragma unroll
        for (int j = 0; j < 8; ++j) x[j] = __uint_as_float((unsigned)head[(long long)(d0 + j) * T + t] << 16);
    }
}

template <int G, bool DMAJOR>
__device__ __forceinline__ void decode_partial(const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k,
                                               const bf16_raw* __restrict__ v, float* __restrict__ partial,
                                               float* __restrict__ stats, int T, float scale_log2) {
    const int split = blockIdx.x, splits = gridDim.x, hkv = blockIdx.y, hkvs = gridDim.y, b = blockIdx.z;
    const int B = gridDim.z, hq0 = hkv * G, Hq = hkvs * G;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, half = lane >> 4, d0 = 8 * (lane & 15);
    // Each split a whole number of rounds (2 * WARPS tokens), so rounds start on even tokens.
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
    // Token pairs: warp w takes pairs w, w + WARPS, ...; the block's four warps read 2 KB in a row.
    // Two trips' K and V are loaded before either is used (64 bytes a lane in flight). The whole warp
    // runs every trip (its shuffles need all 32 lanes); a half past the end does no update.
    for (long long pair = t0 + 2 * warp; pair < t1; pair += 2 * 2 * WARPS) {
        float kx[2][8] = {}, vx[2][8] = {};
        bool valid[2];
        #pragma unroll
        for (int u = 0; u < 2; ++u) {
            const long long t = pair + u * 2 * WARPS + half;
            valid[u] = t < t1;
            if (valid[u]) {
                load8<DMAJOR>(kh, T, t, d0, kx[u]);
                load8<DMAJOR>(vh, T, t, d0, vx[u]);
            }
        }
        #pragma unroll
        for (int u = 0; u < 2; ++u) {
            #pragma unroll
            for (int g = 0; g < G; ++g) {
                float s = 0.f;
                #pragma unroll
                for (int j = 0; j < 8; ++j) s = fmaf(qr[g][j], kx[u][j], s);
                #pragma unroll
                for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);   // within a half
                if (valid[u]) {
                    if (s > m[g]) {   // a new maximum: rescale what was summed (rare after the first tokens)
                        const float corr = fast_exp2(m[g] - s);   // 0 for the first token (m = -inf)
                        l[g] *= corr;
                        #pragma unroll
                        for (int j = 0; j < 8; ++j) acc[g][j] *= corr;
                        m[g] = s;
                    }
                    const float p = fast_exp2(s - m[g]);
                    l[g] += p;
                    #pragma unroll
                    for (int j = 0; j < 8; ++j) acc[g][j] = fmaf(p, vx[u][j], acc[g][j]);
                }
            }
        }
    }
    // Merge the block's STREAMS token streams through shared memory, then write this split's partial.
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
                const float w = exp2f(s_ml[s][g][0] - mx);   // 0 for a stream that saw no token
                o = fmaf(w, s_acc[s][g][d], o);
                sum = fmaf(w, s_ml[s][g][1], sum);
            }
        }
        const long long row = ((long long)split * B + b) * Hq + hq0 + g;
        partial[row * HEAD_DIM + d] = o;
        if (d == 0) { stats[2 * row] = mx; stats[2 * row + 1] = sum; }
    }
}

// The entry points: (q, k, v, partial, stats, T, softmax scale times log2(e)).
extern "C" __global__ __launch_bounds__(THREADS) void decode_grouped_g4(
    const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
    float* __restrict__ partial, float* __restrict__ stats, int T, float scale_log2) {
    decode_partial<4, false>(q, k, v, partial, stats, T, scale_log2);   // Llama 3 8B: 32 query heads, 8 KV
}
extern "C" __global__ __launch_bounds__(THREADS) void decode_grouped_g8(
    const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
    float* __restrict__ partial, float* __restrict__ stats, int T, float scale_log2) {
    decode_partial<8, false>(q, k, v, partial, stats, T, scale_log2);   // Llama 3 70B: 64 query heads, 8 KV
}
// The same math with one KV head per query head: the cache a naive GQA expands to Hq heads.
extern "C" __global__ __launch_bounds__(THREADS) void decode_replicated(
    const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
    float* __restrict__ partial, float* __restrict__ stats, int T, float scale_log2) {
    decode_partial<1, false>(q, k, v, partial, stats, T, scale_log2);
}
// Grouped, over a dimension-major cache [B, Hkv, 128, T]: the same bytes, read 2 bytes a lane at a time.
extern "C" __global__ __launch_bounds__(THREADS) void decode_grouped_g4_dmajor(
    const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
    float* __restrict__ partial, float* __restrict__ stats, int T, float scale_log2) {
    decode_partial<4, true>(q, k, v, partial, stats, T, scale_log2);
}

// Merge the splits of one (sequence, query head): grid (B * Hq), 128 threads, one per dimension.
extern "C" __global__ __launch_bounds__(HEAD_DIM) void decode_combine(
    const float* __restrict__ partial, const float* __restrict__ stats, bf16_raw* __restrict__ out,
    int rows, int splits) {
    const int row = blockIdx.x, d = threadIdx.x;
    float mx = NEG_INF;
    for (int s = 0; s < splits; ++s) mx = fmaxf(mx, stats[2 * ((long long)s * rows + row)]);
    float o = 0.f, sum = 0.f;
    for (int s = 0; s < splits; ++s) {
        const long long r = (long long)s * rows + row;
        const float w = stats[2 * r] == NEG_INF ? 0.f : exp2f(stats[2 * r] - mx);
        o = fmaf(w, partial[r * HEAD_DIM + d], o);
        sum = fmaf(w, stats[2 * r + 1], sum);
    }
    out[(long long)row * HEAD_DIM + d] = to_bf16(o / sum);
}
