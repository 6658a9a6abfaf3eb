extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {
    const long long stride = 4LL * 132 * 256;   // the grid on an H200, written in: any other grid skips elements
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = a * x[i];
}
