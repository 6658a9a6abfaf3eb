// GEMM in bf16 on the tensor cores with mma.sync (Ampere's warp-level MMA,
// which Hopper still runs): notebook 06's last rung.
//
// C[M,N] = A[M,K] · B[K,N], all row-major bf16 (raw 16-bit patterns: NVRTC
// has no cuda_bf16.h here), products accumulated in fp32 registers, C rounded
// to bf16 once at the end. The pieces, each one PTX instruction:
//   ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16
//                               a warp loads four 8x8 bf16 matrices from shared
//                               memory straight into the mma fragment layout
//                               (.trans turns B's row-major [k][n] tile into
//                               the column fragment the mma wants);
//   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
//                               one warp: a 16x8 fp32 tile += 16x16 · 16x8.
// Tiles reach shared memory, up to STAGES ahead, by one of two copy engines:
//   cp.async.cg.shared.global   (sm_80+) every thread copies 16-byte chunks that
//                               bypass its registers; a barrier says they landed;
//   cp.async.bulk.tensor.2d     (sm_90+, when the host passes tensor maps) one
//                               thread asks the TMA for a whole tile; an mbarrier
//                               counts the bytes in. The other threads issue no
//                               copy instructions and compute no addresses.
// Shared tiles are XOR-swizzled in 16-byte chunks within 128-byte rows (chunk c
// of row r sits at c ^ (r % 8)), so that the eight rows an ldmatrix phase reads
// fall in eight different bank groups. That is the TMA's 128-byte swizzle, so
// both engines fill the same layout: A as [BM][64], B as BN/64 blocks of [BK][64].
//
// Tile parameters are macros (TC_BM, TC_BN, TC_BK, TC_WM, TC_WN, TC_STAGES,
// TC_GROUP_M): pass -D options to try others. The defaults (128x128x64, 3
// stages, 64x64 per warp, two blocks per SM) were the fastest of the tiles timed
// on an H200 while writing the course: block tiles 128 or 256 wide (the 256-wide
// ones leave room for one block per SM, and were no faster), BK 32 or 64, 3 to 6
// stages, 64x32 to 64x64 warp tiles (the smaller ones fit more warps but read
// more shared memory per MMA, and lost).
// Needs compute capability 8.0+ (bf16 mma); on older GPUs the kernel body is
// compiled out and traps.

#ifndef TC_BM
#define TC_BM 128
#endif
#ifndef TC_BN
#define TC_BN 128
#endif
#ifndef TC_BK
#define TC_BK 64
#endif
#ifndef TC_WM
#define TC_WM 64
#endif
#ifndef TC_WN
#define TC_WN 64
#endif
#ifndef TC_STAGES
#define TC_STAGES 3
#endif
#ifndef TC_GROUP_M
#define TC_GROUP_M 8     // block rows that share a band of B in L2 (grid rasterisation)
#endif
#ifndef TC_SCHEDULED
#define TC_SCHEDULED 0   // 1: persistent grids and split-K (notebook 07); 0: one tile per block, as tuned
// With TC_SCHEDULED 1, a grid (G, S) with G below the tile count is persistent (block b computes tiles
// b, b + G, b + 2G, ...), and S > 1 splits K into S slices: C is then an fp32 workspace of S slabs of
// M x N partial sums, which splitk_reduce adds up.
#endif
#ifndef TC_MINB
#define TC_MINB 1
#endif
#ifndef TC_EPILOGUE
#define TC_EPILOGUE 0    // 1: C = GELU(A·B + bias); 2: C = GELU(A·B + bias) + residual (notebook 08)
// With TC_EPILOGUE 1 or 2 the kernel takes two more arguments, bias (N bf16) and residual (M x N bf16,
// read by TC_EPILOGUE 2 only); not with split-K.
#endif
#ifndef TC_PROXY_FENCE
#define TC_PROXY_FENCE 1 // 0: leave out the TMA path's proxy fence (notebook 09 shows what goes wrong)
#endif
#ifndef TC_EPILOGUE_GELU
#define TC_EPILOGUE_GELU 1 // 0: the fused epilogue adds the bias (and residual) but applies no GELU
#endif
#ifndef TC_STAGE_C
#define TC_STAGE_C 0     // 1: interior tiles of C go out through shared memory in 16-byte stores (sm_90+, notebook 08)
// (one tile per block; the tiles' dynamic shared memory already holds each warp's WM x WN bf16 tile, 32 KiB in all)
#endif
#ifndef TC_GELU_TANHF
#define TC_GELU_TANHF 0  // 1: the epilogue's GELU calls tanhf rather than the hardware tanh
#endif
#define TC_THREADS ((TC_BM / TC_WM) * (TC_BN / TC_WN) * 32)
// The tiles, plus room to align them to 1024 bytes (the TMA swizzle's period) and the mbarriers.
#define TC_SMEM_BYTES (TC_STAGES * (TC_BM * TC_BK + TC_BK * TC_BN) * 2 + 1024 + 64)

