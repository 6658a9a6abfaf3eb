"""Notebook 13's attention kernels without a GPU: every rung x head dimension x mask compiles with NVRTC
for sm_80 and sm_90, with no spills, no local memory in its SASS and the instructions its rung stands for;
its registers and shared memory let two blocks share an SM; the launcher's contract (names, geometry, one
line per rung, ptxas's report, bad input refused in words); and the float64 reference and the hostile
operands the GPU tests use, held to independent arithmetic and shown to expose the mistakes they target."""
import math

import numpy as np
import pytest

from course_lib.core import cuda
from course_lib.core.hardware import spec
from course_lib.launch import attention
from course_lib.measure import sass
from course_lib.models import waves

ARCHS = ("sm_80", "sm_90")
BUILDS = [(rung, d, causal) for rung in attention.RUNGS for d in attention.HEAD_DIMS for causal in (False, True)]
# The spec-table GPU whose budgets each architecture's build is held to.
GPU_FOR = {"sm_80": "a100", "sm_90": "h100"}


def _nvrtc_or_skip():
    try:
        cuda.installed_nvrtc_version()
    except cuda.NvrtcUnavailable:
        pytest.skip("no NVRTC here")


@pytest.fixture(scope="module", params=ARCHS)
def compiled(request):
    _nvrtc_or_skip()
    return cuda.compile_family(attention.FAMILY, request.param)


def test_the_launcher_names_every_kernel_of_the_file_and_no_other():
    assert set(attention.KERNELS) == set(cuda.kernel_names(attention.FAMILY))
    assert len(attention.KERNELS) == 10   # 3 rungs x 2 head dims x 2 masks, less causal_skip without the mask


def test_causal_skip_without_the_mask_is_rung_2s_kernel():
    for d in attention.HEAD_DIMS:
        assert attention.kernel_name("causal_skip", d, False) == attention.kernel_name("cp_async", d, False)
        assert attention.kernel_name("causal_skip", d, True) == f"attention_causal_skip_d{d}_causal"
    assert attention.kernel_name("mma", 128, True) == "attention_mma_d128_causal"


@pytest.mark.parametrize("rung,d,causal", BUILDS)
def test_every_build_compiles_without_spills_or_stack(compiled, rung, d, causal):
    r = compiled.resources[attention.kernel_name(rung, d, causal)]
    assert not r.spills and r.stack_frame_bytes == 0, r
    assert r.static_smem_bytes == 0, r   # all of its shared memory is the dynamic tiles the launcher sizes


@pytest.mark.parametrize("rung,d,causal", BUILDS)
def test_two_blocks_fit_an_sm_by_registers_and_shared_memory(compiled, rung, d, causal):
    """__launch_bounds__(128, ATT_MIN_BLOCKS = 2) asks ptxas for it; the occupancy model confirms it on
    the spec-table GPU of the architecture (A100 for sm_80, H100 for sm_90), shared memory included."""
    r = compiled.resources[attention.kernel_name(rung, d, causal)]
    blocks = attention.tile_macros()["ATT_MIN_BLOCKS"]
    assert blocks == 2
    assert r.registers * attention.threads() * blocks <= 65536, r
    gpu = spec(GPU_FOR[compiled.arch])
    smem = attention.smem_bytes(rung, d)
    assert smem <= gpu.max_smem_per_block_bytes
    assert waves.resident_blocks_per_sm(gpu, attention.threads(), r.registers, smem) >= blocks


@pytest.fixture(scope="module", params=ARCHS)
def listing(request):
    _nvrtc_or_skip()
    if sass.nvdisasm_path() is None:
        pytest.skip("nvdisasm is not installed")
    return sass.instructions(cuda.compile_family(attention.FAMILY, request.param).cubin)


def _count(mnemonics, opcode):
    return sum(sass._matches(m, opcode) for m in mnemonics)


