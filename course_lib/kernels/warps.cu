// Threads, warps and blocks: which block owns which output tile, in what order blocks
// start, and what a branch costs when it splits the lanes of a warp.

// Each block owns one BM x BN tile of an M x N output and writes its own program id into
// every element of that tile; elements past the bottom and right edges are masked off.
// Thread 0 records how the block started: a ticket from a global counter (the order in
// which blocks reached that line), the SM it runs on, and the global nanosecond timer.
// It then keeps the block busy for spin_ns so that the launch spans several waves.
// Launch: block (BM * BN) with BM * BN <= 1024, grid (ceil(M / BM) * ceil(N / BN)).
// owner: M * N ints. ticket, smid: one int per block. start_ns: one u64 per block.
// counter: one unsigned int, zero before the first launch; each launch of the same grid
// adds exactly gridDim.x to it, so ticket = counter value modulo the grid size.
extern "C" __global__ void tile_owner_order(int* __restrict__ owner, int* __restrict__ ticket,
                                            int* __restrict__ smid, unsigned long long* __restrict__ start_ns,
                                            unsigned int* __restrict__ counter, int M, int N, int BM, int BN,
                                            int spin_ns) {
    const int pid = blockIdx.x;
    const int grid_n = (N + BN - 1) / BN;
    if (threadIdx.x == 0) {
        unsigned long long now;
        unsigned int sm;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        ticket[pid] = (int)(atomicAdd(counter, 1u) % gridDim.x);
        smid[pid] = (int)sm;
        start_ns[pid] = now;
    }
    const int pid_m = pid / grid_n, pid_n = pid % grid_n;
    const int e = threadIdx.x;                      // one tile element per thread, row-major
    if (e < BM * BN) {
        const int row = pid_m * BM + e / BN, col = pid_n * BN + e % BN;
        if (row < M && col < N) owner[(long long)row * N + col] = pid;   // the edge mask
    }
    if (threadIdx.x == 0 && spin_ns > 0) {
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < (unsigned long long)spin_ns);
    }
}

// Every thread applies one of four maps to its element `iters` times; `mode` decides which
// thread takes which path (see launch_geometry.DIVERGENCE_MODES). Each path is a chain of
// dependent FMAs of the same length, so every thread does the same amount of work whatever
// the mode; only how the paths fall across the lanes of a warp changes. The four maps are
// contractions, so float32 stays within a small tolerance of a float64 reference.
// mode 0: all lanes path 0; 1: path = warp % 2; 2: path = lane % 2; 3: path = warp % 4;
// 4: path = lane % 4; 5: odd warps skip the work; 6: odd lanes skip the work;
// 7: path 1 where the input is above 0.5, else path 0 (the data decides).
// Launch: block (256), grid (ceil(n / 256)). out, in: n floats, in within [0, 1).
extern "C" __global__ void divergence(float* __restrict__ out, const float* __restrict__ in, long long n,
                                      int iters, int mode) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const int lane = threadIdx.x & 31;
    const long long warp = t >> 5;
    float x = in[t];
    int path;
    switch (mode) {
        case 0: path = 0; break;
        case 1: path = (int)(warp & 1); break;
        case 2: path = lane & 1; break;
        case 3: path = (int)(warp & 3); break;
        case 4: path = lane & 3; break;
        case 5: path = (warp & 1) ? -1 : 0; break;
        case 6: path = (lane & 1) ? -1 : 0; break;
        default: path = x > 0.5f ? 1 : 0; break;
    }
    if (path == 0) {
        #pragma unroll 8
        for (int i = 0; i < iters; ++i) x = fmaf(x, 0.999f, 0.001f);
    } else if (path == 1) {
        #pragma unroll 8
        for (int i = 0; i < iters; ++i) x = fmaf(x, x, -0.25f);
    } else if (path == 2) {
        #pragma unroll 8
        for (int i = 0; i < iters; ++i) x = fmaf(-x, 0.5f, 0.75f);
    } else if (path == 3) {
        #pragma unroll 8
        for (int i = 0; i < iters; ++i) x = fmaf(x, -x, 0.5f);
    }
    out[t] = x;
}
