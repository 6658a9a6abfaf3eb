#define ROWS_PER_BLOCK 256   // one thread per row

extern "C" __global__ void row_sums(float* out, const float* in, int rows, int cols) {
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x;
    if (row >= rows) return;
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c)
        sum += in[(long long)row * cols + c];
    out[row] = sum;
}
