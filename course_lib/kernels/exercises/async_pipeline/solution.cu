#define THREADS 256
#define VECS 4                           // float4s per thread per tile
#define TILE (THREADS * VECS)            // float4s per tile: 16 KiB

// Copy 16 bytes global -> shared without passing through registers; zero-fill when !valid.
__device__ void copy16_async(float4* smem, const float4* gmem, bool valid) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(s), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
}
__device__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Wait until at most N of this thread's committed groups are still in flight.
template <int N> __device__ void wait_copies() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

__device__ float sum_squares4(float4 v) { return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }
__device__ void add_block_total(float* out, float acc) {   // one atomic per warp
    for (int step = 16; step > 0; step /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, step);
    if (threadIdx.x % 32 == 0) atomicAdd(out, acc);
}

// out[0] += the sum of squares of in[0 .. n), n a multiple of 4. Launch: one block of 256 threads per SM.
extern "C" __global__ void sum_squares(float* out, const float* in, long long n) {
    __shared__ __align__(16) float4 slot[2][TILE];            // two stages of 16 KiB
    const long long n4 = n / 4, tiles = (n4 + TILE - 1) / TILE;
    const float4* in4 = reinterpret_cast<const float4*>(in);
    auto issue = [&](long long tile, int s) {                 // this thread's four float4s of a tile
        for (int v = 0; v < VECS; ++v) {
            const long long i = tile * TILE + v * THREADS + threadIdx.x;
            copy16_async(&slot[s][v * THREADS + threadIdx.x], in4 + (i < n4 ? i : 0), i < n4);
        }
        commit_copies();
    };
    float acc = 0.0f;
    int s = 0;
    if (blockIdx.x < tiles) issue(blockIdx.x, 0);
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x, s ^= 1) {
        if (tile + gridDim.x < tiles) issue(tile + gridDim.x, s ^ 1);   // the next tile flies while this one is summed
        else commit_copies();                                         // an empty group: the count stays right
        wait_copies<1>();                                             // this tile's group has landed
        for (int v = 0; v < VECS; ++v)                                // each thread reads only what it copied
            acc += sum_squares4(slot[s][v * THREADS + threadIdx.x]);
    }
    add_block_total(out, acc);
}
