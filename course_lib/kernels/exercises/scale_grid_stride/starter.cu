extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];   // one element per thread: not enough threads for large n
}
