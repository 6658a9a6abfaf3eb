extern "C" __global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][32];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {   // read rows of in, coalesced
        int r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x ^ (dy >> 5)] = in[(long long)r * cols + c];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {   // write rows of out (columns of in)
        int r = r0 + threadIdx.x, c = c0 + dy;
        if (r < rows && c < cols) out[(long long)c * rows + r] = tile[threadIdx.x][dy ^ (threadIdx.x >> 5)];
    }
}
