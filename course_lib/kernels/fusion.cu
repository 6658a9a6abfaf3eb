// Notebook 08's hand-written kernels: row reductions (softmax, RMSNorm) fused into one pass or split
// into two, and the GEMM epilogue (bias, GELU, residual) as a separate pass. The elementwise chains
// are not here: course_lib/launch/fusion.py generates their source from an op list.
//
// Row kernels give one block to one row of n floats; any n >= 1 is correct. Rows start 16-byte
// aligned when n % 4 == 0, and then move as float4.

#ifndef ROW_VECS
#define ROW_VECS 8   // float4 per thread a one-pass kernel holds in registers: rows up to 4 * ROW_VECS * threads
#endif

#define NEG_INF (-__int_as_float(0x7f800000))

#include "common.cuh"       // bf16_raw, bf16_to_float, float_to_bf16, cluster_rank
#include "async_copy.cuh"   // smem_u32, and the cp.async copies of prefetch_row
#include "gelu.cuh"         // gelu_of_half, the separate epilogue pass's GELU

// ---------------------------------------------------------------------------------------------- reductions

// A running softmax denominator: s = sum of exp(x - m) over the values seen, m their maximum.
struct MaxSum {
    float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    float m = fmaxf(a.m, b.m);
    if (m == NEG_INF) return {m, 0.f};   // both empty
    return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ MaxSum push(MaxSum a, float x) {   // one more value, rescaling only when the max moves
    if (x == NEG_INF) return a;   // a masked value adds nothing (and exp(-inf - -inf) would be NaN)
    if (x > a.m) return {x, a.s * __expf(a.m - x) + 1.f};
    return {a.m, a.s + __expf(x - a.m)};
}

// Every thread of the block gets the merge of all threads' values. scratch: 32 entries of shared memory.
template <typename T, typename Op>
__device__ __forceinline__ T block_all_reduce(T v, Op op, T* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
        T o;
        if constexpr (sizeof(T) == 8) {
            o.m = __shfl_xor_sync(0xffffffffu, v.m, off);
            o.s = __shfl_xor_sync(0xffffffffu, v.s, off);
        } else {
            o = __shfl_xor_sync(0xffffffffu, v, off);
        }
        v = op(v, o);
    }
    __syncthreads();   // scratch may still be read from a previous reduction
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = scratch[0];
    for (int w = 1; w < warps; ++w) v = op(v, scratch[w]);
    return v;
}

// The block's sum, in every thread, behind two barriers: warp 0 adds the warps' partials and broadcasts
// one value. block_all_reduce instead has every thread add all 32 partials, a serial chain of shared
// loads (a reading, not profiled: one a kernel with little work a thread cannot hide). A probe of
// rmsnorm_reread at rows of 8k floats (two float4 for each of 1,024 threads) ran at 92% of the copy with
// block_all_reduce and at 99% with this. blockDim.x: a multiple of 32 (the shuffles take whole warps).
// scratch: 33 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? scratch[lane] : 0.f;
#pragma unroll
        for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) scratch[32] = v;
    }
    __syncthreads();
    return scratch[32];
}

struct Add {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct Merge {
    __device__ MaxSum operator()(MaxSum a, MaxSum b) const { return merge(a, b); }
};

// Thread t's slot j of a row: float4 number j * blockDim.x + t, so a warp's slots are consecutive
// 16-byte chunks. Every row kernel lays its registers (and shared copies) out this way.
__device__ __forceinline__ int thread_slot(int j) { return j * blockDim.x + threadIdx.x; }

// The sum of squares of a thread's slots (RMSNorm's statistic before the block's reduction).
__device__ __forceinline__ float sum_squares(const float (&v)[ROW_VECS][4]) {
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) ss = fmaf(v[j][e], v[j][e], ss);
    return ss;
}

// A softmax thread's steps on its slots: their maximum; v = exp(v - shift) in place, returning the
// sum; v *= scale.
__device__ __forceinline__ float slots_max(const float (&v)[ROW_VECS][4]) {
    float m = NEG_INF;
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) m = fmaxf(m, v[j][e]);
    return m;
}

