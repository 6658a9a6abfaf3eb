// The async-copy pieces shared by the Hopper kernels (sm_90+): shared-memory addresses, mbarriers
// whose waits give up instead of hanging, and 2-D tile copies by the TMA. A family uses them with
// #include "async_copy.cuh"; course_lib.cuda pastes the header in, so NVRTC needs no include path.

typedef unsigned int u32;
typedef unsigned long long u64;

#ifndef ASYNC_WAIT_NS
#define ASYNC_WAIT_NS 2000000000ull   // 2 s: far longer than any correct wait in the course
#endif

__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ u64 globaltimer_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ void mbar_init(u32 bar, u32 arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(arrivals) : "memory");
}
// Make the initialised barriers visible to the TMA (the async proxy) and to the rest of the cluster.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// Arrive on the barrier at the same offset in CTA `cta` of this cluster.
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 cta) {
    asm volatile("{ .reg .b32 remote; mapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote]; }"
                 :: "r"(bar), "r"(cta) : "memory");
}
// Arrive, and add `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void mbar_expect_bytes(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_test(u32 bar, u32 parity) {
    u32 done;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done;
}
// Wait until the phase with this parity has completed. The first test is the fast path; a wait that
// lasts ASYNC_WAIT_NS traps, so a wrong parity or byte count fails the launch (CUDA reports an
// "unspecified launch failure") instead of never returning.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    if (mbar_test(bar, parity)) return;
    const u64 start = globaltimer_ns();
    while (!mbar_test(bar, parity))
        if (globaltimer_ns() - start > ASYNC_WAIT_NS) __trap();
}

// The tensor maps were written by a host copy into global memory: order that before the TMA reads them.
__device__ __forceinline__ void tensormap_acquire(const void* map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(map) : "memory");
}
// A box of a 2-D tensor (x: the contiguous coordinate, y: the row) into shared memory at dst; its
// bytes count against the mbarrier's expected transactions. Parts outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_2d(u32 dst, const void* map, int x, int y, u32 bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}
// The same box written into the same offset of every CTA in cta_mask, each CTA's barrier counting its bytes.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const void* map, int x, int y, u32 bar, unsigned short cta_mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar), "h"(cta_mask) : "memory");
}
