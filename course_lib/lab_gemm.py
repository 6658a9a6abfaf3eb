"""Notebook 06's experiments: the fp32 GEMM ladder and the bf16 ``mma.sync`` kernel, each beside cuBLAS.

Kernels live in ``kernels/gemm_fp32.cu`` and ``kernels/gemm_bf16.cu``; this module
knows their launch geometry (read from each file's macro defaults, so a
``-D`` option used while tuning cannot drift from what the launch assumes),
runs them on CuPy arrays, checks them against references and times them. The
cuBLAS baselines go through PyTorch in the same run, on the same data.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from . import cuda
from .evidence import Case
from .experiments import beside_reference, beside_reference_figure, check_close, experiment, kernel_launch_record, require_passed
from .smoke import covers

FP32 = "gemm_fp32"
BF16 = "gemm_bf16"
BF16_MIN_CC = 8.0
TMA_MIN_CC = 9.0
BF16_SMEM_EXTRA = 1024 + 64   # beyond the tiles: slack to align them to 1024 bytes, and the mbarriers
COPY_ENGINES = ("cp.async", "tma")


@dataclass(frozen=True)
class Step:
    """One rung of the fp32 ladder: what it adds, what then limits it, what the next rung changes."""

    number: int
    label: str
    kernel: str
    idea: str
    limit: str
    next_change: str
    block: tuple[int, int, int]        # B_M, B_N, B_K (B_K 0: nothing staged in shared memory)
    threads: int
    thread_tile: tuple[int, int]       # outputs per thread, T_M x T_N
    stages: int = 1


LADDER: tuple[Step, ...] = (
    Step(1, "naive", "sgemm_naive", "one thread per output, threadIdx.x down a column of C",
         "a warp's A loads hit 32 different rows and its C stores 32 rows: uncoalesced, so memory "
         "transactions, not arithmetic, set the pace",
         "swap the thread mapping so a warp runs along a row", (32, 32, 0), 1024, (1, 1), 0),
    Step(2, "coalesced", "sgemm_coalesced", "threadIdx.x along a row: B and C accesses coalesce",
         "every multiply-add still issues two global loads (L1 catches most of them), and warps wait for them",
         "stage 32x32 tiles of A and B in shared memory and reuse each loaded float 32 times", (32, 32, 0), 1024, (1, 1), 0),
    Step(3, "shared-memory tiles", "sgemm_smem", "32x32 tiles of A and B staged in shared memory",
         "two shared-memory loads per multiply-add: the shared-memory pipe, not HBM, is now the limit",
         "keep several outputs per thread in registers so each shared load feeds several FMAs", (32, 32, 32), 1024, (1, 1)),
    Step(4, "1-D register tiles", "sgemm_reg1d", "8 outputs of a column per thread",
         "9 shared loads per 8 FMAs is better but still load-heavy, and 64x64 tiles reuse HBM data only 64 times",
         "give each thread an 8x8 block (16 loads per 64 FMAs) and the block a 128x128 tile", (64, 64, 8), 512, (8, 1)),
    Step(5, "2-D register tiles", "sgemm_reg2d", "8x8 outputs per thread, 128x128 tile per block",
         "scalar global loads (8 per thread per stage) and bank conflicts when the 16 threads of a "
         "half-warp read B at a stride of 8 floats",
         "move 16 bytes per instruction: float4 global loads, shared reads and stores", (128, 128, 8), 256, (8, 8)),
    Step(6, "vectorised", "sgemm_vec4", "float4 global loads, shared reads and C stores",
         "the thread layout still makes a warp's shared reads collide in banks, and every stage "
         "waits for its global loads",
         "arrange threads in warp tiles so each warp reads a few consecutive shared addresses", (128, 128, 8), 256, (8, 8)),
    Step(7, "warp tiles", "sgemm_warptile", "8x8 per thread as 4x4 sub-tiles laid out per warp",
         "conflict-free shared reads; what remains is the wait for each stage's global loads "
         "before the barrier",
         "double-buffer: load the next stage into registers while computing on the current one", (128, 128, 8), 256, (8, 8)),
    Step(8, "double buffer", "sgemm_warptile_db",
         "two shared stages; the next stage's global loads in flight during the FMAs",
         "8x8 outputs per thread: 4 float4 shared loads per 64 FMAs, and 128 registers per thread to "
         "keep 2 blocks per SM",
         "a 16x8 thread tile (256x128 block): 6 float4 shared loads per 128 FMAs", (128, 128, 8), 256, (8, 8), 2),
    Step(9, "16x8 thread tile", "sgemm_warptile_db_16x8",
         "128 outputs per thread, 256x128 per block, still double-buffered",
         "one block (8 warps) per SM at about 220 registers per thread; FFMA issue and the "
         "shared-memory pipe, not HBM, set the pace",
         "for more, change the unit: tensor cores (the bf16 kernel below)", (256, 128, 8), 256, (16, 8), 2),
)
LADDER_KERNELS = [s.kernel for s in LADDER]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=None)
def macro_defaults(family: str) -> dict[str, int]:
    """The numeric ``#define`` defaults of a family's tile macros (WT_*, WB_* and TC_*)."""
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"#define\s+((?:WT|WB|TC|HG)_\w+)\s+(\d+)\b", cuda.source(family))}


