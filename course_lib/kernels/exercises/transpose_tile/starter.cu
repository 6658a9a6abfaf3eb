extern "C" __global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][32];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    // 1. each thread copies tile rows dy = threadIdx.y, threadIdx.y + 8, ... from in (mind the edges)
    // 2. wait until the whole tile is written
    // 3. write out's rows from the tile's columns (mind the edges)
}
