extern "C" __global__ void row_sum_squares(float* out, const float* in, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = in + (long long)r * cols;
    float part[32] = {0.f};   // 32 partial sums, all live until the end
    int c = 0;
    for (; c + 32 <= cols; c += 32) {
#pragma unroll
        for (int j = 0; j < 32; ++j) part[j] += row[c + j] * row[c + j];
    }
    for (; c < cols; ++c) part[0] += row[c] * row[c];
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 32; ++j) s += part[j];
    out[r] = s;
}
