// Notebook 09's kernels: how long a load takes, and the ways a kernel keeps enough of them in flight.
//
// * chase_l1 / chase_l2: one thread follows a chain of indices, each load's address the last one's
//   value, so no two loads overlap and the time per hop is the load latency (L1-cached or L2-only).
// * stream_sync, stream_cp_async, stream_bulk: the same work (a sum of squares, per-block partial
//   sums), three ways to get the bytes in. stream_sync loads into registers and waits for each load
//   before it issues the next: only occupancy (many resident warps) puts bytes in flight.
//   stream_cp_async copies 16 KiB tiles into PL_STAGES shared-memory slots with cp.async (every
//   thread PL_VECS x 16 bytes); stream_bulk has one thread ask the TMA for each tile with one
//   cp.async.bulk, and an mbarrier per slot counts the bytes in (expect-tx) and flips its phase.
// * stream_specialized: a producer warp issues the bulk copies, four consumer warps do the math,
//   full and empty mbarriers per slot hand tiles back and forth. Built with PL_TRACE=1 an observer
//   warp joins the protocol and the kernel records, on its first blocks, when each copy was issued,
//   when it landed and when its math started and ended (clock64, calibrated by %globaltimer).
//
// Every mbarrier wait here gives up after PL_WAIT_NS nanoseconds with a trap: a wrong
// parity or byte count ends the launch with an error (on the H200, "unspecified launch failure")
// instead of hanging the notebook. The wait is async_copy.cuh's mbar_wait_clock_every_1024, which
// reads the clock on every 1024th try; the copies, barriers and fences are that header's too.

#ifndef PL_STAGES
#define PL_STAGES 4
#endif
#ifndef PL_TRACE
#define PL_TRACE 0
#endif
#ifndef PL_WAIT_NS
#define PL_WAIT_NS 2000000000ull   // 2 s: far longer than any correct wait here
#endif
#ifndef PL_VECS
#define PL_VECS 4                  // float4s per thread per tile of stream_cp_async and stream_bulk
#endif
#define PL_THREADS 256             // stream_*: threads per block
#define PL_TILE_F4 (PL_THREADS * PL_VECS)   // a pipelined tile: 16 KiB by default
#define SP_CONSUMERS 4             // stream_specialized: consumer warps
#define SP_F4_PER_THREAD 8         // ...each thread's float4s per tile: 4 warps x 32 x 8 x 16 B = 16 KiB
#define SP_TILE_F4 (SP_CONSUMERS * 32 * SP_F4_PER_THREAD)
#define SP_TRACE_TILES 64          // tiles traced per traced block
#define SP_EVENTS 4                // issue, land, math start, math end

#include "async_copy.cuh"   // smem_u32, globaltimer_ns, cp.async, mbarriers, bulk copies, proxy fences

// ---------------------------------------------------------------------------- pointer chasing

// Launch: grid (1), block (1). next: a permutation cycle of indices (u32, into next itself). The
// walk starts at index *cursor and leaves there the index reached after `hops` hops, so that the
// next launch walks on rather than repeating the same lines.
extern "C" __global__ void chase_l1(const u32* __restrict__ next, long long hops, u32* cursor) {
    u32 i = *cursor;
    for (long long h = 0; h < hops; ++h)
        asm volatile("ld.global.ca.u32 %0, [%1];" : "=r"(i) : "l"(next + i) : "memory");
    *cursor = i;
}

// The same, with loads that skip L1 (ld.global.cg): an L2 hit at best.
extern "C" __global__ void chase_l2(const u32* __restrict__ next, long long hops, u32* cursor) {
    u32 i = *cursor;
    for (long long h = 0; h < hops; ++h)
        asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(i) : "l"(next + i) : "memory");
    *cursor = i;
}

// ---------------------------------------------------------------------------- streaming

__device__ __forceinline__ float sum_squares(float4 v, float acc) {
    return fmaf(v.w, v.w, fmaf(v.z, v.z, fmaf(v.y, v.y, fmaf(v.x, v.x, acc))));
}

// Adds the block's per-thread values; thread 0 writes the total to partial[blockIdx.x].
// The n % 4 floats after the last whole float4 are added by block 0.
__device__ __forceinline__ void block_partial(float acc, const float* __restrict__ in, long long n,
                                              float* __restrict__ partial) {
    __shared__ float warp_sums[32];
    if (blockIdx.x == 0 && threadIdx.x < (n & 3)) {
        float x = in[(n & ~3ll) + threadIdx.x];
        acc = fmaf(x, x, acc);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.f;
        for (int w = 0; w < (int)(blockDim.x + 31) / 32; ++w) total += warp_sums[w];
        partial[blockIdx.x] = total;
    }
}

