"""The course's attention forward kernel in Triton, FlashAttention-2's plan: one program per (sequence,
query head, tile of BLOCK_M queries) holds its Q tile and streams K and V in tiles of BLOCK_N keys,
keeping the running maximum m, running sum l and output accumulator of each row on chip (the online
softmax, ``models.attention.online_softmax_row``), so the S_q x S_k scores never reach HBM.

What it supports, and how:

- bf16 Q (B, H_q, S_q, d), K and V (B, H_kv, S_k, d), the last dimension contiguous, d = 64 or 128.
- Grouped-query heads: query head h reads KV head h // (H_q / H_kv) (``repeat_interleave``'s mapping).
- Any S_q and S_k: tails of query and key tiles are loaded masked and their scores set to -inf.
- Causal masks aligned to the bottom-right corner (query i sees key j iff j <= i + S_k - S_q; the same as
  j <= i when S_q == S_k). PyTorch's ``scaled_dot_product_attention(is_causal=True)`` aligns to the
  top-left instead; ``models.attention`` says more. A row that sees no key (S_q > S_k) outputs zeros.
- Scores in the log2 domain: the kernel computes exp2(s · log2(e)/√d - m), the softmax scale and log2(e)
  folded into one multiply-add before the MUFU's ex2, as FlashAttention does.
- Each program first walks the key tiles every one of its rows sees in full (no mask: no compares, no
  selects), then the tiles that cross the causal diagonal or the keys' tail (masked). Under a causal mask
  the query tiles with the most keys are scheduled first, so the short ones fill the last wave.
- ``triton.autotune`` picks BLOCK_M, BLOCK_N, warps and pipeline stages per (S_q, S_k, d, causal) on the
  first call of each, by timing each config (``CONFIGS``). Under Triton's interpreter
  (``TRITON_INTERPRET=1``, the CPU), nothing is tuned: ``INTERPRETER_CONFIG`` runs.

Triton is imported on first use (``TritonUnavailable`` says what to install if it is missing), so this
module imports anywhere. The kernel's functions below are plain Python until then: ``_compiled()`` binds
``tl`` and wraps them with ``triton.jit``, as the decorator would at import.
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass

from course_lib.core.validate import grouped_heads

HEAD_DIMS = (64, 128)
LOG2_E = 1.4426950408889634
MAX_ELEMENTS = 2**31 - 1       # the kernel's offsets are 32-bit: no operand may hold more elements

# triton.language, bound by ``_compiled()``; None until Triton is first needed.
tl = None


class TritonUnavailable(RuntimeError):
    """Triton is not installed here (CI, macOS, a CPU-only PyTorch without it)."""


@dataclass(frozen=True)
class TileConfig:
    """One launch shape of the kernel: queries per program, keys per tile, warps, software-pipeline stages."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int

    @property
    def label(self) -> str:
        return f"BLOCK_M={self.block_m}, BLOCK_N={self.block_n}, {self.num_warps} warps, {self.num_stages} stages"


# What the autotuner chooses from: the tile heights and widths FlashAttention-2 uses on Ampere and Hopper
# (128 x 64 and 128 x 128 at d = 128, 64-row tiles for small grids), four or eight warps, two to four
# stages of K and V in flight. A config whose shared memory does not fit is skipped by the tuner.
CONFIGS = (
    TileConfig(128, 64, 8, 3),
    TileConfig(128, 128, 8, 3),
    TileConfig(128, 64, 4, 3),
    TileConfig(128, 32, 4, 4),
    TileConfig(128, 128, 8, 2),
    TileConfig(64, 64, 4, 3),
    TileConfig(64, 128, 4, 3),
)
# Small tiles keep the interpreter quick and still cross several tiles and tails at the test shapes.
INTERPRETER_CONFIG = TileConfig(16, 16, 4, 1)