@pytest.mark.parametrize("rung,d,causal", BUILDS)
def test_sass_has_no_local_memory_and_the_instructions_of_its_rung(listing, rung, d, causal):
    ins = listing[attention.kernel_name(rung, d, causal)]
    assert _count(ins, "LDL") == 0 and _count(ins, "STL") == 0, "local memory: a spill or an indexed register array"
    assert _count(ins, "HMMA") > 0          # mma.sync on the tensor cores
    assert _count(ins, "LDSM") > 0          # ldmatrix for Q and K ...
    assert _count(ins, "LDSM.MT88") > 0     # ... and .trans for V
    assert _count(ins, "MUFU.EX2") > 0      # the softmax's exponentials on the MUFU
    assert _count(ins, "SHFL.BFLY") > 0     # row max and sum across a quad
    if rung == "mma":
        assert _count(ins, "LDGSTS") == 0 and _count(ins, "STS.128") > 0   # through registers, 16 bytes at a time
    else:
        assert _count(ins, "LDGSTS") > 0 and _count(ins, "STS") == 0      # cp.async only: no shared stores


def test_a_wrong_build_would_fail_the_local_memory_check():
    """The SASS check sees local memory when there is some: a dynamically indexed register array."""
    _nvrtc_or_skip()
    if sass.nvdisasm_path() is None:
        pytest.skip("nvdisasm is not installed")
    code = '''extern "C" __global__ void k(float* x, int i) {
        float a[32] = {}; for (int j = 0; j < 32; ++j) a[(x[j] > 0.f ? j : i) & 31] += x[j];
        x[threadIdx.x] = a[i & 31]; }'''
    cubin, _ = cuda.compile_source(code, "sm_90", "local.cu", use_cache=False)
    ins = sass.instructions(cubin)["k"]
    assert _count(ins, "LDL") + _count(ins, "STL") > 0


def test_compile_report_says_what_ptxas_gave():
    _nvrtc_or_skip()
    rep = attention.compile_report("cp_async", 128, causal=True, arch="sm_90")
    r = cuda.compile_family(attention.FAMILY, "sm_90").resources["attention_cp_async_d128_causal"]
    assert rep["kernel"] == "attention_cp_async_d128_causal" and rep["arch"] == "sm_90"
    assert (rep["registers"], rep["spills"], rep["stack_frame_bytes"]) == (r.registers, False, 0)
    assert rep["dynamic_smem_bytes"] == (64 + 2 * 2 * 64) * 128 * 2 and rep["threads"] == 128
    same = attention.compile_report("causal_skip", 64, causal=False, arch="sm_80")
    assert same["kernel"] == "attention_cp_async_d64"   # rung 3 without the mask is rung 2
    with pytest.raises(ValueError, match="head dimension 64 or 128"):
        attention.compile_report("mma", 96)


def test_geometry_and_shared_memory_of_each_rung():
    assert attention.tile_macros()["ATT_WARPS"] == 4 and attention.block_queries() == 64 and attention.threads() == 128
    assert attention.geometry("mma", 64, 130, 2 * 32) == ((3, 64), (128,), (64 + 2 * 64) * 64 * 2)
    assert attention.geometry("cp_async", 128, 64, 1) == ((1, 1), (128,), (64 + 4 * 64) * 128 * 2)
    assert attention.stages("mma") == 1 and attention.stages("causal_skip") == attention.tile_macros()["ATT_STAGES"]


def test_each_rung_is_described_in_one_line_of_its_own():
    lines = [attention.describe(r) for r in attention.RUNGS]
    assert all(line and "\n" not in line for line in lines) and len(set(lines)) == len(lines)
    assert "cp.async" in lines[1] and "2 shared buffers" in lines[1] and "swizzle" in lines[1].lower()
    assert "diagonal" in lines[2] and "cp_async's kernel" in lines[2]
    with pytest.raises(ValueError, match="mma, cp_async, causal_skip"):
        attention.describe("wgmma")


# --------------------------------------------------------------------------- bad input, in words


