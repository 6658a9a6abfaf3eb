"""Host launcher of ``kernels/gemm_bf16.cu``: the bf16 ``mma.sync`` kernel, its tiles filled by cp.async or
(sm_90+) the TMA, its geometry from the file's macro defaults, the TMA descriptors, and its smoke launch.
Notebooks 06-09 run it; their labs pick a named ``Variant`` (its ``-D`` defines) from this module's table
and this module launches it."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from course_lib.core import cuda
from course_lib.core.cuda import defines_to_options, macros
from course_lib.core.hardware import detect
from course_lib.launch.gemm_fp32 import SMOKE_SHAPES
from course_lib.launch.operands import bf16_bits_to_float32, bf16_tolerance, random_operand, to_bf16_bits
from course_lib.measure.smoke import covers
from course_lib.models import waves
from course_lib.models.launch_geometry import cdiv

BF16 = "gemm_bf16"
BF16_MIN_CC = 8.0
TMA_MIN_CC = 9.0
BF16_SMEM_EXTRA = 1024 + 64   # beyond the tiles: slack to align them to 1024 bytes, and the mbarriers
COPY_ENGINES = ("cp.async", "tma")
KERNEL = "bf16_gemm_mma"


@dataclass(frozen=True)
class Variant:
    """One named build of ``bf16_gemm_mma``: the ``-D`` defines it sets over the file's defaults
    (none for the plain kernel). Pick one from the table below; never build its defines by hand."""

    name: str
    defines: dict[str, int] = field(default_factory=dict)

    def __hash__(self) -> int:   # a dict field: hash what it compiles to
        return hash((self.name, self.options))

    @property
    def epilogue(self) -> int:
        """``TC_EPILOGUE``: 0 none, 1 bias (+ GELU), 2 with the residual too."""
        return self.defines.get("TC_EPILOGUE", 0)

    @property
    def residual(self) -> bool:
        return self.epilogue == 2

    @property
    def gelu(self) -> bool:
        return self.epilogue > 0 and self.defines.get("TC_EPILOGUE_GELU", 1) == 1

    @property
    def staged_stores(self) -> bool:
        """C sent out through shared memory in 16-byte stores (``TC_STAGE_C``, sm_90+)."""
        return self.defines.get("TC_STAGE_C", 0) == 1

    def staged(self) -> Variant:
        """The same variant with 16-byte staged stores."""
        return Variant(f"{self.name}, 16-byte stores", {**self.defines, "TC_STAGE_C": 1})

    @property
    def options(self) -> tuple[str, ...]:
        return defines_to_options(self.defines)

    def family(self, arch: str | None = None):
        return cuda.compile_family(BF16, arch, self.options)

    def function(self):
        return self.family().function(KERNEL)

    def run(self, a_bits, b_bits, c_bits, copies: str = "auto", grid=None, epilogue_args: tuple = (),
            smem_bytes: int | None = None) -> None:
        """``run_bf16`` with this variant's kernel and defines."""
        run_bf16(a_bits, b_bits, c_bits, self.function(), self.defines or None, copies, grid, epilogue_args,
                 smem_bytes)


def epilogue_variant(residual: bool, libm_tanh: bool = False, gelu: bool = True, staged: bool = False) -> Variant:
    """The fused-epilogue variant: bias, GELU unless ``gelu=False`` (its tanh by libm's tanhf with
    ``libm_tanh``), the residual with ``residual``, 16-byte staged stores with ``staged``."""
    name = "bias" + " + GELU" * gelu + " + residual" * residual + ", libm tanhf" * libm_tanh
    variant = Variant(name, {"TC_EPILOGUE": 2 if residual else 1, **({"TC_GELU_TANHF": 1} if libm_tanh else {}),
                             **({} if gelu else {"TC_EPILOGUE_GELU": 0})})
    return variant.staged() if staged else variant


PLAIN = Variant("plain")
PLAIN_STAGED = PLAIN.staged()
BIAS_ONLY = epilogue_variant(False, gelu=False)
BIAS_GELU = epilogue_variant(False)
BIAS_GELU_STAGED = BIAS_GELU.staged()
BIAS_RESIDUAL = epilogue_variant(True, gelu=False)
BIAS_GELU_RESIDUAL = epilogue_variant(True)
BIAS_GELU_RESIDUAL_STAGED = BIAS_GELU_RESIDUAL.staged()
BIAS_GELU_RESIDUAL_TANHF = epilogue_variant(True, libm_tanh=True)
SCHEDULED = Variant("scheduled", {"TC_SCHEDULED": 1})    # persistent grids and split-K (notebook 07)
NARROW = Variant("128x64 tile", {"TC_BN": 64, "TC_WN": 32})
PROXY_FENCE = Variant("proxy fence", {"TC_PROXY_FENCE": 1})   # the default, asked for by name (notebook 09)
NO_PROXY_FENCE = Variant("no proxy fence", {"TC_PROXY_FENCE": 0})


