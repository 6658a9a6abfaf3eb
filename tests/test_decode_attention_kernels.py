"""Notebook 12's decode kernels on the tensor cores, without a GPU: decode_grouped_g4_mma and _g8_mma compile with
NVRTC for sm_80 and sm_90 with no spills and no local memory, their SASS holds what the design stands for (mma.sync,
ldmatrix, cp.async, no block-wide barrier in the token loop), two blocks share an H100 SM; on sm_75 the body is
compiled out and traps. And the launcher's side: the kernel names, the engines, the shared memory a launch asks
for, the split rule (worked examples), bad input refused in words."""
import collections

import pytest

from course_lib.core import cuda
from course_lib.launch import decode_attention as decode
from course_lib.measure import sass
from course_lib.models import occupancy

ARCHS = ("sm_80", "sm_90")
MMA = sorted(decode.MMA_KERNELS.values())
GPU_FOR = {"sm_80": "a100", "sm_90": "h100"}   # the spec-table GPU each build's budget is checked on


def _nvrtc_or_skip():
    try:
        cuda.installed_nvrtc_version()
    except cuda.NvrtcUnavailable:
        pytest.skip("no NVRTC here")


@pytest.fixture(scope="module", params=ARCHS)
def compiled(request):
    _nvrtc_or_skip()
    return cuda.compile_family(decode.FAMILY, request.param)


@pytest.fixture(scope="module", params=ARCHS)
def mnemonics(request):
    _nvrtc_or_skip()
    if sass.nvdisasm_path() is None:
        pytest.skip("nvdisasm is not installed")
    return request.param, sass.instructions(cuda.compile_family(decode.FAMILY, request.param).cubin)


def _count(listing, opcode):
    return sum(sass._matches(m, opcode) for m in listing)


def test_the_launcher_names_every_kernel_of_the_file_and_no_other():
    named = set(decode.KERNELS.values()) | set(decode.MMA_KERNELS.values()) | {"decode_combine"}
    assert named == set(cuda.kernel_names(decode.FAMILY))


@pytest.mark.parametrize("kernel", MMA)
def test_the_mma_kernels_compile_without_spills_or_stack(compiled, kernel):
    r = compiled.resources[kernel]
    assert not r.spills and r.stack_frame_bytes == 0, r
    assert r.static_smem_bytes == 0, r   # all of its shared memory is the dynamic buffers the launcher sizes


@pytest.mark.parametrize("kernel", MMA)
def test_the_mma_kernels_sass_is_tensor_core_math_fed_by_cp_async(mnemonics, kernel):
    """One tile's body: TILE/8 x 8 + TILE/16 x 16 mma.sync (S = Q Kᵀ, then P V) = 2 TILE, as many ldmatrix.x4
    halves, cp.async copies, no local memory, and only the merge's two block barriers (none in the token loop)."""
    arch, listing = mnemonics
    found = listing[kernel]
    tile = decode.mma_macros()["DEC_MMA_TILE"]
    assert _count(found, "HMMA") >= 2 * tile, (arch, collections.Counter(found))
    assert _count(found, "LDSM") >= tile and _count(found, "LDGSTS") > 0
    assert _count(found, "LDL") == 0 and _count(found, "STL") == 0
    assert _count(found, "BAR.SYNC") == 2, (arch, [m for m in found if m.startswith("BAR")])


def test_on_sm_75_the_mma_kernels_only_trap():
    _nvrtc_or_skip()
    if sass.nvdisasm_path() is None:
        pytest.skip("nvdisasm is not installed")
    listing = sass.instructions(cuda.compile_family(decode.FAMILY, "sm_75").cubin)
    for kernel in MMA:
        assert _count(listing[kernel], "BPT.TRAP") == 1 and _count(listing[kernel], "HMMA") == 0


