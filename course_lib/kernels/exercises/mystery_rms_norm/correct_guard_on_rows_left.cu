#define ROWS_PER_BLOCK 8   // one warp per row: 8 warps of a 256-thread block

extern "C" __global__ void rms_norm(float* out, const float* in, const float* weight, int rows, int cols) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const int rows_left = rows - (int)blockIdx.x * ROWS_PER_BLOCK;   // rows this block still has to do
    if (threadIdx.x / 32 >= rows_left) return;       // a whole warp leaves together
    const float* x = in + (long long)row * cols;
    float* y = out + (long long)row * cols;
    // 16-byte loads need 16-byte aligned rows: cols a multiple of 4, and the arrays' bases aligned too
    // (a tensor view can start anywhere)
    const bool aligned = ((unsigned long long)in | (unsigned long long)weight | (unsigned long long)out) % 16 == 0;
    const int quads = aligned && cols % 4 == 0 ? cols / 4 : 0;
    float sum_sq = 0.0f;
    for (int i = lane; i < quads; i += 32) {         // lane i reads floats 4i..4i+3
        const float4 v = reinterpret_cast<const float4*>(x)[i];
        sum_sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (int c = 4 * quads + lane; c < cols; c += 32)   // rows whose length is not a multiple of 4
        sum_sq += x[c] * x[c];
    for (int step = 16; step > 0; step /= 2)         // the warp's 32 partial sums, added in registers
        sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, step);
    const float scale = rsqrtf(sum_sq / cols + 1e-6f);
    for (int i = lane; i < quads; i += 32) {
        const float4 v = reinterpret_cast<const float4*>(x)[i], w = reinterpret_cast<const float4*>(weight)[i];
        reinterpret_cast<float4*>(y)[i] = make_float4(v.x * scale * w.x, v.y * scale * w.y, v.z * scale * w.z, v.w * scale * w.w);
    }
    for (int c = 4 * quads + lane; c < cols; c += 32)
        y[c] = x[c] * scale * weight[c];
}
