#define ROWS_PER_BLOCK 256

extern "C" __global__ void rms_norm(float* out, const float* in, const float* weight, int rows, int cols) {
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x;
    float x[1024];
    float sum_sq = 0.0f;
    for (int c = 0; c < cols; ++c) {
        x[c] = in[row * cols + c];
        sum_sq += x[c] * x[c];
    }
    float scale = rsqrtf(sum_sq / cols + 1e-6f);
    for (int c = 0; c < cols; ++c)
        out[row * cols + c] = x[c] * scale * weight[c];
}
