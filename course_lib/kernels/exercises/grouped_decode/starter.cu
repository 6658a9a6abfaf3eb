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
    RunningSoftmax r[GROUP];
    // Correct, but each query head walks the whole cache: K and V are read GROUP times.
    for (int g = 0; g < GROUP; ++g) {
        float qg[8];
        load_row8(q + rows + g * HEAD_DIM, d0, qg);
        for (int j = 0; j < 8; ++j) qg[j] *= scale_log2;
        r[g].reset();
        for (int t = stream; t < T; t += STREAMS) {
            float kx[8], vx[8];
            load_row8(k + head + (long long)t * HEAD_DIM, d0, kx);
            load_row8(v + head + (long long)t * HEAD_DIM, d0, vx);
            float s = 0.f;
            for (int j = 0; j < 8; ++j) s = fmaf(qg[j], kx[j], s);
            r[g].add(half_warp_sum(s), vx);
        }
    }
    merge_streams<GROUP, STREAMS>(r, out + rows);
}
