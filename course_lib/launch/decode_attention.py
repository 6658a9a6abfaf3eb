"""Host launcher of ``kernels/decode_attention.cu``: one decode step's attention over a bf16 KV cache,
grouped (each KV head read once for its group of query heads), replicated (the cache expanded to one
KV head per query head) or over a dimension-major cache; and its smoke launch. Notebook 12's lab times
them beside PyTorch's attention."""
from __future__ import annotations

import math

import numpy as np

from course_lib.core import cuda
from course_lib.launch.operands import bf16_bits_to_float32, random_operand, to_bf16_bits
from course_lib.measure.smoke import covers

FAMILY = "decode_attention"
HEAD_DIM = 128
THREADS = 128
ROUND = 8                 # tokens a block's four warps take in one trip (two per warp)
MIN_TOKENS_PER_SPLIT = 64
BLOCKS_PER_SM = 4         # what the grouped kernel's 124 registers a thread allow (sm_90)
LAYOUTS = ("token-major", "dimension-major")
KERNELS = {(4, "token-major"): "decode_grouped_g4", (8, "token-major"): "decode_grouped_g8",
           (1, "token-major"): "decode_replicated", (4, "dimension-major"): "decode_grouped_g4_dmajor"}


def kernel_for(group: int, layout: str = "token-major") -> str:
    """The kernel for ``group`` query heads per KV head read from a cache in ``layout``."""
    try:
        return KERNELS[(group, layout)]
    except KeyError:
        have = ", ".join(f"group {g} {lay}" for g, lay in KERNELS)
        raise ValueError(f"no decode kernel for group {group} with a {layout} cache; built: {have}") from None


