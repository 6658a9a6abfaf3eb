#define ROWS_PER_BLOCK 8   // one warp per row

extern "C" __global__ void row_sums(float* out, const float* in, int rows, int cols) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= rows) return;
    const float* x = in + (long long)row * cols;
    const int chunk = (cols + 31) / 32;            // each lane sums its own contiguous piece of the row:
    float sum = 0.0f;                              // one load instruction touches 32 pieces, 32 sectors
    for (int c = lane * chunk; c < min(cols, (lane + 1) * chunk); ++c)
        sum += x[c];
    for (int step = 16; step > 0; step /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, step);
    if (lane == 0) out[row] = sum;
}