def macros(family: str, defines: dict[str, int] | None = None) -> dict[str, int]:
    """A family's tile macros as a compile with ``defines`` sees them: the defaults, overridden."""
    return {**macro_defaults(family), **(defines or {})}


def defines_to_options(defines: dict[str, int] | None) -> tuple[str, ...]:
    return tuple(f"-D{k}={v}" for k, v in sorted((defines or {}).items()))


def fp32_geometry(kernel: str, m: int, n: int, defines: dict[str, int] | None = None):
    """(grid, block) from each kernel's launch contract."""
    if kernel == "sgemm_naive":
        return (_ceil_div(m, 32), _ceil_div(n, 32)), (32, 32)
    if kernel in ("sgemm_coalesced", "sgemm_smem"):
        return (_ceil_div(n, 32), _ceil_div(m, 32)), (32, 32)
    if kernel == "sgemm_reg1d":
        return (_ceil_div(n, 64), _ceil_div(m, 64)), (512,)
    if kernel in ("sgemm_reg2d", "sgemm_vec4"):
        return (_ceil_div(n, 128), _ceil_div(m, 128)), (256,)
    if kernel in ("sgemm_warptile", "sgemm_warptile_db"):
        d = macros(FP32, defines)
        threads = (d["WT_BM"] // d["WT_WM"]) * (d["WT_BN"] // d["WT_WN"]) * 32
        return (_ceil_div(n, d["WT_BN"]), _ceil_div(m, d["WT_BM"])), (threads,)
    if kernel == "sgemm_warptile_db_16x8":
        d = macros(FP32, defines)
        threads = (d["WB_BM"] // d["WB_WM"]) * (d["WB_BN"] // d["WB_WN"]) * 32
        return (_ceil_div(n, d["WB_BN"]), _ceil_div(m, d["WB_BM"])), (threads,)
    raise KeyError(f"no fp32 GEMM kernel {kernel!r}; the ladder has {', '.join(LADDER_KERNELS)}")


def bf16_geometry(m: int, n: int, defines: dict[str, int] | None = None):
    """(grid, block, dynamic shared bytes) of ``bf16_gemm_mma``."""
    d = macros(BF16, defines)
    threads = (d["TC_BM"] // d["TC_WM"]) * (d["TC_BN"] // d["TC_WN"]) * 32
    smem = d["TC_STAGES"] * (d["TC_BM"] * d["TC_BK"] + d["TC_BK"] * d["TC_BN"]) * 2 + BF16_SMEM_EXTRA
    return (_ceil_div(m, d["TC_BM"]) * _ceil_div(n, d["TC_BN"]),), (threads,), smem


def require_bf16_mma(compute_capability: str | float) -> None:
    """The bf16 kernel's guard on the Python side: refuse, in words, on GPUs without bf16 mma.sync."""
    if float(compute_capability) < BF16_MIN_CC:
        raise RuntimeError(f"bf16_gemm_mma needs compute capability 8.0+ (bf16 mma.sync arrived with Ampere); "
                           f"this GPU is {compute_capability}. The fp32 ladder runs here; the bf16 rung "
                           "can only be replayed.")


# --------------------------------------------------------------------------- launching

def run_fp32(kernel: str, a, b, c, function=None, defines=None) -> None:
    """C = A·B with one ladder kernel on CuPy float32 arrays (asynchronous)."""
    import numpy as np

    m, k = a.shape
    n = b.shape[1]
    grid, block = fp32_geometry(kernel, m, n, defines)
    fn = function or cuda.kernel(FP32, kernel)
    fn(grid, block, (a, b, c, np.int32(m), np.int32(n), np.int32(k)))


def _bf16_function():
    from .hardware import detect

    require_bf16_mma(detect().compute_capability)
    fn = cuda.kernel(BF16, "bf16_gemm_mma")
    return fn


@functools.lru_cache(maxsize=None)
def _device_cc() -> float:
    """The current GPU's compute capability, looked up once (launches inside timed loops use it)."""
    from .hardware import detect

    return float(detect().compute_capability)


def copy_engine(copies: str, compute_capability, k: int, n: int, defines: dict[str, int] | None = None) -> str:
    """Which engine fills the shared tiles: ``"auto"`` picks the TMA where it can run, else cp.async."""
    if copies not in ("auto", *COPY_ENGINES):
        raise ValueError(f"copies must be 'auto', 'cp.async' or 'tma', not {copies!r}")
    d = macros(BF16, defines)
    tma_ok = float(compute_capability) >= TMA_MIN_CC and k % 8 == 0 and n % 8 == 0 and d["TC_BK"] == 64
    if copies == "tma" and not tma_ok:
        raise RuntimeError(f"TMA copies need compute capability {TMA_MIN_CC}+ (this GPU: {compute_capability}), "
                           f"K and N multiples of 8 (here {k} and {n}) and TC_BK = 64; use copies='cp.async'.")
    return "tma" if copies == "tma" or (copies == "auto" and tma_ok) else "cp.async"


def runnable_engines(compute_capability, k: int, n: int) -> list[str]:
    """The copy engines this GPU can use for a K-deep, N-wide product: cp.async, and the TMA where it runs."""
    return sorted({copy_engine(e, compute_capability, k, n) for e in ("cp.async", "auto")})


_TENSOR_MAPS: dict[tuple, object] = {}


def encode_tensor_map(ptr: int, width: int, height: int, box_width: int, box_height: int) -> list[int]:
    """A CUtensorMap (as 16 64-bit words) for a row-major ``height x width`` bf16 matrix at ``ptr``,
    fetched in ``box_width x box_height`` boxes with the 128-byte swizzle (box_width = 64: one
    128-byte row per box row); box parts outside the matrix are zero-filled."""
    from cuda.bindings import driver as drv

    err, tmap = drv.cuTensorMapEncodeTiled(
        drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, ptr,
        [drv.cuuint64_t(width), drv.cuuint64_t(height)], [drv.cuuint64_t(width * 2)],
        [drv.cuuint32_t(box_width), drv.cuuint32_t(box_height)], [drv.cuuint32_t(1), drv.cuuint32_t(1)],
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled refused a {height} x {width} bf16 matrix "
                           f"(box {box_height} x {box_width}): {err.name}")
    return [int(word) for word in tmap.opaque]


def tensor_maps(a_bits, b_bits, defines: dict[str, int] | None = None):
    """The two TMA descriptors the kernel reads (A then B), 128 bytes each, in GPU memory.

    A is described as a K-wide, M-tall bf16 matrix fetched in 64 x TC_BM boxes, B as N-wide, K-tall
    in 64 x TC_BK boxes; the 128-byte swizzle matches the kernel's shared layout, and boxes that
    stick out of the matrix are zero-filled. Cached per (arrays, shapes, tile).
    """
    import cupy
    import numpy as np

    d = macros(BF16, defines)
    (m, k), n = a_bits.shape, b_bits.shape[1]
    key = (a_bits.data.ptr, b_bits.data.ptr, m, n, k, d["TC_BM"], d["TC_BK"])
    if key not in _TENSOR_MAPS:
        words = (encode_tensor_map(a_bits.data.ptr, k, m, 64, d["TC_BM"])
                 + encode_tensor_map(b_bits.data.ptr, n, k, 64, d["TC_BK"]))
        if len(_TENSOR_MAPS) > 64:
            _TENSOR_MAPS.clear()
        _TENSOR_MAPS[key] = cupy.asarray(np.array(words, dtype=np.uint64))
    return _TENSOR_MAPS[key]


def run_bf16(a_bits, b_bits, c_bits, function=None, defines=None, copies: str = "auto", grid=None,
             epilogue_args: tuple = (), smem_bytes: int | None = None) -> None:
    """C = A·B with the mma.sync kernel on raw-bf16 CuPy arrays (uint16 or int16 bit patterns).

    ``copies`` picks how tiles reach shared memory: ``"cp.async"``, ``"tma"`` (sm_90+), or ``"auto"``.
    ``grid`` replaces the one-tile-per-block grid (the scheduled variant's persistent and split-K grids).
    ``epilogue_args`` are the bias and residual a ``TC_EPILOGUE`` variant takes (``lab_fusion``).
    ``smem_bytes`` asks for more dynamic shared memory than the tiles need, so fewer blocks fit on an
    SM (``lab_pipeline`` holds the GEMM to one block per SM that way).
    """
    import numpy as np

    m, k = a_bits.shape
    n = b_bits.shape[1]
    one_tile_each, block, smem = bf16_geometry(m, n, defines)
    smem = max(smem, smem_bytes or 0)
    grid = grid or one_tile_each
    fn = function or _bf16_function()
    if fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem    # opt in beyond the default 48 KiB
    engine = copy_engine(copies, _device_cc(), k, n, defines)
    maps = tensor_maps(a_bits, b_bits, defines) if engine == "tma" else np.uint64(0)
    fn(grid, block, (a_bits, b_bits, c_bits, np.int32(m), np.int32(n), np.int32(k), maps, *epilogue_args),
       shared_mem=smem)


def to_bf16_bits(x):
    """float32 CuPy array -> bf16 bit patterns (uint16), round to nearest even."""
    import cupy

    u = cupy.ascontiguousarray(x, dtype=cupy.float32).view(cupy.uint32)
    return ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(cupy.uint16)


def bf16_bits_to_float32(bits):
    import cupy

    return (bits.astype(cupy.uint32) << 16).view(cupy.float32)


def _random(shape, seed: int):
    import cupy

    return cupy.random.default_rng(seed).random(shape, dtype=cupy.float32) - 0.5


def _torch_view(x):
    """A zero-copy torch tensor over a CuPy array (bf16 bit patterns come back as torch.bfloat16)."""
    import cupy
    import torch

    if x.dtype == cupy.uint16:
        return torch.as_tensor(x.view(cupy.int16), device="cuda").view(torch.bfloat16)
    return torch.as_tensor(x, device="cuda")


FP32_RTOL = 1e-5   # times max(1, K/1024) times max|reference|: fp32 rounding grows with the reduction


def fp32_tolerance(k: int) -> float:
    return FP32_RTOL * max(1.0, k / 1024)


def bf16_tolerance_rel() -> float:
    # Both kernels accumulate in fp32 and round once to bf16: they may differ by one bf16 ulp
    # (2^-8 relative) of an output, bounded here by two ulps of the largest output.
    return 2.0 ** -7


def bf16_tolerance(want) -> float:
    """What a bf16 result may be off from ``want`` (a NumPy or CuPy array): the relative bound times
    its largest magnitude."""
    return bf16_tolerance_rel() * float(abs(want).max())


def _one_call_s(fn) -> float:
    """One call timed with CUDA events: only to decide whether a full measurement fits the budget."""
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) * 1e-3


# --------------------------------------------------------------------------- experiments

@experiment("gemm.fp32_ladder",
            "Square fp32 GEMMs: the eight kernels of the ladder beside cuBLAS fp32 (TF32 off), same run.",
            sizes=[1024, 2048, 4096, 8192], kernels=list(LADDER_KERNELS), samples=25, case_budget_s=3.0)
def fp32_ladder(sizes: list[int], kernels: list[str], samples: int, case_budget_s: float) -> list[Case]:
    import cupy
    import torch

    from .timing import benchmark

    torch.backends.cuda.matmul.allow_tf32 = False
    warmup = 2
    cases, last = [], {}
    for n in sorted(sizes):
        a, b = _random((n, n), 1), _random((n, n), 2)
        c = cupy.empty((n, n), dtype=cupy.float32)
        ta, tb = _torch_view(a), _torch_view(b)
        ref = cupy.asarray(torch.mm(ta.double(), tb.double()))
        tol = fp32_tolerance(n)
        check = check_close(cupy.asarray(torch.mm(ta, tb)), ref, "float64 matmul (cuBLAS dgemm)", tol)
        t = benchmark(lambda: torch.mm(ta, tb), samples, warmup=warmup)
        skipped = []
        for kernel in kernels:
            fn = cuda.kernel(FP32, kernel)
            if kernel in last:   # predict from the last size (time ~ n^3) before spending the budget
                n0, t0 = last[kernel]
                if t0 * (n / n0) ** 3 * (samples + warmup) > case_budget_s:
                    skipped.append(kernel)
                    continue
            c.fill(float("nan"))
            run_fp32(kernel, a, b, c, fn)
            kcheck = check_close(c, ref, "float64 matmul (cuBLAS dgemm)", tol)
            once = _one_call_s(lambda: run_fp32(kernel, a, b, c, fn))
            last[kernel] = (n, once)
            if once * (samples + warmup) > case_budget_s:
                skipped.append(kernel)
                continue
            timing = benchmark(lambda: run_fp32(kernel, a, b, c, fn), samples, warmup=warmup)
            last[kernel] = (n, timing.median_s)
            grid, block = fp32_geometry(kernel, n, n)
            cases.append(require_passed(Case(
                f"{kernel}, n={n}", {"sizes": n, "kernels": kernel}, f"{FP32}.{kernel}", list(timing.samples_s),
                2.0 * n ** 3, 4.0 * 3 * n * n, kcheck, kernel_launch_record(grid, block, FP32, kernel))))
        cases.append(require_passed(Case(
            f"cuBLAS fp32, n={n}", {"sizes": n}, "cublas sgemm (torch.mm, TF32 off)", list(t.samples_s),
            2.0 * n ** 3, 4.0 * 3 * n * n, check,
            extra={"not_measured": skipped,
                   "why_not_measured": f"predicted {samples + warmup} calls > {case_budget_s} s budget per case"})))
        del a, b, c, ta, tb, ref
    return cases


@experiment("gemm.bf16_mma",
            "Square bf16 GEMMs: the mma.sync tensor-core kernel, its tiles copied by cp.async and (sm_90+) "
            "by the TMA, beside cuBLAS bf16 (torch.mm); the three timed call by call in turn.",
            sizes=[2048, 4096, 8192], samples=30)
def bf16_mma(sizes: list[int], samples: int) -> list[Case]:
    import cupy
    import torch

    from .hardware import detect
    from .timing import benchmark_interleaved

    cc = detect().compute_capability
    require_bf16_mma(cc)
    fn = _bf16_function()
    cases = []
    for n in sorted(sizes):
        engines = runnable_engines(cc, n, n)
        a, b = to_bf16_bits(_random((n, n), 3)), to_bf16_bits(_random((n, n), 4))
        c = cupy.empty((n, n), dtype=cupy.uint16)
        ta, tb = _torch_view(a), _torch_view(b)
        lib = torch.mm(ta, tb)
        exact = torch.mm(ta.double(), tb.double())
        lib_err = float((lib.double() - exact).abs().max())
        ref = cupy.asarray(lib.float())
        checks = {}
        for engine in engines:
            c.fill(0xFFFF)   # NaN bits: an unwritten output fails the check
            run_bf16(a, b, c, fn, copies=engine)
            got = bf16_bits_to_float32(c)
            err64 = float(cupy.abs(got.astype(cupy.float64) - cupy.asarray(exact)).max())
            checks[engine] = (check_close(got, ref, "cuBLAS bf16 (torch.mm)", bf16_tolerance_rel()), err64)
        calls = [lambda: torch.mm(ta, tb)] + [lambda e=e: run_bf16(a, b, c, fn, copies=e) for e in engines]
        # Each timed call is held (timing.benchmark_interleaved): no host-side launch time (torch's
        # dispatch, the tensor-map lookup) is timed.
        t_lib, *t_engines = benchmark_interleaved(calls, samples)
        grid, block, smem = bf16_geometry(n, n)
        flop, nbytes = 2.0 * n ** 3, 2.0 * 3 * n * n
        cases.append(require_passed(Case(
            f"cuBLAS bf16, n={n}", {"sizes": n}, "cublas bf16 (torch.mm)", list(t_lib.samples_s), flop, nbytes,
            check_close(ref, exact, "float64 matmul of the same bf16 inputs", bf16_tolerance_rel()),
            extra={"max_abs_err_vs_float64": lib_err})))
        for engine, t in zip(engines, t_engines):
            check, err64 = checks[engine]
            cases.append(require_passed(Case(
                f"bf16_gemm_mma ({engine}), n={n}", {"sizes": n, "copies": engine}, f"{BF16}.bf16_gemm_mma",
                list(t.samples_s), flop, nbytes, check, kernel_launch_record(grid, block, BF16, "bf16_gemm_mma", smem),
                extra={"max_abs_err_vs_float64": err64, "defines": macro_defaults(BF16), "copies": engine,
                       "timing": "interleaved call by call with cuBLAS and the other copy engine"})))
        del a, b, c, ta, tb, lib, exact
    return cases


# The bf16 kernel's paths: K or N not a multiple of 8 (element-wise copies, plain loop); aligned with
# edge blocks and a partial last K tile (zero-filled copies, pipelined loop); aligned interior blocks
# over more tiles than stages (unchecked copies, slots reused).
EDGE_SHAPES = [[1, 1, 1], [127, 129, 65], [333, 1000, 77], [1000, 333, 1025], [515, 1027, 258], [256, 384, 512],
               [520, 264, 200]]


@experiment("gemm.edges",
            "Every GEMM kernel on square and non-square shapes that are not multiples of its tile, "
            "checked against float64.",
            shapes=EDGE_SHAPES, samples=20)
def edges(shapes: list[list[int]], samples: int) -> list[Case]:
    import cupy

    from .hardware import detect
    from .timing import benchmark

    cases = []
    cc = detect().compute_capability
    bf16_ok = float(cc) >= BF16_MIN_CC
    for m, n, k in shapes:
        a, b = _random((m, k), 5), _random((k, n), 6)
        ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
        c = cupy.empty((m, n), dtype=cupy.float32)
        for kernel in LADDER_KERNELS:
            fn = cuda.kernel(FP32, kernel)
            c.fill(float("nan"))
            run_fp32(kernel, a, b, c, fn)
            check = check_close(c, ref, "float64 matmul", fp32_tolerance(k))
            t = benchmark(lambda: run_fp32(kernel, a, b, c, fn), samples, warmup=1)
            grid, block = fp32_geometry(kernel, m, n)
            cases.append(require_passed(Case(
                f"{kernel}, {m}x{n}x{k}", {"shapes": [m, n, k], "kernel": kernel}, f"{FP32}.{kernel}",
                list(t.samples_s), 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n), check,
                kernel_launch_record(grid, block, FP32, kernel))))
        if bf16_ok:
            fn = _bf16_function()
            ab, bb = to_bf16_bits(a), to_bf16_bits(b)
            exact = bf16_bits_to_float32(ab).astype(cupy.float64) @ bf16_bits_to_float32(bb).astype(cupy.float64)
            cb = cupy.full((m, n), 0xFFFF, dtype=cupy.uint16)   # NaN bits: an unwritten output fails the check
            for engine in runnable_engines(cc, k, n):
                cb.fill(0xFFFF)
                run_bf16(ab, bb, cb, fn, copies=engine)
                check = check_close(bf16_bits_to_float32(cb), exact, "float64 matmul of the bf16 inputs",
                                     bf16_tolerance_rel())
                t = benchmark(lambda: run_bf16(ab, bb, cb, fn, copies=engine), samples, warmup=1)
                grid, block, smem = bf16_geometry(m, n)
                name = f"bf16_gemm_mma ({engine})"
                cases.append(require_passed(Case(
                    f"{name}, {m}x{n}x{k}", {"shapes": [m, n, k], "kernel": name},
                    f"{BF16}.bf16_gemm_mma", list(t.samples_s), 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n),
                    check, kernel_launch_record(grid, block, BF16, "bf16_gemm_mma", smem), extra={"copies": engine})))
    return cases


