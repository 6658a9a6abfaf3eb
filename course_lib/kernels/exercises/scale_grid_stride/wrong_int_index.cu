extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)   // an int stops being an index at 2^31
        y[i] = a * x[i];
}