__device__ __forceinline__ float exp_slots(float (&v)[ROW_VECS][4], float shift) {
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s += (v[j][e] = __expf(v[j][e] - shift));
    return s;
}

__device__ __forceinline__ void scale_slots(float (&v)[ROW_VECS][4], float scale) {
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[j][e] *= scale;
}

// A row into this thread's slots (thread_slot's layout). Elements past n read as `pad`. float4 moves need x 16-byte
// aligned: `aligned` says so (a whole row of n % 4 == 0 floats is; a split row's half needs the row's n).
__device__ __forceinline__ void load_row(float (&v)[ROW_VECS][4], const float* __restrict__ x, int n, float pad,
                                         bool aligned = true) {
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j) {
        int e0 = 4 * thread_slot(j);
        if (aligned && (n & 3) == 0 && e0 < n) {
            float4 f = *reinterpret_cast<const float4*>(x + e0);
            v[j][0] = f.x, v[j][1] = f.y, v[j][2] = f.z, v[j][3] = f.w;
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) v[j][e] = e0 + e < n ? x[e0 + e] : pad;
        }
    }
}

__device__ __forceinline__ void store_row(float* __restrict__ y, const float (&v)[ROW_VECS][4], int n,
                                          bool aligned = true) {
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j) {
        int e0 = 4 * thread_slot(j);
        if (aligned && (n & 3) == 0 && e0 < n) {
            *reinterpret_cast<float4*>(y + e0) = make_float4(v[j][0], v[j][1], v[j][2], v[j][3]);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (e0 + e < n) y[e0 + e] = v[j][e];
        }
    }
}

// v[j][e] *= r * w[element], each slot laid out as load_row laid it out; 0 past n. w is read one
// slot at a time: a second row of registers would not fit. w itself is always 16-byte aligned.
__device__ __forceinline__ void scale_by_weights(float (&v)[ROW_VECS][4], const float* __restrict__ w, int n,
                                                 float r) {
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j) {
        int e0 = 4 * thread_slot(j);
        if ((n & 3) == 0 && e0 < n) {
            float4 g = *reinterpret_cast<const float4*>(w + e0);
            v[j][0] *= r * g.x, v[j][1] *= r * g.y, v[j][2] *= r * g.z, v[j][3] *= r * g.w;
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) v[j][e] *= e0 + e < n ? r * w[e0 + e] : 0.f;
        }
    }
}

// Softmax of each row, reading it from memory once: the row stays in registers. Each thread takes
// the max of its values, keeps e = exp(x - its max) in place and sums them; the block merges the
// threads' (max, sum) pairs by rescaling (the online-softmax merge), and each thread rescales its e
// by exp(its max - the row's max) / sum: one exp per element. Launch: block (T, a multiple of 32,
// at most 1024), grid (rows); n <= 4 * ROW_VECS * T.
extern "C" __global__ __launch_bounds__(1024) void softmax_one_pass(float* __restrict__ out, const float* __restrict__ in, int n) {
    __shared__ MaxSum scratch[32];
    const size_t row = (size_t)blockIdx.x * n;
    float v[ROW_VECS][4];
    load_row(v, in + row, n, NEG_INF);
    const float m = slots_max(v);
    const float m_thread = m == NEG_INF ? 0.f : m;   // a thread with no values: exp(-inf - 0) = 0
    const float s = exp_slots(v, m_thread);
    const MaxSum row_ms = block_all_reduce(MaxSum{m, s}, Merge{}, scratch);
    const float scale = __expf(m_thread - row_ms.m) / row_ms.s;
    scale_slots(v, scale);
    store_row(out + row, v, n);
}

