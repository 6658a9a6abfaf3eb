#define ROWS_PER_BLOCK 8   // one warp per row

extern "C" __global__ void row_sums(float* out, const float* in, int rows, int cols) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= rows) return;                       // the whole warp leaves together
    const float* x = in + (long long)row * cols;
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 32)          // lane i reads element i: one warp load, 4 sectors
        sum += x[c];
    if (lane == 0) out[row] = sum;
}
