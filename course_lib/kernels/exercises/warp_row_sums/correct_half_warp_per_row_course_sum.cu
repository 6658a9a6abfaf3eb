#include "online_softmax.cuh"   // half_warp_sum: the 16 lanes of a half-warp add up their values
#define ROWS_PER_BLOCK 16       // half a warp per row: a warp's load covers 16 neighbouring floats of two rows

extern "C" __global__ void row_sums(float* out, const float* in, int rows, int cols) {
    const int lane = threadIdx.x % 16;
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 16;
    if (row >= rows) return;                       // a whole half-warp leaves together
    const float* x = in + (long long)row * cols;
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 16) sum += x[c];
    sum = half_warp_sum(sum);                      // the 16 partial sums of the row, added by shuffles
    if (lane == 0) out[row] = sum;
}