// ---- rows split over a cluster of two blocks (sm_90+)
//
// A one-pass row of more than 4 * ROW_VECS * 512 floats needs 1,024 threads, and 1,024 threads of
// about 60 registers fill an SM's 65,536: one row per SM, whose load, reduction and store then run
// one after another. Split over a cluster of two blocks of at most 512 threads, each block holds half
// the row, two blocks fit per SM, and one's load overlaps another's reduction. The halves trade their
// partial statistics through distributed shared memory. Launch: block (T <= 512, enough for half a
// row), grid (2 * rows); n <= 8 * ROW_VECS * 512.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CLUSTER_PAIR __cluster_dims__(2, 1, 1)
__device__ __forceinline__ void cluster_barrier() {   // release this block's writes, acquire the peer's
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The float at the same shared-memory offset in the other block of the pair.
__device__ __forceinline__ float peer_float(const float* p) {
    unsigned remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"((unsigned)__cvta_generic_to_shared(p)),
                 "r"(cluster_rank() ^ 1u));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
}
#else
#define CLUSTER_PAIR
#endif

// The first element of this block's half of a row (a multiple of 4, so halves stay 16-byte aligned).
__device__ __forceinline__ int split_half(int n) { return ((n + 1) / 2 + 3) & ~3; }

extern "C" __global__ __launch_bounds__(512, 2) void CLUSTER_PAIR softmax_split(float* __restrict__ out,
                                                                               const float* __restrict__ in, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ MaxSum scratch[32];
    __shared__ float part[2];
    const int start = (int)cluster_rank() * split_half(n), len = min(split_half(n), n - start);
    const size_t first = (size_t)(blockIdx.x / 2) * n + start;
    float v[ROW_VECS][4];
    load_row(v, in + first, len, NEG_INF, (n & 3) == 0);
    const float m = slots_max(v);
    const float m_thread = m == NEG_INF ? 0.f : m;
    const float s = exp_slots(v, m_thread);
    const MaxSum mine = block_all_reduce(MaxSum{m, s}, Merge{}, scratch);
    if (threadIdx.x == 0) part[0] = mine.m, part[1] = mine.s;
    cluster_barrier();
    const MaxSum row_ms = merge(mine, MaxSum{peer_float(&part[0]), peer_float(&part[1])});
    cluster_barrier();   // the peer has read this block's part: either may now leave
    const float scale = __expf(m_thread - row_ms.m) / row_ms.s;
    scale_slots(v, scale);
    store_row(out + first, v, len, (n & 3) == 0);
#else
    __trap();   // clusters need compute capability 9.0 or newer
#endif
}

extern "C" __global__ __launch_bounds__(512, 2) void CLUSTER_PAIR rmsnorm_split(float* __restrict__ out,
                                                                               const float* __restrict__ in,
                                                                               const float* __restrict__ w, int n,
                                                                               float eps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ float scratch[32];
    __shared__ float part[1];
    const int len = min(split_half(n), n - (int)cluster_rank() * split_half(n));
    const size_t first = (size_t)(blockIdx.x / 2) * n + cluster_rank() * split_half(n);
    float v[ROW_VECS][4];
    load_row(v, in + first, len, 0.f, (n & 3) == 0);
    const float mine = block_all_reduce(sum_squares(v), Add{}, scratch);
    if (threadIdx.x == 0) part[0] = mine;
    cluster_barrier();
    const float r = rsqrtf((mine + peer_float(&part[0])) / n + eps);
    cluster_barrier();
    // w recomputed from the rank: nothing is held across the reductions
    scale_by_weights(v, w + cluster_rank() * split_half(n), len, r);
    store_row(out + first, v, len, (n & 3) == 0);
#else
    __trap();   // clusters need compute capability 9.0 or newer
#endif
}

// The textbook split: a first kernel reduces each row to its (max, sum) and writes them out; a second
// reads the row again and normalizes. Any n. Launch both: block (T, a multiple of 32), grid (rows).
extern "C" __global__ void softmax_row_stats(float2* __restrict__ stats, const float* __restrict__ in, int n) {
    __shared__ MaxSum scratch[32];
    const float* x = in + (size_t)blockIdx.x * n;
    MaxSum ms = {NEG_INF, 0.f};
    if ((n & 3) == 0) {
        for (int i = threadIdx.x; i < n / 4; i += blockDim.x) {
            float4 f = reinterpret_cast<const float4*>(x)[i];
            ms = push(push(push(push(ms, f.x), f.y), f.z), f.w);
        }
    } else {
        for (int e = threadIdx.x; e < n; e += blockDim.x) ms = push(ms, x[e]);
    }
    ms = block_all_reduce(ms, Merge{}, scratch);
    if (threadIdx.x == 0) stats[blockIdx.x] = make_float2(ms.m, ms.s);
}

