// archs: sm_90a
// Notebook 10's kernels: the Hopper GEMM, one rung at a time, and the instruction ceilings it is
// measured against. wgmma and setmaxnreg exist only on sm_90a (the "a" is for architecture-
// specific features that later GPUs do not keep), so this family compiles for sm_90a alone.
//
// C[M,N] = A[M,K] · B[N,K]^T in bf16 with fp32 accumulation: A and B both K-major (each row a run of
// K contiguous bf16, the layout of torch.nn.Linear's input and weight), C row-major, rounded to bf16
// once. Both operands reach shared memory by the TMA in 64-column boxes (one 128-byte row of bf16
// per tile row) with the 128-byte swizzle, and wgmma reads them there through matrix descriptors.
// Tile parts outside the matrices arrive as zeros, so M, N and K need not be multiples of the tile;
// the TMA needs K % 8 == 0 (16-byte row strides) and the host refuses other K.
//
// The rungs (all: one output tile per block unless persistent; a warpgroup = 4 warps = 128 threads):
//   hgemm_1_tma_wgmma    one warpgroup, 128x128 tile, one shared slot: load, wait, multiply, repeat
//   hgemm_2_ring         the same with HG_RING_STAGES slots, refilled as they are freed (a __syncthreads)
//   hgemm_3_specialized  a producer warpgroup (one thread issues the TMA) and two consumer
//                        warpgroups (64 rows each); full and empty mbarriers per slot, no __syncthreads
//   hgemm_4_wide         a 128x256 tile (each consumer 64x256) and setmaxnreg: the producer gives
//                        registers back so the consumers can hold 128 accumulators each
//   hgemm_5_persistent   one block per SM loops over tiles in an L2-friendly grouped order; the
//                        producer loads the next tile while the consumers store the last
//   hgemm_6_cluster      clusters of two blocks on vertically adjacent tiles, which share their B
//                        tile: each block's TMA fetches half of it and multicasts it to both
//   hgemm_7_tma_store    the output tile leaves through shared memory: stmatrix writes it in the TMA's
//                        swizzled layout and one thread per consumer stores it with the TMA, which
//                        runs on while the consumers start the next tile
// Rung 7 also fuses notebook 08's epilogue (HG_EPILOGUE): GELU(A·Bᵀ + bias), + residual, in the
// registers before the tile leaves, the residual brought into the output stage by the TMA.
// Not a rung: hgemm_split_k and hgemm_split_k_finish, the dispatch's kernels for shapes with too few
// tiles to fill the SMs (rung 3's block over a slice of K; the slices summed by a second kernel).
//
// Every mbarrier wait gives up after ASYNC_WAIT_NS with a trap (async_copy.cuh): a wrong parity or
// byte count fails the launch instead of hanging it.

#include "common.cuh"       // bf16_raw, bf16_lo/hi, ldmatrix_x4, stmatrix_x4, cluster_rank
#include "async_copy.cuh"

#ifndef HG_RING_STAGES
#define HG_RING_STAGES 3      // rung 2's slots: 3 x 32 KiB leave room for two blocks per SM
#endif
#ifndef HG_STAGES
#define HG_STAGES 4           // rungs 3-5's slots (4 x 48 KiB at 128x256: one block per SM)
#endif
#ifndef HG_STORE_STAGES
#define HG_STORE_STAGES 3     // rung 7's slots: 3 x 48 KiB, and 64 KiB for the output tile on its way out
#endif
#ifndef HG_GROUP_M
#define HG_GROUP_M 8          // rung 5: tile rows per band of the grouped order (1: row by row)
#endif
#ifndef HG_SETMAXNREG
#define HG_SETMAXNREG 1       // rungs 4-5: move registers from the producer to the consumers
#endif
#ifndef HG_CONSUMER_REGS
#define HG_CONSUMER_REGS 232
#endif
#ifndef HG_PRODUCER_REGS
#define HG_PRODUCER_REGS 40
#endif
#ifndef HG_INFLIGHT
#define HG_INFLIGHT 0         // 1: a consumer keeps one k-block's wgmma group running while it issues the next
#endif
#ifndef HG_REMOTE_RELEASE_CLUSTER
#define HG_REMOTE_RELEASE_CLUSTER 0   // rungs 6-7: 0 frees the other block's slot with the default .release.cta,
                                      // 1 (the measured pitfall) with .release.cluster, a MEMBAR.ALL.GPU per slot
#endif
#ifndef HG_RELEASE_BEFORE_WAIT
#define HG_RELEASE_BEFORE_WAIT 0   // 1: the pitfall: free a slot before the wgmma reading it has finished
#endif
#ifndef HG_MIN_BLOCKS_NARROW
#define HG_MIN_BLOCKS_NARROW 1   // rung 3: blocks per SM its registers must allow (2: the spill pitfall)
#endif
#ifndef HG_MIN_BLOCKS_WIDE
#define HG_MIN_BLOCKS_WIDE 1     // rungs 4-5: the same (2 leaves 80 registers: ptxas refuses m64n256)
#endif
#ifndef HG_EPILOGUE
#define HG_EPILOGUE 0         // rung 7: 0 C = A·Bᵀ (the ladder); 1 GELU(A·Bᵀ + bias); 2 the same + residual
#endif
#ifndef HG_RESIDUAL_TMA
#define HG_RESIDUAL_TMA 1     // HG_EPILOGUE 2: 1 the TMA brings the residual tile into the output stage
#endif                        // while the K loop runs; 0 each thread loads its residual pairs itself
#ifndef HG_CEIL_N
#define HG_CEIL_N 256         // wgmma_ceiling: the N of its m64nNk16
#endif
#ifndef HG_CEIL_REGA
#define HG_CEIL_REGA 0        // wgmma_ceiling: 1 reads A from registers, 0 from shared memory
#endif