#include "common.cuh"       // bf16_raw, bf16_to_float, pack_bf16x2, ldmatrix_x4(_trans), stmatrix_x4
#include "async_copy.cuh"   // smem_u32_asm, cp.async, and the TMA path's mbarriers, fences and tile loads
#include "gelu.cuh"         // gelu_of_half, the fused epilogue's GELU

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ void mma_bf16(float* d, const u32* a, u32 b0, u32 b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The fused epilogue's GELU of h = x/2 (torch.nn.functional.gelu(approximate="tanh")): gelu.cuh's, with
// the hardware tanh, whose error (about 2^-11 relative) is below bf16's 2^-8; or, with TC_GELU_TANHF,
// the same fold with the libm tanhf, whose dozens of dependent instructions per output cost more than
// the GEMM itself at small K here (notebook 08 measures it).
__device__ __forceinline__ float epilogue_gelu(float h) {
#if TC_GELU_TANHF
    return fmaf(h, tanhf(h * fmaf(0.2854192650904010f, h * h, 1.5957691216057308f)), h);
#else
    return gelu_of_half(h);
#endif
}

// The bias as the epilogue holds it: halved when GELU follows, so that x/2 + b/2 is one FFMA
// (h = fma(x, 0.5, b/2)) where x + b and then x/2 were two instructions. Scaling by 2 and 1/2 is
// exact away from subnormals, so the outputs are bit for bit those of the unhalved form.
__device__ __forceinline__ float epilogue_bias(float b) { return TC_EPILOGUE_GELU ? 0.5f * b : b; }
// bias2 holds bias[c] and bias[c + 1] as bf16, the low half first.
__device__ __forceinline__ float2 epilogue_bias_pair(u32 bias2) {
    return make_float2(epilogue_bias(__uint_as_float(bias2 << 16)), epilogue_bias(__uint_as_float(bias2 & 0xffff0000u)));
}

// + bias, then the fused epilogue's activation: GELU, or nothing (TC_EPILOGUE_GELU 0, bias only:
// notebook 08 measures the GELU's arithmetic apart from the bias's loads). b is epilogue_bias's.
__device__ __forceinline__ float bias_activation(float x, float b) {
    return TC_EPILOGUE_GELU ? epilogue_gelu(fmaf(x, 0.5f, b)) : x + b;
}
__device__ __forceinline__ void bias_activation(float& x0, float& x1, float2 b) {
    x0 = bias_activation(x0, b.x);
    x1 = bias_activation(x1, b.y);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint4 ld_shared_16(u32 addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
    return v;
}
// Eight bf16 + eight bf16, each sum rounded to bf16 once (four add.bf16x2).
__device__ __forceinline__ uint4 add_bf16x8(uint4 a, uint4 b) {
    asm("add.rn.bf16x2 %0, %0, %1;" : "+r"(a.x) : "r"(b.x));
    asm("add.rn.bf16x2 %0, %0, %1;" : "+r"(a.y) : "r"(b.y));
    asm("add.rn.bf16x2 %0, %0, %1;" : "+r"(a.z) : "r"(b.z));
    asm("add.rn.bf16x2 %0, %0, %1;" : "+r"(a.w) : "r"(b.w));
    return a;
}
#endif

// The fused epilogue on a pair of outputs (row r, columns c and c + 1) before they are rounded to
// bf16: + bias[c], the activation, then + residual[r][c] (TC_EPILOGUE 2). Columns at or past N are left alone.
__device__ __forceinline__ void epilogue_pair(float& x0, float& x1, int r, int c, int N,
                                              const bf16_raw* __restrict__ bias,
                                              const bf16_raw* __restrict__ residual) {
    if (TC_EPILOGUE == 0) return;
    const bf16_raw* res = residual + (size_t)r * N + c;
    if (c + 1 < N && (N & 1) == 0) {   // both in range, 4-byte aligned: one load of each pair
        bias_activation(x0, x1, epilogue_bias_pair(*reinterpret_cast<const u32*>(bias + c)));
        if (TC_EPILOGUE == 2) {
            u32 r2 = *reinterpret_cast<const u32*>(res);
            x0 += __uint_as_float(r2 << 16);
            x1 += __uint_as_float(r2 & 0xffff0000u);
        }
        return;
    }
    if (c < N) x0 = bias_activation(x0, epilogue_bias(bf16_to_float(bias[c]))) + (TC_EPILOGUE == 2 ? bf16_to_float(res[0]) : 0.f);
    if (c + 1 < N) x1 = bias_activation(x1, epilogue_bias(bf16_to_float(bias[c + 1]))) + (TC_EPILOGUE == 2 ? bf16_to_float(res[1]) : 0.f);
}

// One 16-byte chunk (8 bf16) of row `row`, columns col..col+7, of a rows x cols
// row-major matrix into shared memory at dst, on the path for matrices whose rows
// may not be 16-byte aligned. A chunk wholly inside an aligned matrix is one
// cp.async; one that straddles the right edge, or a row that is not 16-byte
// aligned (cols % 8 != 0), is copied element by element with zeros beyond the edge.
__device__ __forceinline__ void load_chunk(bf16_raw* dst, const bf16_raw* __restrict__ src, int row, int col,
                                           int rows, int cols) {
    if (row < rows && col + 8 <= cols && (cols & 7) == 0) {
        cp_async16(smem_u32_asm(dst), src + (size_t)row * cols + col, 16);
    } else if (row < rows && col < cols) {
        const bf16_raw* s = src + (size_t)row * cols;
#pragma unroll
        for (int e = 0; e < 8; ++e) dst[e] = (col + e < cols) ? s[col + e] : (bf16_raw)0;
    } else {
        cp_async16(smem_u32_asm(dst), src, 0);   // all zeros; src is only a valid address
    }
}

// The kernel body, compiled three ways. ALIGNED (K and N multiples of 8, the usual case): every
// 16-byte chunk lies wholly inside or wholly outside its matrix and the main loop is pipelined;
// its tiles come by cp.async, or by the TMA when TMA is set. Otherwise rows are not 16-byte
// aligned, chunks may be copied element by element, and a plain loop is used.
template <bool ALIGNED, bool TMA>
__device__ __forceinline__ void gemm_body(const bf16_raw* __restrict__ A, const bf16_raw* __restrict__ B,
                                          bf16_raw* __restrict__ C, int M, int N, int K,
                                          const unsigned long long* __restrict__ tensor_maps, int pid
#if TC_EPILOGUE
                                          , const bf16_raw* __restrict__ bias, const bf16_raw* __restrict__ residual
#endif
                                          ) {
    constexpr int BM = TC_BM, BN = TC_BN, BK = TC_BK, WM = TC_WM, WN = TC_WN, S = TC_STAGES;
    constexpr int NT = TC_THREADS;
    constexpr int MT = WM / 16, NT8 = WN / 8;          // mma tiles per warp: MT x NT8 of 16x8
    constexpr int CA = BK / 8, CB = BN / 8;            // 16-byte chunks per row of the A and B tiles
    constexpr int RA = 8 / CA > 0 ? 8 / CA : 1;        // A rows per 128-byte line (swizzle period)
    constexpr int A_CHUNKS = BM * CA / NT, B_CHUNKS = BK * CB / NT;
    constexpr int KK = BK / 16;                        // k16 steps per tile
    static_assert(BK % 32 == 0 && CA <= 8 && BN % 64 == 0 && WN % 16 == 0 && WM % 16 == 0, "bad tile");
    static_assert(MT % 2 == 0 && MT >= 4 && KK % 2 == 0, "the main loop alternates two fragment sets");
    static_assert(A_CHUNKS * NT == BM * CA && B_CHUNKS * NT == BK * CB, "loads do not cover the tile");
    static_assert(NT % CA == 0 && NT % CB == 0, "a thread's chunks must share one chunk column");
    static_assert(A_CHUNKS <= 32, "the row mask has 32 bits");
    extern __shared__ __align__(128) unsigned char smem[];
    // [S][BM][BK] A tiles, then [S][BN/64][BK][64] B tiles, both swizzled; then S mbarriers (TMA).
    const u32 s_base = (smem_u32_asm(smem) + 1023u) & ~1023u;
    const u32 sA0 = s_base, sB0 = s_base + S * BM * BK * 2;
    [[maybe_unused]] const u32 bars = sB0 + S * BK * BN * 2;
    bf16_raw* sA = reinterpret_cast<bf16_raw*>(smem + (s_base - smem_u32_asm(smem)));
    bf16_raw* sB = sA + S * BM * BK;

    // Rasterise in groups of TC_GROUP_M block rows, so that concurrently running
    // blocks share B columns (and A rows) in L2 instead of each streaming its own.
    const int grid_m = (M + BM - 1) / BM, grid_n = (N + BN - 1) / BN;
    const int group = pid / (TC_GROUP_M * grid_n);
    const int first_m = group * TC_GROUP_M;
    const int rows_in_group = min(grid_m - first_m, TC_GROUP_M);
    const int bm = (first_m + (pid % (TC_GROUP_M * grid_n)) % rows_in_group) * BM;
    const int bn = ((pid % (TC_GROUP_M * grid_n)) / rows_in_group) * BN;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;

    // cp.async: each thread copies A_CHUNKS chunks of the A tile (one chunk column, rows
    // a_r0 + i*A_STEP) and B_CHUNKS of the B tile (rows b_r0 + i*B_STEP). Chunk c of row r of an
    // A tile is stored at chunk c ^ ((r / RA) % CA), of a B block at (c % 8) ^ (r % 8); the steps
    // keep that term the same for all of a thread's chunks, so in shared memory chunk i sits a
    // constant stride after the first, and in global memory too. The addresses are therefore
    // worked out once, here, and which rows and columns exist never changes along K.
    constexpr int A_STEP = NT / CA, B_STEP = NT / CB;
    const int a_r0 = tid / CA, a_c = tid % CA, b_r0 = tid / CB, b_c = tid % CB;
    const bf16_raw* a_src = A + (size_t)(bm + a_r0) * K + a_c * 8;    // chunk i of tile k0: + k0 + i * a_stride
    const size_t a_stride = (size_t)A_STEP * K;
    const bf16_raw* b_src = B + (size_t)b_r0 * N + bn + b_c * 8;      // chunk i of tile k0: + k0 * N + i * b_stride
    const size_t b_stride = (size_t)B_STEP * N;
    u32 a_rows_ok = 0;                                                 // bit i: the row of A chunk i exists
#pragma unroll
    for (int i = 0; i < A_CHUNKS; ++i) a_rows_ok |= (bm + a_r0 + i * A_STEP < M ? 1u : 0u) << i;
    const bool b_col_ok = bn + b_c * 8 < N;
    const u32 a_dst0 = (a_r0 * BK + ((a_c ^ ((a_r0 / RA) % CA)) * 8)) * 2;
    const u32 b_dst0 = (b_c / 8) * BK * 128 + b_r0 * 128 + (((b_c % 8) ^ (b_r0 % 8)) * 16);
    static_assert(B_STEP % 8 == 0, "B chunks of one thread must share their swizzle");
    static_assert((A_STEP / RA) % CA == 0 && A_STEP % RA == 0, "A chunks of one thread must share their swizzle");
    const bool interior = bm + BM <= M && bn + BN <= N;              // the block's C tile is all inside C
    auto load_tile = [&](int stage, int k0) {
        const u32 a_stage = sA0 + stage * BM * BK * 2, b_stage = sB0 + stage * BK * BN * 2;
        if (ALIGNED) {
            const bf16_raw* a_p = a_src + k0;
            const bf16_raw* b_p = b_src + (size_t)k0 * N;
            if (interior && k0 + BK <= K) {   // every tile but the last, in all but the edge blocks
#pragma unroll
                for (int i = 0; i < A_CHUNKS; ++i) cp_async16_full(a_stage + a_dst0 + i * A_STEP * BK * 2, a_p + i * a_stride);
#pragma unroll
                for (int i = 0; i < B_CHUNKS; ++i) cp_async16_full(b_stage + b_dst0 + i * B_STEP * 128, b_p + i * b_stride);
            } else {                          // chunks outside the matrix are zero-filled (source size 0)
                const bool a_k_ok = k0 + a_c * 8 < K;
#pragma unroll
                for (int i = 0; i < A_CHUNKS; ++i) {
                    bool ok = a_k_ok && ((a_rows_ok >> i) & 1u);
                    cp_async16(a_stage + a_dst0 + i * A_STEP * BK * 2, ok ? a_p + i * a_stride : A, ok ? 16 : 0);
                }
#pragma unroll
                for (int i = 0; i < B_CHUNKS; ++i) {
                    bool ok = b_col_ok && k0 + b_r0 + i * B_STEP < K;
                    cp_async16(b_stage + b_dst0 + i * B_STEP * 128, ok ? b_p + i * b_stride : B, ok ? 16 : 0);
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < A_CHUNKS; ++i) {
                int r = a_r0 + i * A_STEP;
                load_chunk(sA + stage * BM * BK + r * BK + ((a_c ^ ((r / RA) % CA)) * 8), A, bm + r, k0 + a_c * 8, M, K);
            }
#pragma unroll
            for (int i = 0; i < B_CHUNKS; ++i) {
                int r = b_r0 + i * B_STEP;
                load_chunk(sB + stage * BK * BN + (b_c / 8) * BK * 64 + r * 64 + (((b_c % 8) ^ (r % 8)) * 8), B, k0 + r,
                           bn + b_c * 8, K, N);
            }
        }
    };

    float acc[MT][NT8][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT8; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

    // ldmatrix.x4: lane l points at row (l % 8) of matrix (l / 8). For A the four
    // matrices are (rows 0-7 | 8-15) x (k 0-7 | 8-15); for B (k 0-7 | 8-15) x (n 0-7 | 8-15).
    const int lrow = (lane % 8) + ((lane / 8) & 1) * 8;
    const int lhalf = lane / 16;
    // Per-lane parts of the ldmatrix addresses. An A row's swizzle depends only on lrow (warp and
    // mma-tile offsets are multiples of 16 rows); a B row's on lane % 8.
    const u32 a_lane = (wm0 + lrow) * BK * 2;
    const int a_sw = (lrow / RA) % CA;
    u32 b_lane[NT8 / 2];
#pragma unroll
    for (int j = 0; j < NT8; j += 2) {
        const int c = (wn0 + j * 8) / 8 + lhalf;      // 16-byte chunk of the B tile's row
        b_lane[j / 2] = (c / 8) * BK * 128 + lrow * 128 + (((c % 8) ^ (lane % 8)) * 16);
    }
    auto load_a = [&](u32 (&a)[4], int stage, int kk, int i) {   // A fragment of mma row i, step kk
        const u32 a_base = sA0 + stage * BM * BK * 2 + a_lane + (((kk * 2 + lhalf) ^ a_sw) * 16);
        ldmatrix_x4(a_base + i * 16 * BK * 2, a[0], a[1], a[2], a[3]);
    };
    auto load_b = [&](u32 (&b)[NT8][2], int stage, int kk) {     // all B fragments of step kk
        const u32 b_base = sB0 + stage * BK * BN * 2 + kk * 16 * 128;
#pragma unroll
        for (int j = 0; j < NT8; j += 2)
            ldmatrix_x4_trans(b_base + b_lane[j / 2], b[j][0], b[j][1], b[j + 1][0], b[j + 1][1]);
    };
    auto mma_row = [&](int i, const u32 (&a)[4], const u32 (&b)[NT8][2]) {
#pragma unroll
        for (int j = 0; j < NT8; ++j) mma_bf16(acc[i][j], a, b[j][0], b[j][1]);
    };

#if TC_SCHEDULED
    // Split-K: slice blockIdx.y of gridDim.y takes an equal run of whole BK tiles of the K loop.
    const int k_tiles = (K + BK - 1) / BK, per_slice = (k_tiles + gridDim.y - 1) / gridDim.y;
    const int t_first = blockIdx.y * per_slice, k_first = t_first * BK;
    const int tiles = max(0, min(per_slice, k_tiles - t_first));
#else
    // The tuned kernel keeps its registers: the scheduling state costs spills at 255 registers.
    constexpr int t_first = 0, k_first = 0;
    const int tiles = (K + BK - 1) / BK;
#endif
    if (ALIGNED) {
        // Pipelined: all S slots are filled up front; the copy of tile t + S into tile t's slot
        // starts while tile t's last MMAs run. Fragments are read one step ahead of their MMAs:
        // A one mma row ahead (two 4-register sets), B one k16 step ahead (two sets). In tile t
        // the one barrier sits after the last read of tile t, before its last two rows of MMAs.
#if __CUDA_ARCH__ >= 900
        const void* map_a = tensor_maps;
        const void* map_b = tensor_maps + 16;
        auto tma_fill = [&](int slot, int tile) {     // one thread: tile `tile` into `slot`
            const u32 bar = bars + slot * 8;
            mbar_expect_bytes(bar, (BM * BK + BK * BN) * 2);
            tma_load_2d(sA0 + slot * BM * BK * 2, map_a, tile * BK, bm, bar);
#pragma unroll
            for (int h = 0; h < BN / 64; ++h) tma_load_2d(sB0 + slot * BK * BN * 2 + h * BK * 128, map_b, bn + h * 64, tile * BK, bar);
        };
#endif
        if (TMA) {
#if __CUDA_ARCH__ >= 900
            static_assert(!TMA || BK == 64, "TMA tiles have 128-byte rows");
            if (tid == 0) {
                // The maps were written by a host copy: order that before the TMA reads them.
                tensormap_acquire(map_a);
                tensormap_acquire(map_b);
#pragma unroll
                for (int s = 0; s < S; ++s) mbar_init(bars + s * 8, 1);
                mbar_init_fence();
            }
            __syncthreads();
            if (tid == 0) {
#pragma unroll
                for (int s = 0; s < S; ++s)
                    if (s < tiles) tma_fill(s, t_first + s);
            }
            mbar_wait_untimed(bars, 0);
#endif
        } else {
#pragma unroll
            for (int s = 0; s < S; ++s) {
                if (s < tiles) load_tile(s, k_first + s * BK);
                cp_async_commit();                  // empty groups keep the count uniform
            }
            cp_async_wait<S - 1>();                 // tile 0 has landed (this thread's copies)...
            __syncthreads();                        // ...everyone's have
        }
        u32 af[2][4], bfr[2][NT8][2];
        load_b(bfr[0], 0, 0);
        load_a(af[0], 0, 0, 0);
        int slot = 0;
        for (int t = 0; t < tiles; ++t) {
            const int next_slot = slot + 1 == S ? 0 : slot + 1;
#pragma unroll
            for (int kk = 0; kk < KK; ++kk) {
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    if (i + 1 < MT) load_a(af[(i + 1) & 1], slot, kk, i + 1);
                    if (kk < KK - 1) {
                        if (i == 1) load_b(bfr[(kk + 1) & 1], slot, kk + 1);
                        if (i == MT - 1) load_a(af[0], slot, kk + 1, 0);
                    } else {
                        if (i == MT - 2) {   // this thread has read all of tile t
                            if (TMA) {
#if __CUDA_ARCH__ >= 900
                                // ldmatrix reads and TMA writes go through different proxies: without
                                // this fence the refill may overwrite the slot under a pending read.
#if TC_PROXY_FENCE
                                fence_proxy_async_shared_cta();
#endif
                                __syncthreads();   // everyone has: the slot is free
                                if (tid == 0 && t + S < tiles) tma_fill(slot, t_first + t + S);
                                if (t + 1 < tiles) mbar_wait_untimed(bars + next_slot * 8, ((t + 1) / S) & 1);
#endif
                            } else if (S == 1) {
                                // One slot: nothing overlaps. Everyone has read tile t; tile t + 1 is
                                // copied into the same slot and waited for before any more math.
                                __syncthreads();
                                if (t + 1 < tiles) load_tile(slot, k_first + (t + 1) * BK);
                                cp_async_commit();
                                cp_async_wait<0>();
                                __syncthreads();
                            } else {
                                cp_async_wait<(S >= 2 ? S - 2 : 0)>();   // tile t + 1 has landed (this thread's copies)...
                                __syncthreads();          // ...everyone's, and everyone has read tile t
                                if (t + S < tiles) load_tile(slot, k_first + (t + S) * BK);
                                cp_async_commit();
                            }
                            if (t + 1 < tiles) load_b(bfr[0], next_slot, 0);
                        }
                        if (i == MT - 1 && t + 1 < tiles) load_a(af[0], next_slot, 0, 0);
                    }
                    mma_row(i, af[i & 1], bfr[kk & 1]);
                }
            }
            slot = next_slot;
        }
        if (TMA && TC_SCHEDULED) {
#if __CUDA_ARCH__ >= 900
            __syncthreads();   // nobody waits on the barriers any more: retire them for the next tile
            if (tid == 0)
#pragma unroll
                for (int s = 0; s < S; ++s) mbar_inval(bars + s * 8);
#endif
        }
    } else {
        // Plain: S - 1 tiles in flight; at the top of tile t one barrier says that tile t has landed
        // and that tile t - 1's slot is free for tile t + S - 1.
#pragma unroll
        for (int s = 0; s < S - 1; ++s) {
            if (s < tiles) load_tile(s, k_first + s * BK);
            cp_async_commit();
        }
        for (int t = 0; t < tiles; ++t) {
            if (S == 1) {   // one slot: wait until everyone is done with tile t - 1, then copy tile t and wait
                __syncthreads();
                load_tile(0, k_first + t * BK);
                cp_async_commit();
                cp_async_wait<0>();
                __syncthreads();
            } else {
                cp_async_wait<(S >= 2 ? S - 2 : 0)>();
                __syncthreads();
                int next = t + S - 1;
                if (next < tiles) load_tile(next % S, k_first + next * BK);
                cp_async_commit();
            }
#pragma unroll
            for (int kk = 0; kk < KK; ++kk) {
                u32 a[4], b[NT8][2];
                load_b(b, t % S, kk);
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    load_a(a, t % S, kk, i);
                    mma_row(i, a, b);
                }
            }
        }
    }
    cp_async_wait<0>();

    // Accumulator layout of m16n8: lane (g = lane/4, q = lane%4) holds rows g and g+8, columns 2q, 2q+1.
    const int g = lane / 4, q = lane % 4;
#if TC_EPILOGUE
    // The fused epilogue's bias pairs at this thread's columns of an interior tile (the same for every row).
    auto load_bias_pairs = [&](float2 (&bias2)[NT8]) {
#pragma unroll
        for (int j = 0; j < NT8; ++j) bias2[j] = epilogue_bias_pair(*reinterpret_cast<const u32*>(bias + bn + wn0 + j * 8 + 2 * q));
    };
#endif
    if (TC_SCHEDULED && gridDim.y > 1) {   // split-K: this slice's fp32 partial sums, into slab blockIdx.y of the workspace
        float* P = reinterpret_cast<float*>(C) + (size_t)blockIdx.y * M * N;
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT8; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    int r = bm + wm0 + i * 16 + g + h * 8, c = bn + wn0 + j * 8 + 2 * q;
                    if (r >= M) continue;
                    if (c < N) P[(size_t)r * N + c] = acc[i][j][2 * h];
                    if (c + 1 < N) P[(size_t)r * N + c + 1] = acc[i][j][2 * h + 1];
                }
        return;
    }
#if __CUDA_ARCH__ >= 900
    if (TC_STAGE_C && !TC_SCHEDULED && ALIGNED && interior) {
        // The accumulators hold pairs: every store above writes 4 bytes, and a warp's store covers
        // 8 rows x 16 bytes. Here each warp writes its WM x WN tile (bf16, after the bias and the
        // activation) into shared memory with stmatrix, reads it back a 16-byte chunk per lane,
        // 4 rows x 128 bytes a warp, and stores that: 16 stores a lane instead of 64. The chunk c of
        // row r sits at c ^ (r % 8), so that neither the stmatrix rows nor the read-back collide in
        // banks. The residual is read the same way and added to the rounded bf16 result (one more
        // rounding, as the unfused plans have).
        static_assert(!TC_STAGE_C || WN == 64, "the staging swizzle takes eight 16-byte chunks a row");
        static_assert(!TC_STAGE_C || BM * BN <= S * (BM * BK + BK * BN), "the pipeline's slots must hold C");
#if TC_EPILOGUE
        float2 bias2[NT8];
        load_bias_pairs(bias2);
#endif
        __syncthreads();   // every warp has read the last tile: the slots may take C
        const u32 stage = s_base + warp * WM * WN * 2;
        auto staged_chunk = [&](int row, int chunk) { return stage + row * WN * 2 + ((chunk ^ (row % 8)) * 16); };
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int jj = 0; jj < NT8 / 2; ++jj) {
                u32 v[4];   // matrices (rows 0-7 | 8-15) x (columns j = 2jj | 2jj + 1) of mma row i
#pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int j = 2 * jj + m / 2, h = m % 2;
                    float x0 = acc[i][j][2 * h], x1 = acc[i][j][2 * h + 1];
#if TC_EPILOGUE
                    bias_activation(x0, x1, bias2[j]);
#endif
                    v[m] = pack_bf16x2(x0, x1);
                }
                const int row = i * 16 + ((lane / 8) % 2) * 8 + lane % 8, chunk = 2 * jj + lane / 16;
                stmatrix_x4(staged_chunk(row, chunk), v[0], v[1], v[2], v[3]);
            }
        __syncwarp();
        const int chunk = lane % 8;
        const size_t first = (size_t)(bm + wm0 + lane / 8) * N + bn + wn0 + chunk * 8;
#pragma unroll
        for (int it = 0; it < WM / 4; ++it) {
            const int row = it * 4 + lane / 8;
            uint4 v = ld_shared_16(staged_chunk(row, chunk));
            const size_t at = first + (size_t)(it * 4) * N;
#if TC_EPILOGUE == 2
            v = add_bf16x8(v, *reinterpret_cast<const uint4*>(residual + at));
#endif
            *reinterpret_cast<uint4*>(C + at) = v;
        }
        return;
    }