extern "C" __global__ void softmax_normalize(float* __restrict__ out, const float* __restrict__ in,
                                             const float2* __restrict__ stats, int n) {
    const size_t row = (size_t)blockIdx.x * n;
    const float2 st = stats[blockIdx.x];
    const float inv = 1.f / st.y;
    if ((n & 3) == 0) {
        const float4* x = reinterpret_cast<const float4*>(in + row);
        float4* y = reinterpret_cast<float4*>(out + row);
        for (int i = threadIdx.x; i < n / 4; i += blockDim.x) {
            float4 f = x[i];
            y[i] = make_float4(__expf(f.x - st.x) * inv, __expf(f.y - st.x) * inv, __expf(f.z - st.x) * inv,
                               __expf(f.w - st.x) * inv);
        }
    } else {
        for (int e = threadIdx.x; e < n; e += blockDim.x) out[row + e] = __expf(in[row + e] - st.x) * inv;
    }
}

// The block's row, held in registers as load_row lays it out: y = v / sqrt(mean(v²) + eps) * w, stored.
__device__ __forceinline__ void normalize_row(float (&v)[ROW_VECS][4], float* __restrict__ y,
                                              const float* __restrict__ w, int n, float eps, float* scratch) {
    const float r = rsqrtf(block_all_reduce(sum_squares(v), Add{}, scratch) / n + eps);
    scale_by_weights(v, w, n, r);
    store_row(y, v, n);
}

// RMSNorm of each row, y = x / sqrt(mean(x²) + eps) * w, reading the row once (held in registers).
// Launch: block (T, a multiple of 32, at most 1024), grid (rows); n <= 4 * ROW_VECS * T. w: n floats.
// Both one-pass kernels are compiled for 1024 threads, at most 64 registers a thread: ROW_VECS = 16
// does not fit and spills (notebook 08's case of a fusion that loses).
extern "C" __global__ __launch_bounds__(1024) void rmsnorm_one_pass(float* __restrict__ out, const float* __restrict__ in,
                                            const float* __restrict__ w, int n, float eps) {
    __shared__ float scratch[32];
    const size_t row = (size_t)blockIdx.x * n;
    float v[ROW_VECS][4];
    load_row(v, in + row, n, 0.f);
    normalize_row(v, out + row, w, n, eps, scratch);
}

// ---- RMSNorm reading its row twice, the second time from the caches (torch.compile's plan)

#ifndef REREAD_VECS
#define REREAD_VECS 2   // float4 slots a thread of rmsnorm_reread reads, twice: rows up to 4 * REREAD_VECS * threads
#endif

#include "l2_hints.cuh"   // l2_policy<KEEP>, load4_hinted<KEEP>: the two reads' L2 eviction hints

// Slot j of this thread (thread_slot's layout) as a float4, 0 past n. Rows of n % 4 == 0 floats move as
// hinted float4 loads. Another row starts at in + row * n, not 16-byte aligned, so no float4 load is
// possible: it is read element by element, without hints (no timed case has such rows).
template <bool KEEP>
__device__ __forceinline__ float4 load_slot_hinted(const float* x, int n, int j, unsigned long long policy) {
    const int e0 = 4 * thread_slot(j);
    if ((n & 3) == 0) return e0 < n ? load4_hinted<KEEP>(x + e0, policy) : make_float4(0.f, 0.f, 0.f, 0.f);
    float e[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) e[k] = e0 + k < n ? x[e0 + k] : 0.f;
    return make_float4(e[0], e[1], e[2], e[3]);
}