#include "hopper_ring.cuh"   // the ring, wgmma's pieces and the tile store, shared with 10's GEMM exercise
#include "gelu.cuh"

// Where tile t of a grid_m x grid_n grid of output tiles starts, visiting the tiles in bands of
// `group` tile rows, column by column within a band: blocks running at the same time then share
// A rows and B columns in L2. group = 1 is plain row-by-row order.
__device__ __forceinline__ void tile_origin(int t, int grid_m, int grid_n, int group, int bm, int bn,
                                            int& row0, int& col0) {
    const int band = t / (group * grid_n), first = band * group;
    const int rows = min(grid_m - first, group), in_band = t % (group * grid_n);
    row0 = (first + in_band % rows) * bm;
    col0 = (in_band / rows) * bn;
}

// The same for rung 6, whose slots are refilled by both blocks of the cluster: the consumers free the
// slot in their own block and in the other one.
__device__ __forceinline__ void release_in_cluster(u32 empty_bar, u32 other_cta) {
    if (!HG_ELECTED_ARRIVE || threadIdx.x % 128 == 0) {
        mbar_arrive(empty_bar);
        if (HG_REMOTE_RELEASE_CLUSTER) mbar_arrive_cluster(empty_bar, other_cta);
        else mbar_arrive_remote(empty_bar, other_cta);
    }
}

// consume_tile's `while_first_runs`: what a consumer does while its first k-block's wgmmas run
// (nothing, for all rungs but rung 7 with a fused residual).
struct Nothing {
    __device__ __forceinline__ void operator()() const {}
};

// One consumer warpgroup's K loop over one output tile: wait for each slot to fill, multiply its
// 64 rows of A by the slot's B, wait for the wgmmas, free the slot.
template <int BM, int BN, int S, typename Hook = Nothing>
__device__ __forceinline__ void consume_tile(const Slots<BM, BN, S>& sl, Ring& ring, float (&d)[BN / 2],
                                             u32 a_offset, int k_tiles, int other_cta = -1, Hook while_first_runs = Hook()) {
    auto free_slot = [&](int slot) {
        if (other_cta < 0) release(sl.empty(slot));
        else release_in_cluster(sl.empty(slot), (u32)other_cta);
    };
#if HG_INFLIGHT
    // One group stays in flight: after issuing k-block kt's wgmmas, wait until only they run, so
    // k-block kt - 1's are done and its slot can be freed while the tensor cores work on kt.
    int previous = -1;
    for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(sl.full(ring.slot), ring.phase);
        wgmma_fence();
        wgmma_slot<BN>(d, sl.a(ring.slot) + a_offset, sl.b(ring.slot), kt > 0);
        wgmma_commit();
        if (kt == 0) while_first_runs();
        wgmma_wait<1>();
        if (previous >= 0) free_slot(previous);
        previous = ring.slot;
        ring.advance(S);
    }
    wgmma_wait<0>();
    if (previous >= 0) free_slot(previous);
    accumulators_ready(d);
#else
    for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(sl.full(ring.slot), ring.phase);
        wgmma_fence();
        wgmma_slot<BN>(d, sl.a(ring.slot) + a_offset, sl.b(ring.slot), kt > 0);
        wgmma_commit();
        if (kt == 0) while_first_runs();
#if HG_RELEASE_BEFORE_WAIT
        free_slot(ring.slot);   // wrong: the wgmmas may still be reading the slot
        wgmma_wait<0>();
#else
        wgmma_wait<0>();
        free_slot(ring.slot);
#endif
        accumulators_ready(d);
        ring.advance(S);
    }
#endif
}

// The producer's K loop over one tile of a cluster pair (rungs 6-7): its own A rows, and half of the
// B rows multicast into the same slot of both blocks; each slot's full barrier counts all 48 KiB.
template <int BM, int BN, int S>
__device__ __forceinline__ void produce_pair_tile(const Slots<BM, BN, S>& sl, Ring& ring, const u64* maps, int k_tiles,
                                                  int row0, int col0, u32 rank) {
    for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(sl.empty(ring.slot), ring.phase ^ 1);
        mbar_expect_bytes(sl.full(ring.slot), sl.BYTES);   // all of it: A, and both halves of B
        tma_load_2d(sl.a(ring.slot), maps, kt * HG_BK, row0, sl.full(ring.slot));
        tma_load_2d_multicast(sl.b(ring.slot) + rank * (BN / 2) * 128, maps + 16, kt * HG_BK,
                              col0 + rank * (BN / 2), sl.full(ring.slot), 0x3);
        ring.advance(S);
    }
}

template <u32 REGS> __device__ __forceinline__ void registers_down() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(REGS));
}
template <u32 REGS> __device__ __forceinline__ void registers_up() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(REGS));
}

// ---------------------------------------------------------------------------- the rungs

