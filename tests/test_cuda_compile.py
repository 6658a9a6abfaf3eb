"""Every kernel compiles for every supported architecture with NVRTC; no GPU needed."""
import pytest

from course_lib import cuda

TARGETS = [*cuda.COMPILE_TEST_ARCHS, "sm_90a"]
KERNELS = [(f, k) for f in cuda.families() for k in cuda.kernel_names(f)]


def test_there_are_kernels():
    assert ("elementwise", "vector_add") in KERNELS and ("elementwise", "copy_vec4") in KERNELS


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("family", cuda.families())
def test_family_compiles_and_reports_resources(family, arch):
    compiled = cuda.compile_family(family, arch)
    assert compiled.cubin[:4] == b"\x7fELF"
    assert set(compiled.resources) == set(cuda.kernel_names(family))
    for r in compiled.resources.values():
        assert 0 < r.registers <= 255


@pytest.mark.parametrize("arch", TARGETS)
def test_elementwise_kernels_stay_lean(arch):
    for r in cuda.compile_family("elementwise", arch).resources.values():
        assert not r.spills and r.static_smem_bytes == 0 and r.registers <= 64


def test_compile_error_shows_the_nvrtc_log():
    with pytest.raises(cuda.CompileError, match=r"broken\.cu.*sm_80[\s\S]*undefined_thing"):
        cuda.compile_source('extern "C" __global__ void k(float* x) { x[0] = undefined_thing; }',
                            "sm_80", "broken.cu", use_cache=False)


def test_unknown_arch_lists_what_nvrtc_supports():
    with pytest.raises(cuda.CompileError, match="supports: .*sm_90"):
        cuda.compile_source('extern "C" __global__ void k() {}', "sm_1234", "k.cu", use_cache=False)


def test_kernel_source_includes_its_launch_contract():
    src = cuda.kernel_source("elementwise", "vector_add_vec4")
    assert src.lstrip().startswith("//") and "Launch:" in src and src.rstrip().endswith("}")
    assert "copy_vec4" not in src


def test_ptxas_report_parsing_with_shared_memory_and_spills():
    log = """ptxas info    : Compiling entry function 'tiled' for 'sm_90'
ptxas info    : Function properties for tiled
ptxas         .     24 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'plain' for 'sm_90'
ptxas info    : Function properties for plain
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers"""
    r = cuda.parse_ptxas_report(log, "sm_90")
    assert (r["tiled"].registers, r["tiled"].static_smem_bytes, r["tiled"].stack_frame_bytes) == (40, 8192, 24)
    assert r["tiled"].spills and not r["plain"].spills
    assert r["plain"].registers == 8 and r["plain"].static_smem_bytes == 0


def test_real_shared_memory_is_reported():
    code = '''extern "C" __global__ void k(float* x) {
        __shared__ float tile[1024]; tile[threadIdx.x] = x[threadIdx.x]; __syncthreads();
        x[threadIdx.x] = tile[1023 - threadIdx.x]; }'''
    _, log = cuda.compile_source(code, "sm_90", "smem.cu", use_cache=False)
    assert cuda.parse_ptxas_report(log, "sm_90")["k"].static_smem_bytes == 4096