def interpreting() -> bool:
    """Whether Triton runs its interpreter (on the CPU, NumPy underneath) instead of compiling."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------- the kernel (Triton source)

def _key_tiles(acc, l_i, m_i, q, k_base, v_base, k_stride, v_stride, rows, dims, qk_scale, start, end, kv_len,
               offset, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr):
    """The online-softmax update of key tiles [start, end) for one query tile: for each K and V tile,
    the scores, the new running max, the rescale of the old sum and accumulator, and P·V added."""
    keys = tl.arange(0, BLOCK_N)
    for n0 in range(start, end, BLOCK_N):
        cols = n0 + keys
        if MASKED:
            in_range = cols[:, None] < kv_len
            k = tl.load(k_base + cols[:, None] * k_stride + dims[None, :], mask=in_range, other=0.0)
            v = tl.load(v_base + cols[:, None] * v_stride + dims[None, :], mask=in_range, other=0.0)
        else:
            k = tl.load(k_base + cols[:, None] * k_stride + dims[None, :])
            v = tl.load(v_base + cols[:, None] * v_stride + dims[None, :])
        s = tl.dot(q, tl.trans(k))                                  # raw q·k, fp32 accumulate
        if MASKED:
            visible = cols[None, :] < kv_len
            if CAUSAL:
                visible = visible & (cols[None, :] <= rows[:, None] + offset)
            s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)             # running max, log2 domain
        if MASKED:
            m_new = tl.where(m_new == float("-inf"), 0.0, m_new)    # a row with no visible key yet: p = 0, not NaN
        p = tl.exp2(tl.fma(s, qk_scale, -m_new[:, None]))          # one FMA and one MUFU ex2 per score
        rescale = tl.exp2(m_i - m_new)
        l_i = l_i * rescale + tl.sum(p, 1)
        acc = acc * rescale[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


def _attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, qk_scale,
                   q_sb, q_sh, q_sm, k_sb, k_sh, k_sn, v_sb, v_sh, v_sn, o_sb, o_sh, o_sm,
                   q_heads, group, q_len, kv_len,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr):
    """One program: query tile ``tile`` of query head h of sequence b. Grid: (B · H_q, query tiles)."""
    bh = tl.program_id(0)
    if CAUSAL:
        tile = tl.num_programs(1) - 1 - tl.program_id(1)            # the longest rows first
    else:
        tile = tl.program_id(1)
    b = bh // q_heads
    h = bh % q_heads
    kv_head = h // group
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    row_ok = rows[:, None] < q_len
    q = tl.load(q_ptr + b * q_sb + h * q_sh + rows[:, None] * q_sm + dims[None, :], mask=row_ok, other=0.0)
    k_base = k_ptr + b * k_sb + kv_head * k_sh
    v_base = v_ptr + b * v_sb + kv_head * v_sh

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    offset = kv_len - q_len                                         # bottom-right: row i sees j <= i + offset
    if CAUSAL:
        first_row = tile * BLOCK_M
        seen_by_all = tl.minimum(tl.maximum(first_row + offset + 1, 0), kv_len)
        end = tl.minimum(tl.maximum(first_row + BLOCK_M + offset, 0), kv_len)
    else:
        seen_by_all = kv_len
        end = kv_len
    full_end = (seen_by_all // BLOCK_N) * BLOCK_N
    acc, l_i, m_i = _key_tiles(acc, l_i, m_i, q, k_base, v_base, k_sn, v_sn, rows, dims, qk_scale, 0, full_end,
                               kv_len, offset, BLOCK_N, CAUSAL, False)
    acc, l_i, m_i = _key_tiles(acc, l_i, m_i, q, k_base, v_base, k_sn, v_sn, rows, dims, qk_scale, full_end, end,
                               kv_len, offset, BLOCK_N, CAUSAL, True)

    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]             # l = 0: the row saw no key, its output 0
    tl.store(o_ptr + b * o_sb + h * o_sh + rows[:, None] * o_sm + dims[None, :], out.to(o_ptr.dtype.element_ty),
             mask=row_ok)


KERNEL_NAME = _attention_fwd.__name__
# The kernel's functions as written, before ``_compiled`` rebinds their names to jitted ones.
_PYTHON_SOURCES = {fn.__name__: fn for fn in (_key_tiles, _attention_fwd)}


def kernel_source() -> str:
    """The kernel's Triton source as written (both functions), for the notebook to show; needs no Triton."""
    import inspect

    return "\n\n".join(inspect.getsource(fn) for fn in _PYTHON_SOURCES.values())


# --------------------------------------------------------------------------- compiling and launching

@dataclass
class _Kernels:
    triton: object
    plain: object       # the jitted kernel, launched with a config's block sizes given explicitly
    tuned: object       # the same wrapped in triton.autotune (None under the interpreter)


@functools.cache
def _compiled() -> _Kernels:
    """Import Triton, bind ``tl`` and jit the kernel's functions (once). Under the interpreter, nothing is
    autotuned: timing configs on NumPy would measure nothing worth choosing by."""
    global tl
    try:
        import triton
        import triton.language as language
    except ImportError as exc:
        raise TritonUnavailable("Triton is not installed: `pip install triton` (Linux; it comes with "
                                f"PyTorch's CUDA wheels) to run the Triton attention kernel ({exc})") from None
    tl = language
    module = globals()
    for name, fn in _PYTHON_SOURCES.items():   # the kernel's body finds its callee by name, jitted too
        module[name] = triton.jit(fn)
    plain = module[KERNEL_NAME]
    tuned = None if interpreting() else triton.autotune(
        configs=[triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n}, num_warps=c.num_warps,
                               num_stages=c.num_stages) for c in CONFIGS],
        key=["q_len", "kv_len", "HEAD_DIM", "CAUSAL"])(plain)
    return _Kernels(triton, plain, tuned)