// Rung 1. Launch: grid (ceil(M/128) * ceil(N/128)), block (128), dynamic shared memory 33,800 bytes
// (opt in above 48 KiB is not needed). maps: two CUtensorMaps in global memory, A {K, M} and B {K, N},
// boxes {64, 128}, bf16, 128-byte swizzle. C: M x N bf16, row-major.
extern "C" __global__ __launch_bounds__(128, 1) void hgemm_1_tma_wgmma(bf16_raw* __restrict__ C, int M, int N, int K,
                                                                       const u64* __restrict__ maps) {
    constexpr int BM = 128, BN = 128;
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 sA = align_1024(smem_u32(smem)), sB = sA + BM * 128, bar = sB + BN * 128;
    const int grid_n = (N + BN - 1) / BN;
    const int row0 = blockIdx.x / grid_n * BM, col0 = blockIdx.x % grid_n * BN;
    if (threadIdx.x == 0) {
        tensormap_acquire(maps);
        tensormap_acquire(maps + 16);
        mbar_init(bar, 1);
        mbar_init_fence();
    }
    __syncthreads();
    float top[BN / 2] = {}, bottom[BN / 2] = {};   // the warpgroup's rows 0-63 and 64-127
    const int k_tiles = (K + HG_BK - 1) / HG_BK;
    for (int kt = 0; kt < k_tiles; ++kt) {
        if (threadIdx.x == 0) {
            mbar_expect_bytes(bar, (BM + BN) * HG_BK * 2);
            tma_load_2d(sA, maps, kt * HG_BK, row0, bar);
            tma_load_2d(sB, maps + 16, kt * HG_BK, col0, bar);
        }
        mbar_wait(bar, kt & 1);
        wgmma_fence();
        wgmma_slot<BN>(top, sA, sB, true);
        wgmma_slot<BN>(bottom, sA + 64 * 128, sB, true);
        wgmma_commit();
        wgmma_wait<0>();
        accumulators_ready(top);
        accumulators_ready(bottom);
        __syncthreads();   // all four warps are done with the slot: it may be overwritten
    }
    store_tile<BN>(C, M, N, row0, col0, top);
    store_tile<BN>(C, M, N, row0 + 64, col0, bottom);
}

// Rung 2. Launch: as rung 1, dynamic shared memory 1,024 + HG_RING_STAGES * (32,768 + 16) bytes.
extern "C" __global__ __launch_bounds__(128, 1) void hgemm_2_ring(bf16_raw* __restrict__ C, int M, int N, int K,
                                                                  const u64* __restrict__ maps) {
    constexpr int BM = 128, BN = 128;
    extern __shared__ __align__(1024) unsigned char smem[];
    const Slots<BM, BN, HG_RING_STAGES> sl{align_1024(smem_u32(smem))};
    const int grid_n = (N + BN - 1) / BN;
    const int row0 = blockIdx.x / grid_n * BM, col0 = blockIdx.x % grid_n * BN;
    init_slots(sl, maps, 1);
    const int k_tiles = (K + HG_BK - 1) / HG_BK;
    if (threadIdx.x == 0)
        for (int kt = 0; kt < HG_RING_STAGES && kt < k_tiles; ++kt) sl.fill(kt, maps, kt, row0, col0);
    float top[BN / 2] = {}, bottom[BN / 2] = {};
    Ring ring;
    for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(sl.full(ring.slot), ring.phase);
        wgmma_fence();
        wgmma_slot<BN>(top, sl.a(ring.slot), sl.b(ring.slot), true);
        wgmma_slot<BN>(bottom, sl.a(ring.slot) + 64 * 128, sl.b(ring.slot), true);
        wgmma_commit();
        wgmma_wait<0>();
        accumulators_ready(top);
        accumulators_ready(bottom);
        __syncthreads();   // the slot is free: refill it with the tile HG_RING_STAGES ahead
        if (threadIdx.x == 0 && kt + HG_RING_STAGES < k_tiles) sl.fill(ring.slot, maps, kt + HG_RING_STAGES, row0, col0);
        ring.advance(HG_RING_STAGES);
    }
    store_tile<BN>(C, M, N, row0, col0, top);
    store_tile<BN>(C, M, N, row0 + 64, col0, bottom);
}

// Rung 3. Launch: grid as rung 1, block (384), dynamic shared memory 1,024 + HG_STAGES * (32,768 + 16).
extern "C" __global__ __launch_bounds__(384, HG_MIN_BLOCKS_NARROW) void hgemm_3_specialized(bf16_raw* __restrict__ C, int M, int N,
                                                                         int K, const u64* __restrict__ maps) {
    constexpr int BM = 128, BN = 128;
    extern __shared__ __align__(1024) unsigned char smem[];
    const Slots<BM, BN, HG_STAGES> sl{align_1024(smem_u32(smem))};
    const int grid_n = (N + BN - 1) / BN;
    const int row0 = blockIdx.x / grid_n * BM, col0 = blockIdx.x % grid_n * BN;
    init_slots(sl, maps, HG_EMPTY_ARRIVALS(2));
    const int k_tiles = (K + HG_BK - 1) / HG_BK, wg = threadIdx.x / 128;
    Ring ring;
    if (wg == 0) {   // the producer: one thread issues every copy
        if (threadIdx.x == 0) produce_tile(sl, ring, maps, k_tiles, row0, col0);
    } else {         // consumer wg - 1 owns rows 64 (wg - 1) ... of the tile
        float d[BN / 2];   // no zeroing: each tile's first wgmma overwrites them
        consume_tile(sl, ring, d, (wg - 1) * 64 * 128, k_tiles);
        store_tile<BN>(C, M, N, row0 + (wg - 1) * 64, col0, d);
    }
}