// This block's tiles are blockIdx.x, blockIdx.x + gridDim.x, ...: how many it has.
__device__ __forceinline__ long long my_tiles(long long tiles) {
    return tiles > blockIdx.x ? (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
}

// Launch: block (PL_THREADS), any grid (persistent: a few blocks per SM). partial: gridDim.x floats.
// Synchronous: one load in flight per thread, waited for before the next is issued.
extern "C" __global__ __launch_bounds__(PL_THREADS) void stream_sync(const float* __restrict__ in, long long n,
                                                                     float* __restrict__ partial) {
    const long long n4 = n / 4, tiles = (n4 + PL_THREADS - 1) / PL_THREADS;   // a float4 per thread
    const float4* in4 = reinterpret_cast<const float4*>(in);
    float acc = 0.f;
#pragma unroll 1
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long i = t * PL_THREADS + threadIdx.x;
        if (i < n4) acc = sum_squares(in4[i], acc);
    }
    block_partial(acc, in, n, partial);
}

// Launch: block (PL_THREADS), persistent grid, dynamic shared memory PL_STAGES * PL_TILE_F4 * 16
// bytes. Tile j of this block goes to slot j % PL_STAGES, PL_STAGES - 1 tiles ahead of the math
// (one slot is being read); with one stage, each copy is waited for before any math. Each thread
// sums the float4s that thread (tid + 128) % 256 copied, so the block must synchronize. sm_80+.
extern "C" __global__ __launch_bounds__(PL_THREADS) void stream_cp_async(const float* __restrict__ in, long long n,
                                                                         float* __restrict__ partial) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int S = PL_STAGES;
    extern __shared__ __align__(16) float4 slots[];   // [S][PL_TILE_F4]
    const long long n4 = n / 4, tiles = (n4 + PL_TILE_F4 - 1) / PL_TILE_F4, mine = my_tiles(tiles);
    const float4* in4 = reinterpret_cast<const float4*>(in);
    const int tid = threadIdx.x, reader = (tid + PL_THREADS / 2) % PL_THREADS;
    const u32 base = smem_u32(slots);
    auto issue = [&](long long j, int slot) {   // this thread's float4s of tile j; zeros past the end
#pragma unroll
        for (int v = 0; v < PL_VECS; ++v) {
            const int e = v * PL_THREADS + tid;
            const long long i = (blockIdx.x + j * gridDim.x) * PL_TILE_F4 + e;
            const bool ok = i < n4;
            cp_async16(base + (slot * PL_TILE_F4 + e) * 16, ok ? in4 + i : in4, ok ? 16 : 0);
        }
    };
    auto consume = [&](int slot, float acc) {
#pragma unroll
        for (int v = 0; v < PL_VECS; ++v) acc = sum_squares(slots[slot * PL_TILE_F4 + v * PL_THREADS + reader], acc);
        return acc;
    };
    float acc = 0.f;
    if (S == 1) {
        for (long long j = 0; j < mine; ++j) {
            issue(j, 0);
            cp_async_commit();
            cp_async_wait<0>();
            __syncthreads();                      // everyone's copy has landed
            acc = consume(0, acc);
            __syncthreads();                      // everyone has read the slot
        }
    } else {
        for (int s = 0; s < S - 1; ++s) {
            if (s < mine) issue(s, s);
            cp_async_commit();   // empty groups keep the count uniform
        }
        for (long long j = 0; j < mine; ++j) {
            cp_async_wait<(S >= 2 ? S - 2 : 0)>();   // this thread's copy of tile j has landed...
            __syncthreads();                             // ...everyone's; and tile j - 1's slot is read
            if (j + S - 1 < mine) issue(j + S - 1, (int)((j + S - 1) % S));
            cp_async_commit();
            acc = consume((int)(j % S), acc);
        }
    }
    block_partial(acc, in, n, partial);
#else
    __trap();   // cp.async needs compute capability 8.0 or newer
#endif
}

