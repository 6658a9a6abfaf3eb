// The course's one home of the asynchronous-copy primitives: cp.async (sm_80+), and the sm_90+
// pieces, mbarriers, cp.async.bulk, TMA tensor loads and the proxy fences around them. No kernel
// writes its own inline asm for these; tests/test_async_copy_header.py fails if one does.
//
// Who uses what:
//   gemm_bf16.cu    smem_u32_asm, cp_async16, cp_async16_full, cp_async_commit, cp_async_wait<N>; on
//                   its TMA path tensormap_acquire, mbar_init, mbar_init_fence, mbar_expect_bytes,
//                   tma_load_2d, fence_proxy_async_shared_cta, mbar_wait_untimed, mbar_inval
//   pipeline.cu     smem_u32, globaltimer_ns, cp_async16, cp_async_commit, cp_async_wait<N>, mbar_init,
//                   mbar_init_fence, mbar_arrive, mbar_expect_bytes, mbar_wait_clock_every_1024,
//                   bulk_load_g2s, bulk_store_s2g, bulk_commit_group, bulk_wait_group_read<N>,
//                   fence_proxy_async_shared_cta
//   fusion.cu       smem_u32, cp_async16, cp_async4_ca, cp_async_commit, cp_async_wait_all
//   attention.cu    smem_u32, cp_async16, cp_async_commit, cp_async_wait<N>
//   decode_attention.cu  smem_u32, cp_async16, cp_async16_full, cp_async_commit, cp_async_wait<N> (its _mma kernels)
//   hopper_gemm.cu  mbar_init, mbar_init_fence, mbar_arrive, mbar_arrive_cluster, mbar_arrive_remote, mbar_expect_bytes,
//                   mbar_wait, tma_load_2d, tma_load_2d_multicast, tma_store_2d, bulk_commit_group,
//                   bulk_wait_group_read<N>, fence_proxy_async_shared_cta
//   notebook 10's kernel exercise (course_lib/kernels/exercises/warp_specialized/): smem_u32, mbar_init,
//                   mbar_init_fence, mbar_arrive, mbar_expect_bytes, mbar_wait (it writes its own
//                   bulk_load and release, so the header must not take those names)
// (mbar_test is the one try inside mbar_wait.)
//
// A family uses it with #include "async_copy.cuh"; course_lib.core.cuda pastes the header in, so NVRTC
// needs no include path. The include guard makes a second #include of it a no-op. Everything is an
// inline function, and the cp.async ones exist only where __CUDA_ARCH__ >= 800, the sm_90 ones only
// where it is >= 900 (as in the kernels that call them), so the header compiles for sm_75 .. sm_100.
//
// Where the kernels' old private copies differed, the differences are kept as separate functions
// whose names say which is which: three mbarrier waits (mbar_wait, mbar_wait_untimed,
// mbar_wait_clock_every_1024), two shared-address helpers (smem_u32, smem_u32_asm), and the arrive
// on this CTA's barrier (mbar_arrive, default .release.cta) against the one on another CTA's
// (mbar_arrive_cluster, .release.cluster). Every cp.async, bulk, TMA, mbarrier and fence asm here
// has a "memory" clobber: gemm_bf16's old cp.async copies had none, and its SASS is the same with it
// (compared for every architecture and option set the course compiles it with).

#ifndef COURSE_ASYNC_COPY_CUH
#define COURSE_ASYNC_COPY_CUH

#include "common.cuh"   // u32, u64

#ifndef ASYNC_WAIT_NS
#define ASYNC_WAIT_NS 2000000000ull   // 2 s: far longer than any correct wait in the course
#endif

// ---------------------------------------------------------------------------- every architecture

