#define ASYNC_WAIT_NS 500000000ull   // a barrier wait that lasts 0.5 s traps instead of hanging
#include "hopper_ring.cuh"           // Slots, Ring, init_slots, produce_tile, wgmma_slot, wgmma_fence, wgmma_commit,
                                     // wgmma_wait<N>, accumulators_ready, release, store_tile; mbar_wait
#define STAGES 4
#define BM 128
#define BN 128

// One consumer warpgroup's K loop: its 64 rows of the block's tile (a_offset into each slot's A) times
// the slot's 128 B rows, one slot of 64 along K at a time, the accumulators in d.
__device__ __forceinline__ void consume(const Slots<BM, BN, STAGES>& sl, Ring& ring, float (&d)[BN / 2],
                                        u32 a_offset, int k_tiles) {
    for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(sl.full(ring.slot), ring.phase);   // the TMA's bytes for this k-tile have landed
        wgmma_fence();                                 // d was last written by other instructions
        wgmma_slot<BN>(d, sl.a(ring.slot) + a_offset, sl.b(ring.slot), false);
        wgmma_commit();
        wgmma_wait<0>();                               // the tensor cores are done reading the slot
        accumulators_ready(d);
        release(sl.empty(ring.slot));                  // one thread per warpgroup arrives on empty
        ring.advance(STAGES);                          // after the last slot, the first, the phase flipped
    }
}

// C[M,N] = A[M,K]·B[N,K]ᵀ, bf16 in, fp32 accumulation, bf16 out. Launch: grid ceil(M/128)·ceil(N/128),
// block 384, dynamic shared memory 1,024 + STAGES · (32,768 + 16) bytes; maps: A's and B's TMA descriptors.
extern "C" __global__ __launch_bounds__(384, 1) void gemm_ring(bf16_raw* __restrict__ C, int M, int N, int K,
                                                               const u64* __restrict__ maps) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const Slots<BM, BN, STAGES> sl{align_1024(smem_u32(smem))};
    const int grid_n = (N + BN - 1) / BN;
    const int row0 = blockIdx.x / grid_n * BM, col0 = blockIdx.x % grid_n * BN;
    init_slots(sl, maps, 2);   // empty[s] completes when both consumer warpgroups have arrived
    const int k_tiles = (K + HG_BK - 1) / HG_BK, wg = threadIdx.x / 128;
    Ring ring;
    if (wg == 0) {             // the producer warpgroup: one thread issues every TMA copy
        if (threadIdx.x == 0) produce_tile(sl, ring, maps, k_tiles, row0, col0);
    } else {                   // consumer wg - 1: rows 64 (wg - 1) ... 64 (wg - 1) + 63 of the tile
        float d[BN / 2];
        consume(sl, ring, d, (wg - 1) * 64 * 128, k_tiles);
        store_tile<BN>(C, M, N, row0 + (wg - 1) * 64, col0, d);
    }
}