# --------------------------------------------------------------------------- sanitizer smoke launches

SMOKE_SHAPES = ((37, 45, 19), (130, 129, 33), (64, 256, 40))


@covers(FP32, *LADDER_KERNELS)
def fp32_smoke() -> None:
    import cupy

    for m, n, k in SMOKE_SHAPES:
        a, b = _random((m, k), 7), _random((k, n), 8)
        ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
        for kernel in LADDER_KERNELS:
            c = cupy.full((m, n), float("nan"), dtype=cupy.float32)
            run_fp32(kernel, a, b, c)
            err = float(cupy.abs(c - ref).max())
            if not err <= 1e-5 * float(cupy.abs(ref).max()):
                raise AssertionError(f"{FP32}.{kernel} wrong at {m}x{n}x{k}: max error {err}")


@covers(BF16, "bf16_gemm_mma")
def bf16_smoke() -> None:
    import cupy

    from .hardware import detect

    if float(detect().compute_capability) < BF16_MIN_CC:
        print(f"skip {BF16}.bf16_gemm_mma: needs compute capability 8.0+")
        return
    for m, n, k in SMOKE_SHAPES + ((128, 128, 64), (200, 136, 72), (256, 256, 448), (136, 264, 200)):
        a, b = to_bf16_bits(_random((m, k), 9)), to_bf16_bits(_random((k, n), 10))
        ref = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64)
        for engine in runnable_engines(_device_cc(), k, n):
            c = cupy.full((m, n), 0xFFFF, dtype=cupy.uint16)
            run_bf16(a, b, c, copies=engine)
            err = float(cupy.abs(bf16_bits_to_float32(c) - ref).max())
            if not err <= bf16_tolerance(ref):
                raise AssertionError(f"{BF16}.bf16_gemm_mma ({engine}) wrong at {m}x{n}x{k}: max error {err}")


