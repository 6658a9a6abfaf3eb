// Matrix transpose, out[c][r] = in[r][c], for a rows x cols fp32 matrix (row-major),
// and a shared-memory bank probe. Notebook 05 climbs the ladder:
//   naive     reads rows (coalesced), writes columns (one sector per lane)
//   tiled     stages a TILE x TILE tile in shared memory so both sides are coalesced,
//             but reads the tile down a column: every lane in the same bank
//   padded    the same with a row pitch of TILE + 1 words: a column walks all banks
//   swizzled  pitch TILE, column index XOR-ed with the row: conflict-free, no wasted words
// Every thread handles TILE / ROWS rows of its tile, so a block of TILE x ROWS
// threads keeps several loads in flight per thread.

template <int TILE, int ROWS>
__device__ __forceinline__ void transpose_naive_body(float* __restrict__ out, const float* __restrict__ in,
                                                     int rows, int cols) {
    int x = blockIdx.x * TILE + threadIdx.x;          // column of `in`
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) {
        int y = blockIdx.y * TILE + threadIdx.y + j;  // row of `in`
        if (x < cols && y < rows) out[(size_t)x * rows + y] = in[(size_t)y * cols + x];
    }
}

// PITCH: words per tile row in shared memory. SWIZZLE: store logical (r, c) at
// column c ^ (r mod 32) inside each group of 32 columns, instead of padding.
template <int PITCH, bool SWIZZLE>
__device__ __forceinline__ int tile_index(int r, int c) {
    return r * PITCH + (SWIZZLE ? ((c & ~31) | ((c ^ r) & 31)) : c);
}

template <int TILE, int ROWS, int PITCH, bool SWIZZLE>
__device__ __forceinline__ void transpose_tiled_body(float* __restrict__ out, const float* __restrict__ in,
                                                     int rows, int cols) {
    __shared__ float tile[TILE * PITCH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x = blockIdx.x * TILE + tx;                   // column of `in` this thread loads
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) {
        int y = blockIdx.y * TILE + ty + j;
        if (x < cols && y < rows) tile[tile_index<PITCH, SWIZZLE>(ty + j, tx)] = in[(size_t)y * cols + x];
    }
    __syncthreads();
    int ox = blockIdx.y * TILE + tx;                  // column of `out` = row of `in`
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS) {
        int oy = blockIdx.x * TILE + ty + j;          // row of `out` = column of `in`
        if (ox < rows && oy < cols) out[(size_t)oy * rows + ox] = tile[tile_index<PITCH, SWIZZLE>(tx, ty + j)];
    }
}

// Launch: block (32, 8), grid (ceil(cols / 32), ceil(rows / 32)). out: cols x rows.
extern "C" __global__ void transpose_naive(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
    transpose_naive_body<32, 8>(out, in, rows, cols);
}

// Launch: block (32, 8), grid (ceil(cols / 32), ceil(rows / 32)). out: cols x rows.
extern "C" __global__ void transpose_tiled(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
    transpose_tiled_body<32, 8, 32, false>(out, in, rows, cols);
}

// Launch: block (32, 8), grid (ceil(cols / 32), ceil(rows / 32)). out: cols x rows.
extern "C" __global__ void transpose_padded(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
    transpose_tiled_body<32, 8, 33, false>(out, in, rows, cols);
}

// Launch: block (32, 8), grid (ceil(cols / 32), ceil(rows / 32)). out: cols x rows.
extern "C" __global__ void transpose_swizzled(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
    transpose_tiled_body<32, 8, 32, true>(out, in, rows, cols);
}

// A 64 x 64 tile: twice the bytes in flight per block, eight rows per thread.
// Launch: block (64, 8), grid (ceil(cols / 64), ceil(rows / 64)). out: cols x rows.
extern "C" __global__ void transpose_padded_64(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
    transpose_tiled_body<64, 8, 65, false>(out, in, rows, cols);
}

// Launch: block (64, 8), grid (ceil(cols / 64), ceil(rows / 64)). out: cols x rows.
extern "C" __global__ void transpose_swizzled_64(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
    transpose_tiled_body<64, 8, 64, true>(out, in, rows, cols);
}

// 32 x 32 tile with 32 x 4 threads: eight rows per thread, more blocks per SM.
// Launch: block (32, 4), grid (ceil(cols / 32), ceil(rows / 32)). out: cols x rows.
extern "C" __global__ void transpose_padded_32x4(float* __restrict__ out, const float* __restrict__ in, int rows, int cols) {
    transpose_tiled_body<32, 4, 33, false>(out, in, rows, cols);
}

// ---------------------------------------------------------------------------- bank probe
// Every lane of every warp loads shared word(s) at its lane's offset, `iters`
// times. The loads are volatile asm so the compiler keeps each one; they do not
// depend on each other, so the time is set by how many wavefronts each request
// needs. PROBE_WORDS words of shared memory hold word w = w.
#define PROBE_WORDS 4096

__device__ __forceinline__ void probe_fill(unsigned* s) {
    for (int i = threadIdx.x; i < PROBE_WORDS; i += blockDim.x) s[i] = i;
    __syncthreads();
}

// One load of W consecutive words (W = 1, 2, 4: a 4-, 8- or 16-byte ld.shared) and their sum.
template <int W> __device__ __forceinline__ unsigned probe_load(unsigned addr);
template <> __device__ __forceinline__ unsigned probe_load<1>(unsigned addr) {
    unsigned v;
    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
    return v;
}
template <> __device__ __forceinline__ unsigned probe_load<2>(unsigned addr) {
    unsigned a, b;
    asm volatile("ld.volatile.shared.v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "r"(addr));
    return a + b;
}
template <> __device__ __forceinline__ unsigned probe_load<4>(unsigned addr) {
    unsigned a, b, c, d;
    asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(addr));
    return a + b + c + d;
}

// offsets: 32 indices of W-word elements (< PROBE_WORDS / W), one per lane; out[t] is iters times the sum of
// the lane's W words, W^2 * offsets[lane] + W (W - 1) / 2 (mod 2^32).
template <int W>
__device__ __forceinline__ void bank_probe_body(unsigned* __restrict__ out, const int* __restrict__ offsets, int iters) {
    __shared__ __align__(16) unsigned s[PROBE_WORDS];
    probe_fill(s);
    int e = offsets[threadIdx.x & 31];
    if (e < 0 || e >= PROBE_WORDS / W) e = 0;
    unsigned addr = (unsigned)__cvta_generic_to_shared(s + W * e);
    unsigned acc = 0;
    for (int k = 0; k < iters; ++k) acc += probe_load<W>(addr);
    out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

// Launch (all three): block (256), any grid; out holds grid * 256 words.
// 4-byte loads: offsets are word indices; out[t] = iters * offsets[lane].
extern "C" __global__ void bank_probe_4b(unsigned* __restrict__ out, const int* __restrict__ offsets, int iters) {
    bank_probe_body<1>(out, offsets, iters);
}

// 8-byte loads (ld.shared.v2.u32): out[t] = iters * (4 * offsets[lane] + 1).
extern "C" __global__ void bank_probe_8b(unsigned* __restrict__ out, const int* __restrict__ offsets, int iters) {
    bank_probe_body<2>(out, offsets, iters);
}

// 16-byte loads (ld.shared.v4.u32): out[t] = iters * (16 * offsets[lane] + 6).
extern "C" __global__ void bank_probe_16b(unsigned* __restrict__ out, const int* __restrict__ offsets, int iters) {
    bank_probe_body<4>(out, offsets, iters);
}