def with_stages(stages: int) -> Variant:
    """The kernel with ``stages`` pipeline slots (``TC_STAGES``, notebook 09)."""
    return Variant(f"{stages} stages", {"TC_STAGES": stages})


def bf16_geometry(m: int, n: int, defines: dict[str, int] | None = None):
    """(grid, block, dynamic shared bytes) of ``bf16_gemm_mma``."""
    d = macros(BF16, defines)
    threads = (d["TC_BM"] // d["TC_WM"]) * (d["TC_BN"] // d["TC_WN"]) * 32
    smem = d["TC_STAGES"] * (d["TC_BM"] * d["TC_BK"] + d["TC_BK"] * d["TC_BN"]) * 2 + BF16_SMEM_EXTRA
    return (cdiv(m, d["TC_BM"]) * cdiv(n, d["TC_BN"]),), (threads,), smem


def require_bf16_mma(compute_capability: str | float) -> None:
    """The bf16 kernel's guard on the Python side: refuse, in words, on GPUs without bf16 mma.sync."""
    if float(compute_capability) < BF16_MIN_CC:
        raise RuntimeError(f"bf16_gemm_mma needs compute capability 8.0+ (bf16 mma.sync arrived with Ampere); "
                           f"this GPU is {compute_capability}. The fp32 ladder runs here; the bf16 rung "
                           "can only be replayed.")


def bf16_function():
    require_bf16_mma(detect().compute_capability)
    fn = cuda.kernel(BF16, "bf16_gemm_mma")
    return fn


@functools.lru_cache(maxsize=None)
def _device_cc() -> float:
    """The current GPU's compute capability, looked up once (launches inside timed loops use it)."""

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
    fn = function or bf16_function()
    if fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem    # opt in beyond the default 48 KiB
    engine = copy_engine(copies, _device_cc(), k, n, defines)
    maps = tensor_maps(a_bits, b_bits, defines) if engine == "tma" else np.uint64(0)
    fn(grid, block, (a_bits, b_bits, c_bits, np.int32(m), np.int32(n), np.int32(k), maps, *epilogue_args),
       shared_mem=smem)


@covers(BF16, "bf16_gemm_mma")
def bf16_smoke() -> None:
    import cupy

    if float(detect().compute_capability) < BF16_MIN_CC:
        print(f"skip {BF16}.bf16_gemm_mma: needs compute capability 8.0+")
        return
    for m, n, k in SMOKE_SHAPES + ((128, 128, 64), (200, 136, 72), (256, 256, 448), (136, 264, 200)):
        a, b = to_bf16_bits(random_operand((m, k), 9)), to_bf16_bits(random_operand((k, n), 10))
        ref = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64)
        for engine in runnable_engines(_device_cc(), k, n):
            c = cupy.full((m, n), 0xFFFF, dtype=cupy.uint16)
            run_bf16(a, b, c, copies=engine)
            err = float(cupy.abs(bf16_bits_to_float32(c) - ref).max())
            if not err <= bf16_tolerance(ref):
                raise AssertionError(f"{BF16}.bf16_gemm_mma ({engine}) wrong at {m}x{n}x{k}: max error {err}")


# --------------------------------------------------------------------------- tiles, persistent grids, split-K (notebook 07)


def variant_name(variant: Variant) -> str:
    d = macros(BF16, variant.defines)
    tags = [f"{d['TC_BM']}x{d['TC_BN']}"] + (["scheduled"] if d["TC_SCHEDULED"] else [])
    return f"{BF16}.{KERNEL} [{', '.join(tags)}]"


def tile_shape(variant: Variant = PLAIN) -> tuple[int, int]:
    d = macros(BF16, variant.defines)
    return d["TC_BM"], d["TC_BN"]


def resident_blocks(gpu, variant: Variant = PLAIN, arch: str | None = None) -> int:
    """Blocks of this variant one SM holds, from its compiled resources and the occupancy model."""
    r = variant.family(arch).resources[KERNEL]
    _, block, smem = bf16_geometry(1, 1, variant.defines)
    return waves.resident_blocks_per_sm(gpu, block[0], r.registers, smem + r.static_smem_bytes)


