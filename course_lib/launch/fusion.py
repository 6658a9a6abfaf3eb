"""Host launcher of ``kernels/fusion.cu`` and of the kernels generated from an op list: elementwise chains
(k kernels or one fused kernel), the bf16 GEMM with its fused epilogues, and the softmax and RMSNorm
row kernels in each plan (one pass, two passes, split over a cluster, prefetched, half the row in
shared memory); and their smoke launch. Notebook 08's lab times them; 11's capstone and the kernel
exercises launch the RMSNorm from here."""
from __future__ import annotations

import enum
import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from course_lib.core import cuda
from course_lib.core.hardware import detect
from course_lib.launch.gemm_bf16 import (
    BIAS_GELU,
    BIAS_GELU_RESIDUAL,
    BIAS_RESIDUAL,
    PLAIN,
    Variant,
    run_bf16,
)
from course_lib.launch.operands import (
    bf16_bits_to_float32,
    bf16_tolerance,
    gelu_tanh_reference,
    random_operand,
    to_bf16_bits,
)
from course_lib.measure.smoke import covers
from course_lib.models import occupancy
from course_lib.models.launch_geometry import cdiv

FAMILY = "fusion"


BLOCK = 256


@dataclass(frozen=True)
class PointwiseOp:
    """One elementwise op as CUDA C: statements that update ``float x``, and the FLOPs they do."""

    name: str
    statements: tuple[str, ...]
    flop_per_element: float
    coefficients: tuple[tuple[float, float], ...] = ()   # (a, b) of each x = a·x + b, for the reference

    def apply(self, x):
        """The same op on an array, in the array's precision (float64 for the reference)."""
        for a, b in self.coefficients:
            x = a * x + b
        return x


def affine_op(index: int, fmas: int = 4) -> PointwiseOp:
    """``fmas`` steps x = a·x + b. Each step's a and b differ (so the compiler can fold none of
    them) and are exact in fp32; |a| < 1 keeps the values bounded however long the chain."""
    coeffs = []
    for j in range(fmas):
        t = index * fmas + j
        coeffs.append((1.0 - (t % 13 + 1) / 1024, ((t % 7) - 3) / 256))
    stmts = tuple(f"x = fmaf(x, {a!r}f, {b!r}f);" for a, b in coeffs)
    return PointwiseOp(f"affine {index + 1}", stmts, 2.0 * fmas, tuple(coeffs))