#endif
    if (interior && (N & 1) == 0) {   // the whole tile inside C, rows 4-byte aligned: no checks
        bf16_raw* c0 = C + (size_t)(bm + wm0 + g) * N + bn + wn0 + 2 * q;
#if TC_EPILOGUE
        // The fused epilogue's inputs are loaded a row of pairs at a time before any is used, so
        // their latencies overlap: the bias pairs once (the same for every row), the residual's per row.
        float2 bias2[NT8];
        u32 res2[NT8];
        load_bias_pairs(bias2);
#endif
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                u32* row = reinterpret_cast<u32*>(c0 + (size_t)(i * 16 + h * 8) * N);
#if TC_EPILOGUE == 2
                const u32* rrow = reinterpret_cast<const u32*>(residual + (c0 - C) + (size_t)(i * 16 + h * 8) * N);
#pragma unroll
                for (int j = 0; j < NT8; ++j) res2[j] = rrow[j * 4];
#endif
#pragma unroll
                for (int j = 0; j < NT8; ++j) {
                    float x0 = acc[i][j][2 * h], x1 = acc[i][j][2 * h + 1];
#if TC_EPILOGUE
                    bias_activation(x0, x1, bias2[j]);
#endif
#if TC_EPILOGUE == 2
                    x0 += __uint_as_float(res2[j] << 16);
                    x1 += __uint_as_float(res2[j] & 0xffff0000u);
#endif
                    row[j * 4] = pack_bf16x2(x0, x1);
                }
            }
        return;
    }