# --------------------------------------------------------------------------- notebook helpers

BF16_STEP = Step(10, "bf16 mma.sync", "bf16_gemm_mma", "tensor cores: mma.sync m16n8k16, ldmatrix, cp.async",
                 "", "", (128, 128, 64), 128, (64, 64), 3)


def step_model_rows() -> list[dict]:
    """Per rung, from the tiling model alone (analytic): tile, threads, reuse at each level."""
    from . import tiling

    rows = []
    for st in (*LADDER, BF16_STEP):
        bm, bn, bk = st.block
        b = 2.0 if st is BF16_STEP else 4.0
        tm, tn = st.thread_tile
        rows.append({
            "step": f"{st.number} {st.label}", "tile B_M×B_N×B_K": f"{bm}×{bn}×{bk}" if bk else f"{bm}×{bn} (no staging)",
            "threads": st.threads, "outputs/thread": tm * tn // (32 if st is BF16_STEP else 1),
            "stages": st.stages,
            "L2 stage intensity": tiling.stage_intensity(bm, bn, b) if bk else None,
            "register-tile intensity": tiling.register_tile_intensity(tm, tn, b),
            "staging KiB": tiling.staging_bytes(bm, bn, bk, b, st.stages) / 1024 if bk else 0.0})
    return rows


