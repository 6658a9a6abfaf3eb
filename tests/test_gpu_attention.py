"""On a CUDA machine only (COURSE_MODE=live, compute capability 8.0+): notebook 13's attention kernels, every
rung x head dimension x mask, against float64 at hostile shapes (one key, tails on both sides, more queries
than keys, grouped heads, a mask off by one made visible, logits that overflow a naive exp); the torch
entry point on torch's current stream, beside SDPA; and compute-sanitizer's memcheck and racecheck.
A failure names the kernel, rung, head dimension, mask, shape and operands, the error, the tolerance and
where the worst output is (batch, head, query, dim)."""
import os

import pytest

from course_lib.launch import attention
from course_lib.measure.sanitizer import sanitizer_summary
from course_lib.measure.target import Target

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def ampere_or_newer():
    from course_lib.core.hardware import detect

    if float(detect().compute_capability) < attention.MIN_CC:
        pytest.skip("the attention kernels need compute capability 8.0+ (bf16 mma.sync)")


BUILDS = [(rung, d, causal) for rung in attention.RUNGS for d in attention.HEAD_DIMS for causal in (False, True)
          if not (rung == "causal_skip" and not causal)]   # that one is cp_async's kernel
# (batch, query heads, KV heads, Sq, Sk, operands)
SHAPES = [
    (1, 1, 1, 1, 1, "random"),          # one query, one key
    (1, 2, 1, 1, 300, "tail"),          # one query, a tail of 44 keys past the last full tile
    (1, 2, 1, 300, 1, "random"),        # Sq > Sk: with the mask, 299 rows see no key (output 0)
    (2, 4, 2, 65, 130, "peaked"),       # Sq < Sk, both with tails; a lax diagonal shows
    (2, 4, 2, 130, 65, "diagonal"),     # Sq > Sk; a strict diagonal shows
    (1, 8, 2, 64, 64, "peaked"),        # whole tiles only, group of 4
    (1, 32, 8, 127, 129, "large"),      # Llama 3's 32 query / 8 KV heads; scores past fp32's exp range
    (1, 2, 2, 200, 200, "tail"),        # zero-filled keys would win an unmasked row
    (1, 1, 1, 1000, 1000, "random"),    # 16 K/V tiles: the stages turn over many times
    (1, 2, 1, 333, 1000, "peaked"),     # Sq < Sk by a non-multiple of the tile: the diagonal crosses tiles
]


def _id(value):
    if isinstance(value, tuple):
        b, hq, hkv, sq, sk, case = value
        return f"B{b}-H{hq}/{hkv}-Sq{sq}-Sk{sk}-{case}"
    return str(value)


@pytest.mark.parametrize("shape", SHAPES, ids=_id)
@pytest.mark.parametrize("rung,d,causal", BUILDS, ids=lambda v: str(v))
def test_rung_matches_float64_at_hostile_shapes(rung, d, causal, shape):
    attention.check_rung(rung, d, causal, *shape)


@pytest.mark.parametrize("case", attention.CASES)
@pytest.mark.parametrize("rung,d,causal", BUILDS, ids=lambda v: str(v))
def test_rung_matches_float64_on_every_kind_of_operand(rung, d, causal, case):
    attention.check_rung(rung, d, causal, 2, 4, 2, 97, 161, case, seed=11)


def test_the_check_rejects_a_wrong_answer():
    """The unmasked kernel's output, judged against the causal reference, fails by far: the tolerance
    separates a right answer from a wrong one on the GPU's own outputs."""
    import cupy
    import numpy as np

    q, k, v = attention.hostile_operands(1, 2, 1, 65, 130, 128, "peaked", 0)
    out = cupy.full(q.shape, 0xFFFF, dtype=cupy.uint16)
    attention.run_bits(cupy.asarray(q), cupy.asarray(k), cupy.asarray(v), out, causal=False, rung="cp_async")
    f = attention.bits_to_float
    want = attention.reference_numpy(f(q), f(k), f(v), causal=True)
    err, _ = attention.worst_error(f(cupy.asnumpy(out)), want)
    assert err > 10 * attention.tolerance(float(np.abs(f(v)).max()), float(np.abs(want).max()))


def _torch_operands(b, hq, hkv, sq, sk, d, seed=0):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).bfloat16()
            for shape in ((b, hq, sq, d), (b, hkv, sk, d), (b, hkv, sk, d))]


@pytest.mark.parametrize("rung,d,causal", BUILDS, ids=lambda v: str(v))
def test_forward_on_torch_matches_the_reference_and_sdpa(rung, d, causal):
    import torch
    import torch.nn.functional as F

    q, k, v = _torch_operands(2, 32, 8, 257, 257, d)
    out = attention.forward(q, k, v, causal=causal, rung=rung)
    assert out.dtype == torch.bfloat16 and out.shape == q.shape and out.is_contiguous()
    want = attention.reference(q, k, v, causal=causal)
    tol = attention.tolerance(float(v.abs().max()), float(want.abs().max()))
    err = float((out.double() - want).abs().max())
    assert err <= tol, f"{rung} d={d} causal={causal}: torch entry point off by {err:.3g} (tolerance {tol:.3g})"
    # With Sq == Sk, SDPA's top-left causal mask is the same as the bottom-right one.
    sdpa = F.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), is_causal=causal)
    gap = float((out.float() - sdpa.float()).abs().max())
    assert gap <= 2 * tol, f"{rung} d={d} causal={causal}: {gap:.3g} from SDPA (tolerance {2 * tol:.3g})"


def test_forward_runs_on_torchs_current_stream():
    """Inputs written on a side stream after a long spin: a launch on any other stream would read them
    before they are there."""
    import torch

    src = _torch_operands(1, 4, 2, 200, 300, 64, seed=1)
    q, k, v = (torch.zeros_like(x) for x in src)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)   # some 0.1 s of GPU time before the copies
        for dst, x in zip((q, k, v), src):
            dst.copy_(x)
        out = attention.forward(q, k, v, causal=True, rung="causal_skip")
    side.synchronize()
    want = attention.reference(*src, causal=True)
    err = float((out.double() - want).abs().max())
    assert err <= attention.tolerance(float(src[2].abs().max()), float(want.abs().max())), err


def test_a_misaligned_tensor_is_refused_before_launch():
    import torch

    storage = torch.zeros(1 * 2 * 64 * 64 + 1, device="cuda", dtype=torch.bfloat16)
    q = storage[1:].view(1, 2, 64, 64)   # 2 bytes past an aligned start
    k = v = torch.zeros(1, 1, 64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="16-byte boundary"):
        attention.forward(q, k, v, causal=False, rung="cp_async")


SANITIZED = [(rung, d, True) for rung in attention.RUNGS for d in attention.HEAD_DIMS] + [("cp_async", 128, False)]


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
@pytest.mark.parametrize("rung,d,causal", SANITIZED, ids=lambda v: str(v))
def test_clean_under_compute_sanitizer(tool, rung, d, causal):
    said = sanitizer_summary(Target(attention.sanitize_launch, (rung, d, causal)), tool, timeout_s=600)
    if "unavailable" in said:
        pytest.skip(said["unavailable"])
    lines = "\n".join(said["lines"])
    assert said["returncode"] == 0, f"{tool} on {rung} d={d} causal={causal}:\n{lines}"
    clean = "ERROR SUMMARY: 0 errors" if tool == "memcheck" else "RACECHECK SUMMARY: 0 hazards"
    assert clean in lines, f"{tool} on {rung} d={d} causal={causal}:\n{lines}"
