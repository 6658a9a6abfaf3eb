// Notebook 13's attention, written: a FlashAttention-2-style forward kernel in bf16 on the tensor
// cores (mma.sync), built as a short ladder in which each rung makes one change.
//
//   O = softmax(Q Kᵀ / sqrt(d)) V     per (batch, query head), bf16 in and out, fp32 inside.
//
// Layouts (bf16 as raw 16-bit words, every tensor contiguous, row = one token's head vector):
//   Q, O   [B, Hq,  Sq, D]
//   K, V   [B, Hkv, Sk, D]      grouped-query heads: query head h reads KV head h / (Hq / Hkv)
//   D = 64 or 128 (a template argument: every loop over the head dimension is unrolled).
//
// One block per (tile of BQ = 16 * ATT_WARPS query rows, batch * query head); warp w owns query rows
// 16w .. 16w + 15 of the tile. The block walks the keys in tiles of ATT_KV_TILE:
//   - Q's 16 x D fragment is loaded once into registers (ldmatrix, the mma's A layout);
//   - S = Q Kᵀ: mma.sync.m16n8k16 bf16 -> fp32; K's rows [key][d] are the B operand in its "col"
//     layout as stored, so ldmatrix reads them without .trans;
//   - keys >= Sk (the tail) and, with CAUSAL, keys past the diagonal are set to -inf;
//   - online softmax in registers: each row lives in the four lanes of a quad (m16n8's C layout:
//     lane 4g + q holds rows g and g + 8, columns 2q and 2q + 1 of every 8-key slice), so its max is
//     two __shfl_xor_sync; the scale is folded into log2(e) so every exponential is one ex2 (MUFU);
//     the running output and sum are rescaled by 2^(m_old - m_new);
//   - P, rounded to bf16 in registers, is the A operand of P V as it is: the C fragments of two
//     neighbouring 8-key slices are, register for register, the A fragment of their 16 keys;
//   - V's rows [key][d] are the B operand transposed, so ldmatrix reads them with .trans.
// At the end O / l is written in bf16, rows >= Sq left alone.
//
// Causal masking is bottom-right aligned, as FlashAttention's: key j is visible to query i iff
// j <= i + Sk - Sq. With Sq > Sk the first Sq - Sk rows see no key at all: their output is 0 (no
// NaN: a row whose every score is -inf keeps l = 0 and its exponentials use 0 for the max).
//
// The ladder (RUNG):
//   1 mma          K and V tiles copied to shared memory by plain 16-byte loads and stores, one
//                  buffer, a barrier on each side; rows laid out as stored (128 or 256 bytes), so
//                  each ldmatrix phase reads 8 rows in the same banks; causal: every tile masked.
//   2 cp_async     K and V through cp.async into ATT_STAGES buffers: the next tile is in flight while
//                  this one is multiplied; 16-byte chunk c of row r sits at chunk c ^ (r % 8), so the
//                  8 rows an ldmatrix phase reads fall in 8 different bank groups.
//   3 causal_skip  with CAUSAL, tiles wholly past the diagonal of the block's last query row are
//                  never loaded nor computed, and only tiles that cross the diagonal (or the tail)
//                  are masked. Without CAUSAL it is rung 2 (the launcher runs rung 2's kernel).
//
// Needs compute capability 8.0+ (bf16 mma.sync, ldmatrix, cp.async); on older GPUs the kernel body is
// compiled out and traps.

#include "common.cuh"       // u32, bf16_raw, pack_bf16x2, ldmatrix_x4, ldmatrix_x4_trans
#include "async_copy.cuh"   // smem_u32, cp_async16, cp_async_commit, cp_async_wait<N>

#ifndef ATT_WARPS
#define ATT_WARPS 4          // warps per block, 16 query rows each: BQ = 64 query rows
#endif
#ifndef ATT_KV_TILE
#define ATT_KV_TILE 64       // keys per K/V tile
#endif
#ifndef ATT_STAGES
#define ATT_STAGES 2         // K/V buffers of rungs 2 and 3 (rung 1 has one)
#endif
#ifndef ATT_MIN_BLOCKS
#define ATT_MIN_BLOCKS 2     // blocks per SM the register allocation must allow (__launch_bounds__)
#endif
#define ATT_THREADS (32 * ATT_WARPS)
#define ATT_BQ (16 * ATT_WARPS)

