extern "C" __global__ void row_sum_squares(float* out, const float* in, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = in + (long long)r * cols;
    float s0 = 0.f, s1 = 0.f;
    int c = 0;
#pragma unroll 2
    for (; c + 2 <= cols; c += 2) {
        s0 += row[c] * row[c];
        s1 += row[c + 1] * row[c + 1];
    }
    if (c < cols) s0 += row[c] * row[c];
    out[r] = s0 + s1;
}
