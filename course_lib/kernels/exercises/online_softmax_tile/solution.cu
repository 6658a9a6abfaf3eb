// Attention over rows of float32 queries, one warp per query row, the keys in tiles of 32:
//   out[i, :] = softmax_j(q_i · k_j / 8) · V  over the keys j that query i sees: j < n_k and, with causal,
//   j <= i + n_k - n_q (aligned bottom-right, as FlashAttention does). A row that sees no key is 0.
// q [n_q, 64], k and v [n_k, 64], out [n_q, 64], row-major. Block 128 (4 warps: 4 query rows), grid ⌈n_q / 4⌉.
// Scores are kept in base 2: q is scaled by log2(e) / 8 once, so exp(x / 8) of a score is exp2f of it.
#define D 64
#define ROWS_PER_BLOCK 4
#define FULL 0xffffffffu
#define NEG_INF __int_as_float(0xff800000)   // -inf (NVRTC has no math.h)

extern "C" __global__ void attention_rows(float* out, const float* q, const float* k, const float* v,
                                          int n_q, int n_k, int causal) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + warp;
    if (row >= n_q) return;                                   // the whole warp leaves together
    __shared__ float qs[ROWS_PER_BLOCK][D];
    qs[warp][lane] = q[row * D + lane] * (1.4426950408889634f / 8.0f);
    qs[warp][lane + 32] = q[row * D + lane + 32] * (1.4426950408889634f / 8.0f);
    __syncwarp();
    const long long last = causal ? min((long long)n_k - 1, row + n_k - n_q) : (long long)n_k - 1;
    float m = NEG_INF;          // the row's running maximum score (base 2); -inf before the first tile
    float l = 0.0f;               // the running sum of exp2(score - m)
    float acc0 = 0.0f, acc1 = 0.0f;   // the running sum of exp2(score - m) · v, this lane's dimensions 2·lane, 2·lane+1
    for (long long t0 = 0; t0 <= last; t0 += 32) {
        // lane i scores key t0 + i; a key past the last visible one scores -inf
        const long long j = t0 + lane;
        float s = NEG_INF;
        if (j <= last) {
            float dot = 0.0f;
            for (int c = 0; c < D; ++c) dot = fmaf(qs[warp][c], k[j * D + c], dot);
            s = dot;
        }
        const int keys = (int)min(32LL, last + 1 - t0);     // visible keys in this tile (at least 1)
        // ---- fold this tile into (m, l, acc0, acc1) ----
        float tile_max = s;
        for (int o = 16; o > 0; o >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(FULL, tile_max, o));
        const float m_new = fmaxf(m, tile_max);             // finite: the tile has a visible key
        const float corr = exp2f(m - m_new);                 // what the old terms shrink by; 0 on the first tile
        const float p = exp2f(s - m_new);                    // never above 1: no overflow, whatever the scores
        float p_sum = p;
        for (int o = 16; o > 0; o >>= 1) p_sum += __shfl_xor_sync(FULL, p_sum, o);
        l = l * corr + p_sum;
        acc0 *= corr;
        acc1 *= corr;
        for (int jj = 0; jj < keys; ++jj) {              // P·V: key jj's weight from lane jj, its V row read by all
            const float pj = __shfl_sync(FULL, p, jj);
            const float2 vj = reinterpret_cast<const float2*>(v + (t0 + jj) * D)[lane];
            acc0 = fmaf(pj, vj.x, acc0);
            acc1 = fmaf(pj, vj.y, acc1);
        }
        m = m_new;
        // ---- end of the tile's update ----
    }
    const float2 o = l > 0.0f ? make_float2(acc0 / l, acc1 / l) : make_float2(0.0f, 0.0f);
    reinterpret_cast<float2*>(out + row * D)[lane] = o;
}
