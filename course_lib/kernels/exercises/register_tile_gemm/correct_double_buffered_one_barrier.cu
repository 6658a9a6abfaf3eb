// Double-buffered stage tiles: the next step's tiles are written into the other buffer while this step's are
// read, so one barrier a step separates every write from the reads of the same buffer.
extern "C" __global__ __launch_bounds__(512) void sgemm_tile(const float* A, const float* B, float* C,
                                                             int M, int N, int K) {
    __shared__ float a_tile[2][8][64];   // [buffer][k][row]
    __shared__ float b_tile[2][8][64];   // [buffer][k][col]
    const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64, t = threadIdx.x;
    const int my_col = t % 64, my_rows = (t / 64) * 8;
    const int a_row = row0 + t / 8, a_k = t % 8, b_k = t / 64, b_col = col0 + t % 64;
    float out[8] = {0.f};
    a_tile[0][a_k][t / 8] = (a_row < M && a_k < K) ? A[(long long)a_row * K + a_k] : 0.f;
    b_tile[0][b_k][t % 64] = (b_k < K && b_col < N) ? B[(long long)b_k * N + b_col] : 0.f;
    __syncthreads();
    int s = 0;
    for (int k0 = 0; k0 < K; k0 += 8) {
        if (k0 + 8 < K) {
            const int k = k0 + 8 + a_k, kb = k0 + 8 + b_k;
            a_tile[s ^ 1][a_k][t / 8] = (a_row < M && k < K) ? A[(long long)a_row * K + k] : 0.f;
            b_tile[s ^ 1][b_k][t % 64] = (kb < K && b_col < N) ? B[(long long)kb * N + b_col] : 0.f;
        }
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            const float b = b_tile[s][kk][my_col];
#pragma unroll
            for (int i = 0; i < 8; ++i) out[i] += a_tile[s][kk][my_rows + i] * b;
        }
        __syncthreads();
        s ^= 1;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = row0 + my_rows + i, c = col0 + my_col;
        if (r < M && c < N) C[(long long)r * N + c] = out[i];
    }
}
