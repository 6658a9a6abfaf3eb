// out = gelu(x + bias[column]) + residual, one element per thread, in one pass.
extern "C" __global__ void bias_gelu_residual(float* out, const float* x, const float* bias, const float* residual,
                                              int cols, long long total) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= total) return;
    const float v = x[i] + bias[i % cols];   // the intermediates stay in registers
    out[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))) + residual[i];
}
