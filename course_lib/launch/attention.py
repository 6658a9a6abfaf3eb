"""Host launcher of ``kernels/attention.cu`` (notebook 13): the FlashAttention-style forward kernel's
ladder (``RUNGS``), ``forward`` on torch tensors, a float64 ``reference``, operands that make a wrong mask
or a lost tail visible (``hostile_operands``), each rung's one change (``describe``), ptxas's report of
it (``compile_report``, no GPU needed), the launch compute-sanitizer runs, and the smoke launch.

Causal masking is bottom-right aligned, as FlashAttention's: with Sq queries and Sk keys, key j is
visible to query i iff j <= i + Sk - Sq. When Sq > Sk the first Sq - Sk queries see no key, and their
output is 0 (FlashAttention's choice too; the reference does the same)."""
from __future__ import annotations

import functools
import math
import re

import numpy as np

from course_lib.core import cuda
from course_lib.core.hardware import detect
from course_lib.core.validate import grouped_heads
from course_lib.launch.operands import bf16_bits
from course_lib.measure.smoke import covers

FAMILY = "attention"
MIN_CC = 8.0               # bf16 mma.sync, ldmatrix, cp.async
HEAD_DIMS = (64, 128)
RUNGS: tuple[str, ...] = ("mma", "cp_async", "causal_skip")
MAX_BATCH_HEADS = 65535    # grid.y = batch x query heads
CASES = ("random", "peaked", "diagonal", "tail", "large")
REFERENCE_BAND_SCORES = 32 << 20   # float64 scores the reference holds at once: 256 MiB


@functools.lru_cache(maxsize=1)
def tile_macros() -> dict[str, int]:
    """The kernel file's tile macros (ATT_WARPS, ATT_KV_TILE, ATT_STAGES, ATT_MIN_BLOCKS) as it defines them."""
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"#define\s+(ATT_[A-Z_]+)\s+(\d+)\b", (cuda.KERNEL_DIR / f"{FAMILY}.cu").read_text())}


def threads() -> int:
    return 32 * tile_macros()["ATT_WARPS"]


def block_queries() -> int:
    """Query rows per block: 16 per warp."""
    return 16 * tile_macros()["ATT_WARPS"]


def kv_tile() -> int:
    return tile_macros()["ATT_KV_TILE"]


def stages(rung: str) -> int:
    """K/V buffers in shared memory: one for ``mma``, ATT_STAGES for the cp.async rungs."""
    _check_rung(rung)
    return 1 if rung == "mma" else tile_macros()["ATT_STAGES"]


def smem_bytes(rung: str, head_dim: int) -> int:
    """Dynamic shared memory of a launch: the Q tile and each stage's K and V tiles, bf16."""
    _check_head_dim(head_dim)
    return (block_queries() + 2 * stages(rung) * kv_tile()) * head_dim * 2


def _check_rung(rung: str) -> None:
    if rung not in RUNGS:
        raise ValueError(f"rung must be one of {', '.join(RUNGS)} (the ladder in order), not {rung!r}")


def _check_head_dim(head_dim: int) -> None:
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"the attention kernels are built for head dimension 64 or 128, not {head_dim}")


def kernel_name(rung: str, head_dim: int, causal: bool) -> str:
    """The entry point that runs ``rung`` at ``head_dim``. ``causal_skip`` without the causal mask has
    nothing to skip, so it is ``cp_async``'s kernel."""
    _check_rung(rung)
    _check_head_dim(head_dim)
    if rung == "causal_skip" and not causal:
        rung = "cp_async"
    return f"attention_{rung}_d{head_dim}" + ("_causal" if causal else "")


KERNELS: tuple[str, ...] = tuple(dict.fromkeys(kernel_name(r, d, c) for r in RUNGS for d in HEAD_DIMS
                                               for c in (False, True)))

_CHANGES = {
    "mma": "one warp per 16 query rows on mma.sync: Q held in registers, S = QKᵀ and O += PV on the tensor "
           "cores, the online softmax in registers; K and V tiles copied by plain 16-byte loads into one "
           "shared buffer between two barriers; causal: every tile masked",
    "cp_async": "K and V tiles stream through cp.async into {stages} shared buffers (the next tile lands while "
                "this one is multiplied), XOR-swizzled so that ldmatrix reads them without bank conflicts",
    "causal_skip": "causal: K/V tiles wholly past the diagonal are never loaded nor computed, and only the "
                   "tiles crossing it are masked (without the causal mask this is cp_async's kernel)",
}


def describe(rung: str) -> str:
    """One line: the single change this rung makes over the one before."""
    _check_rung(rung)
    return _CHANGES[rung].format(stages=tile_macros()["ATT_STAGES"])