def check_operands(q, k, v) -> tuple[int, int, int, int, int, int]:
    """(B, H_q, H_kv, S_q, S_k, d) of valid operands, or a ValueError that says what is wrong."""
    import torch

    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor, got {type(x).__name__}")
        if x.dim() != 4:
            raise ValueError(f"{name} must be 4-d (batch, heads, sequence, head_dim), got shape {tuple(x.shape)}")
        if x.dtype != torch.bfloat16:
            raise ValueError(f"{name} must be bf16, got {x.dtype}")
        if x.stride(-1) != 1:
            raise ValueError(f"{name}'s last dimension must be contiguous (stride 1), got stride {x.stride(-1)}")
        if x.numel() > MAX_ELEMENTS:
            raise ValueError(f"{name} holds {x.numel()} elements; the kernel's 32-bit offsets allow {MAX_ELEMENTS}")
        if x.device.type != "cuda" and not interpreting():
            raise ValueError(f"{name} is on {x.device}; the kernel runs on a CUDA GPU (or, on the CPU, under "
                             "Triton's interpreter: TRITON_INTERPRET=1)")
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k and v must be on one device, got {q.device}, {k.device} and {v.device}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    b, hq, sq, d = q.shape
    bk, hkv, sk, dk = k.shape
    if bk != b or dk != d:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} must agree on batch and head_dim")
    if d not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {d}")
    grouped_heads(hq, hkv)
    if min(b, hq, sq, sk) < 1:
        raise ValueError(f"every dimension must be at least 1, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    return b, hq, hkv, sq, sk, d


_last: dict = {}


def forward(q, k, v, *, causal: bool, config: TileConfig | None = None):
    """softmax(q·kᵀ/√d [causal mask]) · v in bf16, as a (B, H_q, S_q, d) tensor; launched asynchronously on
    PyTorch's current stream. ``config``: run that tile shape instead of the autotuner's choice."""
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    b, hq, hkv, sq, sk, d = check_operands(q, k, v)
    kernels = _compiled()
    o = q.new_empty(q.shape)
    args = (q, k, v, o, LOG2_E / math.sqrt(d), q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1),
            k.stride(2), v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
            hq, hq // hkv, sq, sk)
    with _on(q.device):
        if config is None and kernels.tuned is not None:
            grid = lambda meta: (b * hq, kernels.triton.cdiv(sq, meta["BLOCK_M"]))  # noqa: E731
            compiled = kernels.tuned[grid](*args, HEAD_DIM=d, CAUSAL=causal)
            best = kernels.tuned.best_config
            used = TileConfig(best.kwargs["BLOCK_M"], best.kwargs["BLOCK_N"], best.num_warps, best.num_stages)
        else:
            used = config or INTERPRETER_CONFIG
            compiled = kernels.plain[(b * hq, kernels.triton.cdiv(sq, used.block_m))](
                *args, HEAD_DIM=d, BLOCK_M=used.block_m, BLOCK_N=used.block_n, CAUSAL=causal,
                num_warps=used.num_warps, num_stages=used.num_stages)
    _last.update(config=used, compiled=compiled)
    return o


def _on(device):
    """The operands' GPU made current for the launch (Triton launches on the current device); nothing on the CPU."""
    import contextlib

    import torch

    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def last_resources() -> dict:
    """What the compiler gave the kernel the last ``forward`` launched: registers a thread, bytes spilled,
    shared memory a program (``None`` where this Triton does not say)."""
    if "compiled" not in _last or interpreting():
        raise ValueError("no compiled Triton kernel yet: call forward on a GPU first (the interpreter compiles nothing)")
    compiled = _last["compiled"]
    return {"registers": getattr(compiled, "n_regs", None), "spilled_registers": getattr(compiled, "n_spills", None),
            "shared_bytes": getattr(getattr(compiled, "metadata", None), "shared", None),
            "num_warps": _last["config"].num_warps}


def last_config() -> TileConfig:
    """The tile shape the last ``forward`` ran with (the autotuner's pick for its shape, unless one was given)."""
    if "config" not in _last:
        raise ValueError("the Triton kernel has not run yet in this process: call forward first")
    return _last["config"]


# --------------------------------------------------------------------------- the generated code

@dataclass(frozen=True)
class GeneratedCode:
    """What Triton made of the kernel for one config and GPU: its TTGIR (the tensors' layouts across
    threads, shared-memory buffers, the pipeline) and its PTX, and how it was obtained."""

    config: TileConfig
    target: str
    how: str
    ttgir: str
    ptx: str
    shared_bytes: int | None


def _code(compiled, config: TileConfig, target: str, how: str) -> GeneratedCode:
    shared = getattr(getattr(compiled, "metadata", None), "shared", None)
    return GeneratedCode(config, target, how, compiled.asm["ttgir"], compiled.asm["ptx"], shared)


def last_generated_code() -> GeneratedCode:
    """The TTGIR and PTX of the kernel the last ``forward`` launched, from Triton's compiled kernel
    (``kernel.asm``): exactly what ran."""
    if "compiled" not in _last or interpreting():
        raise ValueError("no compiled Triton kernel yet: call forward on a GPU first (the interpreter compiles nothing)")
    return _code(_last["compiled"], _last["config"], "this GPU", "the kernel the last forward call launched")


def generated_code(head_dim: int = 128, causal: bool = True, config: TileConfig = CONFIGS[0],
                   capability: int = 90) -> GeneratedCode:
    """Compile the kernel ahead of time for compute capability ``capability`` (90: Hopper) with no GPU, as
    the JIT would for contiguous operands (pointers and strides multiples of 16 bytes): its TTGIR and PTX.
    A live run's own code is ``last_generated_code``."""
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {head_dim}")
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    kernels = _compiled()
    if interpreting():
        raise ValueError("Triton's interpreter compiles nothing: unset TRITON_INTERPRET to read the generated code")
    triton = kernels.triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = kernels.plain
    names = list(fn.arg_names)
    pointers = ("q_ptr", "k_ptr", "v_ptr", "o_ptr")
    strides = ("q_sb", "q_sh", "q_sm", "k_sb", "k_sh", "k_sn", "v_sb", "v_sh", "v_sn", "o_sb", "o_sh", "o_sm")
    signature = {n: "*bf16" for n in pointers} | {"qk_scale": "fp32"} | {n: "i32" for n in strides} \
        | {n: "i32" for n in ("q_heads", "group", "q_len", "kv_len")}
    constants = {"HEAD_DIM": head_dim, "BLOCK_M": config.block_m, "BLOCK_N": config.block_n, "CAUSAL": causal}
    signature |= {n: "constexpr" for n in constants}
    signature = {n: signature[n] for n in names}
    aligned = [["tt.divisibility", 16]]
    attrs = {(names.index(n),): aligned for n in (*pointers, *strides)}
    src = ASTSource(fn, signature, constexprs={(names.index(n),): v for n, v in constants.items()}, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", capability, 32),
                              options={"num_warps": config.num_warps, "num_stages": config.num_stages})
    return _code(compiled, config, f"sm_{capability}", "compiled ahead of time, no GPU")


# What the notebook reads of the generated code, small enough to record: the TTGIR's layout definitions (how
# each tensor is spread over threads, warps and shared memory) and how often the PTX names each instruction
# that tells the plan (static counts: instructions in the code, not executed).
PTX_MARKERS = {
    "wgmma.mma_async": "Hopper warpgroup MMA (wgmma)",
    "mma.sync": "warp MMA (mma.sync)",
    "ldmatrix": "ldmatrix (shared memory to MMA fragments)",
    "cp.async.bulk": "TMA bulk copy",
    "cp.async.cg": "cp.async (16-byte global to shared copy)",
    "ex2.approx": "ex2 (MUFU exponential)",
    "fma.rn.f32": "fp32 FMA",
    "bar.sync": "block barrier",
    "ld.local": "local-memory load (a spill)",
    "st.local": "local-memory store (a spill)",
}


def code_summary(code: GeneratedCode) -> dict:
    """The TTGIR's layout lines and the PTX's instruction counts (``PTX_MARKERS``), for a record."""
    layouts = [line for line in code.ttgir.splitlines() if line.startswith("#") and " = #ttg." in line]
    counts = {label: sum(1 for line in code.ptx.splitlines() if line.lstrip().startswith(marker))
              for marker, label in PTX_MARKERS.items()}
    return {"config": code.config.label, "target": code.target, "how": code.how, "shared_bytes": code.shared_bytes,
            "ttgir_layouts": layouts, "ptx_instruction_counts": counts}
