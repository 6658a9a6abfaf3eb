// l2_hints.cuh: L2 eviction policies and the float4 load that carries one, for a kernel that reads its
// data twice (fusion.cu's rmsnorm_reread, and scripts/probe_rmsnorm_reread.py's variants of it).
#pragma once

// L2 eviction policies for the two reads of a row: the first asks the caches to keep its lines (L2
// evict_last), the second to let them go first (evict_first), so that a row read once stays until it is
// read again while rows already done make room (torch.compile's RMSNorm loads the same way).
// KEEP: L2 evict_last, else evict_first. Below sm_80 (no cache-eviction policies) the reads are plain loads.
template <bool KEEP>
__device__ __forceinline__ unsigned long long l2_policy() {
    unsigned long long policy = 0;
#if __CUDA_ARCH__ >= 800
    if constexpr (KEEP)
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    else
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
    return policy;
}
template <bool KEEP>
__device__ __forceinline__ float4 load4_hinted(const float* p, unsigned long long policy) {
#if __CUDA_ARCH__ >= 800
    float4 v;
    if constexpr (KEEP)
        asm volatile("ld.global.L1::evict_last.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
    else
        asm volatile("ld.global.L1::evict_first.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
    return v;
#else
    return *reinterpret_cast<const float4*>(p);
#endif
}
