"""Host launcher of ``kernels/decode_attention.cu``: one decode step's attention over a bf16 KV cache,
grouped (each KV head read once for its group of query heads), replicated (the cache expanded to one
KV head per query head) or over a dimension-major cache; and its smoke launch. Notebook 12's lab times
them beside PyTorch's attention.

Two engines do the grouped math: ``"simt"``, the course's first kernels (a half-warp a token, shuffle sums
and one exponential per token and query head), and ``"mma"`` (compute capability 8.0+), which packs the
group's query heads as the rows of an m16 tile and does Q·Kᵀ and P·V on the tensor cores (mma.sync), each
warp streaming its own tiles of the cache through cp.async. Both write the same partial results, which the
same ``decode_combine`` merges."""
from __future__ import annotations

import functools
import math
import re

import numpy as np

from course_lib.core import cuda
from course_lib.core.hardware import detect
from course_lib.launch.operands import bf16_bits_to_float32, random_operand, to_bf16_bits
from course_lib.measure.smoke import covers
from course_lib.models import occupancy

FAMILY = "decode_attention"
HEAD_DIM = 128
THREADS = 128
ROUND = 8                 # tokens a block's four warps take in one trip (two per warp)
MIN_TOKENS_PER_SPLIT = 64
BLOCKS_PER_SM = 4         # what the grouped kernel's 124 registers a thread allow (sm_90)
LAYOUTS = ("token-major", "dimension-major")
KERNELS = {(4, "token-major"): "decode_grouped_g4", (8, "token-major"): "decode_grouped_g8",
           (1, "token-major"): "decode_replicated", (4, "dimension-major"): "decode_grouped_g4_dmajor"}
ENGINES = ("simt", "mma")
MMA_KERNELS = {(4, "token-major"): "decode_grouped_g4_mma", (8, "token-major"): "decode_grouped_g8_mma"}
MMA_MIN_CC = 8.0          # bf16 mma.sync, ldmatrix, cp.async


def kernel_for(group: int, layout: str = "token-major", engine: str = "simt") -> str:
    """The kernel for ``group`` query heads per KV head read from a cache in ``layout``, by ``engine``
    (``"simt"``: the course's first kernels; ``"mma"``: the tensor-core ones)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    built = KERNELS if engine == "simt" else MMA_KERNELS
    try:
        return built[(group, layout)]
    except KeyError:
        have = ", ".join(f"group {g} {lay}" for g, lay in built)
        raise ValueError(f"no {engine} decode kernel for group {group} with a {layout} cache; built: {have}") from None


@functools.lru_cache(maxsize=1)
def mma_macros() -> dict[str, int]:
    """The tensor-core kernels' tile macros (DEC_MMA_WARPS, DEC_MMA_TILE, DEC_MMA_STAGES) as the file defines them."""
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"#define\s+(DEC_MMA_[A-Z]+)\s+(\d+)\b", (cuda.KERNEL_DIR / f"{FAMILY}.cu").read_text())}


def _mma(macros: dict[str, int] | None) -> dict[str, int]:
    return {**mma_macros(), **(macros or {})}


def mma_threads(macros: dict[str, int] | None = None) -> int:
    """Threads a block of the tensor-core kernels: 32 a warp (``macros`` override the file's, as -D would)."""
    return 32 * _mma(macros)["DEC_MMA_WARPS"]


def mma_tokens_per_round(macros: dict[str, int] | None = None) -> int:
    """Tokens a block's warps take in one round, one tile each."""
    m = _mma(macros)
    return m["DEC_MMA_WARPS"] * m["DEC_MMA_TILE"]


def mma_smem_bytes(group: int, macros: dict[str, int] | None = None) -> int:
    """Dynamic shared memory of a tensor-core launch: each warp's stages of a K and a V tile (bf16), or, if
    larger, the merge of the warps' fp32 outputs and (max, sum) pairs that reuses them."""
    m = _mma(macros)
    pipeline = m["DEC_MMA_WARPS"] * m["DEC_MMA_STAGES"] * 2 * m["DEC_MMA_TILE"] * HEAD_DIM * 2
    merge = m["DEC_MMA_WARPS"] * group * (HEAD_DIM + 2) * 4
    return max(pipeline, merge)