#define ATT_RUNG_MMA 1
#define ATT_RUNG_CP_ASYNC 2
#define ATT_RUNG_CAUSAL_SKIP 3

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// -inf as a float (there is no INFINITY without the math headers NVRTC lacks here).
#define ATT_NEG_INF (-__int_as_float(0x7f800000))

// d += a · b for one 16 x 8 fp32 tile: a is 16 x 16 bf16 (4 registers), b 16 x 8 bf16 (2 registers).
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x by the MUFU (relative error about 2^-22; 2^-inf = +0, which the masked scores rely on).
__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Byte offset of the 16-byte chunk `chunk` of row `row` in a [rows][D] bf16 tile: as stored, or with
// the chunk index XOR-ed with row % 8 (SWIZZLE), which spreads any 8 consecutive rows' copies of one
// logical chunk over the 8 bank groups of a 128-byte line.
template <int D, bool SWIZZLE>
__device__ __forceinline__ u32 chunk_offset(int row, int chunk) {
    return (u32)(row * (D * 2) + ((SWIZZLE ? (chunk ^ (row & 7)) : chunk) << 4));
}

// Rows row0 .. row0 + ROWS - 1 of one head ([rows_total][D], src) into a shared tile at byte offset
// `dst` of smem; rows at or past rows_total are zero-filled (a V row left as garbage could hold a
// NaN, and 0 * NaN would reach the output through a masked key). ASYNC: by cp.async (the caller
// commits and waits); else by 16-byte loads into registers and stores to shared memory.
template <int D, int ROWS, bool ASYNC, bool SWIZZLE>
__device__ __forceinline__ void load_rows(unsigned char* smem, u32 dst, const bf16_raw* __restrict__ src,
                                          int row0, int rows_total) {
    constexpr int CHUNKS = D / 8;                          // 16-byte chunks per row
    static_assert((ROWS * CHUNKS) % ATT_THREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int i = 0; i < ROWS * CHUNKS / ATT_THREADS; ++i) {
        const int idx = i * ATT_THREADS + threadIdx.x;    // consecutive threads, consecutive chunks of a row
        const int r = idx / CHUNKS, c = idx % CHUNKS;
        const u32 off = dst + chunk_offset<D, SWIZZLE>(r, c);
        const bool inside = row0 + r < rows_total;
        const bf16_raw* from = src + (size_t)(row0 + r) * D + c * 8;
        if (ASYNC) {
            cp_async16(smem_u32(smem) + off, inside ? from : src, inside ? 16 : 0);   // 0 bytes read: zeros
        } else {
            const uint4 v = inside ? *reinterpret_cast<const uint4*>(from) : make_uint4(0u, 0u, 0u, 0u);
            *reinterpret_cast<uint4*>(smem + off) = v;
        }
    }
}

