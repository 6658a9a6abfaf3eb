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
// decode_grouped_g4_mma and _g8_mma, at the end of the file, do the same on the tensor cores (sm_80+).

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

// ------------------------------------------------------------------------------------------------------------
// The same decode on the tensor cores (sm_80+): decode_grouped_g4_mma and decode_grouped_g8_mma.
//
// The SIMT kernels above pay, per token and query head, a 16-lane shuffle sum and an exponential: G times the
// instructions per cache byte of the replicated kernel (the hypothesis of issue 62, which
// scripts/probe_decode_attention.py tests, is that these instructions, not HBM, hold the grouped ones back).
// Here the G query heads that share a KV head are the rows of one m16 tile (rows G .. 15 are zeros whose results
// are never read), so the scores of 16 tokens for all G heads are 16 mma.sync.m16n8k16 and their weighted V
// another 16, as FlashAttention's and FlashInfer's decode paths do for grouped-query attention:
//   - Q's tile is the A operand, loaded once from global memory into registers (rows >= G are zero registers);
//   - S = Q Kᵀ: K's rows [token][d] are the B operand as stored (ldmatrix, no .trans), as in attention.cu;
//   - the online softmax on the C fragments: lane 4g + q holds head g's scores of tokens 2q, 2q + 1 of every
//     8-token slice (rows g + 8 are padding: only c0, c1 are used), so a head's maximum is two shuffles;
//   - P, rounded to bf16, is the A operand of P V from registers; V's rows are the B operand with .trans.
// Each warp runs its own pipeline: warp w of a block takes tiles w, w + DEC_MMA_WARPS, ... of DEC_MMA_TILE tokens
// of its split, through DEC_MMA_STAGES buffers of its own filled by cp.async (XOR-swizzled, so ldmatrix reads
// them without bank conflicts), so no block-wide barrier stands in the token loop. At the end the warps' running
// softmaxes are merged through shared memory into the split's partial and stats, in the layout above, and the
// same decode_combine merges the splits.
//
// Launch: grid (splits, Hkv, B), DEC_MMA_WARPS * 32 threads, dynamic shared memory
//   max(DEC_MMA_WARPS * DEC_MMA_STAGES * 2 * DEC_MMA_TILE * 256, DEC_MMA_WARPS * G * (128 + 2) * 4) bytes
// (each warp's K and V buffers; reused for the merge), opting in above 48 KiB. q, k, v token-major, contiguous,
// 16-byte aligned; any T >= 1, any splits >= 1. Compute capability 8.0+ (bf16 mma.sync, ldmatrix, cp.async);
// on older GPUs the body is compiled out and traps.

#include "async_copy.cuh"   // smem_u32, cp_async16(_full), cp_async_commit, cp_async_wait<N>; common.cuh's ldmatrix

