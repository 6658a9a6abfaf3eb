// GEMM in fp32 on the CUDA cores: the course's ladder, from one thread per
// output to warp-tiled, double-buffered register blocking (notebook 06).
//
// Every kernel computes C[M,N] = A[M,K] · B[K,N] with all three matrices
// row-major fp32, and masks every edge, so any M, N, K >= 1 is correct. The
// vectorised kernels take 16-byte loads only where a row is 16-byte aligned
// (K or N a multiple of 4, pointers 16-byte aligned, as CuPy and PyTorch
// allocate them); elsewhere they fall back to masked scalar loads.
//
// The warp-tiled kernels are parametrised by macros (WT_* for steps 7 and 8,
// WB_* for step 9: block tile, stage depth, warp tile, lanes along M, minimum
// blocks per SM): pass -D options to the compiler to try other tiles.

#ifndef WT_BM
#define WT_BM 128      // block tile rows
#endif
#ifndef WT_BN
#define WT_BN 128      // block tile columns
#endif
#ifndef WT_BK
#define WT_BK 8        // depth of one shared-memory stage
#endif
#ifndef WT_WM
#define WT_WM 64       // warp tile rows
#endif
#ifndef WT_WN
#define WT_WN 32       // warp tile columns
#endif
#ifndef WT_LM
#define WT_LM 8        // lanes of a warp along M (32 / WT_LM along N)
#endif
#ifndef WT_MINB
#define WT_MINB 2      // blocks per SM the register allocation must allow
#endif
#define WT_THREADS ((WT_BM / WT_WM) * (WT_BN / WT_WN) * 32)
// Step 9's larger thread tile (16 x 8 outputs per thread).
#ifndef WB_BM
#define WB_BM 256
#endif
#ifndef WB_BN
#define WB_BN 128
#endif
#ifndef WB_BK
#define WB_BK 8
#endif
#ifndef WB_WM
#define WB_WM 64
#endif
#ifndef WB_WN
#define WB_WN 64
#endif
#ifndef WB_LM
#define WB_LM 4
#endif
#ifndef WB_MINB
#define WB_MINB 1
#endif
#define WB_THREADS ((WB_BM / WB_WM) * (WB_BN / WB_WN) * 32)

// Four consecutive floats of row `row` of a rows x cols row-major matrix,
// starting at column `col`; zeros outside the matrix.
__device__ __forceinline__ float4 load4(const float* __restrict__ p, int row, int col, int rows, int cols) {
    if (row < rows && (cols & 3) == 0 && col + 3 < cols)
        return __ldg(reinterpret_cast<const float4*>(p + (size_t)row * cols + col));
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < rows) {
        const float* r = p + (size_t)row * cols;
        if (col < cols) v.x = r[col];
        if (col + 1 < cols) v.y = r[col + 1];
        if (col + 2 < cols) v.z = r[col + 2];
        if (col + 3 < cols) v.w = r[col + 3];
    }
    return v;
}

// The mirror of load4: store the parts of v that fall inside the matrix.
__device__ __forceinline__ void store4(float* __restrict__ p, int row, int col, int rows, int cols, float4 v) {
    if (row >= rows) return;
    float* r = p + (size_t)row * cols;
    if ((cols & 3) == 0 && col + 3 < cols) {
        *reinterpret_cast<float4*>(r + col) = v;
        return;
    }
    if (col < cols) r[col] = v.x;
    if (col + 1 < cols) r[col + 1] = v.y;
    if (col + 2 < cols) r[col + 2] = v.z;
    if (col + 3 < cols) r[col + 3] = v.w;
}

// Step 1, naive. One thread per output, and threadIdx.x runs DOWN a column of
// C: the 32 lanes of a warp read 32 different rows of A (32 sectors for 32
// useful floats) and write 32 different rows of C.
// Launch: block (32, 32), grid (ceil(M / 32), ceil(N / 32)).
extern "C" __global__ void sgemm_naive(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, int M, int N, int K) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        C[(size_t)row * N + col] = acc;
    }
}

// Step 2, coalesced. The same arithmetic with threadIdx.x along a ROW of C:
// a warp now reads one A element (a broadcast) and 32 consecutive B elements,
// and writes 128 contiguous bytes of C.
// Launch: block (32, 32), grid (ceil(N / 32), ceil(M / 32)).
extern "C" __global__ void sgemm_coalesced(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
        C[(size_t)row * N + col] = acc;
    }
}