// Rung 4. Launch: grid (ceil(M/128) * ceil(N/256)), block (384), dynamic shared memory
// 1,024 + HG_STAGES * (49,152 + 16) bytes (197,696 at 4 slots).
extern "C" __global__ __launch_bounds__(384, HG_MIN_BLOCKS_WIDE) void hgemm_4_wide(bf16_raw* __restrict__ C, int M, int N, int K,
                                                                  const u64* __restrict__ maps) {
    constexpr int BM = 128, BN = 256;
    extern __shared__ __align__(1024) unsigned char smem[];
    const Slots<BM, BN, HG_STAGES> sl{align_1024(smem_u32(smem))};
    const int grid_n = (N + BN - 1) / BN;
    const int row0 = blockIdx.x / grid_n * BM, col0 = blockIdx.x % grid_n * BN;
    init_slots(sl, maps, HG_EMPTY_ARRIVALS(2));
    const int k_tiles = (K + HG_BK - 1) / HG_BK, wg = threadIdx.x / 128;
    Ring ring;
    if (wg == 0) {
#if HG_SETMAXNREG
        registers_down<HG_PRODUCER_REGS>();
#endif
        if (threadIdx.x == 0) produce_tile(sl, ring, maps, k_tiles, row0, col0);
    } else {
#if HG_SETMAXNREG
        registers_up<HG_CONSUMER_REGS>();
#endif
        float d[BN / 2];   // no zeroing: each tile's first wgmma overwrites them
        consume_tile(sl, ring, d, (wg - 1) * 64 * 128, k_tiles);
        store_tile<BN>(C, M, N, row0 + (wg - 1) * 64, col0, d);
    }
}

// Rung 5. Launch: grid (min(SMs, tiles)), block (384), dynamic shared memory as rung 4. Block b
// computes tiles b, b + gridDim.x, ... of the grouped order; the ring runs on from tile to tile.
extern "C" __global__ __launch_bounds__(384, HG_MIN_BLOCKS_WIDE) void hgemm_5_persistent(bf16_raw* __restrict__ C, int M, int N,
                                                                        int K, const u64* __restrict__ maps) {
    constexpr int BM = 128, BN = 256;
    extern __shared__ __align__(1024) unsigned char smem[];
    const Slots<BM, BN, HG_STAGES> sl{align_1024(smem_u32(smem))};
    const int grid_m = (M + BM - 1) / BM, grid_n = (N + BN - 1) / BN, tiles = grid_m * grid_n;
    init_slots(sl, maps, HG_EMPTY_ARRIVALS(2));
    const int k_tiles = (K + HG_BK - 1) / HG_BK, wg = threadIdx.x / 128;
    Ring ring;
    int row0, col0;
    if (wg == 0) {
#if HG_SETMAXNREG
        registers_down<HG_PRODUCER_REGS>();
#endif
        if (threadIdx.x == 0)
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                tile_origin(t, grid_m, grid_n, HG_GROUP_M, BM, BN, row0, col0);
                produce_tile(sl, ring, maps, k_tiles, row0, col0);
            }
    } else {
#if HG_SETMAXNREG
        registers_up<HG_CONSUMER_REGS>();
#endif
        float d[BN / 2];
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            tile_origin(t, grid_m, grid_n, HG_GROUP_M, BM, BN, row0, col0);
            consume_tile(sl, ring, d, (wg - 1) * 64 * 128, k_tiles);
            store_tile<BN>(C, M, N, row0 + (wg - 1) * 64, col0, d);
        }
    }
}

// Every thread of both blocks: nothing after it starts before everything before it, in either block.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// Rungs 6-7's schedule: cluster c takes tile pairs c, c + clusters, ... of the grouped order; a pair
// is two vertically adjacent BM x BN tiles with the same B rows, and block `rank` of the cluster
// computes the upper (0) or the lower (1) one.
template <int BM, int BN>
struct PairGrid {
    int grid_n, pair_rows, pairs, cluster, clusters;
    u32 rank;
    __device__ __forceinline__ PairGrid(int M, int N)
        : grid_n((N + BN - 1) / BN), pair_rows(((M + BM - 1) / BM + 1) / 2), pairs(pair_rows * grid_n),
          cluster(blockIdx.x / 2), clusters(gridDim.x / 2), rank(cluster_rank()) {}
    __device__ __forceinline__ void origin(int p, int& row0, int& col0) const {
        tile_origin(p, pair_rows, grid_n, (HG_GROUP_M + 1) / 2, 2 * BM, BN, row0, col0);
        row0 += rank * BM;
    }
};

// The producer of a clustered rung (6-7): its cluster's tile pairs in turn, each one's K loop.
template <int BM, int BN, int S>
__device__ __forceinline__ void produce_pairs(const Slots<BM, BN, S>& sl, Ring& ring, const u64* maps, int k_tiles,
                                              const PairGrid<BM, BN>& pg) {
    int row0, col0;
    for (int p = pg.cluster; p < pg.pairs; p += pg.clusters) {
        pg.origin(p, row0, col0);
        produce_pair_tile(sl, ring, maps, k_tiles, row0, col0, pg.rank);
    }
}