def step_source(kernel: str, arch: str | None = None) -> str:
    """A rung's source for the notebook: the kernel, and for the thin double-buffer wrappers the template too."""
    family = BF16 if kernel == "bf16_gemm_mma" else FP32
    text = cuda.describe(family, kernel, arch)
    if kernel == "bf16_gemm_mma":   # the entry point only picks an instantiation of the body
        src = cuda.source(BF16)
        start = src.index("// The kernel body, compiled three ways")
        end = src.rindex("#endif", start, src.index("// Launch: block (TC_THREADS"))
        text = src[start:end].rstrip() + "\n\n" + text
    if kernel.startswith("sgemm_warptile_db"):
        src = cuda.source(FP32)
        start = src.index("// Steps 8 and 9")
        end = src.index("// Step 8: step 7's tile")
        text = src[start:end].rstrip() + "\n\n" + text
    return text


def rung_diff(kernel: str) -> str:
    """What a rung of the fp32 ladder changes: a unified diff of its source against the rung before."""
    import difflib

    i = LADDER_KERNELS.index(kernel)
    if i == 0:
        raise ValueError(f"{kernel} is the first rung: there is nothing before it to compare with")
    before, after = (cuda.kernel_source(FP32, k).splitlines() for k in LADDER_KERNELS[i - 1:i + 1])
    return "\n".join(difflib.unified_diff(before, after, LADDER_KERNELS[i - 1], kernel, lineterm="", n=1))


