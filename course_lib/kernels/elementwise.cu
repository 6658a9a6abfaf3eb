// Elementwise kernels: the memory-bound end of the roofline.
// Every kernel here bounds-checks, so any grid that covers n (or n/4 for the
// vec4 variants) is correct; the launch contract in each header gives the grid
// the course uses.

// One thread per element, the textbook form.
// Launch: block (256), grid (ceil(n / 256)). out, a, b: n floats.
extern "C" __global__ void vector_add(float* __restrict__ out, const float* __restrict__ a,
                                      const float* __restrict__ b, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// 16-byte loads and stores: a quarter of the instructions, four times the
// bytes in flight per thread. The grid-stride loop keeps it correct for any
// grid; on an H200 one float4 per thread (no looping) measured fastest.
// Launch: block (256), grid (ceil(n / 4 / 256)). Pointers 16-byte aligned
// (CuPy allocations are). Threads 0..2 handle the n % 4 tail.
extern "C" __global__ void vector_add_vec4(float* __restrict__ out, const float* __restrict__ a,
                                           const float* __restrict__ b, long long n) {
    long long n4 = n / 4;
    long long stride = (long long)gridDim.x * blockDim.x;
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* o4 = reinterpret_cast<float4*>(out);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 x = a4[i], y = b4[i];
        o4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n - 4 * n4) out[4 * n4 + t] = a[4 * n4 + t] + b[4 * n4 + t];
}

// Copy, one thread per element.
// Launch: block (256), grid (ceil(n / 256)).
extern "C" __global__ void copy(float* __restrict__ out, const float* __restrict__ in, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}

// Copy with 16-byte accesses; the same shape as vector_add_vec4.
// Launch: block (256), grid (ceil(n / 4 / 256)). Pointers 16-byte aligned.
extern "C" __global__ void copy_vec4(float* __restrict__ out, const float* __restrict__ in, long long n) {
    long long n4 = n / 4;
    long long stride = (long long)gridDim.x * blockDim.x;
    const float4* in4 = reinterpret_cast<const float4*>(in);
    float4* out4 = reinterpret_cast<float4*>(out);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride)
        out4[i] = in4[i];
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n - 4 * n4) out[4 * n4 + t] = in[4 * n4 + t];
}
