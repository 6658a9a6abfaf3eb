"""On a CUDA machine only (COURSE_MODE=live, compute capability 8.0+): notebook 12's decode attention on the tensor
cores (decode_grouped_g4_mma, _g8_mma, then decode_combine) against float64 at hostile shapes (one token, tokens
that end mid-tile, more splits than tiles, a thousand tokens over many tiles a warp), scores whose exponentials
overflow fp32 unshifted, a winning token at the very end of the cache or a different one for each head of a group;
beside the course's SIMT kernel on the same operands; and under compute-sanitizer's memcheck and racecheck.
A failure names the kernel, the shape, the splits, the error and the tolerance."""
import os

import pytest

from course_lib.launch import decode_attention as decode
from course_lib.launch.operands import bf16_bits_to_float32, to_bf16_bits
from course_lib.measure.sanitizer import sanitizer_summary
from course_lib.measure.target import Target

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def ampere_or_newer():
    from course_lib.core.hardware import detect

    if float(detect().compute_capability) < decode.MMA_MIN_CC:
        pytest.skip("the tensor-core decode kernels need compute capability 8.0+ (bf16 mma.sync)")


GROUPS = sorted(g for g, _ in decode.MMA_KERNELS)
# (batch, KV heads, context, splits): None is the launcher's split rule.
SHAPES = [
    (1, 1, 1, 1), (1, 2, 1, 3),          # one token; empty splits beside it
    (1, 1, 7, 1), (1, 2, 7, 3),          # less than a tile
    (2, 1, 17, 1), (1, 1, 17, 7),        # a tile and one token; more splits than tiles
    (1, 1, 63, 2), (1, 2, 65, 1),        # a split's last tile cut short, a token past four warps' tiles
    (1, 1, 65, 64),                      # 64 splits of 16 tokens, most of them empty
    (2, 2, 1000, None), (1, 1, 1000, 1), (1, 2, 1000, 5),   # many tiles a warp; stages turning over
    (4, 8, 4097, None),                  # Llama's 8 KV heads, a context just past a power of two
]


def _id(shape):
    b, hkv, t, splits = shape
    return f"B{b}-Hkv{hkv}-T{t}-splits{splits}"


@pytest.mark.parametrize("scale", [1.0, 24.0], ids=["scores", "overflowing-scores"])
@pytest.mark.parametrize("shape", SHAPES, ids=_id)
@pytest.mark.parametrize("group", GROUPS)
def test_mma_kernel_matches_float64_at_hostile_shapes(group, shape, scale):
    decode.check_mma(group, *shape, scale=scale)


def _aimed(q, k, group, tokens):
    """q with query head h of sequence b replaced by 6 x the key of token tokens(b, h): that token takes almost
    all of the head's weight, so a lost, masked or misplaced token shows in the output."""
    import cupy

    kf = bf16_bits_to_float32(k)
    rows = [[6 * kf[b, h // group, tokens(b, h)] for h in range(q.shape[1])] for b in range(q.shape[0])]
    return to_bf16_bits(cupy.stack([cupy.stack(r) for r in rows]))


@pytest.mark.parametrize("aim", ["last-token", "a-token-per-head"])
@pytest.mark.parametrize("group", GROUPS)
def test_the_winning_token_is_found_wherever_it_is(group, aim):
    batch, kv_heads, context, splits = 2, 2, 1000, 5
    q, k, v, out = decode.operands(batch, kv_heads, group, context, seed=7)
    where = (lambda b, h: context - 1) if aim == "last-token" else (lambda b, h: (97 * h + 31 * b) % context)
    q = _aimed(q, k, group, where)
    decode.run_decode(q, k, v, out, group, splits=splits, engine="mma")
    err, tol = decode.max_error(out, decode.reference(q, k, v), v)
    assert err <= tol, f"{decode.kernel_for(group, engine='mma')}, {aim}: error {err:.3g} > {tol:.3g}"


@pytest.mark.parametrize("group", GROUPS)
def test_mma_and_simt_kernels_agree(group):
    q, k, v, out = decode.operands(8, 8, group, 8192, seed=3)
    simt = out.copy()
    decode.run_decode(q, k, v, simt, group)
    used = decode.run_decode(q, k, v, out, group, engine="mma")
    gap, tol = decode.max_error(out, bf16_bits_to_float32(simt).astype("float64"), v)
    assert gap <= 2 * tol, f"group {group}, {used} splits: the two engines differ by {gap:.3g} (2 x tolerance {2 * tol:.3g})"


def test_the_check_rejects_a_wrong_answer():
    """The output judged against the reference of the group's query heads in another order fails by far: the
    tolerance tells a head's output from its neighbour's."""
    import cupy

    q, k, v, out = decode.operands(1, 2, 4, 300, seed=11)
    decode.run_decode(q, k, v, out, 4, splits=3, engine="mma")
    swapped = q.reshape(1, 2, 4, -1)[:, :, [1, 0, 3, 2]].reshape(q.shape)
    err, tol = decode.max_error(out, decode.reference(cupy.ascontiguousarray(swapped), k, v), v)
    assert err > 10 * tol, (err, tol)


def test_a_layout_or_engine_without_a_kernel_is_refused_in_words():
    q, k, v, out = decode.operands(1, 1, 4, 64, seed=1, layout="dimension-major")
    with pytest.raises(ValueError, match="no mma decode kernel for group 4 with a dimension-major cache"):
        decode.run_decode(q, k, v, out, 4, layout="dimension-major", engine="mma")
    q, k, v, out = decode.operands(1, 1, 4, 64, seed=1)
    with pytest.raises(ValueError, match="engine must be one of"):
        decode.run_decode(q, k, v, out, 4, engine="wgmma")


SANITIZED = [(g, 1, 2, 65, 3) for g in GROUPS]


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
@pytest.mark.parametrize("args", SANITIZED, ids=lambda a: f"g{a[0]}")
def test_clean_under_compute_sanitizer(tool, args):
    said = sanitizer_summary(Target(decode.check_mma, args), tool, timeout_s=600)
    if "unavailable" in said:
        pytest.skip(said["unavailable"])
    lines = "\n".join(said["lines"])
    assert said["returncode"] == 0, f"{tool} on {args}:\n{lines}"
    clean = "ERROR SUMMARY: 0 errors" if tool == "memcheck" else "RACECHECK SUMMARY: 0 hazards"
    assert clean in lines, f"{tool} on {args}:\n{lines}"
