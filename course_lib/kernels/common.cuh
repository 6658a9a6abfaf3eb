// The course's one home of the small CUDA helpers several kernel families share: the integer and bf16
// types, the bf16 conversions, ldmatrix / stmatrix, and a block's rank in its cluster. Each was once
// copied into every family that used it (and one copy of ldmatrix_x4 lacked the "memory" clobber);
// tests/test_common_header.py fails if a family defines one of these names again.
//
// Who uses what:
//   async_copy.cuh          u32, u64 (so every family that copies asynchronously has them)
//   gemm_bf16.cu            bf16_raw, bf16_to_float, pack_bf16x2, ldmatrix_x4, ldmatrix_x4_trans, stmatrix_x4
//   hopper_gemm.cu          bf16_raw, bf16_lo, bf16_hi, ldmatrix_x4, stmatrix_x4, cluster_rank
//   hopper_ring.cuh         bf16_raw, pack_bf16x2 (and so notebook 10's GEMM exercise)
//   fusion.cu               bf16_raw, bf16_to_float, float_to_bf16, cluster_rank
//   online_softmax.cuh      bf16_raw, bf16_lo, bf16_hi (and so decode_attention.cu and notebook 12's exercise)
//   attention.cu            u32, bf16_raw, pack_bf16x2, ldmatrix_x4, ldmatrix_x4_trans
//   decode_attention.cu     u32, pack_bf16x2, ldmatrix_x4, ldmatrix_x4_trans (its _mma kernels)
//
// Pasted in by course_lib.core.cuda like every course header (each header once per compile). The
// inline asm of each helper is emitted only where a kernel calls it, so helpers whose PTX needs sm_80
// (cvt to bf16, ldmatrix here) or sm_90 (stmatrix, the cluster rank) are guarded like the kernels
// that call them, and the header compiles for sm_75 .. sm_100.

#ifndef COURSE_COMMON_CUH
#define COURSE_COMMON_CUH

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short bf16_raw;   // the bit pattern of one bfloat16

// ---------------------------------------------------------------------------- bf16 <-> fp32

// A bf16 is the top half of an fp32: widening is a shift, exact.
__device__ __forceinline__ float bf16_to_float(bf16_raw v) { return __uint_as_float((u32)v << 16); }
// The two bf16 of a 32-bit word, the low half first in memory.
__device__ __forceinline__ float bf16_lo(u32 pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi(u32 pair) { return __uint_as_float(pair & 0xffff0000u); }

// fp32 -> bf16, rounded to nearest even, in one instruction (sm_80+). online_softmax.cuh keeps a
// software rounding (to_bf16) because decode_attention is built for sm_75 too.
__device__ __forceinline__ bf16_raw float_to_bf16(float x) {
    unsigned short r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}
// Two fp32 -> two bf16 (round to nearest even), lo in the low half (sm_80+).
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// ---------------------------------------------------------------------------- 8x8 matrices, warp-wide

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// Four 8x8 matrices of 16-bit values from shared memory into registers: lane l gives the address of row
// l % 8 of matrix l / 8, and register i of lane l receives its two values of matrix i (the mma fragment:
// row l / 4, columns 2 (l % 4) and the next). The "memory" clobber keeps the compiler from moving the
// load across the shared-memory stores that fill the tile.
__device__ __forceinline__ void ldmatrix_x4(u32 addr, u32& m0, u32& m1, u32& m2, u32& m3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(m0), "=r"(m1), "=r"(m2), "=r"(m3) : "r"(addr) : "memory");
}
// The same, each matrix transposed on the way (a K-major tile read as N-major fragments).
__device__ __forceinline__ void ldmatrix_x4_trans(u32 addr, u32& m0, u32& m1, u32& m2, u32& m3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(m0), "=r"(m1), "=r"(m2), "=r"(m3) : "r"(addr) : "memory");
}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// ldmatrix_x4's inverse: the same addresses take from each lane the values ldmatrix_x4 would have given it.
__device__ __forceinline__ void stmatrix_x4(u32 addr, u32 m0, u32 m1, u32 m2, u32 m3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "r"(m0), "r"(m1), "r"(m2), "r"(m3) : "memory");
}

// ---------------------------------------------------------------------------- clusters

// This block's rank in its thread-block cluster (0 .. cluster size - 1).
__device__ __forceinline__ u32 cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
#endif

#endif  // COURSE_COMMON_CUH
