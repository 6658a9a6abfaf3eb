#define ASYNC_WAIT_NS 500000000ull   // a barrier wait that lasts 0.5 s traps instead of hanging
#include "async_copy.cuh"            // smem_u32, mbar_init, mbar_init_fence, mbar_arrive, mbar_expect_bytes, mbar_wait
#define STAGES 4
#define CONSUMERS 128                // warps 1-4 sum; lane 0 of warp 0 is the producer
#define TILE4 512                    // float4s per tile (8 KiB): four per consumer thread

// One TMA bulk copy, global -> shared; the barrier counts its bytes as they land.
__device__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
__device__ float sum_squares4(float4 v) { return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }

// out[0] += the sum of squares of in[0 .. n), n a multiple of 4. Launch: one block of 160 threads per SM.
extern "C" __global__ void sum_squares(float* out, const float* in, long long n) {
    __shared__ __align__(128) float4 slot[STAGES][TILE4];
    __shared__ __align__(8) u64 full[STAGES], empty[STAGES];
    const long long n4 = n / 4, tiles = (n4 + TILE4 - 1) / TILE4;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) { mbar_init(smem_u32(&full[s]), 1); mbar_init(smem_u32(&empty[s]), CONSUMERS); }
        mbar_init_fence();
    }
    __syncthreads();
    float acc = 0.0f;
    if (threadIdx.x == 0) {                               // the producer
        for (long long t = blockIdx.x, j = 0; t < tiles; t += gridDim.x, ++j) {
            const int s = (int)(j % STAGES);
            mbar_wait(smem_u32(&empty[s]), (u32)((j / STAGES) & 1) ^ 1u);   // its previous use is read (none yet: at once)
            const u32 bytes = (u32)min((long long)TILE4, n4 - t * TILE4) * 16;             // the last tile is short
            mbar_expect_bytes(smem_u32(&full[s]), bytes);
            bulk_load(smem_u32(slot[s]), in + t * TILE4 * 4, bytes, smem_u32(&full[s]));
        }
    } else if (threadIdx.x >= 32) {                       // the consumers
        const int c = threadIdx.x - 32;
        for (long long t = blockIdx.x, j = 0; t < tiles; t += gridDim.x, ++j) {
            const int s = (int)(j % STAGES);
            mbar_wait(smem_u32(&full[s]), (u32)((j / STAGES) & 1));   // use j / STAGES of slot s has landed
            float4 v[TILE4 / CONSUMERS];                 // the slot's four float4s of this thread, read first
            for (int k = 0; k < TILE4 / CONSUMERS; ++k) {
                const int e = k * CONSUMERS + c;
                v[k] = t * TILE4 + e < n4 ? slot[s][e] : make_float4(0.f, 0.f, 0.f, 0.f);
            }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");   // the reads are done: order them
            for (int k = 0; k < TILE4 / CONSUMERS; ++k) acc += sum_squares4(v[k]);   // then the math,
            mbar_arrive(smem_u32(&empty[s]));            // and then the release
        }
    }
    for (int step = 16; step > 0; step /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, step);
    if (threadIdx.x % 32 == 0) atomicAdd(out, acc);
}
