// The kernel declared first and defined after its helper: one kernel, written twice in the cell.
extern "C" __global__ void bias_gelu_residual(float* out, const float* x, const float* bias, const float* residual,
                                              int cols, long long total);

__device__ __forceinline__ float gelu(float v) {
    return 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

extern "C" __global__ void bias_gelu_residual(float* out, const float* x, const float* bias, const float* residual,
                                              int cols, long long total) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < total) out[i] = gelu(x[i] + bias[i % cols]) + residual[i];
}