// Rung 6. Launch: grid (2 * min(SMs / 2, tile pairs)), block (384), clusters of 2 (fixed here by
// __cluster_dims__), dynamic shared memory as rung 4. maps: A as before; B with boxes {64, 128}, half
// a B tile. Cluster c takes tile pairs c, c + gridDim.x / 2, ...: a pair is two vertically adjacent
// 128x256 tiles, one per block, with the same 256 B rows. Each block loads its own A slice and half
// of the B slice, multicast into the same slot of both blocks, so a slot is full when 48 KiB have
// landed from two TMAs, and free when the consumers of both blocks have released it.
extern "C" __global__ __launch_bounds__(384, HG_MIN_BLOCKS_WIDE) void __cluster_dims__(2, 1, 1)
hgemm_6_cluster(bf16_raw* __restrict__ C, int M, int N, int K, const u64* __restrict__ maps) {
    constexpr int BM = 128, BN = 256;
    extern __shared__ __align__(1024) unsigned char smem[];
    const Slots<BM, BN, HG_STAGES> sl{align_1024(smem_u32(smem))};
    const PairGrid<BM, BN> pg(M, N);
    init_slots(sl, maps, 2 * HG_EMPTY_ARRIVALS(2));
    cluster_sync();   // both blocks' barriers exist before either multicasts into, or arrives on, the other's
    const int k_tiles = (K + HG_BK - 1) / HG_BK, wg = threadIdx.x / 128;
    Ring ring;
    int row0, col0;
    if (wg == 0) {
#if HG_SETMAXNREG
        registers_down<HG_PRODUCER_REGS>();
#endif
        if (threadIdx.x == 0) produce_pairs(sl, ring, maps, k_tiles, pg);
    } else {
#if HG_SETMAXNREG
        registers_up<HG_CONSUMER_REGS>();
#endif
        float d[BN / 2];
        for (int p = pg.cluster; p < pg.pairs; p += pg.clusters) {
            pg.origin(p, row0, col0);   // past M for the second block of a last, half-empty pair: its stores are masked
            consume_tile(sl, ring, d, (wg - 1) * 64 * 128, k_tiles, (int)(pg.rank ^ 1));
            store_tile<BN>(C, M, N, row0 + (wg - 1) * 64, col0, d);
        }
    }
    cluster_sync();   // neither block exits while the other may still write into its slots or barriers
}

// The 128 threads of consumer warpgroup `consumer` (0 or 1) wait for each other, no one else.
__device__ __forceinline__ void consumer_sync(int consumer) {
    asm volatile("bar.sync %0, 128;" :: "r"(consumer + 1) : "memory");
}
#ifndef HG_C_BOX
#define HG_C_BOX 64                                    // rung 7's output boxes: 64 x 64 bf16, 128-byte rows
#endif
#if HG_C_BOX != 64
#error "HG_C_BOX: the output stage's swizzle is written for 64 x 64 boxes (128-byte rows)"
#endif
constexpr u32 HG_C_BOX_BYTES = HG_C_BOX * HG_C_BOX * 2;


// What rung 7's fused epilogue (HG_EPILOGUE) reads, and where a consumer's 64 x BN tile starts.
struct EpilogueArgs {
    const bf16_raw* __restrict__ bias;       // N values (HG_EPILOGUE 1-2)
    const bf16_raw* __restrict__ residual;   // M x N (HG_EPILOGUE 2)
    int M, N, row0, col0;
};

// Rung 7's epilogue on a consumer thread's accumulators of column groups j and j + 1 (m64nN layout:
// value i at row row0 + 16 (warp) + lane / 4 + 8 ((i / 2) % 2), column col0 + 8 (j + i / 4) +
// 2 (lane % 4) + i % 2): v = GELU(d + bias[col]) for HG_EPILOGUE 1-2 (the bias halved for
// gelu_of_half), then + residual[row, col] loaded here where `global_residual` (HG_EPILOGUE 2 without
// the TMA), 4 bytes a pair. Rows past M and columns past N read nothing: their outputs are never stored.
__device__ __forceinline__ void epilogue_8(float (&v)[8], const float (&d)[8], const EpilogueArgs& e, int j,
                                           bool global_residual) {
    const int t = threadIdx.x % 128, lane = t % 32;
    const int r0 = e.row0 + (t / 32) * 16 + lane / 4;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
        // c is even and N % 8 == 0 (the host's rule for a fused epilogue): both columns of a pair are
        // inside or neither, and a pair is one aligned 4-byte load.
        const int c = e.col0 + 8 * (j + g) + 2 * (lane % 4);
        const bool inside = c < e.N;
        float b0 = 0.f, b1 = 0.f;
        if (HG_EPILOGUE >= 1) {
            const u32 pair = inside ? __ldg(reinterpret_cast<const unsigned int*>(e.bias + c)) : 0u;
            b0 = 0.5f * bf16_lo(pair), b1 = 0.5f * bf16_hi(pair);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int i = 4 * g + 2 * h, r = r0 + 8 * h;
            v[i] = HG_EPILOGUE >= 1 ? gelu_of_half(fmaf(d[i], 0.5f, b0)) : d[i];
            v[i + 1] = HG_EPILOGUE >= 1 ? gelu_of_half(fmaf(d[i + 1], 0.5f, b1)) : d[i + 1];
            if (HG_EPILOGUE == 2 && global_residual && inside && r < e.M) {
                const u32 pair = __ldg(reinterpret_cast<const unsigned int*>(e.residual + (size_t)r * e.N + c));
                v[i] += bf16_lo(pair), v[i + 1] += bf16_hi(pair);
            }
        }
    }
}

