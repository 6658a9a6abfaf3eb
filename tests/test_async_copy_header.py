"""async_copy.cuh is the one home of the cp.async / cp.async.bulk / TMA / mbarrier / proxy-fence
wrappers: no kernel family writes its own inline asm for them (wgmma.cuh, generated, is separate)."""
import re

import pytest

from course_lib.core import cuda

HEADER = "async_copy.cuh"
SEPARATE = {HEADER, "wgmma.cuh"}
# The PTX this header owns: any asm statement whose template names one of these belongs there.
OWNED = re.compile(r"\bcp\.async\b|\bmbarrier\.|\bfence\.mbarrier_init\b|\bfence\.proxy\.(?:async|tensormap)\b")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ASM = re.compile(r'\basm\s*(?:(?:volatile|__volatile__)\s*)?\(\s*((?:"(?:[^"\\\n]|\\.)*"\s*)+)')


def owned_asm(text: str) -> list[str]:
    """The asm templates in CUDA C `text` (comments left out) that use PTX async_copy.cuh owns."""
    code = _COMMENT.sub("", text)
    templates = ("".join(re.findall(r'"((?:[^"\\\n]|\\.)*)"', m.group(1))) for m in _ASM.finditer(code))
    templates = (re.sub(r"\\[nt]", " ", s) for s in templates)   # "...;\n" "mbarrier..." spans literals
    return [t for t in templates if OWNED.search(t)]


def kernel_files():
    return sorted(p for p in cuda.KERNEL_DIR.iterdir() if p.suffix in (".cu", ".cuh") and p.name not in SEPARATE)


@pytest.mark.parametrize("path", kernel_files(), ids=lambda p: p.name)
def test_no_private_async_copy_wrappers(path):
    found = owned_asm(path.read_text())
    assert not found, (f"{path.name} writes its own inline asm for {found}: use (or add to) the wrappers in "
                       f"{HEADER}, the one home of cp.async, cp.async.bulk, TMA, mbarrier and proxy-fence PTX")


def test_the_scan_finds_what_the_old_private_copies_looked_like():
    old = '''
// a comment naming cp.async.wait_all and mbarrier.init is fine
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(N));
}
__device__ void pl_mbar_arrive(u32 bar) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory"); }
__device__ void f(u32 bar, u32 cta) {
    asm volatile("{ .reg .b32 remote; mapa.shared::cluster.u32 remote, %0, %1;\\n"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote]; }" :: "r"(bar), "r"(cta) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(x));
}
'''
    assert len(owned_asm(old)) == 5
    assert owned_asm('asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(x));') == []


def test_the_header_holds_the_wrappers_and_names_its_users():
    text = (cuda.KERNEL_DIR / HEADER).read_text()
    assert len(owned_asm(text)) >= 15
    assert "#ifndef COURSE_ASYNC_COPY_CUH" in text
    users = [f for f in cuda.families() if f'#include "{HEADER}"' in (cuda.KERNEL_DIR / f"{f}.cu").read_text()]
    assert set(users) >= {"gemm_bf16", "pipeline", "hopper_gemm", "fusion"}
    head = text[:text.index("#ifndef")]
    for family in users:
        assert f"{family}.cu" in head, f"{HEADER}'s header comment does not say that {family}.cu uses it"


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90", "sm_100"])
def test_the_header_compiles_everywhere_and_twice(arch):
    try:
        cuda.installed_nvrtc_version()
    except cuda.NvrtcUnavailable:
        pytest.skip("no NVRTC here")
    code = cuda.paste_headers(f'#include "{HEADER}"\n#include "{HEADER}"\n'
                              'extern "C" __global__ void k(unsigned* out) { __shared__ unsigned s; out[0] = smem_u32(&s); }\n', "twice.cu")
    cubin, _ = cuda.compile_source(code, arch, "twice.cu", use_cache=False)
    assert cubin[:4] == b"\x7fELF"