@pytest.mark.parametrize("kernel", MMA)
def test_two_blocks_fit_an_h100_sm_and_one_an_a100_sm(compiled, kernel):
    """The block's 96 KiB of K and V buffers are what sets it: two on sm_90's 228 KiB, one on the A100's 164."""
    group = 4 if "g4" in kernel else 8
    r = compiled.resources[kernel]
    budget = occupancy.budget(GPU_FOR[compiled.arch])
    blocks = decode.mma_blocks_per_sm(group, budget, r.registers)
    assert blocks == (2 if compiled.arch == "sm_90" else 1), (r, blocks)
    limiter = occupancy.residency(budget, decode.mma_threads(), r.registers, decode.mma_smem_bytes(group)).limiter
    assert limiter == "shared memory"


def test_kernel_choice_by_engine():
    assert decode.kernel_for(4, engine="mma") == "decode_grouped_g4_mma"
    assert decode.kernel_for(8, "token-major", "mma") == "decode_grouped_g8_mma"
    assert decode.kernel_for(4) == "decode_grouped_g4"   # the default engine is the course's first kernels
    with pytest.raises(ValueError, match="no mma decode kernel for group 1"):
        decode.kernel_for(1, engine="mma")
    with pytest.raises(ValueError, match="dimension-major"):
        decode.kernel_for(4, "dimension-major", "mma")
    with pytest.raises(ValueError, match="engine must be one of"):
        decode.kernel_for(4, engine="tensor")


def test_the_launch_geometry_follows_the_files_macros():
    m = decode.mma_macros()
    assert set(m) == {"DEC_MMA_WARPS", "DEC_MMA_TILE", "DEC_MMA_STAGES"}
    assert decode.mma_threads() == 32 * m["DEC_MMA_WARPS"]
    assert decode.mma_tokens_per_round() == m["DEC_MMA_WARPS"] * m["DEC_MMA_TILE"]
    # Each warp's stages of a 16-token K tile and V tile of 256-byte rows: 4 warps x 3 stages x 2 x 4 KiB.
    assert decode.mma_smem_bytes(4, {"DEC_MMA_WARPS": 4, "DEC_MMA_TILE": 16, "DEC_MMA_STAGES": 3}) == 96 * 1024
    assert decode.mma_smem_bytes(8, {"DEC_MMA_WARPS": 2, "DEC_MMA_TILE": 32, "DEC_MMA_STAGES": 2}) == 64 * 1024
    assert decode.mma_threads({"DEC_MMA_WARPS": 8}) == 256


def test_the_mma_split_rule_keeps_every_block_in_one_wave():
    # 132 SMs x 2 blocks = 264 slots.
    assert decode.mma_splits_for(8, 8, 8192, 132, 2) == 4        # 64 pairs x 4 = 256 <= 264 (x 5 = 320 would not)
    assert decode.mma_splits_for(1, 8, 32768, 132, 2) == 33      # 8 pairs x 33 = 264, every slot
    assert decode.mma_splits_for(32, 8, 8192, 132, 2) == 1       # 256 pairs already fill a wave
    assert decode.mma_splits_for(64, 8, 8192, 132, 2) == 1       # more pairs than slots: no split helps
    assert decode.mma_splits_for(1, 8, 1024, 132, 2) == 16       # 1024 / 64 tokens: one tile a warp
    assert decode.mma_splits_for(1, 1, 1, 132, 2) == 1
    for batch, kv_heads, context, sms, blocks in ((1, 8, 8192, 132, 2), (3, 8, 8192, 132, 2), (1, 8, 8192, 114, 1)):
        splits = decode.mma_splits_for(batch, kv_heads, context, sms, blocks)
        assert batch * kv_heads * splits <= sms * blocks < batch * kv_heads * (splits + 1)
    with pytest.raises(ValueError, match="context"):
        decode.mma_splits_for(1, 8, 0, 132, 2)
    with pytest.raises(ValueError, match="blocks_per_sm"):
        decode.mma_splits_for(1, 8, 64, 132, 0)