def geometry(rung: str, head_dim: int, sq: int, batch_heads: int):
    """(grid, block, dynamic shared bytes) of one launch: a block per (query tile, batch x query head)."""
    return (-(-sq // block_queries()), batch_heads), (threads(),), smem_bytes(rung, head_dim)


def compile_report(rung: str, head_dim: int, causal: bool = False, arch: str | None = None) -> dict:
    """What ptxas gave the rung's kernel (NVRTC, no GPU): registers a thread, shared memory, stack and
    spills, for ``arch`` (default: the GPU the notebook shows, live or recorded)."""
    name = kernel_name(rung, head_dim, causal)
    arch = arch or cuda.arch_for(FAMILY, cuda.target_arch())
    fam = cuda.compile_family(FAMILY, arch)
    r = fam.resources[name]
    return {"rung": rung, "kernel": name, "head_dim": head_dim, "causal": causal, "arch": arch,
            "compiler": fam.compiler, "threads": threads(), "registers": r.registers,
            "static_smem_bytes": r.static_smem_bytes, "dynamic_smem_bytes": smem_bytes(rung, head_dim),
            "stack_frame_bytes": r.stack_frame_bytes, "spill_store_bytes": r.spill_store_bytes,
            "spill_load_bytes": r.spill_load_bytes, "spills": r.spills}


# --------------------------------------------------------------------------- launching


def check_shapes(q_shape, k_shape, v_shape, kernel: bool = True) -> tuple[int, int, int, int, int, int]:
    """(batch, query heads, KV heads, Sq, Sk, head dim) of consistent shapes, or a ValueError saying what is
    wrong; with ``kernel``, also within what the kernels are built for (head dimension, grid size)."""
    for name, shape in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        if len(shape) != 4:
            raise ValueError(f"{name} must be 4-d (batch, heads, sequence, head dim), got shape {tuple(shape)}")
    if tuple(k_shape) != tuple(v_shape):
        raise ValueError(f"k and v must have the same shape, got {tuple(k_shape)} and {tuple(v_shape)}")
    b, hq, sq, d = q_shape
    bk, hkv, sk, dk = k_shape
    if bk != b:
        raise ValueError(f"q has batch {b} but k and v have batch {bk}")
    if dk != d:
        raise ValueError(f"q has head dimension {d} but k and v have {dk}")
    if kernel:
        _check_head_dim(d)
    if sq < 1 or sk < 1 or b < 1 or hkv < 1:
        raise ValueError(f"every dimension must be at least 1, got q {tuple(q_shape)} and k {tuple(k_shape)}")
    grouped_heads(hq, hkv)
    if kernel and b * hq > MAX_BATCH_HEADS:
        raise ValueError(f"batch x query heads = {b * hq} is more than one grid dimension holds ({MAX_BATCH_HEADS})")
    return b, hq, hkv, sq, sk, d


def run_bits(q, k, v, out, *, causal: bool, rung: str) -> None:
    """``out`` = attention(q, k, v) with ``rung``'s kernel, on CuPy arrays of raw bf16 (uint16), on
    CuPy's current stream (asynchronous). Shapes as ``forward``'s; ``out`` has q's."""
    b, hq, hkv, sq, sk, d = check_shapes(q.shape, k.shape, v.shape)
    if tuple(out.shape) != tuple(q.shape):
        raise ValueError(f"out must have q's shape {tuple(q.shape)}, got {tuple(out.shape)}")
    for name, x in (("q", q), ("k", k), ("v", v), ("out", out)):
        if x.dtype != np.uint16 or not x.flags.c_contiguous or x.data.ptr % 16:
            raise ValueError(f"{name} must be contiguous, 16-byte aligned bf16 bit patterns (uint16), got {x.dtype}")
    fn = cuda.kernel(FAMILY, kernel_name(rung, d, causal))
    grid, block, smem = geometry(rung, d, sq, b * hq)
    if fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem   # opt in beyond the default 48 KiB
    fn(grid, block, (q, k, v, out, np.int32(sq), np.int32(sk), np.int32(hq), np.int32(hkv)), shared_mem=smem)


def forward(q, k, v, *, causal: bool, rung: str):
    """softmax(q kᵀ / sqrt(d)) v with the course's kernel, rung ``rung`` of ``RUNGS``.

    q: (B, Hq, Sq, d), k and v: (B, Hkv, Sk, d); torch bf16 CUDA tensors, contiguous, on one GPU;
    Hq a multiple of Hkv (query head h reads KV head h // (Hq // Hkv)); d 64 or 128. Returns a new
    (B, Hq, Sq, d) bf16 tensor, launched on torch's current stream. Softmax scale 1/sqrt(d).
    ``causal``: key j is visible to query i iff j <= i + Sk - Sq (bottom-right aligned, as
    FlashAttention does); a query that sees no key (Sq > Sk) gets 0. Bad input raises ValueError.
    """
    import torch

    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, not {causal!r}")
    _check_rung(rung)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor, got {type(x).__name__}")
    check_shapes(q.shape, k.shape, v.shape)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dtype != torch.bfloat16:
            raise ValueError(f"{name} must be bfloat16, got {x.dtype}: the kernels read bf16 (convert with .bfloat16())")
        if not x.is_contiguous():
            raise ValueError(f"{name} must be contiguous (a transposed or sliced view is not): call .contiguous() first")
        if x.data_ptr() % 16:
            raise ValueError(f"{name} must start on a 16-byte boundary (the kernels copy 16-byte chunks)")
        if not x.is_cuda:
            raise ValueError(f"{name} is on the {x.device.type.upper()}: the kernels run on a CUDA GPU (move it with .cuda())")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one GPU, got {q.device}, {k.device} and {v.device}")
    major, minor = torch.cuda.get_device_capability(q.device)
    if major + minor / 10 < MIN_CC:
        raise RuntimeError(f"the attention kernels need compute capability {MIN_CC}+ (bf16 mma.sync); "
                           f"{torch.cuda.get_device_name(q.device)} is {major}.{minor}")
    import cupy

    out = torch.empty_like(q)
    with cupy.cuda.Device(q.device.index), cupy.cuda.ExternalStream(torch.cuda.current_stream(q.device).cuda_stream):
        run_bits(bf16_bits(q), bf16_bits(k), bf16_bits(v), bf16_bits(out), causal=causal, rung=rung)
    return out


# --------------------------------------------------------------------------- references and operands


def reference(q, k, v, *, causal: bool):
    """The same attention in float64 from q, k, v as given (torch, CUDA or CPU), the same masking
    (bottom-right causal; a query that sees no key gets 0). Computed a band of queries at a time,
    so that the float64 scores stay under 256 MiB."""
    import torch

    b, hq, hkv, sq, sk, d = check_shapes(q.shape, k.shape, v.shape, kernel=False)
    group = hq // hkv
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    rows = max(1, REFERENCE_BAND_SCORES // (hq * sk))
    keys = torch.arange(sk, device=q.device)
    for i in range(b):
        kb = k[i].to(torch.float64).repeat_interleave(group, dim=0)   # (Hq, Sk, d)
        vb = v[i].to(torch.float64).repeat_interleave(group, dim=0)
        for r0 in range(0, sq, rows):
            s = q[i, :, r0:r0 + rows].to(torch.float64) @ kb.transpose(1, 2) / math.sqrt(d)
            if causal:
                queries = torch.arange(r0, min(sq, r0 + rows), device=q.device)
                s = s.masked_fill(keys[None, :] > queries[:, None] + (sk - sq), float("-inf"))
            m = s.amax(-1, keepdim=True)
            p = torch.exp(s - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
            row_sum = p.sum(-1, keepdim=True)
            out[i, :, r0:r0 + rows] = (p @ vb) / torch.where(row_sum > 0, row_sum, torch.ones_like(row_sum))
    return out


def reference_numpy(q, k, v, *, causal: bool) -> np.ndarray:
    """``reference`` in NumPy float64 (what the smoke launch checks against: it imports no torch)."""
    b, hq, hkv, sq, sk, d = check_shapes(q.shape, k.shape, v.shape, kernel=False)
    group = hq // hkv
    kf = np.repeat(np.asarray(k, np.float64), group, axis=1)
    vf = np.repeat(np.asarray(v, np.float64), group, axis=1)
    s = np.einsum("bhid,bhjd->bhij", np.asarray(q, np.float64), kf) / math.sqrt(d)
    if causal:
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    row_sum = p.sum(-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", p, vf) / np.where(row_sum > 0, row_sum, 1.0)


def bf16_to_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even (NumPy)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bits_to_float(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def hostile_operands(batch: int, q_heads: int, kv_heads: int, sq: int, sk: int, head_dim: int, case: str = "random",
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v as bf16 bit patterns (NumPy uint16), built so that a given mistake shows:

    random    standard normal values;
    peaked    query i is twice the first key it must not see (key i + Sk - Sq + 1): with the causal mask
              one key too lax, that key takes almost all the weight and the output jumps;
    diagonal  query i is twice the last key it may see (key i + Sk - Sq): a mask one key too strict drops it;
    tail      every real score is very negative, so the zero-filled keys past Sk (score 0) would win
              any row they were not masked from;
    large     queries scaled by 40: scores past 88, whose exponentials overflow fp32 without the running max.
    """
    if case not in CASES:
        raise ValueError(f"case must be one of {', '.join(CASES)}, not {case!r}")
    check_shapes((batch, q_heads, sq, head_dim), (batch, kv_heads, sk, head_dim), (batch, kv_heads, sk, head_dim))
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, q_heads, sq, head_dim), dtype=np.float32)
    k = rng.standard_normal((batch, kv_heads, sk, head_dim), dtype=np.float32)
    v = rng.standard_normal((batch, kv_heads, sk, head_dim), dtype=np.float32)
    if case in ("peaked", "diagonal"):
        rows = np.arange(sq)
        keys = rows + (sk - sq) + (1 if case == "peaked" else 0)
        ok = (keys >= 0) & (keys < sk)
        kv_of = np.arange(q_heads) // (q_heads // kv_heads)
        q[:, :, rows[ok]] = 2 * k[:, kv_of][:, :, keys[ok]]
    elif case == "tail":
        direction = rng.standard_normal(head_dim, dtype=np.float32)
        k = direction + 0.1 * k
        q = np.broadcast_to(-3 * direction, q.shape).copy()
    elif case == "large":
        q *= 40
    return bf16_to_bits(q), bf16_to_bits(k), bf16_to_bits(v)


def tolerance(v_max_abs: float, want_max_abs: float) -> float:
    """What a bf16 output may be off from float64: P is rounded to bf16 before P·V (relative 2^-9 per
    weight, so at most 2^-9 max|v| on an output), and the output is rounded once (2^-9 of itself);
    twice both."""
    return 2.0 ** -8 * (v_max_abs + want_max_abs)


def worst_error(got: np.ndarray, want: np.ndarray) -> tuple[float, tuple[int, ...]]:
    """(max |got - want|, where: (batch, head, query, dim)); a NaN anywhere (a row never written) counts as inf."""
    err = np.abs(np.asarray(got, np.float64) - want)
    err = np.where(np.isnan(err), np.inf, err)
    where = np.unravel_index(int(np.argmax(err)), err.shape)
    return float(err[where]), tuple(int(i) for i in where)


SMOKE_SHAPES = ((1, 2, 1, 1, 1, "random"), (1, 2, 2, 65, 130, "peaked"), (2, 4, 2, 130, 65, "diagonal"),
                (1, 1, 1, 200, 17, "tail"), (1, 2, 1, 17, 200, "large"))


def check_rung(rung: str, head_dim: int, causal: bool, batch: int, q_heads: int, kv_heads: int, sq: int, sk: int,
               case: str = "random", seed: int = 0) -> str:
    """Run one rung on hostile operands (CuPy, no torch) and compare with ``reference_numpy``; an
    AssertionError names the rung, the shape, the case, the error and where it is. Returns a summary."""
    import cupy

    q, k, v = hostile_operands(batch, q_heads, kv_heads, sq, sk, head_dim, case, seed)
    out = cupy.full(q.shape, 0xFFFF, dtype=cupy.uint16)   # NaN: a row never written shows
    run_bits(cupy.asarray(q), cupy.asarray(k), cupy.asarray(v), out, causal=causal, rung=rung)
    want = reference_numpy(bits_to_float(q), bits_to_float(k), bits_to_float(v), causal=causal)
    err, where = worst_error(bits_to_float(cupy.asnumpy(out)), want)
    tol = tolerance(float(np.abs(bits_to_float(v)).max()), float(np.abs(want).max()))
    said = (f"{kernel_name(rung, head_dim, causal)} ({rung}, d={head_dim}, causal={causal}) at B={batch} Hq={q_heads} "
            f"Hkv={kv_heads} Sq={sq} Sk={sk}, {case} operands: max error {err:.3g} (tolerance {tol:.3g}) "
            f"at (batch, head, query, dim) = {where}")
    if not err <= tol:
        raise AssertionError(said)
    return said


def sanitize_launch(rung: str, head_dim: int, causal: bool) -> str:
    """One small checked launch for compute-sanitizer (a Target's function: literal arguments only):
    two query tiles, three K/V tiles with a tail, grouped heads, more keys than queries."""
    return check_rung(rung, head_dim, causal, 1, 2, 1, 70, 150, "peaked" if causal else "random")


@covers(FAMILY, *KERNELS)
def attention_smoke() -> None:
    """Every kernel at edge shapes: one query and one key, tails on both sides, Sq > Sk (rows that see
    no key), Sq < Sk, grouped heads, and the hostile operands that expose a mask off by one."""
    if float(detect().compute_capability) < MIN_CC:
        print(f"skip {FAMILY}: needs compute capability {MIN_CC}+")
        return
    for rung in RUNGS:
        for d in HEAD_DIMS:
            for causal in (False, True):
                if rung == "causal_skip" and not causal:
                    continue   # cp_async's kernel, checked above
                for batch, hq, hkv, sq, sk, case in SMOKE_SHAPES:
                    check_rung(rung, d, causal, batch, hq, hkv, sq, sk, case)