def mma_splits_for(batch: int, kv_heads: int, context: int, sms: int, blocks_per_sm: int,
                   tokens_per_round: int | None = None) -> int:
    """Splits of the cache for the tensor-core kernels: as many as let all of the step's blocks be resident
    at once (batch × KV heads × splits at most SMs × ``blocks_per_sm``), so that no block waits for a
    second wave, and no more than give every warp of a block a tile (``tokens_per_round`` tokens a split)."""
    tokens_per_round = tokens_per_round or mma_tokens_per_round()
    for name, value in (("batch", batch), ("kv_heads", kv_heads), ("context", context), ("sms", sms),
                        ("blocks_per_sm", blocks_per_sm), ("tokens_per_round", tokens_per_round)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    one_wave = (sms * blocks_per_sm) // (batch * kv_heads)
    return max(1, min(one_wave, math.ceil(context / tokens_per_round)))


def mma_blocks_per_sm(group: int, budget: occupancy.SmBudget, registers: int,
                      macros: dict[str, int] | None = None) -> int:
    """Resident blocks an SM of ``budget`` holds of the tensor-core kernel at ``registers`` a thread, its
    dynamic shared memory included (the occupancy model, allocation rules and all)."""
    return occupancy.residency(budget, mma_threads(macros), registers, mma_smem_bytes(group, macros)).resident_blocks


@functools.lru_cache(maxsize=None)
def _mma_blocks_here(device: int, group: int) -> int:   # per GPU: the launch path asks on every call
    info = detect()
    if float(info.compute_capability) < MMA_MIN_CC:
        raise ValueError(f"the tensor-core decode kernels need compute capability {MMA_MIN_CC}+ (bf16 mma.sync, "
                         f"cp.async); {info.name} is {info.compute_capability}: use engine='simt'")
    registers = cuda.resources(FAMILY, kernel_for(group, engine="mma")).registers
    return mma_blocks_per_sm(group, occupancy.budget_from_device(info), registers)


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


def run_decode(q, k, v, out, group: int, layout: str = "token-major", splits: int | None = None,
               engine: str = "simt") -> int:
    """out = softmax(q·Kᵀ/√128)·V for one new token per sequence, asynchronously; returns the splits used.
    ``engine="mma"`` runs the tensor-core kernel (groups 4 and 8, token-major, compute capability 8.0+),
    split by ``mma_splits_for`` unless ``splits`` is given."""
    import cupy

    b, hkv, t = check_shapes(q, k, v, out, group, layout)
    name = kernel_for(group, layout, engine)
    scale_log2 = np.float32(math.log2(math.e) / math.sqrt(HEAD_DIM))
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    if engine == "mma":
        blocks = _mma_blocks_here(cupy.cuda.Device().id, group)
        splits = splits or mma_splits_for(b, hkv, t, sms, blocks)
        smem = mma_smem_bytes(group)
        fn = cuda.kernel(FAMILY, name)
        if fn.max_dynamic_shared_size_bytes < smem:
            fn.max_dynamic_shared_size_bytes = smem   # opt in beyond the default 48 KiB
        partial, stats = _scratch(splits, b * hkv * group)
        fn((splits, hkv, b), (mma_threads(),), (q, k, v, partial, stats, np.int32(t), scale_log2), shared_mem=smem)
    else:
        splits = splits or splits_for(b, hkv, t, sms)
        partial, stats = _scratch(splits, b * hkv * group)
        cuda.kernel(FAMILY, name)((splits, hkv, b), (THREADS,), (q, k, v, partial, stats, np.int32(t), scale_log2))
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


def tolerance(want, v=None) -> float:
    """What a bf16 output may be off from the float64 ``want``: two bf16 ulps of its largest value
    (one rounding of the output, one of the running sums' order) and a small absolute term for the
    exponentials' fp32 rounding. With ``v``, the V cache of a kernel that rounds each softmax weight to
    bf16 before P·V (the mma engine): each weight is then off by at most 2^-9 of itself, so an output, a
    weighted mean of V, by at most 2^-9 max|v| more."""
    import cupy

    rounded_weights = 0.0 if v is None else 2.0 ** -9 * float(cupy.abs(bf16_bits_to_float32(v)).max())
    return 2.0 ** -7 * float(cupy.abs(want).max()) + 1e-3 + rounded_weights


def max_error(out, want, v=None) -> tuple[float, float]:
    """(max |out - want|, ``tolerance(want, v)``) for the kernels' bf16 ``out``; a NaN counts as infinite."""
    import cupy

    err = cupy.abs(bf16_bits_to_float32(out).astype(cupy.float64) - want)
    return float(cupy.where(cupy.isnan(err), cupy.inf, err).max()), tolerance(want, v)


SMOKE_SHAPES = ((1, 1, 1, 1, 1.0), (1, 2, 7, 3, 1.0), (2, 1, 17, 1, 1.0), (1, 1, 300, 7, 1.0), (2, 2, 129, None, 1.0),
                (1, 1, 64, 2, 24.0))


@covers(FAMILY, *KERNELS.values(), "decode_combine")
def decode_smoke() -> None:
    """Every decode kernel at edge sizes: one token, a partial round, more splits than tokens, a
    context that is not a multiple of anything, scores large enough that an unshifted exp overflows."""
    for (group, layout) in KERNELS:
        for batch, kv_heads, context, splits, scale in SMOKE_SHAPES:
            q, k, v, out = operands(batch, kv_heads, group, context, 5, layout, scale)
            run_decode(q, k, v, out, group, layout, splits)
            err, tol = max_error(out, reference(q, k, v, layout))
            if not err <= tol:
                raise AssertionError(f"{kernel_for(group, layout)} wrong at batch {batch}, {kv_heads} KV heads, "
                                     f"context {context}, splits {splits}, score scale {scale}: "
                                     f"max error {err:.3g} > {tol:.3g}")


MMA_SMOKE_SHAPES = SMOKE_SHAPES + ((1, 1, 63, 2, 1.0), (1, 2, 65, 64, 1.0), (1, 1, 1000, None, 24.0))


def check_mma(group: int, batch: int, kv_heads: int, context: int, splits: int | None, scale: float = 1.0,
              seed: int = 5) -> str:
    """Run the tensor-core kernel of ``group`` on the launcher's operands and compare with ``reference``; an
    AssertionError names the kernel, the shape, the error and the tolerance. Returns a summary."""
    q, k, v, out = operands(batch, kv_heads, group, context, seed, scale=scale)
    used = run_decode(q, k, v, out, group, splits=splits, engine="mma")
    err, tol = max_error(out, reference(q, k, v), v)
    said = (f"{kernel_for(group, engine='mma')} at batch {batch}, {kv_heads} KV heads, context {context}, "
            f"{used} splits, score scale {scale}: max error {err:.3g} (tolerance {tol:.3g})")
    if not err <= tol:
        raise AssertionError(said)
    return said


@covers(FAMILY, *MMA_KERNELS.values())
def decode_mma_smoke() -> None:
    """The tensor-core kernels at the same edge sizes, and a tile cut by the end of a split, more splits than
    tiles, and many tiles a warp with scores whose exponentials overflow unshifted."""
    if float(detect().compute_capability) < MMA_MIN_CC:
        print(f"skip the mma decode kernels: they need compute capability {MMA_MIN_CC}+")
        return
    for group, _ in MMA_KERNELS:
        for batch, kv_heads, context, splits, scale in MMA_SMOKE_SHAPES:
            check_mma(group, batch, kv_heads, context, splits, scale)