template <int D, int RUNG, bool CAUSAL>
__device__ __forceinline__ void attention_forward(const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k,
                                                  const bf16_raw* __restrict__ v, bf16_raw* __restrict__ o,
                                                  int Sq, int Sk, int Hq, int Hkv) {
    constexpr int BQ = ATT_BQ, BKV = ATT_KV_TILE;
    constexpr bool ASYNC = RUNG >= ATT_RUNG_CP_ASYNC;            // rungs 2, 3: cp.async stages
    constexpr bool SWIZZLE = RUNG >= ATT_RUNG_CP_ASYNC;          // rungs 2, 3: conflict-free ldmatrix
    constexpr bool SKIP = RUNG >= ATT_RUNG_CAUSAL_SKIP && CAUSAL;  // rung 3: no tile past the diagonal
    constexpr int STAGES = ASYNC ? ATT_STAGES : 1;
    constexpr int KSTEPS = D / 16;      // k16 steps of Q Kᵀ (over d)
    constexpr int NSLICES = BKV / 8;    // 8-key slices of a score tile (n8 of Q Kᵀ)
    constexpr int PSTEPS = BKV / 16;    // k16 steps of P V (over keys)
    constexpr int DSLICES = D / 8;      // 8-column slices of the output (n8 of P V)
    constexpr u32 ROW_BYTES = D * 2, TILE_BYTES = BKV * ROW_BYTES;
    // The softmax scale and the change of base in one factor: e^(s / sqrt(D)) = 2^(s * SCALE_LOG2).
    constexpr float SCALE_LOG2 = 1.4426950408889634f / (D == 64 ? 8.0f : 11.313708498984761f);
    static_assert(D == 64 || D == 128, "head dimension 64 or 128");
    static_assert(BKV % 16 == 0 && STAGES >= 1, "bad tile");

    extern __shared__ __align__(128) unsigned char smem[];
    // Byte offsets in smem: the Q tile, then STAGES x (K tile, V tile).
    constexpr u32 SQ_OFF = 0, KV_OFF = BQ * ROW_BYTES;
    auto k_tile = [&](int stage) { return KV_OFF + (u32)stage * 2 * TILE_BYTES; };
    auto v_tile = [&](int stage) { return KV_OFF + (u32)stage * 2 * TILE_BYTES + TILE_BYTES; };
    const u32 s_base = smem_u32(smem);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, quad = lane % 4;   // the C layout: rows g, g + 8; columns 2 quad, 2 quad + 1
    const int bh = blockIdx.y, b = bh / Hq, hq = bh % Hq;
    const int hkv = hq / (Hq / Hkv);
    const int q0 = blockIdx.x * BQ;
    const bf16_raw* q_head = q + (long long)bh * Sq * D;
    bf16_raw* o_head = o + (long long)bh * Sq * D;
    const long long kv_head_off = ((long long)b * Hkv + hkv) * Sk * D;
    const bf16_raw* k_head = k + kv_head_off;
    const bf16_raw* v_head = v + kv_head_off;

    // Bottom-right causal alignment: query i sees key j iff j <= i + diag.
    const int diag = Sk - Sq;
    const int kv_tiles_all = (Sk + BKV - 1) / BKV;
    int kv_tiles = kv_tiles_all;
    if (SKIP) {
        // The block's last query row sees keys up to q_last + diag; later tiles are seen by no row.
        const int q_last = min(q0 + BQ, Sq) - 1;
        const int last_key = q_last + diag;
        kv_tiles = last_key < 0 ? 0 : min(kv_tiles_all, last_key / BKV + 1);
    }

    // ldmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8. Here the four matrices
    // are always (rows 0-7 | rows 8-15) x (chunk 2c | chunk 2c + 1) of a 16-row, 16-column block, so a
    // lane's row is lrow and its chunk 2c + lhalf; lrow % 8 = lane % 8, which is all the swizzle sees.
    const int lrow = (lane % 8) + ((lane / 8) & 1) * 8;
    const int lhalf = lane / 16;
    auto frag_addr = [&](u32 tile, int row16, int c) {   // matrices of rows row16 + 0..15, chunks 2c, 2c+1
        return s_base + tile + chunk_offset<D, SWIZZLE>(row16 + lrow, 2 * c + lhalf);
    };

    float acc[DSLICES][4];     // this warp's 16 x D output, unnormalized
    float row_max[2] = {ATT_NEG_INF, ATT_NEG_INF};   // rows g and g + 8, in raw score units
    float row_sum[2] = {0.f, 0.f};                   // this lane's part of l (summed over the quad at the end)
#pragma unroll
    for (int j = 0; j < DSLICES; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    if (kv_tiles > 0) {
        // The Q tile with the first K/V tiles (one cp.async group with tile 0), then Q into registers.
        load_rows<D, BQ, ASYNC, SWIZZLE>(smem, SQ_OFF, q_head, q0, Sq);
        if (ASYNC) {
#pragma unroll
            for (int s = 0; s < STAGES - 1; ++s) {
                if (s < kv_tiles) {
                    load_rows<D, BKV, true, SWIZZLE>(smem, k_tile(s), k_head, s * BKV, Sk);
                    load_rows<D, BKV, true, SWIZZLE>(smem, v_tile(s), v_head, s * BKV, Sk);
                }
                cp_async_commit();   // empty groups keep every thread's count the same
            }
            cp_async_wait<STAGES - 2>();   // this thread's Q and tile 0 have landed ...
        }
        __syncthreads();                   // ... and everyone's
        u32 qf[KSTEPS][4];   // A fragments of this warp's 16 query rows, one per k16 step over d
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk)
            ldmatrix_x4(frag_addr(SQ_OFF, warp * 16, kk), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);

        const int row_a = q0 + warp * 16 + g;   // this lane's two query rows: row_a and row_a + 8

        for (int t = 0; t < kv_tiles; ++t) {
            int stage = 0;
            if (ASYNC) {
                stage = t % STAGES;
                cp_async_wait<STAGES - 2>();   // tile t has landed (this thread's copies) ...
                __syncthreads();               // ... everyone's, and everyone is done with tile t - 1
                const int next = t + STAGES - 1;   // into the buffer tile t - 1 has just left
                if (next < kv_tiles) {
                    load_rows<D, BKV, true, SWIZZLE>(smem, k_tile(next % STAGES), k_head, next * BKV, Sk);
                    load_rows<D, BKV, true, SWIZZLE>(smem, v_tile(next % STAGES), v_head, next * BKV, Sk);
                }
                cp_async_commit();
            } else {
                __syncthreads();   // everyone is done with tile t - 1: the one buffer may be refilled
                load_rows<D, BKV, false, SWIZZLE>(smem, k_tile(0), k_head, t * BKV, Sk);
                load_rows<D, BKV, false, SWIZZLE>(smem, v_tile(0), v_head, t * BKV, Sk);
                __syncthreads();   // tile t is in
            }
            const int key0 = t * BKV;

            // S = Q Kᵀ for 16 rows x BKV keys. One ldmatrix.x4 gives two 8-key slices' B fragments:
            // matrices (keys 0-7, d lo), (keys 8-15, d lo), (keys 0-7, d hi), (keys 8-15, d hi).
            float s[NSLICES][4];
#pragma unroll
            for (int n = 0; n < NSLICES; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
                for (int n = 0; n < NSLICES; n += 2) {
                    u32 k_lo0, k_lo1, k_hi0, k_hi1;   // slice n: k_lo0 (d lo), k_hi0 (d hi); slice n + 1: the other two
                    ldmatrix_x4(frag_addr(k_tile(stage), n * 8, kk), k_lo0, k_lo1, k_hi0, k_hi1);
                    mma_16816(s[n], qf[kk], k_lo0, k_hi0);
                    mma_16816(s[n + 1], qf[kk], k_lo1, k_hi1);
                }

            // Masks: the tail tile (keys >= Sk) always; with CAUSAL every tile (rungs 1, 2) or only
            // those that reach past the diagonal of the block's first row (rung 3).
            const bool tail = key0 + BKV > Sk;
            const bool crosses = CAUSAL && (!SKIP || key0 + BKV - 1 > q0 + diag);
            if (tail || crosses) {
#pragma unroll
                for (int n = 0; n < NSLICES; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int key = key0 + n * 8 + 2 * quad + (e & 1), row = row_a + (e >> 1) * 8;
                        if (key >= Sk || (CAUSAL && key > row + diag)) s[n][e] = ATT_NEG_INF;
                    }
            }

            // Online softmax, per row h (g, g + 8): the new max over the quad, the rescale of what was
            // summed, then p = 2^((s - m) * SCALE_LOG2), kept in s. A row that has seen only -inf keeps
            // max -inf and uses 0 in the exponent: every p is then 2^-inf = 0, and the rescale too.
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float mx = row_max[h];
#pragma unroll
                for (int n = 0; n < NSLICES; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_scaled = mx == ATT_NEG_INF ? 0.f : mx * SCALE_LOG2;
                const float rescale = ex2_approx(row_max[h] * SCALE_LOG2 - m_scaled);   // 0 the first time
                row_max[h] = mx;
                row_sum[h] *= rescale;
#pragma unroll
                for (int j = 0; j < DSLICES; ++j) {
                    acc[j][2 * h] *= rescale;
                    acc[j][2 * h + 1] *= rescale;
                }
#pragma unroll
                for (int n = 0; n < NSLICES; ++n)
#pragma unroll
                    for (int e = 2 * h; e < 2 * h + 2; ++e) {
                        s[n][e] = ex2_approx(fmaf(s[n][e], SCALE_LOG2, -m_scaled));
                        row_sum[h] += s[n][e];
                    }
            }

            // O += P V. P's A fragment for keys 16 kp .. 16 kp + 15 is the C fragments of slices 2 kp and
            // 2 kp + 1, paired into bf16x2: (row g, keys 2q, 2q+1), (row g+8, ...), then the same 8 keys on.
            // One ldmatrix.x4.trans gives two 8-column slices' B fragments: matrices (keys 0-7, cols lo),
            // (keys 8-15, cols lo), (keys 0-7, cols hi), (keys 8-15, cols hi), each transposed.
#pragma unroll
            for (int kp = 0; kp < PSTEPS; ++kp) {
                const u32 pa[4] = {pack_bf16x2(s[2 * kp][0], s[2 * kp][1]), pack_bf16x2(s[2 * kp][2], s[2 * kp][3]),
                                   pack_bf16x2(s[2 * kp + 1][0], s[2 * kp + 1][1]),
                                   pack_bf16x2(s[2 * kp + 1][2], s[2 * kp + 1][3])};
#pragma unroll
                for (int j = 0; j < DSLICES; j += 2) {
                    u32 v_lo0, v_hi0, v_lo1, v_hi1;   // slice j: keys lo, keys hi; slice j + 1: the same
                    ldmatrix_x4_trans(frag_addr(v_tile(stage), kp * 16, j / 2), v_lo0, v_hi0, v_lo1, v_hi1);
                    mma_16816(acc[j], pa, v_lo0, v_hi0);
                    mma_16816(acc[j + 1], pa, v_lo1, v_hi1);
                }
            }
        }
    }

    // O / l, rounded once to bf16; l = 0 (a row that saw no key) gives 0. Rows >= Sq are not written.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l = row_sum[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = l > 0.f ? 1.f / l : 0.f;
        const int row = q0 + warp * 16 + g + 8 * h;
        if (row < Sq) {
            u32* out = reinterpret_cast<u32*>(o_head + (long long)row * D + 2 * quad);
#pragma unroll
            for (int j = 0; j < DSLICES; ++j) out[j * 4] = pack_bf16x2(acc[j][2 * h] * inv, acc[j][2 * h + 1] * inv);
        }
    }
}
#define ATT_BODY(D, RUNG, CAUSAL) attention_forward<D, RUNG, CAUSAL>(q, k, v, o, Sq, Sk, Hq, Hkv)
#else
#define ATT_BODY(D, RUNG, CAUSAL) __trap()   // bf16 mma.sync needs compute capability 8.0 or newer
#endif

