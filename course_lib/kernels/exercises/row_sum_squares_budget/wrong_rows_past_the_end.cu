extern "C" __global__ void row_sum_squares(float* out, const float* in, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    const float* row = in + (long long)r * cols;
    float s = 0.f;
    for (int c = 0; c < cols; ++c) s += row[c] * row[c];
    out[r] = s;
}