// A warpgroup's 64 x BN accumulators, through HG_EPILOGUE and rounded to bf16, into `stage` as BN / 64
// boxes of 64 x 64, each in the TMA's 128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)):
// the eight rows one stmatrix phase writes then fall in eight different bank groups. The epilogue
// runs on eight accumulators at a time, just before they are written, so the others stay as they are
// and each one's register is free once written (the 128 accumulators leave no room for a copy).
// RESIDUAL: the stage already holds the residual tile, as the TMA brought it; each value is read back
// with ldmatrix from where its output goes, added, and overwritten (one warp's rows, in program order).
template <int BN, bool RESIDUAL = false>
__device__ __forceinline__ void stage_tile(u32 stage, const float (&d)[BN / 2], const EpilogueArgs& e = EpilogueArgs()) {
    const int t = threadIdx.x % 128, lane = t % 32, q = lane / 8;
    const int row = (t / 32) * 16 + (q % 2) * 8 + lane % 8;
#pragma unroll
    for (int j = 0; j < BN / 8; j += 2) {
        const int col = 8 * (j + q / 2), chunk = (col % HG_C_BOX) / 8;
        const u32 addr = stage + (col / HG_C_BOX) * HG_C_BOX_BYTES + row * 128 + ((chunk ^ (row % 8)) << 4);
        float v[8];
        epilogue_8(v, *reinterpret_cast<const float(*)[8]>(&d[4 * j]), e, j, !RESIDUAL);
        if (RESIDUAL) {
            u32 r[4];
            ldmatrix_x4(addr, r[0], r[1], r[2], r[3]);
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] += i % 2 ? bf16_hi(r[i / 2]) : bf16_lo(r[i / 2]);
        }
        stmatrix_x4(addr, pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]),
                    pack_bf16x2(v[6], v[7]));
    }
}

// Rung 7's epilogue for one consumer warpgroup: wait until the TMA has read the last tile out of the
// stage (RESIDUAL: until this tile's residual has arrived in it, which load_residual asked for only
// after that read), write this one into it, make the writes visible to the TMA (the async proxy),
// and let one thread store the boxes. The stores run on while the warpgroup starts its next tile.
template <int BN, bool RESIDUAL = false>
__device__ __forceinline__ void store_tile_tma(const u64* c_map, u32 stage, int consumer, int M, int row0, int col0,
                                               const float (&d)[BN / 2], const EpilogueArgs& e = EpilogueArgs(),
                                               u32 residual_bar = 0, u32 parity = 0) {
    const bool issuer = threadIdx.x % 128 == 0;
    if (RESIDUAL) {
        mbar_wait(residual_bar, parity);
    } else {
        if (issuer) bulk_wait_group_read<0>();
        consumer_sync(consumer);
    }
    stage_tile<BN, RESIDUAL>(stage, d, e);
    fence_proxy_async_shared_cta();
    consumer_sync(consumer);
    if (issuer && row0 < M) {
#pragma unroll
        for (int box = 0; box < BN / HG_C_BOX; ++box)
            tma_store_2d(c_map, stage + box * HG_C_BOX_BYTES, col0 + box * HG_C_BOX, row0);
        bulk_commit_group();
    }
}

// HG_EPILOGUE 2 by the TMA, while a tile's first k-block is multiplied: one thread waits until the TMA
// has read the last tile's output out of the stage, then asks it for this tile's 64 x BN residual,
// into the same boxes and swizzle, counted on `bar`. It lands while the K loop runs. (At the start of
// the tile, before any wgmma, the wait held up the whole warpgroup's first one.)
template <int BN>
__device__ __forceinline__ void load_residual(const u64* r_map, u32 stage, u32 bar, int row0, int col0) {
    if (threadIdx.x % 128 != 0) return;
    bulk_wait_group_read<0>();
    mbar_expect_bytes(bar, 64 * BN * 2);
#pragma unroll
    for (int box = 0; box < BN / HG_C_BOX; ++box)
        tma_load_2d(stage + box * HG_C_BOX_BYTES, r_map, col0 + box * HG_C_BOX, row0, bar);
}

// HG_EPILOGUE 1-2, at the start of a tile: lanes 0..BN/64-1 of each warp ask for the tile's bias slice
// (BN bf16, one 128-byte line per lane) to be brought into L1, so that the epilogue's loads of it,
// long after, hit there instead of waiting on L2. (The K loop's TMA copies do not pass through L1.)
template <int BN>
__device__ __forceinline__ void prefetch_bias(const bf16_raw* __restrict__ bias, int N, int col0) {
    const int lane = threadIdx.x % 32, c = col0 + 64 * lane;
    if (lane < BN / 64 && c < N) asm volatile("prefetch.global.L1 [%0];" :: "l"(bias + c));
}

