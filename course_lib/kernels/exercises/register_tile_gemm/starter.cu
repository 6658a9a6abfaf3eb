extern "C" __global__ __launch_bounds__(512) void sgemm_tile(const float* A, const float* B, float* C,
                                                             int M, int N, int K) {
    __shared__ float a_tile[8][64];
    __shared__ float b_tile[8][64];
    const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64, t = threadIdx.x;
    const int my_col = t % 64, my_rows = (t / 64) * 8;
    float out[8] = {0.f};
    // for each step of 8 along K: load the two tiles (zeros outside the matrices), wait,
    // accumulate out[i] += A[my_rows + i][k] * B[k][my_col], wait again
    for (int i = 0; i < 8; ++i) {
        int r = row0 + my_rows + i, c = col0 + my_col;
        if (r < M && c < N) C[(long long)r * N + c] = out[i];
    }
}