// Step 3, shared-memory tiles. A 32x32 block stages a 32x32 tile of A and of
// B in shared memory, then each thread reads its row and column from there:
// every float fetched from global memory is used 32 times. Still two shared
// loads per multiply-add.
// Launch: block (32, 32), grid (ceil(N / 32), ceil(M / 32)).
extern "C" __global__ void sgemm_smem(const float* __restrict__ A, const float* __restrict__ B,
                                      float* __restrict__ C, int M, int N, int K) {
    constexpr int T = 32;
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // nobody overwrites a tile another thread still reads
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

// Step 4, 1-D register tiling. A 64x64 tile per block of 512 threads; each
// thread accumulates 8 outputs of one column in registers, so one B value
// read from shared memory feeds 8 multiply-adds (9 shared loads per 8 FMAs
// instead of 16).
// Launch: block (512), grid (ceil(N / 64), ceil(M / 64)).
extern "C" __global__ __launch_bounds__(512) void sgemm_reg1d(const float* __restrict__ A,
                                                              const float* __restrict__ B,
                                                              float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = 64, BN = 64, BK = 8, TM = 8;
    __shared__ float As[BK][BM];   // transposed: a thread's 8 rows are contiguous
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int tcol = tid % BN, trow = tid / BN;           // trow owns rows trow*8 .. trow*8+7
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int ar = tid / BK, ac = tid % BK;               // one A element per thread per stage
    const int br = tid / BN, bc = tid % BN;               // one B element per thread per stage
    float acc[TM] = {0.f};
    for (int k0 = 0; k0 < K; k0 += BK) {
        As[ac][ar] = (bm + ar < M && k0 + ac < K) ? A[(size_t)(bm + ar) * K + k0 + ac] : 0.f;
        Bs[br][bc] = (k0 + br < K && bn + bc < N) ? B[(size_t)(k0 + br) * N + bn + bc] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float b = Bs[k][tcol];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += As[k][trow * TM + i] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        int r = bm + trow * TM + i, c = bn + tcol;
        if (r < M && c < N) C[(size_t)r * N + c] = acc[i];
    }
}

// Step 5, 2-D register tiling. A 128x128 tile per block of 256 threads; each
// thread owns an 8x8 block of outputs: per k it reads 8 A and 8 B values from
// shared memory and does 64 multiply-adds with them (16 loads : 64 FMAs).
// Launch: block (256), grid (ceil(N / 128), ceil(M / 128)).
extern "C" __global__ __launch_bounds__(256) void sgemm_reg2d(const float* __restrict__ A,
                                                              const float* __restrict__ B,
                                                              float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, NT = 256;
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    float acc[TM][TN] = {{0.f}};
    float ra[TM], rb[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = tid; i < BM * BK; i += NT) {       // 4 scalar loads of A per thread
            int r = i / BK, c = i % BK;
            As[c][r] = (bm + r < M && k0 + c < K) ? A[(size_t)(bm + r) * K + k0 + c] : 0.f;
        }
#pragma unroll
        for (int i = tid; i < BK * BN; i += NT) {       // and 4 of B
            int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && bn + c < N) ? B[(size_t)(k0 + r) * N + bn + c] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) ra[i] = As[k][trow * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) rb[j] = Bs[k][tcol * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            int r = bm + trow * TM + i, c = bn + tcol * TN + j;
            if (r < M && c < N) C[(size_t)r * N + c] = acc[i][j];
        }
}