def _target_budget(gpu_name: str | None = None):
    from . import occupancy
    from .hardware import detect, spec

    try:
        return occupancy.budget(spec(gpu_name)) if gpu_name else occupancy.budget_from_device(detect())
    except KeyError:
        return occupancy.budget_from_device(detect())


def resources_rows(gpu_name: str, arch: str | None = None) -> list[dict]:
    """Per rung: registers, shared memory and spills from the compiler (NVRTC), residency from the model."""
    from . import occupancy

    arch = arch or cuda.target_arch()
    budget = _target_budget(gpu_name)
    rows = []
    for st in (*LADDER, BF16_STEP):
        family = BF16 if st is BF16_STEP else FP32
        r = cuda.resources(family, st.kernel, arch)
        threads = st.threads if st is BF16_STEP else math.prod(fp32_geometry(st.kernel, 1, 1)[1])
        dyn = bf16_geometry(1, 1)[2] if st is BF16_STEP else 0
        res = occupancy.residency(budget, threads, r.registers, r.static_smem_bytes + dyn)
        rows.append({"step": f"{st.number} {st.label}", "kernel": st.kernel, "threads": threads,
                     "registers": r.registers, "shared KiB": (r.static_smem_bytes + dyn) / 1024,
                     "spilled bytes": r.spill_store_bytes, "blocks/SM": res.resident_blocks,
                     "limited by": res.limiter, "occupancy %": 100 * res.occupancy})
    return rows