// RMSNorm of each row in one kernel that reads the row twice: once for its mean square (the lines kept in
// the caches), and again, after the block's reduction, to scale it by r * w and store it. The slots are
// not held across the reduction, so up to 4 slots a thread two 1,024-thread blocks fit on an SM, where
// the one-pass kernel holding 8 fits one. (Unlike Inductor's loop, each thread loads its whole share of the
// row in the first read.) Launch: block (T, a multiple of 32, at most 1024), grid (rows);
// n <= 4 * REREAD_VECS * T. w: n floats.
// 32 registers a thread up to 4 slots (two 1,024-thread blocks an SM); 8 slots take more.
#if REREAD_VECS <= 4
#define REREAD_BOUNDS __launch_bounds__(1024, 2)
#else
#define REREAD_BOUNDS __launch_bounds__(1024)
#endif
extern "C" __global__ void REREAD_BOUNDS rmsnorm_reread(float* __restrict__ out, const float* __restrict__ in,
                                                                 const float* __restrict__ w, int n, float eps) {
    __shared__ float scratch[33];
    const float* x = in + (size_t)blockIdx.x * n;
    float* y = out + (size_t)blockIdx.x * n;
    float squares = 0.f;
    {
        const unsigned long long keep = l2_policy<true>();
        float4 v[REREAD_VECS];
#pragma unroll
        for (int j = 0; j < REREAD_VECS; ++j) v[j] = load_slot_hinted<true>(x, n, j, keep);
#pragma unroll
        for (int j = 0; j < REREAD_VECS; ++j) squares += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
    const float r = rsqrtf(block_sum(squares, scratch) / n + eps);
    const unsigned long long drop = l2_policy<false>();
#pragma unroll
    for (int j = 0; j < REREAD_VECS; ++j) {
        const float4 v = load_slot_hinted<false>(x, n, j, drop);
        const int e0 = 4 * thread_slot(j);
        if ((n & 3) == 0 && e0 < n) {
            const float4 g = *reinterpret_cast<const float4*>(w + e0);
            *reinterpret_cast<float4*>(y + e0) = make_float4(v.x * r * g.x, v.y * r * g.y, v.z * r * g.z, v.w * r * g.w);
        } else if ((n & 3) != 0) {
            const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int k = 0; k < 4; ++k)
                if (e0 + k < n) y[e0 + k] = e[k] * r * w[e0 + k];
        }
    }
}

// The next row's slots copied into shared memory while this row is reduced, scaled and stored: slot j
// of thread t lands at float4 j * blockDim.x + t, the layout load_row gives the registers. Each thread
// later reads back only the slots it copied, so its own cp.async.wait_all orders them and no barrier
// is needed. Slots past n are zero-filled (a source size of 0 reads nothing). Below sm_80 (no
// cp.async) nothing is prefetched and take_row reads global memory instead. Either way slots past n
// read as 0, the pad RMSNorm needs.
__device__ __forceinline__ void prefetch_row(float4* slots, const float* __restrict__ x, int n) {
#if __CUDA_ARCH__ >= 800
#pragma unroll 1
    for (int j = 0; j < ROW_VECS; ++j) {
        const int slot = j * blockDim.x + threadIdx.x, e0 = 4 * slot;   // thread_slot(j), written out: the SASS the records ran
        const u32 dst = smem_u32(slots + slot);
        if ((n & 3) == 0) {
            cp_async16(dst, x + (e0 < n ? e0 : 0), e0 < n ? 16 : 0);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                cp_async4_ca(dst + 4 * e, x + (e0 + e < n ? e0 + e : 0), e0 + e < n ? 4 : 0);
        }
    }
    cp_async_commit();
#endif
}

// This thread's cp.async copies have landed (nothing to wait for below sm_80).
__device__ __forceinline__ void wait_copies() {
#if __CUDA_ARCH__ >= 800
    cp_async_wait_all();
#endif
}

__device__ __forceinline__ void take_row(float (&v)[ROW_VECS][4], const float4* slots, const float* __restrict__ x,
                                         int n) {
#if __CUDA_ARCH__ >= 800
    wait_copies();
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j) {
        const float4 f = slots[thread_slot(j)];
        v[j][0] = f.x, v[j][1] = f.y, v[j][2] = f.z, v[j][3] = f.w;
    }
#else
    load_row(v, x, n, 0.f);
#endif
}

