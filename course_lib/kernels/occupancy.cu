// Occupancy experiments: a memory-bound copy whose residency is set from outside (dynamic
// shared memory the kernel never touches, but which every block is allocated), the same
// copy with more independent loads per thread (ILP), and a register-hungry accumulation
// whose register count the compiler can be told to cap.

// Each block of COPY_BLOCK threads copies ILP * COPY_BLOCK consecutive floats: thread t
// takes elements t, t + COPY_BLOCK, ..., so every load of a warp is one contiguous 128-byte
// run. The stride is a compile-time constant, so all ILP loads share one base address (an
// immediate offset each) and fit in few registers; the compiler then issues all ILP loads
// before the first store: ILP independent 4-byte requests in flight per thread. Dynamic
// shared memory passed at launch is not used; it only limits residency.
// __launch_bounds__(256, 8) promises 256-thread blocks, eight per SM, so the compiler keeps
// each copy within 32 registers: registers never limit the copy's residency on an H200.
#define COPY_BLOCK 256
template <int ILP>
__device__ __forceinline__ void copy_ilp_body(float* __restrict__ out, const float* __restrict__ in,
                                              long long n) {
    if (blockDim.x != COPY_BLOCK) return;           // the stride below assumes it; the check catches it
    const long long base = (long long)blockIdx.x * (COPY_BLOCK * ILP) + threadIdx.x;
    const long long left = n - base;                // elements from this thread's first one to the end
    const float* src = in + base;
    float* dst = out + base;
    float v[ILP];
    if (left > (ILP - 1) * COPY_BLOCK) {            // all ILP elements exist: no masks, no predicates
        #pragma unroll
        for (int j = 0; j < ILP; ++j) v[j] = src[j * COPY_BLOCK];
        #pragma unroll
        for (int j = 0; j < ILP; ++j) dst[j * COPY_BLOCK] = v[j];
    } else {                                        // the tail of the array: masked
        #pragma unroll
        for (int j = 0; j < ILP; ++j) v[j] = j * COPY_BLOCK < left ? src[j * COPY_BLOCK] : 0.0f;
        #pragma unroll
        for (int j = 0; j < ILP; ++j) {
            if (j * COPY_BLOCK < left) dst[j * COPY_BLOCK] = v[j];
        }
    }
}

// One float per thread: the textbook copy.
// Launch: block (256) exactly, grid (ceil(n / 256)), any dynamic shared memory. out, in: n floats.
extern "C" __global__ __launch_bounds__(256, 8) void copy_ilp1(float* __restrict__ out, const float* __restrict__ in, long long n) {
    copy_ilp_body<1>(out, in, n);
}

// Two independent floats per thread.
// Launch: block (256) exactly, grid (ceil(n / 512)), any dynamic shared memory. out, in: n floats.
extern "C" __global__ __launch_bounds__(256, 8) void copy_ilp2(float* __restrict__ out, const float* __restrict__ in, long long n) {
    copy_ilp_body<2>(out, in, n);
}

// Four independent floats per thread.
// Launch: block (256) exactly, grid (ceil(n / 1024)), any dynamic shared memory. out, in: n floats.
extern "C" __global__ __launch_bounds__(256, 8) void copy_ilp4(float* __restrict__ out, const float* __restrict__ in, long long n) {
    copy_ilp_body<4>(out, in, n);
}

// Eight independent floats per thread.
// Launch: block (256) exactly, grid (ceil(n / 2048)), any dynamic shared memory. out, in: n floats.
extern "C" __global__ __launch_bounds__(256, 8) void copy_ilp8(float* __restrict__ out, const float* __restrict__ in, long long n) {
    copy_ilp_body<8>(out, in, n);
}

// R accumulators live in each thread for the whole loop: acc[r] += x * (1 + r/64) for every
// x of the thread's column, then out = sum_r acc[r] / (r + 1). The accumulators are
// independent, so the loop has R-way instruction-level parallelism, and it needs about R
// registers: cap the registers below that and the compiler spills accumulators to local memory.
template <int R>
__device__ __forceinline__ void accumulate_body(float* __restrict__ out, const float* __restrict__ in,
                                                int n_threads, int k) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_threads) return;
    float acc[R];
    #pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    for (int kk = 0; kk < k; ++kk) {
        const float x = in[(long long)kk * n_threads + t];
        #pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = fmaf(x, 1.0f + r * 0.015625f, acc[r]);
    }
    float s = 0.0f;
    #pragma unroll
    for (int r = 0; r < R; ++r) s = fmaf(acc[r], 1.0f / (r + 1), s);
    out[t] = s;
}

// 64 accumulators per thread. Compiled as is it needs more than 64 registers; with
// --maxrregcount below that it spills (the NVRTC report says how many bytes).
// Launch: block (256), grid (ceil(n_threads / 256)). in: k * n_threads floats, element
// (kk, t) at kk * n_threads + t; out: n_threads floats.
extern "C" __global__ void register_pressure(float* __restrict__ out, const float* __restrict__ in,
                                             int n_threads, int k) {
    accumulate_body<64>(out, in, n_threads, k);
}
