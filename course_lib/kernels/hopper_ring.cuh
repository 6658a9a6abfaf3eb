// The pieces of notebook 10's Hopper GEMM that its rungs share with the notebook's GEMM exercise
// (kernels/exercises/wgmma_consumer/): wgmma's descriptors, fences and waits; the ring of shared-memory
// slots with a full and an empty mbarrier each; the producer's K loop; the tile store. The consumer's
// K loop is not here: hopper_gemm.cu writes it (consume_tile), and the exercise asks for it.
// sm_90a only (wgmma). Every macro below has a default; hopper_gemm.cu's variants override them.

#ifndef COURSE_HOPPER_RING_CUH
#define COURSE_HOPPER_RING_CUH

#include "common.cuh"       // bf16_raw, pack_bf16x2
#include "async_copy.cuh"

#ifndef HG_ELECTED_ARRIVE
#define HG_ELECTED_ARRIVE 1   // 1: one thread per consumer warpgroup frees a slot; 0: all 128 arrive
#endif
#ifndef HG_EXTRA_EXPECT_BYTES
#define HG_EXTRA_EXPECT_BYTES 0    // > 0: the pitfall: a slot waits for bytes that never come (the wait traps)
#endif
#ifndef HG_SWIZZLE_DESC
#define HG_SWIZZLE_DESC 1     // 0: the pitfall: describe the TMA's swizzled tiles as unswizzled
#endif
#define HG_BK 64              // K per slot: one 128-byte swizzle row of bf16 per tile row

#include "wgmma.cuh"

// ---------------------------------------------------------------------------- wgmma's pieces

// The shared-memory matrix descriptor of a K-major tile written by the TMA with the 128-byte
// swizzle: rows of 128 bytes, 8-row groups (1024 bytes, the swizzle's period) one after another.
// Bits 0-13: start address / 16; 16-29: leading byte offset / 16 (unused by swizzled K-major
// layouts, 1 by convention); 32-45: stride byte offset / 16 (from one 8-row group to the next);
// 62-63: the swizzle (1 = 128-byte). Stepping 16 elements along K inside the 128-byte row is
// adding 32 bytes to the start address: the hardware applies the swizzle to the address it forms.
__device__ __forceinline__ u64 smem_desc(u32 addr) {
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(16 >> 4) << 16) | ((u64)(1024 >> 4) << 32) |
           ((u64)(HG_SWIZZLE_DESC ? 1 : 0) << 62);
}

// Registers the accumulators were written by other instructions: order that before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
// Close the wgmmas issued so far into a group; wait until at most N groups are still running.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
// wgmma writes the accumulators behind the compiler's back: after the wait, tell it they changed,
// so that no read of them is moved above the wait.
template <int R> __device__ __forceinline__ void accumulators_ready(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}

// m64nNk16 for N = 64, 128 or 256: A from shared memory, or (wgmma_regs) from registers.
template <int N> __device__ __forceinline__ void wgmma_smem(float (&d)[N / 2], u64 da, u64 db, int accumulate) {
    static_assert(N == 64 || N == 128 || N == 256, "no wrapper for this N");
    if constexpr (N == 64) wgmma_m64n64(d, da, db, accumulate);
    else if constexpr (N == 128) wgmma_m64n128(d, da, db, accumulate);
    else wgmma_m64n256(d, da, db, accumulate);
}
template <int N> __device__ __forceinline__ void wgmma_regs(float (&d)[N / 2], const u32 (&a)[4], u64 db, int accumulate) {
    static_assert(N == 64 || N == 128 || N == 256, "no wrapper for this N");
    if constexpr (N == 64) wgmma_m64n64_rega(d, a, db, accumulate);
    else if constexpr (N == 128) wgmma_m64n128_rega(d, a, db, accumulate);
    else wgmma_m64n256_rega(d, a, db, accumulate);
}

// One 64-row slice of a slot times its B tile: four k16 steps of m64nBNk16. `accumulate` 0 on the
// first step of a tile overwrites the accumulators (D = A·B) instead of adding to them.
template <int BN>
__device__ __forceinline__ void wgmma_slot(float (&d)[BN / 2], u32 a_rows, u32 b_tile, bool accumulate) {
#pragma unroll
    for (int kk = 0; kk < HG_BK / 16; ++kk) {
        wgmma_smem<BN>(d, smem_desc(a_rows + kk * 32), smem_desc(b_tile + kk * 32), kk > 0 || accumulate);
    }
}

// ---------------------------------------------------------------------------- shared by the rungs

__device__ __forceinline__ u32 align_1024(u32 addr) { return (addr + 1023u) & ~1023u; }