// Launch: block (PL_THREADS), persistent grid, dynamic shared memory PL_STAGES * PL_TILE_F4 * 16 bytes. All
// PL_STAGES slots are filled up front; after the block has read slot j % S, thread 0 refills it
// with tile j + S. `proxy_fence` = 0 leaves out the fence.proxy.async that orders the block's
// reads of a slot (generic proxy) before the TMA's refill of it (async proxy): notebook 09 shows
// what that costs. sm_90+.
extern "C" __global__ __launch_bounds__(PL_THREADS) void stream_bulk(const float* __restrict__ in, long long n,
                                                                     float* __restrict__ partial, int proxy_fence) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int S = PL_STAGES;
    extern __shared__ __align__(128) float4 slots[];
    __shared__ __align__(8) u64 full[S];
    const long long n4 = n / 4, tiles = (n4 + PL_TILE_F4 - 1) / PL_TILE_F4, mine = my_tiles(tiles);
    const float4* in4 = reinterpret_cast<const float4*>(in);
    const int tid = threadIdx.x, reader = (tid + PL_THREADS / 2) % PL_THREADS;
    const u32 base = smem_u32(slots), bars = smem_u32(full);
    auto issue = [&](long long j, int slot) {   // thread 0: tile j into `slot`, as many bytes as exist
        const long long first = (blockIdx.x + j * gridDim.x) * PL_TILE_F4;
        const u32 bytes = (u32)min((long long)PL_TILE_F4, n4 - first) * 16;
        mbar_expect_bytes(bars + slot * 8, bytes);
        bulk_load_g2s(base + slot * PL_TILE_F4 * 16, in4 + first, bytes, bars + slot * 8);
    };
    if (tid == 0) {
        for (int s = 0; s < S; ++s) mbar_init(bars + s * 8, 1);
        mbar_init_fence();   // visible to the TMA
    }
    __syncthreads();
    if (tid == 0)
        for (int s = 0; s < S && s < mine; ++s) issue(s, s);
    float acc = 0.f;
    for (long long j = 0; j < mine; ++j) {
        const int slot = (int)(j % S);
        mbar_wait_clock_every_1024(bars + slot * 8, (u32)((j / S) & 1), PL_WAIT_NS);
        const long long first = (blockIdx.x + j * gridDim.x) * PL_TILE_F4;
#pragma unroll
        for (int v = 0; v < PL_VECS; ++v) {   // past the end the slot holds stale bytes: skip them
            const int e = v * PL_THREADS + reader;
            if (first + e < n4) acc = sum_squares(slots[slot * PL_TILE_F4 + e], acc);
        }
        if (proxy_fence) fence_proxy_async_shared_cta();
        __syncthreads();                          // everyone has read the slot
        if (tid == 0 && j + S < mine) issue(j + S, slot);
    }
    block_partial(acc, in, n, partial);
#else
    __trap();   // cp.async.bulk and mbarrier transaction counts need compute capability 9.0 or newer
#endif
}

// ---------------------------------------------------------------------------- the proxy race, small

// Two small kernels in which the generic proxy and the async proxy touch the same 4 KiB tile of
// shared memory (32 x 32 floats), with fence.proxy.async (`proxy_fence` = 1) or without. Each
// generic access is a 32-way bank conflict (lane l touches word 32 l + k), so when the block passes
// its barrier a deep queue of them is still waiting to be served: the window in which an async-proxy
// access that comes after the barrier can overtake them. sm_90+.
#define RACE_WORDS 1024

// Generic reads, then a TMA refill (write after read). Round r's tile is copied from src + (r % 2)
// * RACE_WORDS, all 1.0 or all 2.0; each thread reads 32 words of it, then thread 0 refills the
// tile with the other pattern. A thread whose 32 reads do not sum to 32 x its round's value has read
// part of the next round's tile; bad counts them (thread-rounds). Launch: any block of whole warps.
extern "C" __global__ void proxy_refill_race(const float* __restrict__ src, unsigned* bad, int rounds, int proxy_fence) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ __align__(128) float tile[RACE_WORDS];
    __shared__ __align__(8) u64 full;
    const u32 bar = smem_u32(&full), base = smem_u32(tile);
    const int lane = threadIdx.x % 32, turn = (threadIdx.x / 32) % 32;
    auto refill = [&](int round) {
        mbar_expect_bytes(bar, RACE_WORDS * 4);
        bulk_load_g2s(base, src + (round & 1) * RACE_WORDS, RACE_WORDS * 4, bar);
    };
    if (threadIdx.x == 0) {
        mbar_init(bar, 1);
        mbar_init_fence();
    }
    __syncthreads();
    if (threadIdx.x == 0) refill(0);
    unsigned wrong = 0;
    for (int r = 0; r < rounds; ++r) {
        mbar_wait_clock_every_1024(bar, r & 1, PL_WAIT_NS);
        float got[32];
#pragma unroll
        for (int k = 0; k < 32; ++k)   // volatile asm: the reads are issued here, before the barrier
            asm volatile("ld.shared.f32 %0, [%1];" : "=f"(got[k]) : "r"(base + 4 * (lane * 32 + ((k + turn) & 31))) : "memory");
        if (proxy_fence) fence_proxy_async_shared_cta();
        __syncthreads();
        if (threadIdx.x == 0 && r + 1 < rounds) refill(r + 1);
        float sum = 0.f;
#pragma unroll
        for (int k = 0; k < 32; ++k) sum += got[k];
        wrong += sum != 32.f * (1 + (r & 1));
    }
    if (wrong) atomicAdd(bad, wrong);