// Launch (every entry point): block (ATT_THREADS = 128), grid (ceil(Sq / ATT_BQ), B * Hq) with
// B * Hq <= 65535, dynamic shared memory (ATT_BQ + 2 * stages * ATT_KV_TILE) * D * 2 bytes (the Q tile,
// then each stage's K and V tiles), stages = 1 for the _mma_ kernels, ATT_STAGES = 2 otherwise (opt in
// above 48 KiB).
// q, o: [B, Hq, Sq, D]; k, v: [B, Hkv, Sk, D]; raw bf16, contiguous, 16-byte aligned; Sq, Sk >= 1;
// Hq a multiple of Hkv. Compute capability 8.0+.
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_mma_d64(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(64, ATT_RUNG_MMA, false);
}
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_mma_d64_causal(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(64, ATT_RUNG_MMA, true);
}
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_mma_d128(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(128, ATT_RUNG_MMA, false);
}
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_mma_d128_causal(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(128, ATT_RUNG_MMA, true);
}

// Rung 2: cp.async stages and the swizzled layout (rung 3 without CAUSAL runs these too).
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_cp_async_d64(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(64, ATT_RUNG_CP_ASYNC, false);
}
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_cp_async_d64_causal(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(64, ATT_RUNG_CP_ASYNC, true);
}
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_cp_async_d128(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(128, ATT_RUNG_CP_ASYNC, false);
}
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_cp_async_d128_causal(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(128, ATT_RUNG_CP_ASYNC, true);
}

// Rung 3: causal tiles past the diagonal skipped (causal only: without the mask there is nothing to skip).
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_causal_skip_d64_causal(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(64, ATT_RUNG_CAUSAL_SKIP, true);
}
extern "C" __global__ __launch_bounds__(ATT_THREADS, ATT_MIN_BLOCKS) void attention_causal_skip_d128_causal(
        const bf16_raw* __restrict__ q, const bf16_raw* __restrict__ k, const bf16_raw* __restrict__ v,
        bf16_raw* __restrict__ o, int Sq, int Sk, int Hq, int Hkv) {
    ATT_BODY(128, ATT_RUNG_CAUSAL_SKIP, true);
}