def _cublas(result, n):
    return next(c for c in result.cases if c.kernel.startswith("cublas") and c.params["sizes"] == n)


@beside_reference
def ladder_rows(result) -> list[dict]:
    """Rung x size: GFLOP/s and % of the same run's cuBLAS; cells never measured say so."""
    sizes = sorted({c.params["sizes"] for c in result.cases})
    by = {(c.params.get("kernels"), c.params["sizes"]): c for c in result.cases}
    rows = []
    for st in LADDER:
        row = {"step": f"{st.number} {st.label}"}
        for n in sizes:
            c, ref = by.get((st.kernel, n)), _cublas(result, n)
            row[f"GFLOP/s n={n}"] = c.flop_per_s / 1e9 if c else "not measured"
            row[f"% cuBLAS n={n}"] = 100 * c.flop_per_s / ref.flop_per_s if c else "—"
        rows.append(row)
    rows.append({"step": "cuBLAS fp32 (TF32 off)", **{k: v for n in sizes for k, v in (
        (f"GFLOP/s n={n}", _cublas(result, n).flop_per_s / 1e9), (f"% cuBLAS n={n}", 100.0))}})
    return rows


def not_measured(result) -> list[str]:
    """Sentences naming every (rung, size) the run left out, and why."""
    out = []
    for c in result.cases:
        if c.kernel.startswith("cublas") and c.extra.get("not_measured"):
            out.append(f"n={c.params['sizes']}: {', '.join(c.extra['not_measured'])} not measured "
                       f"({c.extra.get('why_not_measured', '')})")
    return out