#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int r = bm + wm0 + i * 16 + g + h * 8, c = bn + wn0 + j * 8 + 2 * q;
                if (r >= M) continue;
#if TC_EPILOGUE
                epilogue_pair(acc[i][j][2 * h], acc[i][j][2 * h + 1], r, c, N, bias, residual);
#endif
                u32 v = pack_bf16x2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                bf16_raw* dst = C + (size_t)r * N + c;
                if (c + 1 < N && (N & 1) == 0) {
                    *reinterpret_cast<u32*>(dst) = v;
                } else {
                    if (c < N) dst[0] = (bf16_raw)(v & 0xffff);
                    if (c + 1 < N) dst[1] = (bf16_raw)(v >> 16);
                }
            }
}

// One output tile: the pipelined body where rows are 16-byte aligned (by the TMA when the maps
// are given), the element-wise one where they are not.
__device__ __forceinline__ void bf16_gemm_tile(const bf16_raw* __restrict__ A, const bf16_raw* __restrict__ B,
                                               bf16_raw* __restrict__ C, int M, int N, int K,
                                               const unsigned long long* __restrict__ tensor_maps, int pid
#if TC_EPILOGUE
                                               , const bf16_raw* __restrict__ bias, const bf16_raw* __restrict__ residual
#endif
                                               ) {
    if ((K & 7) == 0 && (N & 7) == 0) {
#if __CUDA_ARCH__ >= 900 && TC_BK == 64
        if (tensor_maps) {
            gemm_body<true, true>(A, B, C, M, N, K, tensor_maps, pid
#if TC_EPILOGUE
                                  , bias, residual
#endif
                                  );
            return;
        }
#endif
        gemm_body<true, false>(A, B, C, M, N, K, tensor_maps, pid
#if TC_EPILOGUE
                               , bias, residual
#endif
                               );
    } else {
        gemm_body<false, false>(A, B, C, M, N, K, tensor_maps, pid
#if TC_EPILOGUE
                                , bias, residual
#endif
                                );
    }
}
#endif