def splits_for(batch: int, kv_heads: int, context: int, sms: int) -> int:
    """Splits of the cache so that the grid fills every SM ``BLOCKS_PER_SM`` times over, each split
    holding at least ``MIN_TOKENS_PER_SPLIT`` tokens: a decode step has only batch × KV heads
    (sequence, head) pairs, 128 at batch 16, too few blocks for 132 SMs without splitting."""
    for name, value in (("batch", batch), ("kv_heads", kv_heads), ("context", context), ("sms", sms)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    want = math.ceil(BLOCKS_PER_SM * sms / (batch * kv_heads))
    return max(1, min(want, math.ceil(context / MIN_TOKENS_PER_SPLIT)))


def check_shapes(q, k, v, out, group: int, layout: str) -> tuple[int, int, int]:
    """(batch, KV heads, context) of a consistent set of operands, or a ValueError saying what differs."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if k.shape != v.shape or len(k.shape) != 4:
        raise ValueError(f"K and V must be the same 4-d cache, got {k.shape} and {v.shape}")
    b, hkv = k.shape[:2]
    t = k.shape[2] if layout == "token-major" else k.shape[3]
    d = k.shape[3] if layout == "token-major" else k.shape[2]
    if d != HEAD_DIM:
        raise ValueError(f"the decode kernels are built for head size {HEAD_DIM}, got {d}")
    if q.shape != (b, hkv * group, HEAD_DIM) or out.shape != q.shape:
        raise ValueError(f"Q and out must be [batch, {hkv} KV heads x group {group}, {HEAD_DIM}] = "
                         f"{(b, hkv * group, HEAD_DIM)}, got {q.shape} and {out.shape}")
    for name, x in (("q", q), ("k", k), ("v", v), ("out", out)):
        if x.dtype != np.uint16 or not x.flags.c_contiguous:
            raise ValueError(f"{name} must be contiguous bf16 bit patterns (uint16), got {x.dtype}")
    return b, hkv, t


_SCRATCH: dict = {}


def _scratch(splits: int, rows: int):
    import cupy

    key = (splits, rows)
    if key not in _SCRATCH:
        _SCRATCH.clear()
        _SCRATCH[key] = (cupy.empty((splits, rows, HEAD_DIM), cupy.float32), cupy.empty((splits, rows, 2), cupy.float32))
    return _SCRATCH[key]


def run_decode(q, k, v, out, group: int, layout: str = "token-major", splits: int | None = None) -> int:
    """out = softmax(q·Kᵀ/√128)·V for one new token per sequence, asynchronously; returns the splits used."""
    import cupy

    b, hkv, t = check_shapes(q, k, v, out, group, layout)
    splits = splits or splits_for(b, hkv, t, cupy.cuda.Device().attributes["MultiProcessorCount"])
    partial, stats = _scratch(splits, b * hkv * group)
    scale_log2 = np.float32(math.log2(math.e) / math.sqrt(HEAD_DIM))
    cuda.kernel(FAMILY, kernel_for(group, layout))((splits, hkv, b), (THREADS,),
                                                   (q, k, v, partial, stats, np.int32(t), scale_log2))
    cuda.kernel(FAMILY, "decode_combine")((b * hkv * group,), (HEAD_DIM,),
                                          (partial, stats, out, np.int32(b * hkv * group), np.int32(splits)))
    return splits


def reference(q, k, v, layout: str = "token-major"):
    """The same attention in float64 from the bf16 inputs (CuPy), the KV head of query head h being h // group."""
    import cupy

    qf, kf, vf = (bf16_bits_to_float32(x).astype(cupy.float64) for x in (q, k, v))
    if layout == "dimension-major":
        kf, vf = kf.transpose(0, 1, 3, 2), vf.transpose(0, 1, 3, 2)
    group = q.shape[1] // k.shape[1]
    kf, vf = cupy.repeat(kf, group, axis=1), cupy.repeat(vf, group, axis=1)
    scores = cupy.einsum("bhd,bhtd->bht", qf, kf) / math.sqrt(HEAD_DIM)
    p = cupy.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return cupy.einsum("bht,bhtd->bhd", p, vf)


def operands(batch: int, kv_heads: int, group: int, context: int, seed: int, layout: str = "token-major",
             scale: float = 1.0):
    """Random bf16 Q [B, Hq, 128], K and V caches in ``layout``, and a NaN-filled output."""
    import cupy

    cache = (batch, kv_heads, context, HEAD_DIM) if layout == "token-major" else (batch, kv_heads, HEAD_DIM, context)
    q = to_bf16_bits(random_operand((batch, kv_heads * group, HEAD_DIM), seed) * (2 * scale))
    k = to_bf16_bits(random_operand(cache, seed + 1) * (2 * scale))
    v = to_bf16_bits(random_operand(cache, seed + 2) * 2)
    return q, k, v, cupy.full(q.shape, 0xFFFF, dtype=cupy.uint16)


def tolerance(want) -> float:
    """What a bf16 output may be off from the float64 ``want``: two bf16 ulps of its largest value
    (one rounding of the output, one of the running sums' order) and a small absolute term for the
    exponentials' fp32 rounding."""
    import cupy

    return 2.0 ** -7 * float(cupy.abs(want).max()) + 1e-3


def max_error(out, want) -> tuple[float, float]:
    """(max |out - want|, ``tolerance(want)``) for the kernels' bf16 ``out``."""
    import cupy

    err = float(cupy.abs(bf16_bits_to_float32(out).astype(cupy.float64) - want).max())
    return err, tolerance(want)


@covers(FAMILY, *KERNELS.values(), "decode_combine")
def decode_smoke() -> None:
    """Every decode kernel at edge sizes: one token, a partial round, more splits than tokens, a
    context that is not a multiple of anything, scores large enough that an unshifted exp overflows."""
    for (group, layout) in KERNELS:
        for batch, kv_heads, context, splits, scale in ((1, 1, 1, 1, 1.0), (1, 2, 7, 3, 1.0), (2, 1, 17, 1, 1.0),
                                                        (1, 1, 300, 7, 1.0), (2, 2, 129, None, 1.0),
                                                        (1, 1, 64, 2, 24.0)):
            q, k, v, out = operands(batch, kv_heads, group, context, 5, layout, scale)
            run_decode(q, k, v, out, group, layout, splits)
            err, tol = max_error(out, reference(q, k, v, layout))
            if not err <= tol:
                raise AssertionError(f"{kernel_for(group, layout)} wrong at batch {batch}, {kv_heads} KV heads, "
                                     f"context {context}, splits {splits}, score scale {scale}: "
                                     f"max error {err:.3g} > {tol:.3g}")