// rmsnorm_one_pass on a persistent grid: each block takes rows blockIdx.x, + gridDim.x, ..., and the
// copy of its next row into shared memory is in flight while it reduces, scales and stores this one,
// so an SM that holds one block (a row of 32k floats fills its registers) never waits for a row to
// arrive after its first. Launch: block (T), grid (at most rows), dynamic shared memory
// ROW_VECS * T * 16 bytes; n <= 4 * ROW_VECS * T.
extern "C" __global__ __launch_bounds__(1024) void rmsnorm_prefetch(float* __restrict__ out, const float* __restrict__ in,
                                            const float* __restrict__ w, int rows, int n, float eps) {
    extern __shared__ float4 next_row[];
    __shared__ float scratch[32];
    int row = blockIdx.x;
    if (row < rows) prefetch_row(next_row, in + (size_t)row * n, n);
    for (; row < rows; row += gridDim.x) {
        float v[ROW_VECS][4];
        take_row(v, next_row, in + (size_t)row * n, n);
        if (row + gridDim.x < rows) prefetch_row(next_row, in + (size_t)(row + gridDim.x) * n, n);
        normalize_row(v, out + (size_t)row * n, w, n, eps, scratch);
    }
}

// ---- rows in registers and shared memory: two blocks of 32k floats to an SM
//
// One-pass kernels for rows too long for a block of 512 threads to hold in registers: the first
// 4 * ROW_VECS * T floats of the row (the near part) sit in registers, the rest (the far part, up to
// as many again) in shared memory, copied there with cp.async while the near part loads. At 512
// threads and 64 KiB of shared memory a block, two blocks fit on an SM, each with a whole 32k row,
// so one block's reduction and stores can overlap the other's loads; a 1,024-thread block holding
// the row in registers alone is the only block on its SM. The far part is used straight from shared
// memory, never loaded into registers beside the near part (that would not fit). Each thread reads
// back only the slots it copied, so no barrier orders them. Launch: block (T), grid (rows), dynamic
// shared memory ROW_VECS * T * 16 bytes when the row has a far part (else none); n <= 8 * ROW_VECS * T.

__device__ __forceinline__ int near_part(int n) { return min(n, 4 * ROW_VECS * (int)blockDim.x); }

__device__ __forceinline__ float4 copied_slot(const float4* slots, const float* __restrict__ x, int slot, int n) {
#if __CUDA_ARCH__ >= 800
    return slots[slot];
#else
    const int e0 = 4 * slot;
    float f[4];
    for (int e = 0; e < 4; ++e) f[e] = e0 + e < n ? x[e0 + e] : 0.f;
    return make_float4(f[0], f[1], f[2], f[3]);
#endif
}

// y[e0 .. e0 + 3] = f * scale (* w[e0 ..] when w is given), elements at or past n left alone.
__device__ __forceinline__ void store_scaled(float* __restrict__ y, const float* __restrict__ w, float4 f, float scale,
                                             int e0, int n, bool aligned) {
    if (aligned && e0 + 3 < n) {
        const float4 g = w ? *reinterpret_cast<const float4*>(w + e0) : make_float4(1.f, 1.f, 1.f, 1.f);
        *reinterpret_cast<float4*>(y + e0) =
            make_float4(f.x * (scale * g.x), f.y * (scale * g.y), f.z * (scale * g.z), f.w * (scale * g.w));
        return;
    }
    const float fe[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
    for (int e = 0; e < 4; ++e)
        if (e0 + e < n) y[e0 + e] = fe[e] * (w ? scale * w[e0 + e] : scale);
}

extern "C" __global__ __launch_bounds__(512, 2) void rmsnorm_half_shared(float* __restrict__ out,
                                                                      const float* __restrict__ in,
                                                                      const float* __restrict__ w, int n, float eps) {
    extern __shared__ float4 far_slots[];
    __shared__ float scratch[32];
    const int near = near_part(n), far = n - near;
    const bool aligned = (n & 3) == 0;   // the far part starts at a multiple of 4: aligned when rows are
    const float* x = in + (size_t)blockIdx.x * n;
    float* y = out + (size_t)blockIdx.x * n;
    if (far > 0) prefetch_row(far_slots, x + near, far);
    float v[ROW_VECS][4];
    load_row(v, x, near, 0.f, aligned);
    float ss = sum_squares(v);
    if (far > 0) {
        wait_copies();
#pragma unroll
        for (int j = 0; j < ROW_VECS; ++j) {   // slots past n were zero-filled: they add nothing
            const float4 f = copied_slot(far_slots, x + near, thread_slot(j), far);
            ss = fmaf(f.x, f.x, fmaf(f.y, f.y, fmaf(f.z, f.z, fmaf(f.w, f.w, ss))));
        }
    }
    const float r = rsqrtf(block_all_reduce(ss, Add{}, scratch) / n + eps);
    scale_by_weights(v, w, near, r);
    store_row(y, v, near, aligned);
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j)
        if (4 * thread_slot(j) < far)
            store_scaled(y + near, w + near, copied_slot(far_slots, x + near, thread_slot(j), far), r, 4 * thread_slot(j),
                         far, aligned);
}