// Rung 7. Launch: as rung 6, dynamic shared memory 1,024 + 65,536 + HG_STORE_STAGES * (49,152 + 16)
// bytes (+ 16 for HG_EPILOGUE 2's residual barriers); maps: A and B as rung 6, then C {N, M} in 64 x 64
// boxes with the 128-byte swizzle (then, for HG_EPILOGUE 2, the residual's, the same). Each consumer's
// 64 x 256 output leaves through its 32 KiB of stage in front of the slots. Where N % 8 != 0 the TMA
// cannot address C's rows (16-byte strides): the maps are unused and the stores are rung 6's.
// bias (N values) and residual (M x N) are read only by the HG_EPILOGUE they belong to.
extern "C" __global__ __launch_bounds__(384, HG_MIN_BLOCKS_WIDE) void __cluster_dims__(2, 1, 1)
hgemm_7_tma_store(bf16_raw* __restrict__ C, int M, int N, int K, const u64* __restrict__ maps,
                  const bf16_raw* __restrict__ bias, const bf16_raw* __restrict__ residual) {
    constexpr int BM = 128, BN = 256;
    constexpr bool STAGED_RESIDUAL = HG_EPILOGUE == 2 && HG_RESIDUAL_TMA;
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 stages_base = align_1024(smem_u32(smem));
    const Slots<BM, BN, HG_STORE_STAGES> sl{stages_base + BM * BN * 2};
    const u32 residual_bars = sl.full(0) + 16 * HG_STORE_STAGES;   // after the slots' barriers, one per consumer
    const PairGrid<BM, BN> pg(M, N);
    if (STAGED_RESIDUAL && threadIdx.x == 0) mbar_init(residual_bars, 1), mbar_init(residual_bars + 8, 1);
    init_slots(sl, maps, 2 * HG_EMPTY_ARRIVALS(2));
    cluster_sync();   // both blocks' barriers exist before either multicasts into, or arrives on, the other's
    const int k_tiles = (K + HG_BK - 1) / HG_BK, wg = threadIdx.x / 128;
    Ring ring;
    int row0, col0;
    if (wg == 0) {
#if HG_SETMAXNREG
        registers_down<HG_PRODUCER_REGS>();
#endif
        if (threadIdx.x == 0) produce_pairs(sl, ring, maps, k_tiles, pg);
    } else {
#if HG_SETMAXNREG
        registers_up<HG_CONSUMER_REGS>();
#endif
        const int consumer = wg - 1;
        const bool tma_store = N % 8 == 0;
        const u32 stage = stages_base + consumer * (BM / 2) * BN * 2, residual_bar = residual_bars + 8 * consumer;
        if (tma_store && threadIdx.x % 128 == 0) {
            tensormap_acquire(maps + 32);
            if (STAGED_RESIDUAL) tensormap_acquire(maps + 48);
        }
        float d[BN / 2];
        u32 tiles = 0;
        for (int p = pg.cluster; p < pg.pairs; p += pg.clusters, ++tiles) {
            pg.origin(p, row0, col0);
            if (HG_EPILOGUE >= 1) prefetch_bias<BN>(bias, N, col0);
            consume_tile(sl, ring, d, consumer * 64 * 128, k_tiles, (int)(pg.rank ^ 1), [&] {
                if (STAGED_RESIDUAL && tma_store) load_residual<BN>(maps + 48, stage, residual_bar, row0 + consumer * 64, col0);
            });
            const EpilogueArgs e{bias, residual, M, N, row0 + consumer * 64, col0};
            if (tma_store) {
                store_tile_tma<BN, STAGED_RESIDUAL>(maps + 32, stage, consumer, M, row0 + consumer * 64, col0, d, e,
                                                    residual_bar, tiles & 1);
            } else {
                if (HG_EPILOGUE >= 1) __trap();   // the host refuses a fused epilogue where N % 8 != 0
                store_tile<BN>(C, M, N, row0 + consumer * 64, col0, d);
            }
        }
        if (tma_store && threadIdx.x % 128 == 0) bulk_wait_group_read<0>();   // the stage outlives its last read
    }
    cluster_sync();   // neither block exits while the other may still write into its slots or barriers
}

// ---------------------------------------------------------------------------- split-K, for the dispatch

// Shapes with too few output tiles to fill the SMs (thin M or N, small products): rung 3's warp-
// specialized 128x128 block over K slices [y kt / Y, (y + 1) kt / Y) of blockIdx.y = y of gridDim.y = Y,
// writing its fp32 partial product into slice y of the workspace (Y x M x N floats);
// hgemm_split_k_finish sums the slices and rounds to bf16. Launch: grid (ceil(M/128) * ceil(N/128),
// splits), block (384), shared memory as rung 3; splits <= ceil(K / 64), so that every slice has at
// least one K step (an empty one would write accumulators no wgmma has set; the host refuses it).
extern "C" __global__ __launch_bounds__(384, 1) void hgemm_split_k(float* __restrict__ partials, int M, int N, int K,
                                                                   const u64* __restrict__ maps) {
    constexpr int BM = 128, BN = 128;
    extern __shared__ __align__(1024) unsigned char smem[];
    const Slots<BM, BN, HG_STAGES> sl{align_1024(smem_u32(smem))};
    const int grid_n = (N + BN - 1) / BN;
    const int row0 = blockIdx.x / grid_n * BM, col0 = blockIdx.x % grid_n * BN;
    init_slots(sl, maps, HG_EMPTY_ARRIVALS(2));
    const int k_tiles = (K + HG_BK - 1) / HG_BK, wg = threadIdx.x / 128;
    const int first = blockIdx.y * k_tiles / gridDim.y, last = (blockIdx.y + 1) * k_tiles / gridDim.y;
    Ring ring;
    if (wg == 0) {
        if (threadIdx.x == 0) produce_tile(sl, ring, maps, last - first, row0, col0, first);
    } else {
        float d[BN / 2];
        consume_tile(sl, ring, d, (wg - 1) * 64 * 128, last - first);
        store_tile<BN>(partials + (size_t)blockIdx.y * M * N, M, N, row0 + (wg - 1) * 64, col0, d);
    }
}