// One accumulator pair into columns c and c + 1 of a row of C: as bf16 (rounded) or as fp32 (split-K's
// partial products); one 4- or 8-byte store where the whole tile is inside, else each column guarded.
__device__ __forceinline__ void write_pair(bf16_raw* row, int c, int N, bool inside, float lo, float hi) {
    const u32 v = pack_bf16x2(lo, hi);
    if (inside) {
        *reinterpret_cast<u32*>(row + c) = v;
    } else {
        if (c < N) row[c] = (bf16_raw)(v & 0xffff);
        if (c + 1 < N) row[c + 1] = (bf16_raw)(v >> 16);
    }
}
__device__ __forceinline__ void write_pair(float* row, int c, int N, bool inside, float lo, float hi) {
    if (inside) {
        *reinterpret_cast<float2*>(row + c) = make_float2(lo, hi);
    } else {
        if (c < N) row[c] = lo;
        if (c + 1 < N) row[c + 1] = hi;
    }
}

// A warpgroup's 64 x BN accumulator tile (the m64nN layout: warp w holds rows 16w..16w+15; lane l
// rows l/4 and l/4 + 8, columns 8j + 2(l%4) and the next) into C at (row0, col0), rounded to bf16
// (or, for split-K's fp32 workspace, as it is).
template <int BN, typename T>
__device__ __forceinline__ void store_tile(T* __restrict__ C, int M, int N, int row0, int col0,
                                           const float (&d)[BN / 2]) {
    const int t = threadIdx.x % 128, lane = t % 32;
    const int r0 = row0 + (t / 32) * 16 + lane / 4, c0 = col0 + 2 * (lane % 4);
    const bool inside = (N % 2 == 0) && row0 + 64 <= M && col0 + BN <= N;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = r0 + 8 * h;
        if (!inside && r >= M) continue;
        T* row = C + (size_t)r * N;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) write_pair(row, c0 + 8 * j, N, inside, d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
    }
}

// A slot of the ring and the phase of its barriers: after the last slot, back to the first, the
// phase flipped.
struct Ring {
    int slot = 0;
    u32 phase = 0;
    __device__ __forceinline__ void advance(int slots) {
        if (++slot == slots) { slot = 0; phase ^= 1; }
    }
};

// Slot s of a ring of S slots of BM x 64 A tiles and BN x 64 B tiles, then the barriers: full[s], empty[s].
template <int BM, int BN, int S>
struct Slots {
    u32 base;
    static constexpr u32 A_BYTES = BM * HG_BK * 2, BYTES = (BM + BN) * HG_BK * 2;
    __device__ __forceinline__ u32 a(int s) const { return base + s * BYTES; }
    __device__ __forceinline__ u32 b(int s) const { return base + s * BYTES + A_BYTES; }
    __device__ __forceinline__ u32 full(int s) const { return base + S * BYTES + 8 * s; }
    __device__ __forceinline__ u32 empty(int s) const { return base + S * BYTES + 8 * (S + s); }
    // One thread: ask the TMA for K tile kt of the block's A rows and B rows; full[s] counts the bytes in.
    __device__ __forceinline__ void fill(int s, const u64* maps, int kt, int row0, int col0) const {
        mbar_expect_bytes(full(s), BYTES + HG_EXTRA_EXPECT_BYTES);
        tma_load_2d(a(s), maps, kt * HG_BK, row0, full(s));
        tma_load_2d(b(s), maps + 16, kt * HG_BK, col0, full(s));
    }
};

// Thread 0: the tensor maps are readable, the barriers initialised (full by one arrival plus the
// bytes, empty by the consumers' arrivals); then everyone may start.
template <int BM, int BN, int S>
__device__ __forceinline__ void init_slots(const Slots<BM, BN, S>& sl, const u64* maps, u32 empty_arrivals) {
    if (threadIdx.x == 0) {
        tensormap_acquire(maps);
        tensormap_acquire(maps + 16);
        for (int s = 0; s < S; ++s) {
            mbar_init(sl.full(s), 1);
            mbar_init(sl.empty(s), empty_arrivals);
        }
        mbar_init_fence();
    }
    __syncthreads();
}

// A consumer warpgroup is done with a slot. Its wgmmas are warpgroup-wide operations, complete for
// all four warps once they are complete for one, so one elected thread can say so for all 128.
__device__ __forceinline__ void release(u32 empty_bar) {
    if (!HG_ELECTED_ARRIVE || threadIdx.x % 128 == 0) mbar_arrive(empty_bar);
}
#define HG_EMPTY_ARRIVALS(consumer_warpgroups) ((consumer_warpgroups) * (HG_ELECTED_ARRIVE ? 1 : 128))

// The producer's K loop over one output tile: wait for each slot to be freed, refill it. On the
// first pass the wait is for the phase before the first (parity 1), which counts as complete.
template <int BM, int BN, int S>
__device__ __forceinline__ void produce_tile(const Slots<BM, BN, S>& sl, Ring& ring, const u64* maps, int k_tiles,
                                             int row0, int col0, int first_k_tile = 0) {
    for (int kt = first_k_tile; kt < first_k_tile + k_tiles; ++kt) {
        mbar_wait(sl.empty(ring.slot), ring.phase ^ 1);
        sl.fill(ring.slot, maps, kt, row0, col0);
        ring.advance(S);
    }
}

#endif   // COURSE_HOPPER_RING_CUH