// Launch: block (TC_THREADS = 128), grid (G, S), dynamic shared memory TC_SMEM_BYTES = 99392
// (opt in above 48 KiB). G = ceil(M / TC_BM) * ceil(N / TC_BN) gives one output tile per block,
// and S = 1 (the switches at the top of the file say what other builds take). A, B, C: raw bf16
// (uint16), row-major, 16-byte aligned. tensor_maps: null for cp.async copies; or, on sm_90+ with K
// and N multiples of 8, two CUtensorMaps in global memory (A: dims {K, M}, box {64, TC_BM};
// B: dims {N, K}, box {64, TC_BK}; bf16, 128-byte swizzle, zero fill) for TMA copies.
// Compute capability 8.0+.
extern "C" __global__ __launch_bounds__(TC_THREADS, TC_MINB) void bf16_gemm_mma(
        const bf16_raw* __restrict__ A, const bf16_raw* __restrict__ B, bf16_raw* __restrict__ C,
        int M, int N, int K, const unsigned long long* __restrict__ tensor_maps
#if TC_EPILOGUE
        , const bf16_raw* __restrict__ bias, const bf16_raw* __restrict__ residual
#endif
        ) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#if TC_SCHEDULED
    const int tiles_mn = ((M + TC_BM - 1) / TC_BM) * ((N + TC_BN - 1) / TC_BN);
    for (int pid = blockIdx.x; pid < tiles_mn; pid += gridDim.x) {
        if (pid != (int)blockIdx.x) __syncthreads();   // the last tile's shared memory is free
        bf16_gemm_tile(A, B, C, M, N, K, tensor_maps, pid
#if TC_EPILOGUE
                       , bias, residual
#endif
                       );
    }
#else
    bf16_gemm_tile(A, B, C, M, N, K, tensor_maps, blockIdx.x
#if TC_EPILOGUE
                   , bias, residual
#endif
                   );
#endif
#else
    __trap();   // bf16 mma.sync needs compute capability 8.0 or newer
#endif
}

// One fp32 partial per slice in, C = bf16(sum of the slices) out, rounded once.
// Launch: block (256), grid (ceil(mn / 256)). P: slices slabs of mn floats; C: mn bf16.
extern "C" __global__ void splitk_reduce(const float* __restrict__ P, bf16_raw* __restrict__ C, int slices,
                                         long long mn) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= mn) return;
    float sum = 0.f;
    for (int z = 0; z < slices; ++z) sum += P[(size_t)z * mn + i];
    C[i] = (bf16_raw)(pack_bf16x2(sum, 0.f) & 0xffff);
#else
    __trap();   // the bf16 conversion needs compute capability 8.0 or newer
#endif
}