def _tensors(b=1, hq=4, hkv=2, sq=8, sk=8, d=64, dtype=None):
    torch = pytest.importorskip("torch")
    dtype = dtype or torch.bfloat16
    return (torch.zeros(b, hq, sq, d, dtype=dtype), torch.zeros(b, hkv, sk, d, dtype=dtype),
            torch.zeros(b, hkv, sk, d, dtype=dtype))


@pytest.mark.parametrize("change,message", [
    ({"dtype": "float16"}, "must be bfloat16"),
    ({"d": 96}, "head dimension 64 or 128"),
    ({"hq": 3, "hkv": 2}, "multiple of the KV heads"),
    ({}, "on the CPU"),
])
def test_forward_refuses_bad_input_with_a_sentence(change, message):
    torch = pytest.importorskip("torch")
    if "dtype" in change:
        change = {**change, "dtype": getattr(torch, change["dtype"])}
    q, k, v = _tensors(**change)
    with pytest.raises(ValueError, match=message):
        attention.forward(q, k, v, causal=False, rung="mma")


def test_forward_refuses_views_shapes_and_arguments_it_cannot_run():
    torch = pytest.importorskip("torch")
    q, k, v = _tensors()
    with pytest.raises(ValueError, match="contiguous"):
        # (batch, sequence, heads, d) memory seen as (batch, heads, sequence, d): the right shape, strided
        attention.forward(torch.zeros(1, 8, 4, 64, dtype=torch.bfloat16).transpose(1, 2), k, v, causal=False, rung="mma")
    with pytest.raises(ValueError, match="same shape"):
        attention.forward(q, k, v[:, :, :4].contiguous(), causal=False, rung="mma")
    with pytest.raises(ValueError, match="4-d"):
        attention.forward(q[0], k[0], v[0], causal=False, rung="mma")
    with pytest.raises(ValueError, match="batch"):
        attention.forward(q, torch.cat([k, k]), torch.cat([v, v]), causal=False, rung="mma")
    with pytest.raises(ValueError, match="rung must be one of"):
        attention.forward(q, k, v, causal=False, rung="flash")
    with pytest.raises(ValueError, match="causal must be True or False"):
        attention.forward(q, k, v, causal=1, rung="mma")
    with pytest.raises(ValueError, match="torch tensor"):
        attention.forward(np.zeros(tuple(q.shape), np.float32), k, v, causal=False, rung="mma")
    with pytest.raises(ValueError, match="at least 1"):
        attention.forward(*_tensors(sq=0), causal=False, rung="mma")
    with pytest.raises(ValueError, match="grid dimension"):
        attention.check_shapes((1, 70000, 1, 64), (1, 1, 1, 64), (1, 1, 1, 64))


# --------------------------------------------------------------------------- the reference and the operands