// Softmax the same way: the far part's exponentials are written back over their own slots.
extern "C" __global__ __launch_bounds__(512, 2) void softmax_half_shared(float* __restrict__ out,
                                                                      const float* __restrict__ in, int n) {
    extern __shared__ float4 far_slots[];
    __shared__ MaxSum scratch[32];
    const int near = near_part(n), far = n - near;
    const bool aligned = (n & 3) == 0;
    const float* x = in + (size_t)blockIdx.x * n;
    float* y = out + (size_t)blockIdx.x * n;
    if (far > 0) prefetch_row(far_slots, x + near, far);
    float v[ROW_VECS][4];
    load_row(v, x, near, NEG_INF, aligned);
    float m = slots_max(v);
    if (far > 0) {
        wait_copies();
#pragma unroll 1
        for (int j = 0; j < ROW_VECS; ++j) {   // zero-filled slots past n are not values: skip them
            const float4 f = copied_slot(far_slots, x + near, thread_slot(j), far);
            const int e0 = 4 * thread_slot(j);
            m = fmaxf(m, fmaxf(fmaxf(e0 < far ? f.x : NEG_INF, e0 + 1 < far ? f.y : NEG_INF),
                               fmaxf(e0 + 2 < far ? f.z : NEG_INF, e0 + 3 < far ? f.w : NEG_INF)));
        }
    }
    const float m_thread = m == NEG_INF ? 0.f : m;   // a thread with no values: exp(-inf - 0) = 0
    float s = exp_slots(v, m_thread);
    if (far > 0) {
#pragma unroll 1
        for (int j = 0; j < ROW_VECS; ++j) {
            const int e0 = 4 * thread_slot(j);
            if (e0 >= far) break;
            float4 f = copied_slot(far_slots, x + near, thread_slot(j), far);
            f = make_float4(__expf(f.x - m_thread), e0 + 1 < far ? __expf(f.y - m_thread) : 0.f,
                            e0 + 2 < far ? __expf(f.z - m_thread) : 0.f, e0 + 3 < far ? __expf(f.w - m_thread) : 0.f);
            s += (f.x + f.y) + (f.z + f.w);
            far_slots[thread_slot(j)] = f;   // below sm_80 nothing was copied, and the slots are written here first
        }
    }
    const MaxSum row_ms = block_all_reduce(MaxSum{m, s}, Merge{}, scratch);
    const float scale = __expf(m_thread - row_ms.m) / row_ms.s;
    scale_slots(v, scale);
    store_row(y, v, near, aligned);
#pragma unroll
    for (int j = 0; j < ROW_VECS; ++j)
        if (4 * thread_slot(j) < far) store_scaled(y + near, nullptr, far_slots[thread_slot(j)], scale, 4 * thread_slot(j), far, aligned);
}

