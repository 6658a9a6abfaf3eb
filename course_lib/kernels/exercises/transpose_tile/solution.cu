extern "C" __global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][33];   // one float of padding per row: a column spans 32 banks
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    // The launch is block (32, 8): a constant step of 8 lets the compiler unroll both loops (four rows a
    // thread), as the course's transpose_padded does; a step of blockDim.y keeps a loop.
#pragma unroll
    for (int dy = threadIdx.y; dy < 32; dy += 8) {   // read rows of in, coalesced
        int r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x] = in[(long long)r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int dy = threadIdx.y; dy < 32; dy += 8) {   // write rows of out (columns of in)
        int r = r0 + threadIdx.x, c = c0 + dy;
        if (r < rows && c < cols) out[(long long)c * rows + r] = tile[threadIdx.x][dy];
    }
}
