extern "C" __global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][33];   // one float of padding per row: a column spans 32 banks
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    // The launch is block (32, 8): four rows a thread, j = 0, 8, 16, 24. A loop with a constant trip count
    // is unrolled, as in the course's transpose_padded; a step of blockDim.y would keep a loop.
#pragma unroll
    for (int j = 0; j < 32; j += 8) {   // read rows of in, coalesced
        int dy = threadIdx.y + j, r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x] = in[(long long)r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 32; j += 8) {   // write rows of out (columns of in)
        int dy = threadIdx.y + j, r = r0 + threadIdx.x, c = c0 + dy;
        if (r < rows && c < cols) out[(long long)c * rows + r] = tile[threadIdx.x][dy];
    }
}