// The two-kernel RMSNorm: each row's 1 / rms, then a second read of the row to scale it.
extern "C" __global__ void rmsnorm_row_stats(float* __restrict__ inv_rms, const float* __restrict__ in, int n,
                                             float eps) {
    __shared__ float scratch[32];
    const float* x = in + (size_t)blockIdx.x * n;
    float ss = 0.f;
    if ((n & 3) == 0) {
        for (int i = threadIdx.x; i < n / 4; i += blockDim.x) {
            float4 f = reinterpret_cast<const float4*>(x)[i];
            ss = fmaf(f.x, f.x, fmaf(f.y, f.y, fmaf(f.z, f.z, fmaf(f.w, f.w, ss))));
        }
    } else {
        for (int e = threadIdx.x; e < n; e += blockDim.x) ss = fmaf(x[e], x[e], ss);
    }
    ss = block_all_reduce(ss, Add{}, scratch);
    if (threadIdx.x == 0) inv_rms[blockIdx.x] = rsqrtf(ss / n + eps);
}

extern "C" __global__ void rmsnorm_normalize(float* __restrict__ out, const float* __restrict__ in,
                                             const float* __restrict__ inv_rms, const float* __restrict__ w,
                                             int n) {
    const size_t row = (size_t)blockIdx.x * n;
    const float r = inv_rms[blockIdx.x];
    if ((n & 3) == 0) {
        const float4* x = reinterpret_cast<const float4*>(in + row);
        const float4* w4 = reinterpret_cast<const float4*>(w);
        float4* y = reinterpret_cast<float4*>(out + row);
        for (int i = threadIdx.x; i < n / 4; i += blockDim.x) {
            float4 f = x[i], g = w4[i];
            y[i] = make_float4(f.x * (r * g.x), f.y * (r * g.y), f.z * (r * g.z), f.w * (r * g.w));
        }
    } else {
        for (int e = threadIdx.x; e < n; e += blockDim.x) out[row + e] = in[row + e] * r * w[e];
    }
}

// ---------------------------------------------------------------------------------------------- GEMM epilogue

// GELU, tanh form, with the hardware tanh: gelu.cuh's fold, of h = x/2 (scaling by 2 is exact, so
// this is bit for bit the fold written around x).
__device__ __forceinline__ float gelu_tanh(float x) { return gelu_of_half(0.5f * x); }

// The epilogue as its own pass over a GEMM's bf16 output: out = GELU(c + bias[col]) + residual.
// residual may be null (bias and GELU only). Launch: block (256), grid (ceil(rows * cols / 8 / 256)).
// Eight bf16 (16 bytes) per thread when cols % 8 == 0, else one element per thread-iteration.
extern "C" __global__ void bias_gelu_residual(bf16_raw* __restrict__ out, const bf16_raw* __restrict__ c,
                                              const bf16_raw* __restrict__ bias,
                                              const bf16_raw* __restrict__ residual, int cols, long long total) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if ((cols & 7) == 0) {
        for (; 8 * t < total; t += stride) {
            uint4 cv = reinterpret_cast<const uint4*>(c)[t];
            uint4 bv = reinterpret_cast<const uint4*>(bias)[(8 * t % cols) / 8];
            uint4 rv = residual ? reinterpret_cast<const uint4*>(residual)[t] : make_uint4(0, 0, 0, 0);
            const u32* cw = &cv.x;
            const u32* bw = &bv.x;
            const u32* rw = &rv.x;
            uint4 o;
            u32* ow = &o.x;
#pragma unroll
            for (int h = 0; h < 4; ++h) {
                float lo = gelu_tanh(__uint_as_float(cw[h] << 16) + __uint_as_float(bw[h] << 16)) +
                           __uint_as_float(rw[h] << 16);
                float hi = gelu_tanh(__uint_as_float(cw[h] & 0xffff0000u) + __uint_as_float(bw[h] & 0xffff0000u)) +
                           __uint_as_float(rw[h] & 0xffff0000u);
                ow[h] = (u32)float_to_bf16(lo) | ((u32)float_to_bf16(hi) << 16);
            }
            reinterpret_cast<uint4*>(out)[t] = o;
        }
    } else {
        for (; t < total; t += stride) {
            float x = gelu_tanh(bf16_to_float(c[t]) + bf16_to_float(bias[t % cols]));
            out[t] = float_to_bf16(residual ? x + bf16_to_float(residual[t]) : x);
        }
    }
#else
    __trap();   // the bf16 conversion needs compute capability 8.0 or newer
#endif
}