#else
    __trap();   // cp.async.bulk and mbarrier transaction counts need compute capability 9.0 or newer
#endif
}

// Generic writes, then a TMA bulk store (read after write). Each round the block writes 3 r + 1 into
// every word of the tile, passes a barrier, and thread 0 stores the tile to out[block][r] with
// cp.async.bulk and waits until the TMA has read it. A word of out that is not 3 r + 1 is stale.
// Launch: any block of whole warps; out: gridDim.x x rounds x RACE_WORDS floats.
extern "C" __global__ void proxy_store_race(float* __restrict__ out, int rounds, int proxy_fence) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ __align__(128) float tile[RACE_WORDS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int r = 0; r < rounds; ++r) {
        for (int k = warp; k < 32; k += warps) tile[lane * 32 + k] = (float)(3 * r + 1);
        if (proxy_fence) fence_proxy_async_shared_cta();
        __syncthreads();
        if (threadIdx.x == 0) {
            bulk_store_s2g(out + ((size_t)blockIdx.x * rounds + r) * RACE_WORDS, smem_u32(tile), RACE_WORDS * 4);
            bulk_commit_group();
            bulk_wait_group_read<0>();   // the tile may be rewritten
        }
        __syncthreads();
    }
#else
    __trap();   // cp.async.bulk needs compute capability 9.0 or newer
#endif
}

// ---------------------------------------------------------------------------- warp specialization