@dataclass(frozen=True)
class ChainShape:
    """How a generated elementwise kernel spreads the tensor over threads: ``vecs`` float4s per
    thread, their loads written first (ptxas may start the math on the first while the others are
    in flight), in blocks of ``block`` threads, one tile per block and no loop; or, with ``loop``,
    the grid-stride loop the course's kernels started from (one float4 per trip, 64-bit index
    arithmetic in every trip)."""

    vecs: int
    block: int
    loop: bool = False

    def __post_init__(self):
        if self.vecs < 1 or self.block < 32 or self.block % 32 or self.block > 1024:
            raise ValueError(f"a chain shape needs at least one float4 per thread and whole warps up to 1024 "
                             f"threads, got {self.vecs} float4s in blocks of {self.block}")
        if self.loop and self.vecs != 1:
            raise ValueError("the grid-stride loop shape takes one float4 per thread per trip")

    @property
    def kernel(self) -> str:
        return "fused_chain_loop" if self.loop else f"fused_chain_{self.vecs}x{self.block}"

    @property
    def label(self) -> str:
        if self.loop:
            return f"grid-stride loop, 1 float4 a trip, {self.block} threads"
        return f"{self.vecs} float4 ({4 * self.vecs} elements) a thread, {self.block} threads, no loop"

    def launch(self, n: int) -> tuple[tuple[int], tuple[int]]:
        """One float4 (or ``vecs``) per thread and at least one block; threads 0..2 of block 0 (of any
        block, for the loop) take the tail of n % 4."""
        return (max(1, -(-(n // 4) // (self.block * self.vecs))),), (self.block,)


LOOP_SHAPE = ChainShape(1, BLOCK, loop=True)
# Inductor's shape for these chains on the H200 (1,024 elements a program, 4 warps) is 2 x 128.
CHAIN_SHAPES = (LOOP_SHAPE, ChainShape(1, 256), ChainShape(2, 128), ChainShape(4, 128), ChainShape(8, 128))
DEFAULT_SHAPE = ChainShape(2, 128)
OP_SHAPE = ChainShape(1, 256)   # each op of the unfused plan


def _kernel(name: str, device_fn: str, shape: ChainShape) -> str:
    head = (f'extern "C" __global__ void __launch_bounds__({shape.block}) {name}'
            "(float* __restrict__ out, const float* __restrict__ in, long long n) {\n"
            "    const float4* in4 = reinterpret_cast<const float4*>(in);\n"
            "    float4* out4 = reinterpret_cast<float4*>(out);\n")
    apply = f"v.x = {device_fn}(v.x); v.y = {device_fn}(v.y); v.z = {device_fn}(v.z); v.w = {device_fn}(v.w);"
    if shape.loop:
        return head + f"""    const long long n4 = n / 4, t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (long long i = t; i < n4; i += (long long)gridDim.x * blockDim.x) {{
        float4 v = in4[i];
        {apply}
        out4[i] = v;
    }}
    if (t < n - 4 * n4) out[4 * n4 + t] = {device_fn}(in[4 * n4 + t]);
}}
"""
    tile, vecs, block = shape.block * shape.vecs, shape.vecs, shape.block
    each = apply.replace("v.", "v[j].")
    return head + f"""    const long long n4 = n / 4, first = (long long)blockIdx.x * {tile} + threadIdx.x;
    float4 v[{vecs}];
    if ((long long)(blockIdx.x + 1) * {tile} <= n4) {{   // a whole tile: every load first, then the math
        #pragma unroll
        for (int j = 0; j < {vecs}; ++j) v[j] = in4[first + j * {block}];
        #pragma unroll
        for (int j = 0; j < {vecs}; ++j) {{ {each} out4[first + j * {block}] = v[j]; }}
    }} else {{
        #pragma unroll
        for (int j = 0; j < {vecs}; ++j) if (first + j * {block} < n4) v[j] = in4[first + j * {block}];
        #pragma unroll
        for (int j = 0; j < {vecs}; ++j) if (first + j * {block} < n4) {{ {each} out4[first + j * {block}] = v[j]; }}
    }}
    if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) out[4 * n4 + threadIdx.x] = {device_fn}(in[4 * n4 + threadIdx.x]);
}}
"""


def chain_source(ops: list[PointwiseOp], shapes: tuple[ChainShape, ...] = CHAIN_SHAPES) -> str:
    """CUDA C for a chain: a kernel ``op_i`` per op (the unfused plan, one launch each, in
    ``OP_SHAPE``) and, for each shape, one kernel (``shape.kernel``) that applies them all to each
    element while it sits in a register. Launch one with ``shape.launch(n)``; in and out are
    16-byte aligned float arrays."""
    if not ops:
        raise ValueError("a chain needs at least one op")
    parts = ["// Generated by course_lib.launch.fusion.chain_source from an op list.\n"]
    for i, op in enumerate(ops, 1):
        body = "\n    ".join(op.statements)
        parts.append(f"// {op.name}: {op.flop_per_element:g} FLOP per element\n"
                     f"__device__ __forceinline__ float op_{i}_fn(float x) {{\n    {body}\n    return x;\n}}\n")
    calls = "".join(f"    x = op_{i}_fn(x);\n" for i in range(1, len(ops) + 1))
    parts.append(f"__device__ __forceinline__ float fused_chain_fn(float x) {{\n{calls}    return x;\n}}\n")
    parts += [_kernel(f"op_{i}", f"op_{i}_fn", OP_SHAPE) for i in range(1, len(ops) + 1)]
    parts += [_kernel(shape.kernel, "fused_chain_fn", shape) for shape in shapes]
    return "".join(parts)


def fused_source(ops: list[PointwiseOp], shape: ChainShape = DEFAULT_SHAPE) -> str:
    """The device functions and the one fused kernel of ``shape``: what a notebook shows of a chain."""
    src = chain_source(ops, (shape,))
    head = src[:src.index("\nextern")]
    return head.rstrip() + "\n" + src[src.index(f"void __launch_bounds__({shape.block}) {shape.kernel}") - len('extern "C" __global__ '):]


def compiled_chain(ops: list[PointwiseOp], arch: str | None = None):
    return cuda.compile_generated(chain_source(ops), f"chain_{len(ops)}", arch)


def run_unfused(fam, k: int, x, out, scratch) -> None:
    """op_1 .. op_k as k launches, each reading the last one's output from memory."""
    grid, block = OP_SHAPE.launch(x.size)
    src = x
    for i in range(1, k + 1):
        dst = out if i == k else scratch[i % 2]
        fam.function(f"op_{i}")(grid, block, (dst, src, np.int64(x.size)))
        src = dst


def run_fused(fam, x, out, shape: ChainShape = DEFAULT_SHAPE) -> None:
    grid, block = shape.launch(x.size)
    fam.function(shape.kernel)(grid, block, (out, x, np.int64(x.size)))


STAGED_MIN_CC = 9.0


def run_gemm(variant: Variant, a, b, c, bias=None, residual=None, copies: str = "auto") -> None:
    """C = A·B by one of the bf16 GEMM's variants (``gemm_bf16``'s table), with its epilogue fused into
    the stores where it has one: + bias, GELU, + residual as the variant says (``bias`` is read by the
    epilogue variants, ``residual`` by the residual ones only)."""
    if not variant.epilogue:
        variant.run(a, b, c, copies)
        return
    import cupy

    if bias is None or (variant.residual and residual is None):
        raise ValueError(f"the {variant.name!r} epilogue reads a bias{' and a residual' * variant.residual}")
    null = cupy.zeros(1, dtype=cupy.uint16)
    variant.run(a, b, c, copies, epilogue_args=(bias, residual if variant.residual else null))


def run_epilogue_pass(out, c, bias, residual=None) -> None:
    """The same epilogue as a kernel of its own over the GEMM's bf16 output."""
    m, n = c.shape
    total = m * n
    per_thread = 8 if n % 8 == 0 else 1
    grid = (max(1, -(-total // per_thread // BLOCK)),)
    cuda.kernel(FAMILY, "bias_gelu_residual")(
        grid, (BLOCK,), (out, c, bias, residual if residual is not None else np.uint64(0), np.int32(n),
                         np.int64(total)))


@functools.lru_cache(maxsize=1)
def row_vecs_default() -> int:
    """ROW_VECS as fusion.cu defines it (read once: every row launch asks)."""
    import re

    return int(re.search(r"#define ROW_VECS (\d+)", cuda.source(FAMILY)).group(1))


def row_threads(n: int, row_vecs: int | None = None) -> int:
    """Threads per row block: a power of two from 32 to 1024, enough to hold the row in
    4 · row_vecs registers a thread (the one-pass kernels' limit)."""
    per_thread = 4 * (row_vecs or row_vecs_default())
    return min(1024, max(32, 1 << max(0, math.ceil(math.log2(-(-n // per_thread))))))


def one_pass_row_vecs(n: int) -> int:
    """The ROW_VECS a one-pass kernel needs to hold a row of n floats at 1024 threads (the default
    when it fits: longer rows need a variant compiled with more registers a thread than there are)."""
    return max(row_vecs_default(), -(-n // (4 * 1024)))


class RowPlan(enum.Enum):
    """How a softmax or RMSNorm kernel covers its rows; the value is the plan's name in notebook 08."""

    ONE_PASS = "one pass"                                      # the row in one block's registers
    TWO_PASS = "two pass"                                      # statistics, then a second read
    SPLIT = "one pass, split over a cluster of 2"              # each row's halves on a pair of blocks, sm_90+
    PREFETCH = "one pass, persistent, next row prefetched"     # RMSNorm only
    HALF_SHARED = "one pass, half the row in shared memory"
    # The control for HALF_SHARED: the same kernel and launch, with more shared memory asked for than it
    # uses, so that only one block fits on an SM. What it loses against HALF_SHARED is what the second
    # block per SM was worth; what is left against the one-pass kernel is the rest of the change (the
    # early cp.async copies, 512-thread blocks, and whatever the padding does to the L1).
    HALF_SHARED_ONE_PER_SM = "one pass, half the row in shared memory, one block per SM"
    # RMSNorm only: one kernel that reads the row a second time from the caches, as torch.compile's does.
    REREAD = "one kernel, row read twice (L2 hints)"

    @property
    def one_pass(self) -> bool:
        """Reads the row once (every plan but two passes), in some layout."""
        return self not in (RowPlan.TWO_PASS, RowPlan.REREAD)


def one_pass_family(n: int):
    rv = one_pass_row_vecs(n)
    return cuda.compile_family(FAMILY, None, () if rv == row_vecs_default() else (f"-DROW_VECS={rv}",))


REREAD_MAX_VECS = 8   # float4 slots a thread of rmsnorm_reread: rows up to 32k floats at 1,024 threads


def reread_launch(n: int) -> tuple[int, int]:
    """(REREAD_VECS, threads) of rmsnorm_reread for rows of n floats: two slots a thread (8 floats) while
    1,024 threads cover the row, then 4 and 8; threads a multiple of 32."""
    if not 1 <= n <= 4 * REREAD_MAX_VECS * 1024:
        raise ValueError(f"rmsnorm_reread takes rows of 1 to {4 * REREAD_MAX_VECS * 1024} floats, got {n}: "
                         "use the two-pass plan for longer rows")
    vecs = max(2, 1 << math.ceil(math.log2(cdiv(n, 4 * 1024))))
    return vecs, 32 * cdiv(cdiv(n, 4 * vecs), 32)


def reread_family(vecs: int):
    return cuda.compile_family(FAMILY, None, () if vecs == 2 else (f"-DREREAD_VECS={vecs}",))


SPLIT_MIN_CC = 9.0


SPLIT_THREADS = 512


def split_threads(n: int) -> int:
    """Threads per block of a split row: enough for half a row (``split_half`` in fusion.cu)."""
    half = ((n + 1) // 2 + 3) & ~3
    if half > 4 * row_vecs_default() * SPLIT_THREADS:
        raise ValueError(f"a split row holds at most {8 * row_vecs_default() * SPLIT_THREADS} floats; n = {n}")
    return min(SPLIT_THREADS, row_threads(half))


def _split(name: str, x, args: tuple) -> None:
    cc = float(detect().compute_capability)
    if cc < SPLIT_MIN_CC:
        raise RuntimeError(f"{name} runs on a cluster of two blocks: it needs compute capability "
                           f"{SPLIT_MIN_CC:g} or newer, and this GPU is {cc:g}. Use the one-pass plan.")
    rows, n = x.shape
    cuda.kernel(FAMILY, name)((2 * rows,), (split_threads(n),), args)


def prefetch_launch(rows: int, n: int) -> tuple[tuple, tuple, int]:
    """(grid, block, dynamic shared memory) of ``rmsnorm_prefetch``: as many blocks as fit on every
    SM at once (the occupancy model with the compiler's registers), each with a row's worth of slots."""

    per_thread = 4 * row_vecs_default()
    if n > per_thread * 1024:
        raise ValueError(f"the prefetching RMSNorm holds a row of at most {per_thread * 1024} floats; n = {n}. "
                         "Use the two-pass plan for longer rows.")
    info = detect()
    threads = row_threads(n)
    smem = row_vecs_default() * threads * 16
    res = cuda.compile_family(FAMILY).resources["rmsnorm_prefetch"]
    per_sm = occupancy.residency(occupancy.budget_from_device(info), threads, res.registers,
                                 smem + res.static_smem_bytes).resident_blocks
    return (min(rows, per_sm * info.sm_count),), (threads,), smem


HALF_SHARED_THREADS = 512


def half_shared_launch(n: int) -> tuple[tuple, int]:
    """(block, dynamic shared memory) of ``rmsnorm_half_shared`` and ``softmax_half_shared``: enough
    threads to hold half the row in registers (at most 512, so that two blocks fit on an SM), and
    shared slots for the rest (none when the row fits in registers)."""
    per_thread = 4 * row_vecs_default()
    if n > 2 * per_thread * HALF_SHARED_THREADS:
        raise ValueError(f"{RowPlan.HALF_SHARED.value} holds a row of at most {2 * per_thread * HALF_SHARED_THREADS} floats; "
                         f"n = {n}. Use the two-pass plan for longer rows.")
    threads = min(HALF_SHARED_THREADS, row_threads(-(-n // 2)))
    far = max(0, n - per_thread * threads)
    return (threads,), (row_vecs_default() * threads * 16 if far else 0)


def one_block_per_sm_smem(budget, threads: int, registers: int, smem: int) -> int:
    """Dynamic shared memory for a ``threads``-thread block that uses ``smem`` of it, padded until one
    block fills an SM of ``budget`` (an ``occupancy.SmBudget``), by ``occupancy.residency``."""

    padded = max(smem, budget.smem_per_sm_bytes // 2 + 1024)   # past half the SM: a second block cannot fit
    if padded > budget.max_smem_per_block_bytes or \
            occupancy.residency(budget, threads, registers, padded).resident_blocks != 1:
        raise ValueError(f"{budget.name}: {padded} B of shared memory a block does not leave exactly one "
                         f"{threads}-thread block per SM; this GPU cannot run {RowPlan.HALF_SHARED_ONE_PER_SM.value!r}.")
    return padded


def half_shared_plans(budget, registers: int, static_smem: int, n: int, row_lengths: list[int]) -> tuple[RowPlan, ...]:
    """The half-shared plans ``fusion.reductions`` runs at row length n on an SM of ``budget``, for a
    kernel of ``registers`` a thread and ``static_smem`` bytes: ``RowPlan.HALF_SHARED`` at ``row_lengths`` where
    its block fits (a 32k row's 64 KiB of slots and the kernel's own do not on a T4), and its
    one-block-per-SM control at the longest of them, where the padding can be arranged."""

    if n not in row_lengths:
        return ()
    (threads,), smem = half_shared_launch(n)
    total = smem + static_smem
    if total > budget.max_smem_per_block_bytes or \
            occupancy.residency(budget, threads, registers, total).resident_blocks < 1:
        return ()
    control = n == max(row_lengths)
    if control:
        try:
            one_block_per_sm_smem(budget, threads, registers, total)
        except ValueError:
            control = False
    return (RowPlan.HALF_SHARED,) + (RowPlan.HALF_SHARED_ONE_PER_SM,) * control


@functools.lru_cache(maxsize=None)   # once per row length: it reads the device's attributes
def half_shared_one_per_sm_launch(op: str, n: int) -> tuple[tuple, int]:
    """(block, dynamic shared memory) of ``RowPlan.HALF_SHARED_ONE_PER_SM`` for ``op`` ("softmax" or "rmsnorm")
    on the GPU in use."""

    block, smem = half_shared_launch(n)
    res = cuda.compile_family(FAMILY).resources[f"{op}_half_shared"]
    padded = one_block_per_sm_smem(occupancy.budget_from_device(detect()), block[0], res.registers,
                                   smem + res.static_smem_bytes)
    return block, padded - res.static_smem_bytes


def _launch_with_slots(name: str, grid: tuple, block: tuple, smem: int, args: tuple) -> None:
    """A row kernel whose shared slots may pass the default 48 KiB (a 32k row's are 64 or 128 KiB)."""
    fn = cuda.kernel(FAMILY, name)
    if fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem
    fn(grid, block, args, shared_mem=smem)


def _half_shared(op: str, rows: int, n: int, args: tuple, one_per_sm: bool = False) -> None:
    block, smem = half_shared_one_per_sm_launch(op, n) if one_per_sm else half_shared_launch(n)
    _launch_with_slots(f"{op}_half_shared", (rows,), block, smem, args)


def run_softmax(out, x, plan: RowPlan = RowPlan.ONE_PASS, stats=None) -> None:
    """Softmax over the last axis of a rows x n float32 CuPy array by ``plan``: any ``RowPlan`` but
    ``PREFETCH``; ``stats`` (2 · rows floats) is the two-pass plan's scratch."""
    rows, n = x.shape
    if plan in (RowPlan.HALF_SHARED, RowPlan.HALF_SHARED_ONE_PER_SM):
        _half_shared("softmax", rows, n, (out, x, np.int32(n)), plan is RowPlan.HALF_SHARED_ONE_PER_SM)
        return
    if plan is RowPlan.SPLIT:
        _split("softmax_split", x, (out, x, np.int32(n)))
        return
    if plan in (RowPlan.PREFETCH, RowPlan.REREAD):
        raise ValueError(f"the plan {plan.value!r} is RMSNorm's only")
    if plan is RowPlan.ONE_PASS:
        rv = one_pass_row_vecs(n)
        one_pass_family(n).function("softmax_one_pass")((rows,), (row_threads(n, rv),), (out, x, np.int32(n)))
        return
    t = (row_threads(n),)
    cuda.kernel(FAMILY, "softmax_row_stats")((rows,), t, (stats, x, np.int32(n)))
    cuda.kernel(FAMILY, "softmax_normalize")((rows,), t, (out, x, stats, np.int32(n)))


def run_rmsnorm(out, x, w, plan: RowPlan = RowPlan.ONE_PASS, stats=None, eps: float = 1e-6) -> None:
    """RMSNorm over the last axis, weights w (n floats), by ``plan``: one pass (the default), two passes,
    ``SPLIT``, ``PREFETCH`` (a persistent grid that copies each block's next row in while it works on
    this one), ``HALF_SHARED`` (half of each row in shared memory, two blocks of 32k rows to an SM) or
    its control ``HALF_SHARED_ONE_PER_SM``."""
    rows, n = x.shape
    if plan is RowPlan.SPLIT:
        _split("rmsnorm_split", x, (out, x, w, np.int32(n), np.float32(eps)))
        return
    if plan is RowPlan.PREFETCH:
        grid, block, smem = prefetch_launch(rows, n)
        _launch_with_slots("rmsnorm_prefetch", grid, block, smem, (out, x, w, np.int32(rows), np.int32(n), np.float32(eps)))
        return
    if plan in (RowPlan.HALF_SHARED, RowPlan.HALF_SHARED_ONE_PER_SM):
        _half_shared("rmsnorm", rows, n, (out, x, w, np.int32(n), np.float32(eps)),
                     plan is RowPlan.HALF_SHARED_ONE_PER_SM)
        return
    if plan is RowPlan.REREAD:
        vecs, threads = reread_launch(n)
        reread_family(vecs).function("rmsnorm_reread")((rows,), (threads,), (out, x, w, np.int32(n), np.float32(eps)))
        return
    if plan is RowPlan.ONE_PASS:
        rv = one_pass_row_vecs(n)
        one_pass_family(n).function("rmsnorm_one_pass")((rows,), (row_threads(n, rv),),
                                                        (out, x, w, np.int32(n), np.float32(eps)))
        return
    t = (row_threads(n),)
    cuda.kernel(FAMILY, "rmsnorm_row_stats")((rows,), t, (stats, x, np.int32(n), np.float32(eps)))
    cuda.kernel(FAMILY, "rmsnorm_normalize")((rows,), t, (out, x, stats, w, np.int32(n)))


@covers(FAMILY, "softmax_one_pass", "softmax_row_stats", "softmax_normalize", "rmsnorm_one_pass",
        "rmsnorm_row_stats", "rmsnorm_normalize", "bias_gelu_residual", "softmax_split", "rmsnorm_split",
        "rmsnorm_prefetch", "rmsnorm_half_shared", "softmax_half_shared", "rmsnorm_reread")
def fusion_smoke() -> None:
    """Every fusion kernel, the generated chain and the fused GEMM epilogue at edge sizes, checked."""
    import cupy

    rng = cupy.random.default_rng(9)
    for rows, n in ((1, 1), (3, 3), (2, 5), (2, 1000), (1, 1024), (2, 4097), (2, 12291), (2, 16385), (3, 32764), (2, 32767)):
        x = rng.standard_normal((rows, n), dtype=cupy.float32)
        w = rng.random(n, dtype=cupy.float32) + 0.5
        out, stats = cupy.empty_like(x), cupy.empty(2 * rows, dtype=cupy.float32)
        xd = x.astype(cupy.float64)
        soft = cupy.exp(xd - xd.max(1, keepdims=True))
        soft /= soft.sum(1, keepdims=True)
        rms = xd / cupy.sqrt((xd * xd).mean(1, keepdims=True) + 1e-6) * w
        split = (RowPlan.SPLIT,) * (float(detect().compute_capability) >= SPLIT_MIN_CC)
        plans = (RowPlan.ONE_PASS, RowPlan.TWO_PASS, RowPlan.HALF_SHARED) + split
        runs = [("softmax", p, lambda p=p: run_softmax(out, x, p, stats), soft) for p in plans]
        runs += [("rmsnorm", p, lambda p=p: run_rmsnorm(out, x, w, p, stats), rms) for p in plans + (RowPlan.PREFETCH, RowPlan.REREAD)]
        for name, plan, run, ref in runs:
            out.fill(np.nan)
            run()
            err = float(cupy.abs(out - ref).max())
            if not err <= 1e-4 * float(cupy.abs(ref).max()):
                raise AssertionError(f"{name} {plan.value} wrong at {rows}x{n}: max error {err}")
    for n in (1, 3, 4, 5, 1001, 4096, 4099, 4096 * 9 + 7):
        ops = [affine_op(i) for i in range(3)]
        fam = compiled_chain(ops)
        x = rng.random(n, dtype=cupy.float32)
        ref = x.astype(cupy.float64)
        for op in ops:
            ref = op.apply(ref)
        out, scratch = cupy.empty_like(x), (cupy.empty_like(x), cupy.empty_like(x))
        runs = [(s.label, lambda s=s: run_fused(fam, x, out, s)) for s in CHAIN_SHAPES]
        for label, run in runs + [("unfused", lambda: run_unfused(fam, 3, x, out, scratch))]:
            out.fill(np.nan)
            run()
            if not float(cupy.abs(out - ref).max()) <= 1e-5 * float(cupy.abs(ref).max()):
                raise AssertionError(f"generated chain ({label}) wrong at n = {n}")
    if float(detect().compute_capability) < 8.0:
        print("skip the bf16 epilogue: needs compute capability 8.0+")
        return

    # the last four have whole 128 x 128 tiles (the epilogue's unchecked path) with fewer K tiles
    # than pipeline slots, as many, and more
    for m, n, k in ((1, 1, 1), (127, 129, 65), (33, 1000, 77), (200, 136, 72), (384, 256, 192), (256, 264, 200),
                    (300, 392, 1000)):
        a, b = to_bf16_bits(random_operand((m, k), 1)), to_bf16_bits(random_operand((k, n), 2))
        bias, res = to_bf16_bits(random_operand((n,), 3)), to_bf16_bits(random_operand((m, n), 4))
        af, bf = bf16_bits_to_float32(a).astype(cupy.float64), bf16_bits_to_float32(b).astype(cupy.float64)
        product = af @ bf
        z = product + bf16_bits_to_float32(bias)
        gelu = gelu_tanh_reference(z)
        ref = gelu + bf16_bits_to_float32(res)
        c, out = cupy.empty((m, n), dtype=cupy.uint16), cupy.empty((m, n), dtype=cupy.uint16)
        stagings = (False, True) if float(detect().compute_capability) >= STAGED_MIN_CC else (False,)
        cases = [(BIAS_GELU_RESIDUAL, ref), (BIAS_RESIDUAL, z + bf16_bits_to_float32(res)), (BIAS_GELU, gelu)]
        for copies, staged, (variant, want) in itertools.product(("cp.async", "auto"), stagings, cases):
            variant = variant.staged() if staged else variant
            c.fill(0xFFFF)
            run_gemm(variant, a, b, c, bias, res, copies)
            if not float(cupy.abs(bf16_bits_to_float32(c) - want).max()) <= bf16_tolerance(want):
                raise AssertionError(f"fused epilogue {variant.name!r} ({copies}) wrong at {m}x{n}x{k}")
        for staged in stagings:
            c.fill(0xFFFF)
            run_gemm(PLAIN.staged() if staged else PLAIN, a, b, c)
            if not float(cupy.abs(bf16_bits_to_float32(c) - product).max()) <= bf16_tolerance(product):
                raise AssertionError(f"plain GEMM (16-byte stores {staged}) wrong at {m}x{n}x{k}")
        run_bf16(a, b, c)
        out.fill(0xFFFF)
        run_epilogue_pass(out, c, bias, res)
        if not float(cupy.abs(bf16_bits_to_float32(out) - ref).max()) <= 2 * bf16_tolerance(ref):
            raise AssertionError(f"separate epilogue pass wrong at {m}x{n}x{k}")