def run_variant(a_bits, b_bits, c_bits, variant: Variant = PLAIN, grid_blocks: int | None = None, split_k: int = 1,
        workspace=None, copies: str = "auto") -> None:
    """C = A·B with a variant of the bf16 kernel (notebook 07's tiles, persistent grids and split-K); ``grid_blocks`` below the tile count makes the grid
    persistent and ``split_k`` > 1 sums K slices through ``workspace`` (fp32, split_k x M x N)."""
    import cupy

    m, k = a_bits.shape
    n = b_bits.shape[1]
    d = macros(BF16, variant.defines)
    if (grid_blocks is not None or split_k > 1) and not d["TC_SCHEDULED"]:
        raise ValueError("persistent grids and split-K need the TC_SCHEDULED=1 variant (gemm_bf16.SCHEDULED)")
    if split_k > 1 and (workspace is None or workspace.size < split_k * m * n or workspace.dtype != cupy.float32):
        raise ValueError(f"split-K {split_k} needs an fp32 workspace of {split_k} x {m} x {n} floats")
    if split_k > 1 and empty_slices(k, split_k, variant):
        # The kernel's TMA path would wait for ever on a slice that holds no K tile.
        raise ValueError(f"split-K {split_k} leaves a slice with no K tile at K = {k} ({k_tiles(k, variant)} tiles "
                         f"of {d['TC_BK']}); use a split of at most {max_split(k, variant)}")
    (tiles,), _, _ = bf16_geometry(m, n, variant.defines)
    variant.run(a_bits, b_bits, workspace if split_k > 1 else c_bits, copies,
                grid=(min(grid_blocks or tiles, tiles), split_k))
    if split_k > 1:
        mn = m * n
        variant.family().function("splitk_reduce")(((mn + 255) // 256,), (256,),
                                      (workspace, c_bits, np.int32(split_k), np.int64(mn)))


def k_tiles(k: int, variant: Variant = PLAIN) -> int:
    return -(-k // macros(BF16, variant.defines)["TC_BK"])


def empty_slices(k: int, split_k: int, variant: Variant = PLAIN) -> bool:
    """Whether the kernel's split of K into ``split_k`` equal runs of whole tiles leaves one empty."""
    tiles = k_tiles(k, variant)
    return (split_k - 1) * -(-tiles // split_k) >= tiles


def max_split(k: int, variant: Variant = PLAIN) -> int:
    return max(s for s in range(1, k_tiles(k, variant) + 1) if not empty_slices(k, s, variant))


def bf16_operands(m: int, n: int, k: int, seed: int):
    import cupy

    a, b = to_bf16_bits(random_operand((m, k), seed)), to_bf16_bits(random_operand((k, n), seed + 1))
    return a, b, cupy.empty((m, n), dtype=cupy.uint16)


SCHEDULED_SMOKE_SHAPES = ((1, 1, 1), (127, 129, 65), (333, 1000, 77), (200, 136, 72), (256, 256, 448))


@covers(BF16, "splitk_reduce")
def scheduled_smoke() -> None:
    """The scheduled and narrow variants at edge shapes: split-K (empty slices too), persistent grids."""
    import cupy

    if float(detect().compute_capability) < 8.0:
        print(f"skip {BF16} variants: need compute capability 8.0+")
        return
    for m, n, k in SCHEDULED_SMOKE_SHAPES:
        a, b, c = bf16_operands(m, n, k, 5)
        ref = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64)
        split = min(4, max_split(k, SCHEDULED))
        work = cupy.empty(split * m * n, dtype=cupy.float32)
        variants = [("128x64", NARROW, {}), ("persistent 2", SCHEDULED, {"grid_blocks": 2})]
        if split > 1:
            variants += [(f"split-K {split}", SCHEDULED, {"split_k": split, "workspace": work}),
                         (f"split-K {split}, persistent 1", SCHEDULED, {"split_k": split, "workspace": work,
                                                                      "grid_blocks": 1})]
        for label, variant, kw in variants:
            for copies in ("cp.async", "auto"):
                c.fill(0xFFFF)
                run_variant(a, b, c, variant, copies=copies, **kw)
                err = float(cupy.abs(bf16_bits_to_float32(c) - ref).max())
                if not err <= bf16_tolerance(ref):
                    raise AssertionError(f"{BF16} {label} ({copies}) wrong at {m}x{n}x{k}: max error {err}")
