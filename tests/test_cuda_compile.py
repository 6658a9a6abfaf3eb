"""Every kernel compiles for every supported architecture with NVRTC; no GPU needed."""
import pytest

from course_lib.core import cuda

TARGETS = [*cuda.COMPILE_TEST_ARCHS, "sm_90a"]
KERNELS = [(f, k) for f in cuda.families() for k in cuda.kernel_names(f)]
# Each family on each architecture it is built for: every one the course tests, or the one its first
# line names (hopper_gemm: wgmma and setmaxnreg exist on sm_90a only).
BUILDS = [(f, a) for f in cuda.families() for a in cuda.family_archs(f)]


def test_there_are_kernels():
    assert ("elementwise", "vector_add") in KERNELS and ("elementwise", "copy_vec4") in KERNELS


@pytest.mark.parametrize("family,arch", BUILDS)
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


def test_only_hopper_gemm_is_built_for_one_architecture():
    assert cuda.family_archs("hopper_gemm") == ("sm_90a",)
    assert cuda.family_archs("gemm_bf16") == tuple(TARGETS)


def test_hopper_gemm_for_plain_sm_90_is_refused_by_ptxas_with_its_reason():
    with pytest.raises(cuda.CompileError, match=r"wgmma\.\w+' not supported on \.target 'sm_90'"):
        cuda.compile_source(cuda.source("hopper_gemm"), "sm_90", "hopper_gemm.cu", use_cache=False)


def test_a_gpu_of_sm_90_builds_the_sm_90a_only_family_for_sm_90a():
    assert cuda.arch_for("hopper_gemm", "sm_90") == "sm_90a"
    assert cuda.arch_for("gemm_bf16", "sm_90") == "sm_90"
    assert cuda.arch_for("hopper_gemm", "sm_80") == "sm_80"   # and then fails to compile, saying why


def test_headers_are_pasted_in_with_line_marks_so_errors_name_the_right_line():
    src = cuda.source("hopper_gemm")
    assert not any(ln.startswith('#include "') for ln in src.splitlines())
    assert "mbar_wait" in src and "wgmma_m64n256" in src
    lines = src.splitlines()
    original = (cuda.KERNEL_DIR / "hopper_gemm.cu").read_text().splitlines()
    # Every mark back into the .cu file is followed by the line it names (where two includes follow each
    # other, the next header's own mark comes first: that line was the second #include).
    marks = [i for i, ln in enumerate(lines) if ln.startswith('#line') and 'hopper_gemm.cu' in ln]
    assert len(marks) >= 3
    for mark in marks:
        expected = original[int(lines[mark].split()[1]) - 1]
        if lines[mark + 1].startswith("#line 1 "):
            assert expected == f'#include {lines[mark + 1].split()[2]}' or expected.startswith(
                f'#include {lines[mark + 1].split()[2]} ')
        else:
            assert lines[mark + 1] == expected   # the line after the mark is that line of the .cu file


def test_a_missing_header_is_named():
    with pytest.raises(FileNotFoundError, match="nothing.cuh"):
        cuda.paste_headers('#include "nothing.cuh"\n', "x.cu")


def test_an_include_may_carry_a_comment():
    pasted = cuda.paste_headers('#include "async_copy.cuh"   // the mbarrier helpers\nint after;\n', "x.cu")
    assert "__device__ __forceinline__ void mbar_wait" in pasted and pasted.endswith('#line 2 "x.cu"\nint after;\n')


def _exercise_files():
    from course_lib.exercises.kernel.catalog import EXERCISES

    return [(e, f) for e in EXERCISES.values() for f in ("starter", "solution")]


@pytest.mark.parametrize("ex,file", _exercise_files(), ids=lambda v: getattr(v, "name", v))
def test_every_exercise_starter_and_solution_compiles(ex, file):
    arch = ex.arch or f"sm_{max(75, round(10 * ex.min_cc))}"
    cubin, res, problems = ex.files.compile(ex.files.source(file), arch)
    assert not problems and cubin[:4] == b"\x7fELF" and res.registers > 0, problems