#ifndef DEC_MMA_WARPS
#define DEC_MMA_WARPS 4      // warps a block, each with its own tiles and running softmax
#endif
#ifndef DEC_MMA_TILE
#define DEC_MMA_TILE 16      // tokens a warp's tile (a multiple of 16: one k16 step of P V)
#endif
#ifndef DEC_MMA_STAGES
#define DEC_MMA_STAGES 3     // tiles a warp has in shared memory: one being multiplied, the others in flight
#endif
#define DEC_MMA_THREADS (32 * DEC_MMA_WARPS)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// d += a · b for one 16 x 8 fp32 tile: a is 16 x 16 bf16 (4 registers), b 16 x 8 bf16 (2 registers).
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int G>
__device__ __forceinline__ void decode_partial_mma(const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k,
                                                   const bf16_raw* __restrict__ v, float* __restrict__ partial,
                                                   float* __restrict__ stats, int T, float scale_log2) {
    constexpr int WARPS_ = DEC_MMA_WARPS, TILE = DEC_MMA_TILE, STAGES = DEC_MMA_STAGES;
    constexpr int KSTEPS = HEAD_DIM / 16;    // k16 steps of Q Kᵀ (over d)
    constexpr int NSLICES = TILE / 8;        // 8-token slices of a score tile (n8 of Q Kᵀ)
    constexpr int PSTEPS = TILE / 16;        // k16 steps of P V (over tokens)
    constexpr int DSLICES = HEAD_DIM / 8;    // 8-dimension slices of the output (n8 of P V)
    constexpr int CHUNKS = HEAD_DIM / 8;     // 16-byte chunks of a token's row
    constexpr u32 ROW_BYTES = HEAD_DIM * 2, TILE_BYTES = TILE * ROW_BYTES;
    constexpr u32 WARP_BYTES = STAGES * 2 * TILE_BYTES;   // a warp's stages, each a K tile then a V tile
    static_assert(G >= 1 && G <= 8, "the group's heads are rows 0 .. G-1 of the m16 tile; rows 8 .. 15 are never used");
    static_assert(TILE % 16 == 0 && STAGES >= 2, "a tile is whole k16 steps; one stage in use, one in flight");

    // 16-byte alignment is all cp.async and ldmatrix need (the swizzle is conflict-free from any 16-byte base);
    // asking for more would pad the static shared memory of the SIMT kernels above, which share this module.
    extern __shared__ __align__(16) unsigned char smem[];
    const int split = blockIdx.x, splits = gridDim.x, hkv = blockIdx.y, hkvs = gridDim.y, b = blockIdx.z;
    const int B = gridDim.z, hq0 = hkv * G, Hq = hkvs * G;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, quad = lane % 4;   // the C layout: row (head) g, tokens 2 quad, 2 quad + 1 of a slice

    // This split's tokens [t0, t1), a whole number of tiles (the last one may be partial, or the split empty).
    const long long chunk = ((((long long)T + splits - 1) / splits + TILE - 1) / TILE) * TILE;
    const long long t0 = split * chunk, t1 = min((long long)T, t0 + chunk);
    const int tiles = t0 < t1 ? (int)((t1 - t0 + TILE - 1) / TILE) : 0;
    const int my_tiles = warp < tiles ? (tiles - warp + WARPS_ - 1) / WARPS_ : 0;   // tiles warp, warp + WARPS_, ...
    const long long head_off = ((long long)b * hkvs + hkv) * (long long)T * HEAD_DIM;
    const bf16_raw* kh = k + head_off;
    const bf16_raw* vh = v + head_off;

    // Q as the A operand, one pair of registers per k16 step: (row g, dims 16 kk + 2 quad, +1) and the same 8 dims
    // on. Rows g + 8 are always zero (the a1, a3 registers); rows G .. 7 are zero too.
    u32 qa[KSTEPS][2];
    {
        const bf16_raw* q_row = q + ((long long)b * Hq + hq0 + (g < G ? g : 0)) * HEAD_DIM + 2 * quad;
        #pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            qa[kk][0] = g < G ? *reinterpret_cast<const u32*>(q_row + 16 * kk) : 0u;
            qa[kk][1] = g < G ? *reinterpret_cast<const u32*>(q_row + 16 * kk + 8) : 0u;
        }
    }

    // The warp's buffers: stage s holds a K tile at k_buf(s) and a V tile after it; chunk c of row r sits at
    // chunk c ^ (r % 8), so the 8 rows an ldmatrix phase reads fall in 8 different bank groups.
    const u32 warp_base = smem_u32(smem) + warp * WARP_BYTES;
    auto k_buf = [&](int stage) { return warp_base + (u32)stage * 2 * TILE_BYTES; };
    // A lane copies chunk lane % 16 of rows lane / 16, lane / 16 + 2, ...: one instruction, two whole rows. The
    // warp's next tile to copy: this lane's first row of it, its K and V sources, and the stage it goes to.
    constexpr int ROWS_PER_COPY = 32 / CHUNKS, COPIES = TILE / ROWS_PER_COPY;
    const int copy_chunk = lane % CHUNKS, copy_row = lane / CHUNKS;
    long long next_row = t0 + (long long)warp * TILE + copy_row;
    const bf16_raw* k_next = kh + next_row * HEAD_DIM + copy_chunk * 8;
    const bf16_raw* v_next = vh + next_row * HEAD_DIM + copy_chunk * 8;
    int next_stage = 0;
    auto load_next_tile = [&]() {
        auto dst = [&](int j) {   // row copy_row + j * ROWS_PER_COPY of the stage's K tile, swizzled
            const int r = copy_row + j * ROWS_PER_COPY;
            return k_buf(next_stage) + (u32)(r * ROW_BYTES) + ((u32)(copy_chunk ^ (r & 7)) << 4);
        };
        if (next_row - copy_row + TILE <= t1) {   // a whole tile (all but a split's last): no row to check
            #pragma unroll
            for (int j = 0; j < COPIES; ++j) {
                cp_async16_full(dst(j), k_next + j * ROWS_PER_COPY * HEAD_DIM);
                cp_async16_full(dst(j) + TILE_BYTES, v_next + j * ROWS_PER_COPY * HEAD_DIM);
            }
        } else {   // rows past the split are zeros (a garbage V row times a 0 weight could be NaN)
            #pragma unroll
            for (int j = 0; j < COPIES; ++j) {
                const bool inside = next_row + j * ROWS_PER_COPY < t1;
                const int at = j * ROWS_PER_COPY * HEAD_DIM;
                cp_async16(dst(j), inside ? k_next + at : kh, inside ? 16 : 0);
                cp_async16(dst(j) + TILE_BYTES, inside ? v_next + at : vh, inside ? 16 : 0);
            }
        }
        next_row += WARPS_ * TILE;
        k_next += WARPS_ * TILE * HEAD_DIM;
        v_next += WARPS_ * TILE * HEAD_DIM;
        next_stage = next_stage + 1 == STAGES ? 0 : next_stage + 1;
    };
    // ldmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8, and register i receives matrix i. The
    // matrices are 8 rows x 8 dims of a 16-row block, ordered so that each mma's two B registers come out of one
    // ldmatrix side by side: for K (rows = tokens, no .trans) (tokens 0-7 | 8-15) x (dims lo, hi) token-slice
    // first; for V (.trans, as in attention.cu) (dims lo | hi) x (tokens 0-7, 8-15) dimension-slice first.
    const int k_row = (lane % 8) + (lane / 16) * 8, k_half = (lane / 8) & 1;
    const int v_row = (lane % 8) + ((lane / 8) & 1) * 8, v_half = lane / 16;
    auto k_frag = [&](u32 tile, int row16, int c) {   // rows row16 .. row16 + 15, chunks 2c and 2c + 1
        return tile + (u32)((row16 + k_row) * ROW_BYTES) + ((u32)((2 * c + k_half) ^ (k_row & 7)) << 4);
    };
    auto v_frag = [&](u32 tile, int row16, int c) {
        return tile + (u32)((row16 + v_row) * ROW_BYTES) + ((u32)((2 * c + v_half) ^ (v_row & 7)) << 4);
    };

    float acc[DSLICES][4];   // head g's unnormalized output in acc[j][0..1] (dims 8 j + 2 quad, +1); [2..3] padding
    #pragma unroll
    for (int j = 0; j < DSLICES; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    float row_max = NEG_INF;   // head g's largest score so far, unscaled
    float row_sum = 0.f;       // this lane's part of head g's sum of weights (summed over the quad at the end)

    #pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < my_tiles) load_next_tile();
        cp_async_commit();   // empty groups keep the count the waits rely on
    }
    int stage = 0;
    for (int i = 0; i < my_tiles; ++i) {
        cp_async_wait<STAGES - 2>();   // this lane's copies of tile i have landed ...
        __syncwarp();                  // ... and every lane's; and every lane is done with tile i - 1's buffer
        if (i + STAGES - 1 < my_tiles) load_next_tile();   // into the buffer tile i - 1 has just left
        cp_async_commit();
        const u32 k_tile = k_buf(stage), v_tile = k_buf(stage) + TILE_BYTES;
        stage = stage + 1 == STAGES ? 0 : stage + 1;
        const long long key0 = t0 + (long long)(warp + i * WARPS_) * TILE;

        // S = Q Kᵀ for the group's heads x TILE tokens: one ldmatrix.x4 gives two 8-token slices' B fragments.
        float s[NSLICES][4];
        #pragma unroll
        for (int n = 0; n < NSLICES; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
        #pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            const u32 a[4] = {qa[kk][0], 0u, qa[kk][1], 0u};
            #pragma unroll
            for (int n = 0; n < NSLICES; n += 2) {
                u32 k_lo0, k_hi0, k_lo1, k_hi1;   // slice n: dims lo, dims hi of the k16 step; slice n + 1: the same
                ldmatrix_x4(k_frag(k_tile, n * 8, kk), k_lo0, k_hi0, k_lo1, k_hi1);
                mma_16816(s[n], a, k_lo0, k_hi0);
                mma_16816(s[n + 1], a, k_lo1, k_hi1);
            }
        }
        if (key0 + TILE > t1) {   // the split's last tile: tokens past it weigh nothing
            #pragma unroll
            for (int n = 0; n < NSLICES; ++n)
                #pragma unroll
                for (int e = 0; e < 2; ++e)
                    if (key0 + n * 8 + 2 * quad + e >= t1) s[n][e] = NEG_INF;
        }

        // Online softmax of head g: the new maximum over the quad, the rescale of what was summed, then
        // p = 2^(s * scale_log2 - m), kept in s. Every tile holds at least one token, so the maximum is finite.
        float mx = row_max;
        #pragma unroll
        for (int n = 0; n < NSLICES; ++n) mx = fmaxf(mx, fmaxf(s[n][0], s[n][1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_scaled = mx * scale_log2;
        const float rescale = fast_exp2(row_max * scale_log2 - m_scaled);   // 0 the first time (row_max = -inf)
        row_max = mx;
        row_sum *= rescale;
        #pragma unroll
        for (int j = 0; j < DSLICES; ++j) { acc[j][0] *= rescale; acc[j][1] *= rescale; }
        #pragma unroll
        for (int n = 0; n < NSLICES; ++n)
            #pragma unroll
            for (int e = 0; e < 2; ++e) {
                s[n][e] = fast_exp2(fmaf(s[n][e], scale_log2, -m_scaled));
                row_sum += s[n][e];
            }

        // O += P V: P's A fragment for tokens 16 kp .. 16 kp + 15 is the C fragments of slices 2 kp and 2 kp + 1
        // (rows g + 8 zero); one ldmatrix.x4.trans gives two 8-dimension slices' B fragments.
        #pragma unroll
        for (int kp = 0; kp < PSTEPS; ++kp) {
            const u32 pa[4] = {pack_bf16x2(s[2 * kp][0], s[2 * kp][1]), 0u,
                               pack_bf16x2(s[2 * kp + 1][0], s[2 * kp + 1][1]), 0u};
            #pragma unroll
            for (int j = 0; j < DSLICES; j += 2) {
                u32 v_lo0, v_hi0, v_lo1, v_hi1;   // slice j: tokens lo, tokens hi; slice j + 1: the same
                ldmatrix_x4_trans(v_frag(v_tile, kp * 16, j / 2), v_lo0, v_hi0, v_lo1, v_hi1);
                mma_16816(acc[j], pa, v_lo0, v_hi0);
                mma_16816(acc[j + 1], pa, v_lo1, v_hi1);
            }
        }
    }
    cp_async_wait<0>();   // only empty groups are left; the buffers become the merge's
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);

    // Merge the block's warps, each a running softmax per head (a warp that saw no token has m = -inf and weighs
    // 0), into this split's partial (unnormalized) and stats (max in base 2, sum): decode_combine's input.
    __syncthreads();   // every warp is done with its buffers
    float* s_acc = reinterpret_cast<float*>(smem);                // [WARPS_][G][HEAD_DIM]
    float* s_ml = s_acc + WARPS_ * G * HEAD_DIM;                  // [WARPS_][G][2]
    if (g < G) {
        float* mine = s_acc + (warp * G + g) * HEAD_DIM + 2 * quad;
        #pragma unroll
        for (int j = 0; j < DSLICES; ++j) { mine[8 * j] = acc[j][0]; mine[8 * j + 1] = acc[j][1]; }
        if (quad == 0) { s_ml[2 * (warp * G + g)] = row_max * scale_log2; s_ml[2 * (warp * G + g) + 1] = row_sum; }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * HEAD_DIM; i += DEC_MMA_THREADS) {
        const int h = i / HEAD_DIM, d = i % HEAD_DIM;
        float mx = NEG_INF;
        #pragma unroll
        for (int w = 0; w < WARPS_; ++w) mx = fmaxf(mx, s_ml[2 * (w * G + h)]);
        float o = 0.f, sum = 0.f;
        if (mx != NEG_INF) {
            #pragma unroll
            for (int w = 0; w < WARPS_; ++w) {
                const float wt = exp2f(s_ml[2 * (w * G + h)] - mx);   // 0 for a warp that saw no token
                o = fmaf(wt, s_acc[(w * G + h) * HEAD_DIM + d], o);
                sum = fmaf(wt, s_ml[2 * (w * G + h) + 1], sum);
            }
        }
        const long long row = ((long long)split * B + b) * Hq + hq0 + h;
        partial[row * HEAD_DIM + d] = o;
        if (d == 0) { stats[2 * row] = mx; stats[2 * row + 1] = sum; }
    }
}
#define DEC_MMA_BODY(G) decode_partial_mma<G>(q, k, v, partial, stats, T, scale_log2)
#else
#define DEC_MMA_BODY(G) __trap()   // bf16 mma.sync needs compute capability 8.0 or newer
#endif

// The entry points: (q, k, v, partial, stats, T, softmax scale times log2(e)), as the SIMT kernels'.
extern "C" __global__ __launch_bounds__(DEC_MMA_THREADS) void decode_grouped_g4_mma(
    const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
    float* __restrict__ partial, float* __restrict__ stats, int T, float scale_log2) {
    DEC_MMA_BODY(4);   // Llama 3 8B: 4 query heads a KV head, rows 0-3 of the m16 tile
}
extern "C" __global__ __launch_bounds__(DEC_MMA_THREADS) void decode_grouped_g8_mma(
    const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
    float* __restrict__ partial, float* __restrict__ stats, int T, float scale_log2) {
    DEC_MMA_BODY(8);   // Llama 3 70B: 8 query heads a KV head, rows 0-7
}