// A pointer into shared memory as the 32-bit shared-window address the PTX below takes.
__device__ __forceinline__ u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// The same address computed by inline PTX (cvta.to.shared.u64, then the low 32 bits): gemm_bf16's
// helper. The compiler cannot see through the asm as it sees through the intrinsic, and with
// smem_u32 instead gemm_bf16's SASS changes (registers and scheduling), so it keeps this one.
__device__ __forceinline__ u32 smem_u32_asm(const void* p) {
    u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

__device__ __forceinline__ u64 globaltimer_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// ---------------------------------------------------------------------------- cp.async (sm_80+)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// The source pointers keep their caller's type (a template, not a const void*): the asm then sees
// the same pointer an asm written at the call site would, and the kernels' SASS stays as it was
// (converting to void* first changed the address arithmetic of fusion's rmsnorm_prefetch, at least
// with -DROW_VECS=4 on sm_90).
//
// 16 bytes global -> shared, bypassing registers (.cg: L2 only); src_bytes < 16 zero-fills the rest
// (0: all zeros, src is then only a valid address).
template <typename T> __device__ __forceinline__ void cp_async16(u32 dst, const T* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// The same copy when the whole chunk is known to be there.
template <typename T> __device__ __forceinline__ void cp_async16_full(u32 dst, const T* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
// 4 bytes (.ca: through the L1), for addresses that are not 16-byte aligned; src_bytes 0 writes a zero.
template <typename T> __device__ __forceinline__ void cp_async4_ca(u32 dst, const T* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// Close this thread's copies issued since the last commit into one group.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Wait until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
// Wait until all of this thread's copies have landed, committed or not.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

#endif  // sm_80+

// ---------------------------------------------------------------------------- mbarriers, bulk copies, TMA (sm_90+)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

__device__ __forceinline__ void mbar_init(u32 bar, u32 arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(arrivals) : "memory");
}
// Make the initialised barriers visible to the TMA (the async proxy) and to the rest of the cluster.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Retire a barrier nobody waits on any more, so that its 8 bytes may become a new barrier.
__device__ __forceinline__ void mbar_inval(u32 bar) {
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(bar) : "memory");
}
// Arrive on this CTA's barrier (the default semantics: .release at CTA scope).
__device__ __forceinline__ void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// Arrive on the barrier at the same offset in CTA `cta` of this cluster (.release at cluster scope).
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 cta) {
    asm volatile("{ .reg .b32 remote; mapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote]; }"
                 :: "r"(bar), "r"(cta) : "memory");
}
// The same arrive with the default semantics (.release at CTA scope), as CUTLASS's cluster barrier
// does it: notebook 10 measures what the cluster-scope release costs rung 6.
__device__ __forceinline__ void mbar_arrive_remote(u32 bar, u32 cta) {
    asm volatile("{ .reg .b32 remote; mapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote]; }"
                 :: "r"(bar), "r"(cta) : "memory");
}
// Arrive, and add `bytes` to the transaction count the current phase waits for.
__device__ __forceinline__ void mbar_expect_bytes(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
// One try: has the phase with this parity completed? (try_wait may block for a while in hardware.)
__device__ __forceinline__ bool mbar_test(u32 bar, u32 parity) {
    u32 done;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done;
}

// Three waits until the phase with this parity has completed. They differ on purpose; each kernel
// keeps the one its SASS (and the notebooks' measurements) were made with.
//
// mbar_wait: the first test is the fast path; after it %globaltimer is read on every try, and a
// wait that lasts ASYNC_WAIT_NS traps, so a wrong parity or byte count fails the launch (CUDA
// reports an "unspecified launch failure") instead of never returning. hopper_gemm, the exercise.
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
    if (mbar_test(bar, parity)) return;
    const u64 start = globaltimer_ns();
    while (!mbar_test(bar, parity))
        if (globaltimer_ns() - start > ASYNC_WAIT_NS) __trap();
}
// mbar_wait_clock_every_1024: tries with no fast path; %globaltimer is read at the first failed try
// and then at every 1024th, and the wait traps once `timeout_ns` have passed. pipeline (PL_WAIT_NS).
__device__ __forceinline__ void mbar_wait_clock_every_1024(u32 bar, u32 parity, u64 timeout_ns) {
    u32 done = 0;
    u64 start = 0;
    for (u32 tries = 0; !done; ++tries) {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
        if (!done && (tries & 1023) == 0) {
            const u64 now = globaltimer_ns();
            if (tries == 0) start = now;
            else if (now - start > timeout_ns) __trap();   // a wrong parity or byte count: no phase will complete
        }
    }
}
// mbar_wait_untimed: tries until the phase completes, with no clock and no trap (a wrong parity
// hangs). gemm_bf16's TMA path, whose timings were taken with this loop.
__device__ __forceinline__ void mbar_wait_untimed(u32 bar, u32 parity) {
    u32 done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

// Order this thread's generic-proxy accesses of shared memory (ordinary loads and stores, ldmatrix,
// stmatrix) before later async-proxy ones (TMA, bulk copies, wgmma): e.g. the reads of a slot
// before the TMA refills it.
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// The tensor maps were written by a host copy into global memory: order that before the TMA reads them.
__device__ __forceinline__ void tensormap_acquire(const void* map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(map) : "memory");
}

// One bulk copy of `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory
// into shared memory at dst; its bytes count against the mbarrier's expected transactions.
__device__ __forceinline__ void bulk_load_g2s(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// The other way: `bytes` of shared memory at src into global memory, in this thread's bulk group.
__device__ __forceinline__ void bulk_store_s2g(void* dst, u32 src, u32 bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst), "r"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most N of this thread's bulk groups have not yet been read from shared memory
// (their source may then be rewritten; the writes to global memory may still be in flight).
template <int N> __device__ __forceinline__ void bulk_wait_group_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
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

// A box of shared memory at src (laid out as tma_load_2d would have written it) into a 2-D tensor at
// (x, y), in this thread's bulk group; the parts of the box outside the tensor are not written.
__device__ __forceinline__ void tma_store_2d(const void* map, u32 src, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"(map), "r"(x), "r"(y), "r"(src) : "memory");
}

#endif  // sm_90+

#endif  // COURSE_ASYNC_COPY_CUH
