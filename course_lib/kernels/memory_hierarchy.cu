// Notebook 12's read ceilings: the bandwidth of reading a working set of a given size over and over,
// so that it is served from L1, from L2 or only from HBM. The plateaus are the hierarchical
// roofline's ceilings.
//
// Both kernels XOR everything they read. Timed (check = 0), a thread writes its XOR only if it
// equals one arbitrary value, so the loads cannot be removed and next to nothing is written. With
// check = 1 every thread XORs its result into sink: the smoke test's proof that each word was read.
// Launch: block 256, any grid.

#define FINISH(x, check, sink) \
    if (check) atomicXor(sink, x); else if ((x) == 0x9E3779B9u) (sink)[0] = (x)

// Every block reads the whole set of n16 16-byte words, `reps` times: each SM's L1 holds its own copy
// when the set fits. Bytes read: gridDim.x * n16 * 16 * reps.
extern "C" __global__ __launch_bounds__(256) void read_per_block(const uint4* __restrict__ in, long long n16, int reps,
                                                                unsigned* __restrict__ sink, int check) {
    unsigned x = 0;
    for (int r = 0; r < reps; ++r)
        for (long long i = threadIdx.x; i < n16; i += blockDim.x) {
            const uint4 w = __ldg(in + i);
            x ^= w.x ^ w.y ^ w.z ^ w.w;
        }
    FINISH(x, check, sink);
}

// The grid reads the set once a rep between them (grid-stride): served by L2 when the set fits in
// it, else by HBM. Bytes read: n16 * 16 * reps.
extern "C" __global__ __launch_bounds__(256) void read_partitioned(const uint4* __restrict__ in, long long n16, int reps,
                                                                  unsigned* __restrict__ sink, int check) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    unsigned x = 0;
    for (int r = 0; r < reps; ++r)
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += stride) {
            const uint4 w = __ldg(in + i);
            x ^= w.x ^ w.y ^ w.z ^ w.w;
        }
    FINISH(x, check, sink);
}
