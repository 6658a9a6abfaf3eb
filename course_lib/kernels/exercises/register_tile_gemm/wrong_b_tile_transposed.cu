extern "C" __global__ __launch_bounds__(512) void sgemm_tile(const float* A, const float* B, float* C,
                                                             int M, int N, int K) {
    __shared__ float a_tile[8][64];   // a_tile[k][row]: a thread's 8 rows are adjacent
    __shared__ float b_tile[64][8];   // b_tile[col][k]: a column's 8 values adjacent
    const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64, t = threadIdx.x;
    const int my_col = t % 64, my_rows = (t / 64) * 8;          // 8 outputs of one column
    float out[8] = {0.f};
    for (int k0 = 0; k0 < K; k0 += 8) {
        int r = row0 + t / 8, k = k0 + t % 8;                   // 512 threads load 64 x 8 of A ...
        a_tile[t % 8][t / 8] = (r < M && k < K) ? A[(long long)r * K + k] : 0.f;
        int kb = k0 + t / 64, c = col0 + t % 64;                // ... and 8 x 64 of B
        b_tile[t % 64][t / 64] = (kb < K && c < N) ? B[(long long)kb * N + c] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            const float b = b_tile[my_col][kk];                 // lanes 8 words apart
#pragma unroll
            for (int i = 0; i < 8; ++i) out[i] += a_tile[kk][my_rows + i] * b;
        }
        __syncthreads();
    }
    for (int i = 0; i < 8; ++i) {
        int r = row0 + my_rows + i, c = col0 + my_col;
        if (r < M && c < N) C[(long long)r * N + c] = out[i];
    }
}