@beside_reference_figure
def ladder_figure(result):
    """The ladder: GFLOP/s per rung, one line per size, cuBLAS as a dashed line per size."""
    import matplotlib.pyplot as plt

    sizes = sorted({c.params["sizes"] for c in result.cases})
    by = {(c.params.get("kernels"), c.params["sizes"]): c for c in result.cases}
    fig, ax = plt.subplots(figsize=(9, 5))
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2"]
    for n, colour in zip(sizes, colours):
        pts = [(st.number, by[(st.kernel, n)].flop_per_s / 1e9) for st in LADDER if (st.kernel, n) in by]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=colour, label=f"n = {n}")
        ax.axhline(_cublas(result, n).flop_per_s / 1e9, color=colour, ls="--", lw=1, alpha=0.7)
    ax.set_yscale("log")
    ax.set_xticks([st.number for st in LADDER])
    ax.set_xticklabels([f"{st.number}. {st.label}" for st in LADDER], fontsize=8, rotation=25, ha="right")
    ax.set_ylabel("GFLOP/s (log scale)")
    ax.plot([], [], ls="--", color="grey", lw=1, label="cuBLAS fp32, TF32 off (dashed, colour = n)")
    ax.set_xlabel("step of the ladder")
    ax.set_title(f"fp32 GEMM ladder, square n×n×n: {result.provenance}", fontsize=10)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


@beside_reference
def bf16_rows(result) -> list[dict]:
    """Per size: cuBLAS, and the mma.sync kernel with each copy engine that was measured."""
    sizes = sorted({c.params["sizes"] for c in result.cases})
    rows = []
    for n in sizes:
        lib = result.case(f"cuBLAS bf16, n={n}")
        row = {"n": n, "cuBLAS TFLOP/s": lib.flop_per_s / 1e12}
        for engine in COPY_ENGINES:
            mine = [c for c in result.cases if c.params["sizes"] == n and c.params.get("copies") == engine]
            if mine:
                row[f"{engine} TFLOP/s"] = mine[0].flop_per_s / 1e12
                row[f"{engine} % of cuBLAS"] = 100 * mine[0].flop_per_s / lib.flop_per_s
                row[f"{engine} max |err| / tol"] = mine[0].check["max_abs_err"] / mine[0].check["tolerance"]
        rows.append(row)
    return rows


@beside_reference
def edges_rows(result) -> list[dict]:
    """Kernel x shape: error over tolerance (passed when <= 1)."""
    shapes = []
    for c in result.cases:
        if c.params["shapes"] not in shapes:
            shapes.append(c.params["shapes"])
    rows = []
    bf16_names = sorted({c.params["kernel"] for c in result.cases if c.params["kernel"].startswith("bf16")})
    for kernel in [*LADDER_KERNELS, *bf16_names]:
        cs = {tuple(c.params["shapes"]): c for c in result.cases if c.params["kernel"] == kernel}
        if not cs:
            continue
        row = {"kernel": kernel}
        for m, n, k in shapes:
            c = cs.get((m, n, k))
            row[f"{m}×{n}×{k}"] = (f"{c.check['max_abs_err'] / c.check['tolerance']:.2g} ✔" if c and c.check["passed"]
                                   else "✘" if c else "—")
        rows.append(row)
    return rows
