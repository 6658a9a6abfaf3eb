// Global-memory access patterns: the same bytes, laid out or indexed differently.
// Notebook 04 times these against the sector model in course_lib/models/memory.py.
//
// The copy-like kernels give each thread ELEMS elements, blockDim.x apart, so a
// warp's loads stay one warp-wide request each while every thread keeps ELEMS
// loads in flight: without that, a one-float-per-thread copy cannot cover HBM
// latency (notebook 00) and the stride-1 baseline would already sit below the
// ceiling for a reason that has nothing to do with sectors.

#define ELEMS 4

// out[i] = in[(i * stride) mod n]: lane i of a warp reads `stride` elements
// after lane i - 1. With n a power of two, mod n is `& mask`; an odd stride is
// coprime with n, so every element is read exactly once.
// Launch: block (256), grid (ceil(n / (256 * ELEMS))). n a power of two, mask = n - 1.
extern "C" __global__ void strided_copy(float* __restrict__ out, const float* __restrict__ in,
                                        long long n, long long mask, long long stride) {
    long long base = (long long)blockIdx.x * blockDim.x * ELEMS + threadIdx.x;
    float v[ELEMS];
#pragma unroll
    for (int k = 0; k < ELEMS; ++k) {
        long long i = base + (long long)k * blockDim.x;
        if (i < n) v[k] = in[(i * stride) & mask];
    }
#pragma unroll
    for (int k = 0; k < ELEMS; ++k) {
        long long i = base + (long long)k * blockDim.x;
        if (i < n) out[i] = v[k];
    }
}

// out[i] = in[i + offset]: unit stride, but every warp's first address moves by
// `offset` elements, so a warp no longer starts on a sector boundary.
// Launch: block (256), grid (ceil(n / (256 * ELEMS))). in holds n + offset floats.
extern "C" __global__ void offset_copy(float* __restrict__ out, const float* __restrict__ in,
                                       long long n, int offset) {
    long long base = (long long)blockIdx.x * blockDim.x * ELEMS + threadIdx.x;
    float v[ELEMS];
#pragma unroll
    for (int k = 0; k < ELEMS; ++k) {
        long long i = base + (long long)k * blockDim.x;
        if (i < n) v[k] = in[i + offset];
    }
#pragma unroll
    for (int k = 0; k < ELEMS; ++k) {
        long long i = base + (long long)k * blockDim.x;
        if (i < n) out[i] = v[k];
    }
}

// Array of structures: a particle is 16 bytes (x, y, z, mass). Reading only x
// makes neighbouring lanes 16 bytes apart: a warp's 128 useful bytes span 512.
struct Particle { float x, y, z, mass; };

// out[i] = particles[i].x
// Launch: block (256), grid (ceil(n / (256 * ELEMS))). particles: n structs.
extern "C" __global__ void aos_field(float* __restrict__ out, const Particle* __restrict__ particles,
                                     long long n) {
    long long base = (long long)blockIdx.x * blockDim.x * ELEMS + threadIdx.x;
    float v[ELEMS];
#pragma unroll
    for (int k = 0; k < ELEMS; ++k) {
        long long i = base + (long long)k * blockDim.x;
        if (i < n) v[k] = particles[i].x;
    }
#pragma unroll
    for (int k = 0; k < ELEMS; ++k) {
        long long i = base + (long long)k * blockDim.x;
        if (i < n) out[i] = v[k];
    }
}

// Structure of arrays: the x of every particle is one contiguous array.
// out[i] = x[i]
// Launch: block (256), grid (ceil(n / (256 * ELEMS))). x: n floats.
extern "C" __global__ void soa_field(float* __restrict__ out, const float* __restrict__ x, long long n) {
    long long base = (long long)blockIdx.x * blockDim.x * ELEMS + threadIdx.x;
    float v[ELEMS];
#pragma unroll
    for (int k = 0; k < ELEMS; ++k) {
        long long i = base + (long long)k * blockDim.x;
        if (i < n) v[k] = x[i];
    }
#pragma unroll
    for (int k = 0; k < ELEMS; ++k) {
        long long i = base + (long long)k * blockDim.x;
        if (i < n) out[i] = v[k];
    }
}

// Copy with 8-byte accesses, one float2 per thread: between elementwise.copy
// (4 bytes per thread) and elementwise.copy_vec4 (16 bytes per thread).
// Launch: block (256), grid (ceil(n / 2 / 256)). Pointers 8-byte aligned.
// Thread 0 copies the last element when n is odd.
extern "C" __global__ void copy_vec2(float* __restrict__ out, const float* __restrict__ in, long long n) {
    long long n2 = n / 2;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n2) reinterpret_cast<float2*>(out)[i] = reinterpret_cast<const float2*>(in)[i];
    if (i == 0 && (n & 1)) out[n - 1] = in[n - 1];
}

// The exercise's kernel once fixed: lanes map to columns, so a warp reads one
// row segment. (The exercise starts from row = a, col = b: lanes down a column.)
// Launch: block (32, 8), grid (ceil(cols / 32), ceil(rows / 8)).
extern "C" __global__ void scale_rows(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    int row = b, col = a;
    if (row < rows && col < cols) out[(size_t)row * cols + col] = 2.0f * in[(size_t)row * cols + col];
}
