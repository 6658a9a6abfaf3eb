extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i <= n; i += stride)
        y[i] = a * x[i];
}
