extern "C" __global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {   // read rows of in, coalesced
        int r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x] = in[(long long)r * cols + c];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {   // each thread writes the element it read: lanes
        int r = r0 + dy, c = c0 + threadIdx.x;                 // of a warp land `rows` floats apart in out
        if (r < rows && c < cols) out[(long long)c * rows + r] = tile[dy][threadIdx.x];
    }
}
