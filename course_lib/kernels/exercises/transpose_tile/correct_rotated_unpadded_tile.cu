// An unpadded 32 x 32 tile whose row r is stored rotated by r: element (r, c) sits at column (c + r) % 32. A warp
// writing a row and a warp reading a column both touch 32 different banks, with no padding and no XOR.
extern "C" __global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][32];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
#pragma unroll
    for (int j = 0; j < 32; j += 8) {   // rows of in, coalesced
        const int dy = threadIdx.y + j, r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][(threadIdx.x + dy) % 32] = in[(long long)r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 32; j += 8) {   // rows of out: column dy of the tile, rotated back
        const int dy = threadIdx.y + j, r = r0 + threadIdx.x, c = c0 + dy;
        if (r < rows && c < cols) out[(long long)c * rows + r] = tile[threadIdx.x][(dy + threadIdx.x) % 32];
    }
}
