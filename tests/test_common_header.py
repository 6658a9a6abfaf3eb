"""common.cuh is the one home of the small helpers several kernel families share (the integer and bf16
types, the bf16 conversions, ldmatrix / stmatrix, the cluster rank): no other course kernel file
defines one of them again. Each was once copied into two to four families, and the copies drifted
(one ldmatrix_x4 lacked the "memory" clobber)."""
import re

import pytest

from course_lib.core import cuda

HEADER = "common.cuh"
SHARED = ("u32", "u64", "bf16_raw", "bf16_to_float", "bf16_lo", "bf16_hi", "float_to_bf16", "pack_bf16x2",
          "ldmatrix_x4", "ldmatrix_x4_trans", "stmatrix_x4", "cluster_rank")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def definitions(text: str) -> list[str]:
    """The SHARED names that CUDA C `text` defines (a typedef, or a device function with a body)."""
    code = _COMMENT.sub("", text)
    found = []
    for name in SHARED:
        typedef = re.search(rf"\btypedef\b[^;\n]*\b{name}\s*;", code)
        # the name is the declarator: nothing but the return type between __device__ and it, on one line
        function = re.search(rf"__device__[^;{{}}()\n]*\b{name}\s*\([^;{{}}]*\)\s*\{{", code)
        if typedef or function:
            found.append(name)
    return found


def course_kernel_files():
    """Every .cu and .cuh of the library's kernels, the exercises' starters and solutions included."""
    return sorted(p for p in cuda.KERNEL_DIR.rglob("*.cu*") if p.name != HEADER)


@pytest.mark.parametrize("path", course_kernel_files(), ids=lambda p: str(p.relative_to(cuda.KERNEL_DIR)))
def test_no_file_defines_a_shared_helper_again(path):
    again = definitions(path.read_text())
    assert not again, f"{path.name} defines {again} again: include {HEADER} (their one home) and use its"


def test_the_scan_finds_the_old_copies():
    old = '''
typedef unsigned short bf16_raw;   // the bit pattern of one bfloat16
// a comment about ldmatrix_x4(addr) { is not a definition
__device__ __forceinline__ void ldmatrix_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0) : "r"(addr));
}
__device__ __forceinline__ unsigned cluster_rank() { unsigned r; return r; }
__device__ __forceinline__ float bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
__device__ void f(u32 a) { u32 x = pack_bf16x2(1.f, 2.f); ldmatrix_x4(a, x, x, x, x); }
'''
    assert definitions(old) == ["bf16_raw", "bf16_hi", "ldmatrix_x4", "cluster_rank"]


def test_the_header_defines_every_shared_helper_and_its_users_include_it():
    assert sorted(definitions((cuda.KERNEL_DIR / HEADER).read_text())) == sorted(SHARED)
    includes = f'#include "{HEADER}"'
    for user in ("gemm_bf16.cu", "hopper_gemm.cu", "fusion.cu", "async_copy.cuh", "hopper_ring.cuh",
                 "online_softmax.cuh"):
        assert includes in (cuda.KERNEL_DIR / user).read_text(), user


def test_a_family_including_the_header_twice_compiles():
    """gemm_bf16 includes common.cuh itself and through async_copy.cuh: pasted once."""
    assert cuda.source("gemm_bf16").count("#define COURSE_COMMON_CUH") == 1