def naive_attention(q, k, v, causal, diag_shift=0, pad_keys=0):
    """Attention one output at a time in float64, from the definition (Python loops): the check of the
    vectorized references. diag_shift moves the causal diagonal (a mask off by one); pad_keys appends
    that many zero keys and values left unmasked (a tail that was not masked)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    if pad_keys:
        k = np.concatenate([k, np.zeros((b, hkv, pad_keys, d))], axis=2)
        v = np.concatenate([v, np.zeros((b, hkv, pad_keys, d))], axis=2)
    out = np.zeros(q.shape)
    for bi in range(b):
        for h in range(hq):
            kv = h // (hq // hkv)
            for i in range(sq):
                seen = [j for j in range(k.shape[2]) if not causal or j <= i + sk - sq + diag_shift]
                if not seen:
                    continue
                s = np.array([q[bi, h, i] @ k[bi, kv, j] / math.sqrt(d) for j in seen])
                p = np.exp(s - s.max())
                out[bi, h, i] = (p[:, None] * v[bi, kv, seen]).sum(0) / p.sum()
    return out


@pytest.mark.parametrize("sq,sk", [(5, 9), (9, 5), (7, 7), (1, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_references_match_the_definition(sq, sk, causal):
    torch = pytest.importorskip("torch")
    q, k, v = (attention.bits_to_float(x) for x in attention.hostile_operands(2, 4, 2, sq, sk, 64, "random", 1))
    want = naive_attention(q, k, v, causal)
    np.testing.assert_allclose(attention.reference_numpy(q, k, v, causal=causal), want, rtol=1e-12, atol=1e-12)
    got = attention.reference(torch.from_numpy(q).bfloat16(), torch.from_numpy(k).bfloat16(),
                              torch.from_numpy(v).bfloat16(), causal=causal)
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_bottom_right_causal_gives_zero_to_queries_that_see_no_key():
    q, k, v = (attention.bits_to_float(x) for x in attention.hostile_operands(1, 1, 1, 6, 2, 64, "random", 2))
    out = attention.reference_numpy(q, k, v, causal=True)
    assert np.all(out[0, 0, :4] == 0) and not np.isnan(out).any()           # rows 0-3: j <= i - 4 < 0
    np.testing.assert_allclose(out[0, 0, 4], v[0, 0, 0], rtol=1e-12)     # row 4 sees key 0 alone
    assert np.abs(out[0, 0, 5]).max() > 0


def test_the_reference_works_in_bands_of_queries(monkeypatch):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(attention.bits_to_float(x)).bfloat16()
               for x in attention.hostile_operands(1, 2, 1, 300, 40, 64, "random", 3))
    want = attention.reference_numpy(*(x.float().numpy() for x in (q, k, v)), causal=True)
    monkeypatch.setattr(attention, "REFERENCE_BAND_SCORES", 2 * 40 * 7)   # bands of 7 queries, the last one short
    np.testing.assert_allclose(attention.reference(q, k, v, causal=True).numpy(), want, rtol=1e-12, atol=1e-12)


def _error_against(wrong, q, k, v, causal):
    want = attention.reference_numpy(q, k, v, causal=causal)
    err, _ = attention.worst_error(wrong, want)
    return err, attention.tolerance(float(np.abs(v).max()), float(np.abs(want).max()))


@pytest.mark.parametrize("sq,sk", [(65, 130), (130, 65), (64, 64)])
def test_the_hostile_operands_expose_a_mask_off_by_one(sq, sk):
    for case, shift in (("peaked", +1), ("diagonal", -1)):
        q, k, v = (attention.bits_to_float(x) for x in attention.hostile_operands(1, 2, 1, sq, sk, 64, case, 4))
        err, tol = _error_against(naive_attention(q, k, v, True, diag_shift=shift), q, k, v, True)
        assert err > 10 * tol, (case, err, tol)


def test_the_tail_operands_expose_an_unmasked_tail():
    q, k, v = (attention.bits_to_float(x) for x in attention.hostile_operands(1, 1, 1, 17, 70, 64, "tail", 5))
    err, tol = _error_against(naive_attention(q, k, v, False, pad_keys=58), q, k, v, False)
    assert err > 10 * tol, (err, tol)


def test_the_large_operands_overflow_an_exponential_without_the_max():
    q, k, v = (attention.bits_to_float(x).astype(np.float64)
               for x in attention.hostile_operands(1, 1, 1, 33, 200, 128, "large", 6))
    s = np.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(128)
    assert s.max() > 88.8   # e^88.8 > the largest float32
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.exp(s.astype(np.float32))
        naive = np.einsum("bhij,bhjd->bhid", p, v) / p.sum(-1, keepdims=True)
    err, tol = _error_against(naive, q, k, v, False)
    assert not err <= tol


def test_worst_error_counts_a_row_never_written():
    want = np.zeros((1, 1, 2, 4))
    got = want.copy()
    got[0, 0, 1, 2] = np.nan
    assert attention.worst_error(got, want) == (math.inf, (0, 0, 1, 2))


def test_hostile_operands_refuse_unknown_cases_and_shapes():
    with pytest.raises(ValueError, match="case must be one of"):
        attention.hostile_operands(1, 1, 1, 4, 4, 64, "nasty")
    with pytest.raises(ValueError, match="multiple of the KV heads"):
        attention.hostile_operands(1, 3, 2, 4, 4, 64)