// Step 6, vectorised. Step 5 with 16-byte accesses written out: one float4
// global load of A and one of B per thread per stage, float4 reads of the
// thread's 8 A and 8 B values from shared memory, float4 stores of C. Step 5's
// shared reads already compile to LDS.128 (notebook 06's SASS table); what
// changes in the SASS is fewer global loads and shared stores, and PAD, which
// takes the 8-way conflict out of the transposed store of A.
// Launch: block (256), grid (ceil(N / 128), ceil(M / 128)).
extern "C" __global__ __launch_bounds__(256) void sgemm_vec4(const float* __restrict__ A,
                                                             const float* __restrict__ B,
                                                             float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, PAD = 4;
    // PAD shifts each k-row of the transposed A tile by 4 banks, so the two
    // threads that store into the same A column do not collide.
    __shared__ __align__(16) float As[BK][BM + PAD];
    __shared__ __align__(16) float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int ar = tid / (BK / 4), ac = (tid % (BK / 4)) * 4;   // A: row ar, columns ac..ac+3
    const int br = tid / (BN / 4), bc = (tid % (BN / 4)) * 4;   // B: row br, columns bc..bc+3
    float acc[TM][TN] = {{0.f}};
    float ra[TM], rb[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        float4 a = load4(A, bm + ar, k0 + ac, M, K);
        As[ac + 0][ar] = a.x; As[ac + 1][ar] = a.y; As[ac + 2][ar] = a.z; As[ac + 3][ar] = a.w;
        *reinterpret_cast<float4*>(&Bs[br][bc]) = load4(B, k0 + br, bn + bc, K, N);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) *reinterpret_cast<float4*>(&ra[i]) = *reinterpret_cast<const float4*>(&As[k][trow * TM + i]);
#pragma unroll
            for (int j = 0; j < TN; j += 4) *reinterpret_cast<float4*>(&rb[j]) = *reinterpret_cast<const float4*>(&Bs[k][tcol * TN + j]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            store4(C, bm + trow * TM + i, bn + tcol * TN + j, M, N,
                   make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}

// Step 7, warp tiling. The same 8x8 outputs per thread, placed so that a warp
// reads few distinct shared-memory addresses: the block tile is cut into warp
// tiles (WT_WM x WT_WN), each warp's lanes form a WT_LM x (32/WT_LM) grid,
// and a thread's outputs are 4x4 sub-tiles repeated at a stride of 4 lanes.
// Each float4 a warp reads from shared memory is then one of at most 8
// distinct, consecutive addresses (broadcast to the rest): no bank conflicts.
// Launch: block (WT_THREADS = 256), grid (ceil(N / WT_BN), ceil(M / WT_BM)).
extern "C" __global__ __launch_bounds__(WT_THREADS, WT_MINB) void sgemm_warptile(
        const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = WT_BM, BN = WT_BN, BK = WT_BK, NT = WT_THREADS, PAD = 4;
    constexpr int LM = WT_LM, LN = 32 / WT_LM;
    constexpr int TM = WT_WM / LM, TN = WT_WN / LN;               // outputs per thread: TM x TN
    constexpr int A4 = BM * BK / 4 / NT, B4 = BK * BN / 4 / NT;   // float4 loads per thread per stage
    static_assert(TM % 4 == 0 && TN % 4 == 0 && A4 >= 1 && B4 >= 1, "tile does not divide evenly");
    static_assert(A4 * NT * 4 == BM * BK && B4 * NT * 4 == BK * BN, "loads do not cover the tile");
    __shared__ __align__(16) float As[BK][BM + PAD];
    __shared__ __align__(16) float Bs[BK][BN];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm0 = (warp / (BN / WT_WN)) * WT_WM, wn0 = (warp % (BN / WT_WN)) * WT_WN;
    const int lm = lane / LN, ln = lane % LN;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    float acc[TM][TN] = {{0.f}};
    float ra[TM], rb[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int l = 0; l < A4; ++l) {
            int f = tid + l * NT, r = f / (BK / 4), c = (f % (BK / 4)) * 4;
            float4 a = load4(A, bm + r, k0 + c, M, K);
            As[c + 0][r] = a.x; As[c + 1][r] = a.y; As[c + 2][r] = a.z; As[c + 3][r] = a.w;
        }
#pragma unroll
        for (int l = 0; l < B4; ++l) {
            int f = tid + l * NT, r = f / (BN / 4), c = (f % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) = load4(B, k0 + r, bn + c, K, N);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(&ra[i]) = *reinterpret_cast<const float4*>(&As[k][wm0 + i * LM + lm * 4]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&rb[j]) = *reinterpret_cast<const float4*>(&Bs[k][wn0 + j * LN + ln * 4]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
        }
        __syncthreads();
    }
    // Output (i, j) of this thread: row wm0 + (i/4)*4*LM + lm*4 + i%4, column likewise.
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            store4(C, bm + wm0 + (i / 4) * 4 * LM + lm * 4 + i % 4, bn + wn0 + j * LN + ln * 4, M, N,
                   make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}

// Steps 8 and 9: warp tiling + double buffering, as one template. Two shared-
// memory stages: while the block computes on one, the next stage's global
// loads are already in flight into registers and land in the other stage
// afterwards, so one barrier per stage suffices and the loads' latency hides
// behind the multiply-adds. Step 8 instantiates it with step 7's tile; step 9
// with a 16x8 thread tile (256x128 per block), which only pays because the
// double buffer keeps 8 warps per SM busy.
template <int BM, int BN, int BK, int WM, int WN, int LM>
__device__ __forceinline__ void warptile_db(const float* __restrict__ A, const float* __restrict__ B,
                                            float* __restrict__ C, int M, int N, int K) {
    constexpr int NT = (BM / WM) * (BN / WN) * 32, PAD = 4;
    constexpr int LN = 32 / LM, TM = WM / LM, TN = WN / LN;
    constexpr int A4 = BM * BK / 4 / NT, B4 = BK * BN / 4 / NT;
    static_assert(TM % 4 == 0 && TN % 4 == 0 && A4 >= 1 && B4 >= 1, "tile does not divide evenly");
    static_assert(A4 * NT * 4 == BM * BK && B4 * NT * 4 == BK * BN, "loads do not cover the tile");
    __shared__ __align__(16) float As[2][BK][BM + PAD];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm0 = (warp / (BN / WN)) * WM, wn0 = (warp % (BN / WN)) * WN;
    const int lm = lane / LN, ln = lane % LN;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    float acc[TM][TN] = {{0.f}};
    float ra[TM], rb[TN];
    float4 pa[A4], pb[B4];   // the next stage, in flight in registers

    auto fetch = [&](int k0) {
#pragma unroll
        for (int l = 0; l < A4; ++l) {
            int f = tid + l * NT;
            pa[l] = load4(A, bm + f / (BK / 4), k0 + (f % (BK / 4)) * 4, M, K);
        }
#pragma unroll
        for (int l = 0; l < B4; ++l) {
            int f = tid + l * NT;
            pb[l] = load4(B, k0 + f / (BN / 4), bn + (f % (BN / 4)) * 4, K, N);
        }
    };
    auto stash = [&](int s) {
#pragma unroll
        for (int l = 0; l < A4; ++l) {
            int f = tid + l * NT, r = f / (BK / 4), c = (f % (BK / 4)) * 4;
            As[s][c + 0][r] = pa[l].x; As[s][c + 1][r] = pa[l].y;
            As[s][c + 2][r] = pa[l].z; As[s][c + 3][r] = pa[l].w;
        }
#pragma unroll
        for (int l = 0; l < B4; ++l) {
            int f = tid + l * NT;
            *reinterpret_cast<float4*>(&Bs[s][f / (BN / 4)][(f % (BN / 4)) * 4]) = pb[l];
        }
    };

    const int stages = (K + BK - 1) / BK;
    fetch(0);
    stash(0);
    __syncthreads();
    for (int t = 0; t < stages; ++t) {
        const int s = t & 1;
        if (t + 1 < stages) fetch((t + 1) * BK);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(&ra[i]) = *reinterpret_cast<const float4*>(&As[s][k][wm0 + i * LM + lm * 4]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&rb[j]) = *reinterpret_cast<const float4*>(&Bs[s][k][wn0 + j * LN + ln * 4]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += ra[i] * rb[j];
        }
        // Stage s^1 was last read in iteration t-1, before everyone passed the
        // previous barrier, so it can be overwritten now; one barrier per stage.
        if (t + 1 < stages) stash(s ^ 1);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            store4(C, bm + wm0 + (i / 4) * 4 * LM + lm * 4 + i % 4, bn + wn0 + j * LN + ln * 4, M, N,
                   make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}

// Step 8: step 7's tile (WT_* macros), double-buffered.
// Launch: block (WT_THREADS = 256), grid (ceil(N / WT_BN), ceil(M / WT_BM)).
extern "C" __global__ __launch_bounds__(WT_THREADS, WT_MINB) void sgemm_warptile_db(
        const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    warptile_db<WT_BM, WT_BN, WT_BK, WT_WM, WT_WN, WT_LM>(A, B, C, M, N, K);
}

// Step 9: a 16x8 thread tile (WB_* macros: 256x128 per block, 64x64 per warp), double-buffered.
// Launch: block (WB_THREADS = 256), grid (ceil(N / WB_BN), ceil(M / WB_BM)).
extern "C" __global__ __launch_bounds__(WB_THREADS, WB_MINB) void sgemm_warptile_db_16x8(
        const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
    warptile_db<WB_BM, WB_BN, WB_BK, WB_WM, WB_WN, WB_LM>(A, B, C, M, N, K);
}