// C = the sum of the splits' slices of the workspace (count = M x N values each), rounded to bf16.
extern "C" __global__ void hgemm_split_k_finish(bf16_raw* __restrict__ C, const float* __restrict__ partials,
                                                long long count, int splits) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; 2 * i < count; i += (long long)gridDim.x * blockDim.x) {
        float lo = 0.f, hi = 0.f;
        const bool pair = 2 * i + 1 < count;
        for (int s = 0; s < splits; ++s) {
            const float* p = partials + s * count + 2 * i;
            lo += p[0];
            if (pair) hi += p[1];
        }
        const u32 v = pack_bf16x2(lo, hi);
        if (pair && count % 2 == 0) reinterpret_cast<u32*>(C)[i] = v;
        else {
            C[2 * i] = (bf16_raw)(v & 0xffff);
            if (pair) C[2 * i + 1] = (bf16_raw)(v >> 16);
        }
    }
}

// ---------------------------------------------------------------------------- instruction ceilings

// The ceilings' operands: along K the values repeat every 8 (the 32-bit word at position w of a row
// holds the pair w % 4), so the swizzle, which moves whole 16-byte chunks, leaves them in place, and
// every row of A and of B is the same. Each k16 step then adds 2 * (1*2 + 2*1 - 1*1 - 3*3 - 2*1 - 2*2
// + 3*1 + 1*1) = -16 to every output: the host checks the sums exactly. Varied values, not zeros,
// because the tensor cores draw less power (and may clock higher) on zeros.
__device__ __forceinline__ u32 ceiling_a_pair(int w) {
    const u32 pairs[4] = {0x40003f80u, 0x4040bf80u, 0xc0004000u, 0x3f804040u};   // (1,2) (-1,3) (2,-2) (3,1)
    return pairs[w & 3];
}
__device__ __forceinline__ u32 ceiling_b_pair(int w) {
    const u32 pairs[4] = {0x3f804000u, 0xc0403f80u, 0x4000bf80u, 0x3f803f80u};   // (2,1) (1,-3) (-1,2) (1,1)
    return pairs[w & 3];
}

// wgmma alone: every warpgroup of every block issues m64nHG_CEIL_Nk16 back to back on one shared
// tile (A from shared memory, or from registers with HG_CEIL_REGA), one group of four in flight
// while the next is issued. No global memory is read. Each wgmma is 2 * 64 * HG_CEIL_N * 16 FLOP.
// Launch: grid (any; one block per SM is the intent), block (128 per warpgroup), dynamic shared
// memory 1,024 + (64 + HG_CEIL_N) * 128 bytes. out: one float per thread, the sum of its
// accumulators: -64 * iters * HG_CEIL_N / 2.
extern "C" __global__ __launch_bounds__(384, 1) void wgmma_ceiling(float* __restrict__ out, int iters) {
    constexpr int N = HG_CEIL_N;
    extern __shared__ __align__(1024) unsigned char smem[];
    const u32 sA = align_1024(smem_u32(smem)), sB = sA + 64 * 128;
    u32* words = reinterpret_cast<u32*>(smem + (sA - smem_u32(smem)));
    for (int i = threadIdx.x; i < (64 + N) * 32; i += blockDim.x)
        words[i] = i < 64 * 32 ? ceiling_a_pair(i) : ceiling_b_pair(i);
    fence_proxy_async_shared_cta();   // the stores above, visible to wgmma's reads
    __syncthreads();
    float d[N / 2] = {};
    // A from registers (the m64k16 fragment): lane l's four registers all hold k pair l % 4.
    const u32 pa = ceiling_a_pair(threadIdx.x % 4), a[4] = {pa, pa, pa, pa};
    for (int it = 0; it < iters; ++it) {
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            if (HG_CEIL_REGA) wgmma_regs<N>(d, a, smem_desc(sB + kk * 32), 1);
            else wgmma_smem<N>(d, smem_desc(sA + kk * 32), smem_desc(sB + kk * 32), 1);
        }
        wgmma_commit();
        wgmma_wait<1>();
    }
    wgmma_wait<0>();
    accumulators_ready(d);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) sum += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// mma.sync alone (notebook 06's instruction): each warp runs eight independent m16n8k16 chains on
// operands held in registers (the same values as wgmma_ceiling's). Each mma is 2 * 16 * 8 * 16 =
// 4,096 FLOP. Launch: any grid and block (whole warps). out: one float per thread, -512 * iters.
extern "C" __global__ void mma_sync_ceiling(float* __restrict__ out, int iters) {
    const u32 pa = ceiling_a_pair(threadIdx.x % 4), pb = ceiling_b_pair(threadIdx.x % 4);
    float acc[8][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                         "{%0,%1,%2,%3}, {%4,%4,%4,%4}, {%5,%5}, {%0,%1,%2,%3};"
                         : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                         : "r"(pa), "r"(pb));
    }
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
