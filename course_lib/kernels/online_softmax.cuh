// online_softmax.cuh: what a decode-attention kernel over a bf16 KV cache needs besides its loop.
// bf16 unpacking, the sum of a half-warp's partial dot products, one query head's running softmax
// over a stream of tokens, and the merge of a block's streams into normalized output rows.
// Scores are in base 2: the query is multiplied by scale * log2(e) first, so every exp is an exp2.
#pragma once

#define HEAD_DIM 128
#define NEG_INF (-__int_as_float(0x7f800000))

#include "common.cuh"   // bf16_raw, bf16_lo, bf16_hi

// Round to nearest even. A NaN stays a NaN (adding the rounding bias to one would carry into the sign
// bit and give -0), so an overflowed softmax shows in the output as what it is.
__device__ __forceinline__ bf16_raw to_bf16(float f) {
    if (f != f) return (bf16_raw)0x7fc0;
    unsigned u = __float_as_uint(f);
    return (bf16_raw)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ void unpack8(uint4 w, float* x) {
    x[0] = bf16_lo(w.x); x[1] = bf16_hi(w.x); x[2] = bf16_lo(w.y); x[3] = bf16_hi(w.y);
    x[4] = bf16_lo(w.z); x[5] = bf16_hi(w.z); x[6] = bf16_lo(w.w); x[7] = bf16_hi(w.w);
}

// Dimensions d0 .. d0 + 7 of one head row (d0 a multiple of 8): a single 16-byte load.
__device__ __forceinline__ void load_row8(const bf16_raw* row, int d0, float* x) {
    unpack8(*reinterpret_cast<const uint4*>(row + d0), x);
}

// The sum of s over the 16 lanes of the caller's half-warp (lanes 0-15 or 16-31), in every lane.
// Only that half takes part, so the two halves of a warp may run different numbers of tokens.
__device__ __forceinline__ float half_warp_sum(float s) {
    const unsigned half = 0xffffu << (threadIdx.x & 16);
    #pragma unroll
    for (int off = 8; off > 0; off >>= 1) s += __shfl_xor_sync(half, s, off);
    return s;
}

// One query head's softmax over the tokens one half-warp has seen so far, kept without storing a
// score: the largest score m, l = sum of 2^(s - m), and acc = sum of 2^(s - m) * v over this lane's
// 8 dimensions. A new maximum rescales what was summed, so no 2^s is ever taken of a large s.
struct RunningSoftmax {
    float m, l, acc[8];

    __device__ __forceinline__ void reset() {
        m = NEG_INF; l = 0.f;
        #pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = 0.f;
    }

    __device__ __forceinline__ void add(float s, const float* v) {   // one token: its score, its 8 values
        if (s > m) {
            const float c = exp2f(m - s);   // 0 for the first token (m = -inf)
            l *= c;
            #pragma unroll
            for (int j = 0; j < 8; ++j) acc[j] *= c;
            m = s;
        }
        const float p = exp2f(s - m);
        l += p;
        #pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = fmaf(p, v[j], acc[j]);
    }
};

// The block's STREAMS half-warps, each with G running softmaxes, merged into G output rows of bf16:
// out_rows[g * HEAD_DIM + d] = sum_s 2^(m_s - M) acc_s[d] / sum_s 2^(m_s - M) l_s, M the largest m_s.
// Every thread of the block calls it once (it holds a barrier); half-warp h is threads 16h .. 16h + 15.
// A stream that saw no token (m = -inf) weighs 0.
template <int G, int STREAMS>
__device__ __forceinline__ void merge_streams(const RunningSoftmax (&r)[G], bf16_raw* out_rows) {
    __shared__ float s_acc[STREAMS][G][HEAD_DIM];
    __shared__ float s_ml[STREAMS][G][2];
    const int stream = threadIdx.x >> 4, d0 = 8 * (threadIdx.x & 15);
    #pragma unroll
    for (int g = 0; g < G; ++g) {
        #pragma unroll
        for (int j = 0; j < 8; ++j) s_acc[stream][g][d0 + j] = r[g].acc[j];
        if (d0 == 0) { s_ml[stream][g][0] = r[g].m; s_ml[stream][g][1] = r[g].l; }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < G * HEAD_DIM; i += blockDim.x) {
        const int g = i / HEAD_DIM, d = i % HEAD_DIM;
        float mx = NEG_INF;
        #pragma unroll
        for (int s = 0; s < STREAMS; ++s) mx = fmaxf(mx, s_ml[s][g][0]);
        float o = 0.f, sum = 0.f;
        #pragma unroll
        for (int s = 0; s < STREAMS; ++s) {
            const float w = s_ml[s][g][0] == NEG_INF ? 0.f : exp2f(s_ml[s][g][0] - mx);
            o = fmaf(w, s_acc[s][g][d], o);
            sum = fmaf(w, s_ml[s][g][1], sum);
        }
        out_rows[i] = to_bf16(o / sum);
    }
}
