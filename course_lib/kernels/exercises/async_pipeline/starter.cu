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
    const long long n4 = n / 4;
    const float4* in4 = reinterpret_cast<const float4*>(in);
    float acc = 0.0f;
#pragma unroll 1
    for (long long i = blockIdx.x * (long long)THREADS + threadIdx.x; i < n4; i += (long long)gridDim.x * THREADS)
        acc += sum_squares4(in4[i]);     // one 16-byte load in flight per thread, waited for at once
    add_block_total(out, acc);
}