// Launch: block ((1 + SP_CONSUMERS + PL_TRACE) * 32), persistent grid (one block per SM), dynamic
// shared memory PL_STAGES * 16384 bytes. Warp 0 lane 0 is the producer: it waits for a slot to be
// empty, then issues one 16 KiB bulk copy into it. Warps 1..4 consume: each waits for its slot to
// be full, copies its 32 floats to registers, arrives on the slot's empty barrier (every consumer
// thread; after the math instead when `release_after_math` is set: with one stage, the serial
// loop), and runs `work` dependent FMAs on each. partial: gridDim.x floats, the sum over the block of f(x) for every input x, where f is
// `work` steps of x = 0.999 x + 0.001. Traced (PL_TRACE=1): warp 5 observes each landing and also
// arrives on the empty barrier (so the producer cannot lap it); blocks below `traced_blocks`
// write, for their first SP_TRACE_TILES tiles, clock64 at issue, land, math start and math end
// into trace[block][tile][4], and header[block] = {smid, globaltimer and clock64 at the start,
// globaltimer and clock64 at the end}. Needs n a multiple of 4. sm_90+.
extern "C" __global__ void stream_specialized(const float* __restrict__ in, long long n, float* __restrict__ partial,
                                              int work, int release_after_math, u64* __restrict__ trace,
                                              u64* __restrict__ header, int traced_blocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int S = PL_STAGES;
    extern __shared__ __align__(128) float4 slots[];
    __shared__ __align__(8) u64 full[S], empty[S];
    __shared__ float warp_sums[SP_CONSUMERS];
    const long long n4 = n / 4, tiles = (n4 + SP_TILE_F4 - 1) / SP_TILE_F4, mine = my_tiles(tiles);
    const float4* in4 = reinterpret_cast<const float4*>(in);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const u32 base = smem_u32(slots), full0 = smem_u32(full), empty0 = smem_u32(empty);
    const bool traced = PL_TRACE && (int)blockIdx.x < traced_blocks;
    u64* my_trace = trace + (size_t)blockIdx.x * SP_TRACE_TILES * SP_EVENTS;
    auto mark = [&](long long j, int event) {
        if (traced && j < SP_TRACE_TILES) my_trace[j * SP_EVENTS + event] = clock64();
    };
    u64 gt0 = 0, clk0 = 0;
    if (threadIdx.x == 0) {
        if (traced) { gt0 = globaltimer_ns(); clk0 = clock64(); }
        for (int s = 0; s < S; ++s) {
            mbar_init(full0 + s * 8, 1);
            mbar_init(empty0 + s * 8, SP_CONSUMERS * 32 + PL_TRACE);
        }
        mbar_init_fence();
    }
    __syncthreads();
    float acc = 0.f;
    if (warp == 0) {
        if (lane == 0) {
            for (long long j = 0; j < mine; ++j) {
                const int slot = (int)(j % S);
                if (j >= S) mbar_wait_clock_every_1024(empty0 + slot * 8, (u32)(((j / S) - 1) & 1), PL_WAIT_NS);
                mark(j, 0);
                const long long first = (blockIdx.x + j * gridDim.x) * SP_TILE_F4;
                const u32 bytes = (u32)min((long long)SP_TILE_F4, n4 - first) * 16;
                mbar_expect_bytes(full0 + slot * 8, bytes);
                bulk_load_g2s(base + slot * SP_TILE_F4 * 16, in4 + first, bytes, full0 + slot * 8);
            }
        }
    } else if (warp <= SP_CONSUMERS) {
        const int c = (warp - 1) * 32 + lane;   // consumer thread 0..127
        for (long long j = 0; j < mine; ++j) {
            const int slot = (int)(j % S);
            mbar_wait_clock_every_1024(full0 + slot * 8, (u32)((j / S) & 1), PL_WAIT_NS);
            if (warp == 1 && lane == 0) mark(j, 2);
            const long long first = (blockIdx.x + j * gridDim.x) * SP_TILE_F4;
            float x[4 * SP_F4_PER_THREAD];
#pragma unroll
            for (int k = 0; k < SP_F4_PER_THREAD; ++k) {
                const int e = k * SP_CONSUMERS * 32 + c;
                float4 v = first + e < n4 ? slots[slot * SP_TILE_F4 + e] : make_float4(0.f, 0.f, 0.f, 0.f);
                x[4 * k] = v.x; x[4 * k + 1] = v.y; x[4 * k + 2] = v.z; x[4 * k + 3] = v.w;
            }
            fence_proxy_async_shared_cta();   // reads before the refill
            // This thread is done with the slot (every thread arrives: each orders its own reads
            // before the refill). Released after the math instead, the slot stays taken until then.
            if (!release_after_math) mbar_arrive(empty0 + slot * 8);
#pragma unroll 1
            for (int w = 0; w < work; ++w)
#pragma unroll
                for (int q = 0; q < 4 * SP_F4_PER_THREAD; ++q) x[q] = fmaf(x[q], 0.999f, 0.001f);
            if (release_after_math) mbar_arrive(empty0 + slot * 8);
            float sum = 0.f;
#pragma unroll
            for (int k = 0; k < SP_F4_PER_THREAD; ++k)   // padding past the end is zero, and f(0) is not
                if (first + k * SP_CONSUMERS * 32 + c < n4)
                    sum += (x[4 * k] + x[4 * k + 1]) + (x[4 * k + 2] + x[4 * k + 3]);
            acc += sum;
            __syncwarp();
            if (warp == 1 && lane == 0) mark(j, 3);
        }
    } else if (PL_TRACE && lane == 0) {   // the observer
        for (long long j = 0; j < mine; ++j) {
            const int slot = (int)(j % S);
            mbar_wait_clock_every_1024(full0 + slot * 8, (u32)((j / S) & 1), PL_WAIT_NS);
            mark(j, 1);
            mbar_arrive(empty0 + slot * 8);
        }
    }
    if (warp >= 1 && warp <= SP_CONSUMERS) {
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (lane == 0) warp_sums[warp - 1] = acc;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.f;
        for (int w = 0; w < SP_CONSUMERS; ++w) total += warp_sums[w];
        partial[blockIdx.x] = total;
        if (traced) {
            u32 smid;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
            u64* h = header + (size_t)blockIdx.x * 5;
            h[0] = smid; h[1] = gt0; h[2] = clk0; h[3] = globaltimer_ns(); h[4] = clock64();
        }
    }
#else
    __trap();   // cp.async.bulk and mbarrier transaction counts need compute capability 9.0 or newer
#endif
}
