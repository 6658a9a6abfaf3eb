#include "online_softmax.cuh"   // HEAD_DIM, bf16_raw, load_row8, half_warp_sum, RunningSoftmax, merge_streams
#define GROUP 4                  // query heads per KV head (Llama 3 8B: 32 on 8)
#define THREADS 128
#define STREAMS (THREADS / 16)   // a half-warp takes one token at a time: 8 tokens at once per block

// One decode step's attention for the GROUP query heads of one KV head: grid (Hkv, B), THREADS threads.
// K, V: the cache [B, Hkv, T, 128]; q, out: [B, Hkv * GROUP, 128]; all bf16. scale_log2 = log2(e) / sqrt(128).
// Lane i of a half-warp holds dimensions 8(i % 16) .. 8(i % 16) + 7 of the token's rows.
extern "C" __global__ void __launch_bounds__(THREADS) decode_gqa(
        const bf16_raw* q, const bf16_raw* k, const bf16_raw* v, bf16_raw* out, int T, float scale_log2) {
    const int hkv = blockIdx.x, b = blockIdx.y, Hkv = gridDim.x;
    const int stream = threadIdx.x / 16, d0 = 8 * (threadIdx.x % 16);
    const long long head = ((long long)b * Hkv + hkv) * T * HEAD_DIM;    // this KV head's first cache row
    const long long rows = ((long long)b * Hkv + hkv) * GROUP * HEAD_DIM;  // its query heads' first row
    float qr[GROUP][8];
    RunningSoftmax r[GROUP];
    for (int g = 0; g < GROUP; ++g) {
        load_row8(q + rows + g * HEAD_DIM, d0, qr[g]);
        for (int j = 0; j < 8; ++j) qr[g][j] *= scale_log2;
        r[g].reset();
    }
    // Each token's K and V rows are loaded once, and all GROUP query heads use them.
    for (int t = stream; t < T; t += STREAMS) {
        float kx[8], vx[8];
        load_row8(k + head + (long long)t * HEAD_DIM, d0, kx);
        load_row8(v + head + (long long)t * HEAD_DIM, d0, vx);
        for (int g = 0; g < GROUP; ++g) {
            float s = 0.f;
            for (int j = 0; j < 8; ++j) s = fmaf(qr[g][j], kx[j], s);
            r[g].add(half_warp_sum(s), vx);
        }
    }
    merge_streams<GROUP, STREAMS>(r, out + rows);
}
