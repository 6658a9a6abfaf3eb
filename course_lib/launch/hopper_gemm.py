"""Host launcher of ``kernels/hopper_gemm.cu`` (notebook 10, ``sm_90a``): the seven rungs of the Hopper
ladder as named values (``Rung``), each one's grid, block and shared memory, the TMA descriptors, the
instruction-ceiling kernels, split-K, the dispatch (the SM-round model's choice of plan for a shape,
calibrated on the ladder), the launches compute-sanitizer and the pitfalls' child processes run,
and the smoke launch."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from course_lib.core import cuda
from course_lib.core.cuda import defines_to_options, macros
from course_lib.core.hardware import detect, spec
from course_lib.launch.gemm_bf16 import encode_tensor_map
from course_lib.launch.operands import (
    bf16_bits_to_float32,
    bf16_tolerance,
    gelu_tanh_reference,
    random_operand,
    to_bf16_bits,
    torch_view,
)
from course_lib.measure.experiments import launch_record
from course_lib.measure.smoke import covers

FAMILY = "hopper_gemm"


ARCH = "sm_90a"


HOPPER_CC = "9.0"


ALIGN_SLACK = 1024   # dynamic shared memory beyond the slots: room to align them to the swizzle's 1024 bytes


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: its kernel, and the one thing it changes from the rung before."""

    number: int
    kernel: str
    label: str
    change: str
    tile: tuple[int, int]          # BM x BN of C per block
    threads: int
    slots: str                     # "one" or "ring" (HG_STAGES)
    consumers: int                 # warpgroups issuing wgmma
    persistent: bool = False
    cluster: int = 1               # blocks per cluster (2: the B tile is shared, half fetched by each)
    tma_store: bool = False        # the output tile leaves through shared memory and the TMA

    @property
    def b_box_rows(self) -> int:
        """Rows of B one TMA copy brings: the whole B tile, or this block's share of it."""
        return self.tile[1] // self.cluster


RUNGS: tuple[Rung, ...] = (
    Rung(1, "hgemm_1_tma_wgmma", "TMA + wgmma",
         "one warpgroup; the TMA brings a 128×128 tile's next K slice into one slot, the warpgroup "
         "waits on its mbarrier, multiplies with wgmma from shared memory, waits for the wgmmas",
         (128, 128), 128, "one", 1),
    Rung(2, "hgemm_2_ring", "mbarrier ring",
         "HG_RING_STAGES slots, one mbarrier each: the copies of the next slices are in flight while one "
         "is multiplied; a __syncthreads says a slot is free",
         (128, 128), 128, "ring", 1),
    Rung(3, "hgemm_3_specialized", "warp specialization",
         "a producer warpgroup (one thread issues every copy) and two consumer warpgroups; full and "
         "empty mbarriers per slot replace the __syncthreads",
         (128, 128), 384, "ring", 2),
    Rung(4, "hgemm_4_wide", "128×256 tile, setmaxnreg",
         "a 128×256 tile, each consumer 64×256 (128 fp32 accumulators per thread); setmaxnreg moves "
         "registers from the producer to the consumers",
         (128, 256), 384, "ring", 2),
    Rung(5, "hgemm_5_persistent", "persistent, grouped order",
         "one block per SM walks the tiles in bands of HG_GROUP_M tile rows; the next tile's copies "
         "overlap the last tile's stores",
         (128, 256), 384, "ring", 2, True),
    Rung(6, "hgemm_6_cluster", "clusters of 2, TMA multicast",
         "clusters of two blocks on vertically adjacent tiles share their B tile: each block's TMA "
         "fetches half of it and multicasts it into both; a slot is freed by the consumers of both",
         (128, 256), 384, "ring", 2, True, 2),
    Rung(7, "hgemm_7_tma_store", "stmatrix + TMA store",
         "each consumer writes its 64×256 output tile into shared memory with stmatrix, in the TMA's "
         "swizzled layout, and one thread stores it with the TMA while the warpgroup starts the next "
         "tile; the 64 KiB this takes leave room for 3 slots instead of 4",
         (128, 256), 384, "ring", 2, True, 2, True),
)


RUNG_KERNELS = [r.kernel for r in RUNGS]


def rung(kernel_or_number) -> Rung:
    for r in RUNGS:
        if kernel_or_number in (r.kernel, r.number):
            return r
    raise KeyError(f"no rung {kernel_or_number!r}; the ladder has {', '.join(RUNG_KERNELS)}")


def hg_macros(defines: dict[str, int] | None = None) -> dict[str, int]:
    return macros(FAMILY, defines)


def smem_bytes(r: Rung, defines: dict[str, int] | None = None) -> int:
    """Dynamic shared memory a rung is launched with: its slots, their mbarriers, alignment slack (and the
    residual's two mbarriers where rung 7's fused epilogue brings it by TMA)."""
    bm, bn = r.tile
    slot = (bm + bn) * hg_macros(defines)["HG_BK"] * 2
    if r.slots == "one":
        return ALIGN_SLACK + slot + 8
    residual_bars = 16 if r.tma_store and staged_residual(defines) else 0
    return ALIGN_SLACK + stages(r, defines) * (slot + 16) + output_stage_bytes(r) + residual_bars


def stages(r: Rung, defines: dict[str, int] | None = None) -> int:
    """The slots of a rung's ring (1 for rung 1's single slot)."""
    if r.slots == "one":
        return 1
    key = "HG_RING_STAGES" if r.consumers == 1 else "HG_STORE_STAGES" if r.tma_store else "HG_STAGES"
    return hg_macros(defines)[key]


def output_stage_bytes(r: Rung) -> int:
    """Shared memory the output tile passes through on its way to the TMA store (rung 7), bf16."""
    return r.tile[0] * r.tile[1] * 2 if r.tma_store else 0


def output_tiles(r: Rung, m: int, n: int) -> int:
    bm, bn = r.tile
    return -(-m // bm) * -(-n // bn)


def tile_pairs(r: Rung, m: int, n: int) -> int:
    """A clustered rung's units of work: vertically adjacent groups of ``r.cluster`` tiles sharing B rows."""
    bm, bn = r.tile
    return -(-(-(-m // bm)) // r.cluster) * -(-n // bn)


def k_slices(k: int) -> int:
    """The 64-wide slices of K a K loop runs (the last one a tail where K % 64 != 0)."""
    return -(-k // hg_macros()["HG_BK"])


def geometry(r: Rung, m: int, n: int, sm_count: int, defines: dict[str, int] | None = None,
             blocks: int | None = None):
    """(grid, block, dynamic shared bytes): one block per output tile, or (persistent) one per SM, or
    ``blocks``; a clustered rung takes pairs of vertically adjacent tiles, one cluster of 2 per pair."""
    if r.cluster > 1:
        clusters = min((blocks or sm_count) // r.cluster, tile_pairs(r, m, n))
        return (clusters * r.cluster,), (r.threads,), smem_bytes(r, defines)
    tiles = output_tiles(r, m, n)
    grid = min(tiles, blocks or sm_count) if r.persistent else tiles
    return (grid,), (r.threads,), smem_bytes(r, defines)


def sm_rounds(r: Rung, m: int, n: int, sm_count: int) -> int:
    """The most output tiles any one SM computes (notebook 07's SM-round model): one block per tile spread
    over the SMs (rungs 1-4), tiles b, b + grid, ... of a persistent grid (rung 5), or tile pairs over
    clusters of two (rungs 6-7)."""
    from course_lib.models import waves

    (grid,), _, _ = geometry(r, m, n, sm_count)
    if r.cluster > 1:
        return -(-tile_pairs(r, m, n) // (grid // r.cluster))
    if r.persistent:
        return waves.persistent_sm_rounds(output_tiles(r, m, n), grid, sm_count)
    return -(-grid // sm_count)


def require_hopper(compute_capability) -> None:
    """wgmma and setmaxnreg are sm_90a: they run on compute capability 9.0 and nowhere else."""
    if str(compute_capability) != HOPPER_CC:
        raise RuntimeError(
            f"notebook 10's kernels use wgmma and setmaxnreg, which exist only on compute capability 9.0 "
            f"(H100, H200, GH200), built for sm_90a; this GPU is {compute_capability}. Blackwell replaces "
            "them with tcgen05 (see the notebook's last section). Here the notebook replays the H200's record.")


def require_k(k: int) -> None:
    """The TMA reads rows of K bf16 at a stride of 2K bytes, which it needs to be a multiple of 16."""
    if k < 1 or k % 8:
        raise ValueError(f"K = {k}: the TMA needs each row of A and B to start 16-byte aligned, so K must be a "
                         f"positive multiple of 8. Pad K with zeros to {max(8, -(-k // 8) * 8)} (zeros add "
                         "nothing to the products).")


@functools.lru_cache(maxsize=None)
def kernel_function(kernel: str, options: tuple[str, ...] = ()):
    """A rung (or ceiling) kernel built for sm_90a with ``options``, ready to launch."""
    return cuda.compile_family(FAMILY, ARCH, options).function(kernel)


@functools.lru_cache(maxsize=None)
def sm_count() -> int:
    import cupy

    return cupy.cuda.Device().attributes["MultiProcessorCount"]


def c_box() -> int:
    """Rung 7's output boxes are c_box() × c_box() bf16 (HG_C_BOX): 128-byte rows, the widest the 128-byte
    swizzle takes."""
    return hg_macros()["HG_C_BOX"]


# Rung 7's fused epilogues (notebook 08): the macros that build each, C = A·Bᵀ for none.
FUSED_EPILOGUES: dict[str, dict[str, int]] = {
    "bias + GELU": {"HG_EPILOGUE": 1},
    "bias + GELU + residual": {"HG_EPILOGUE": 2},
    "bias + GELU + residual, each thread loading its residual": {"HG_EPILOGUE": 2, "HG_RESIDUAL_TMA": 0},
}


def epilogue_of(defines: dict[str, int] | None) -> int:
    """HG_EPILOGUE in a build: 0 none, 1 GELU(A·Bᵀ + bias), 2 the same + residual."""
    return hg_macros(defines)["HG_EPILOGUE"]


def staged_residual(defines: dict[str, int] | None) -> bool:
    """Whether the build's epilogue brings the residual into the output stage by TMA (a fourth map)."""
    return epilogue_of(defines) == 2 and bool(hg_macros(defines)["HG_RESIDUAL_TMA"])


def tensor_maps(a_bits, b_bits, box_rows_a: int, box_rows_b: int, c_bits=None, residual_bits=None):
    """A's and B's TMA descriptors (K wide, 64 × box_rows boxes, 128-byte swizzle) in GPU memory, then
    (``c_bits``, N % 8 == 0) C's for the TMA store, N wide in 64 × 64 boxes, and (``residual_bits``) the
    residual's, the same. Where N % 8 != 0 C's rows are not 16-byte aligned, the TMA cannot address
    them, and the kernel stores directly."""
    import cupy
    import numpy as np

    (m, k), n = a_bits.shape, b_bits.shape[0]
    c_ptr = None if c_bits is None else c_bits.data.ptr
    r_ptr = None if residual_bits is None else residual_bits.data.ptr
    key = (a_bits.data.ptr, b_bits.data.ptr, c_ptr, r_ptr, m, n, k, box_rows_a, box_rows_b)
    if key not in _MAPS:
        words = (encode_tensor_map(a_bits.data.ptr, k, m, 64, box_rows_a)
                 + encode_tensor_map(b_bits.data.ptr, k, n, 64, box_rows_b))
        box = c_box()
        if c_bits is not None:
            words += encode_tensor_map(c_ptr, n, m, box, box) if n % 8 == 0 else [0] * 16
        if residual_bits is not None:
            words += encode_tensor_map(r_ptr, n, m, box, box)
        if len(_MAPS) > 64:
            _MAPS.clear()
        _MAPS[key] = cupy.asarray(np.array(words, dtype=np.uint64))
    return _MAPS[key]


def _require_aligned(what: str, array, alignment: int, why: str) -> None:
    if array.data.ptr % alignment:
        raise ValueError(f"{what} starts at byte {array.data.ptr % alignment} of a {alignment}-byte line; {why} needs it "
                         f"{alignment}-byte aligned. Pass a fresh allocation, or a view whose first element is aligned.")


def _require_raw_bf16(what: str, array) -> None:
    """The kernel reads raw bf16 (uint16) rows N values apart: another dtype or a strided view would be
    read as if it were that, silently wrong."""
    if str(array.dtype) != "uint16" or not array.flags.c_contiguous:
        raise ValueError(f"{what} must be a contiguous array of raw bf16 bits (uint16, as to_bf16_bits makes them); "
                         f"got {array.dtype}{'' if array.flags.c_contiguous else ', not contiguous (a view?)'}. "
                         "Pass cupy.ascontiguousarray of its bf16 bits.")


def require_epilogue_operands(defines, m: int, n: int, bias_bits, residual_bits) -> None:
    """Rung 7's fused epilogue needs the bias (N raw bf16), and the residual (M×N) for HG_EPILOGUE 2, both
    where the kernel can read them; and N % 8 == 0, since the epilogue runs on the tile on its way to the
    TMA store."""
    epilogue = epilogue_of(defines)
    if epilogue == 0:
        return
    if n % 8:
        raise ValueError(f"N = {n}: rung 7's fused epilogue runs on the tile the TMA stores, and the TMA needs C's rows "
                         f"16-byte aligned, so N must be a multiple of 8. Pad N to {-(-n // 8) * 8} (and the bias, "
                         "residual and B with it), or use notebook 08's mma.sync GEMM, which fuses at any N.")
    if bias_bits is None or bias_bits.shape != (n,):
        raise ValueError(f"the fused epilogue adds a bias of N = {n} raw bf16 values; got "
                         f"{None if bias_bits is None else bias_bits.shape}")
    _require_raw_bf16("the bias", bias_bits)
    _require_aligned("the bias", bias_bits, 4, "the epilogue's 4-byte loads of column pairs")
    if epilogue == 2:
        if residual_bits is None or residual_bits.shape != (m, n):
            raise ValueError(f"HG_EPILOGUE 2 adds an M×N = {m}×{n} residual; got "
                             f"{None if residual_bits is None else residual_bits.shape}")
        _require_raw_bf16("the residual", residual_bits)
        _require_aligned("the residual", residual_bits, 16 if staged_residual(defines) else 4,
                         "the TMA load of its tiles" if staged_residual(defines) else "the epilogue's 4-byte loads")


def run(r: Rung | str | int, a_bits, b_bits, c_bits, defines: dict[str, int] | None = None, fn=None,
        smem_bytes_at_least: int = 0, blocks: int | None = None, bias_bits=None, residual_bits=None) -> None:
    """C = A·Bᵀ with one rung on raw-bf16 CuPy arrays (A: M×K, B: N×K, C: M×N), asynchronously; with a
    fused epilogue in ``defines`` (rung 7, ``FUSED_EPILOGUES``) C = GELU(A·Bᵀ + bias) (+ residual).
    ``smem_bytes_at_least`` launches with more shared memory than the rung needs, so that fewer of its
    blocks fit on an SM (the residency comparison of rungs 1 and 2); ``blocks`` sets a persistent
    rung's grid (default: one block per SM)."""
    import numpy as np

    r = r if isinstance(r, Rung) else rung(r)
    (m, k), n = a_bits.shape, b_bits.shape[0]
    if b_bits.shape[1] != k or c_bits.shape != (m, n):
        raise ValueError(f"shapes do not chain: A {a_bits.shape}, B {b_bits.shape} (N×K), C {c_bits.shape}")
    require_k(k)
    if epilogue_of(defines) and not r.tma_store:
        raise ValueError(f"only rung 7 ({RUNGS[-1].kernel}) fuses an epilogue; {r.kernel} computes A·Bᵀ alone")
    require_epilogue_operands(defines, m, n, bias_bits, residual_bits)
    if r.tma_store and n % 8 == 0:
        _require_aligned(f"C of {r.kernel}", c_bits, 16, "the TMA store")
    grid, block, smem = geometry(r, m, n, sm_count(), defines, blocks)
    smem = max(smem, smem_bytes_at_least)
    fn = fn or kernel_function(r.kernel, defines_to_options(defines))
    if fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem
    maps = tensor_maps(a_bits, b_bits, r.tile[0], r.b_box_rows, c_bits if r.tma_store else None,
                       residual_bits if r.tma_store and staged_residual(defines) else None)
    args = (c_bits, np.int32(m), np.int32(n), np.int32(k), maps)
    if r.tma_store:
        args += tuple(np.uint64(0) if x is None else x for x in (bias_bits, residual_bits))
    fn(grid, block, args, shared_mem=smem)


SPLIT_K_KERNEL, SPLIT_K_FINISH = "hgemm_split_k", "hgemm_split_k_finish"
SPLIT_K_TILE = (128, 128)   # rung 3's tile and block, over a slice of K per blockIdx.y


@dataclass(frozen=True)
class Plan:
    """What the dispatch runs for one shape: a rung, or rung 3's block over ``splits`` slices of K whose
    fp32 partial products a second kernel sums and rounds to bf16."""

    kernel: str
    splits: int = 1

    @property
    def label(self) -> str:
        return f"split-K ×{self.splits}" if self.splits > 1 else f"rung {rung(self.kernel).number}"


def split_k_grid(m: int, n: int, k: int, splits: int) -> tuple[int, int]:
    """(tiles, splits) of the split-K launch; a split needs at least one 64-wide K slice."""
    if not 1 <= splits <= k_slices(k):
        raise ValueError(f"{splits} splits of K = {k}: each split needs at least one {hg_macros()['HG_BK']}-wide "
                         f"slice of K, so at most {k_slices(k)} splits")
    return -(-m // SPLIT_K_TILE[0]) * -(-n // SPLIT_K_TILE[1]), splits


def run_split_k(a_bits, b_bits, c_bits, splits: int) -> None:
    """C = A·Bᵀ by split-K: each split's 128×128 blocks write their fp32 partial products into their own
    slice of a workspace, and a second kernel sums the slices and rounds to bf16 into C. Asynchronous;
    the workspace is kept per shape and split count."""
    import cupy
    import numpy as np

    (m, k), n = a_bits.shape, b_bits.shape[0]
    require_k(k)
    tiles, splits = split_k_grid(m, n, k, splits)
    part = _WORKSPACE.get((m, n, splits))
    if part is None:
        _WORKSPACE.clear()
        part = _WORKSPACE[(m, n, splits)] = cupy.empty((splits, m, n), dtype=cupy.float32)
    r3 = rung(3)
    fn = kernel_function(SPLIT_K_KERNEL)
    smem = smem_bytes(r3)
    fn.max_dynamic_shared_size_bytes = max(fn.max_dynamic_shared_size_bytes, smem)
    maps = tensor_maps(a_bits, b_bits, *SPLIT_K_TILE)
    fn((tiles, splits), (r3.threads,), (part, np.int32(m), np.int32(n), np.int32(k), maps), shared_mem=smem)
    kernel_function(SPLIT_K_FINISH)((min(-(-m * n // 512), 4 * sm_count()),), (256,),
                                    (c_bits, part, np.int64(m * n), np.int32(splits)))


def run_plan(plan: Plan, a_bits, b_bits, c_bits) -> None:
    if plan.splits > 1:
        run_split_k(a_bits, b_bits, c_bits, plan.splits)
    else:
        run(plan.kernel, a_bits, b_bits, c_bits)


SWEEP_RUNGS = (2, 3, 5, 7)
SWEEP_SPLITS = (2, 4, 8)


def sweep_plans(k: int, rungs=SWEEP_RUNGS, splits=SWEEP_SPLITS) -> list[Plan]:
    """The plans the sweep times at one shape: each rung, and split-K at each split K's slices allow."""
    return [Plan(rung(x).kernel) for x in rungs] + [Plan(SPLIT_K_KERNEL, s) for s in splits if s <= k_slices(k)]


def seconds_per_tile_k_block(ladder_result, shape=(4096, 4096, 4096), sm_count: int = 132) -> dict[str, float]:
    """Each rung's time per output tile and 64-wide K slice on its busiest SM, from the ladder at one shape:
    the time over (SM rounds × K slices). The dispatch's measured input."""
    m, n, k = shape
    out = {}
    for r in RUNGS:
        c = next(c for c in ladder_result.cases if c.params.get("kernel") == r.kernel and c.params["shapes"] == list(shape))
        out[r.kernel] = c.median_s / (sm_rounds(r, m, n, sm_count) * k_slices(k))
    return out


def predicted_seconds(plan: Plan, m: int, n: int, k: int, per_tile_k_block: dict[str, float],
                      sm_count: int = 132, gpu: str = "h200") -> float:
    """The SM-round model's time for one plan at one shape: its busiest SM's tiles × K slices × the
    calibrated seconds per tile and slice (an SM taken to run at the same rate however few tiles it has).
    Split-K runs rung 3's block over each slice of K, and adds its fp32 workspace's bytes (each split's
    partial written and read back, and C written) at the datasheet's HBM bandwidth."""
    slices = k_slices(k)
    if plan.splits == 1:
        return sm_rounds(rung(plan.kernel), m, n, sm_count) * slices * per_tile_k_block[plan.kernel]
    tiles, splits = split_k_grid(m, n, k, plan.splits)
    compute = -(-tiles * splits // sm_count) * -(-slices // splits) * per_tile_k_block[rung(3).kernel]
    workspace = m * n * (8 * splits + 2) / spec(gpu).hbm_bandwidth_bytes_per_s
    return compute + workspace


def dispatch(m: int, n: int, k: int, per_tile_k_block: dict[str, float], plans: list[Plan] | None = None,
             sm_count: int = 132, gpu: str = "h200") -> Plan:
    """The plan the SM-round model predicts fastest at M × N × K (default: the sweep's plans)."""
    return min(plans or sweep_plans(k), key=lambda p: predicted_seconds(p, m, n, k, per_tile_k_block, sm_count, gpu))


def operands(m: int, n: int, k: int, seed: int):
    """Random bf16 A (M×K) and B (N×K) as CuPy bit patterns, and the same as torch bf16 views."""
    a, b = to_bf16_bits(random_operand((m, k), seed)), to_bf16_bits(random_operand((n, k), seed + 1))
    return a, b, torch_view(a), torch_view(b)


def nan_output(m: int, n: int):
    import cupy

    return cupy.full((m, n), 0xFFFF, dtype=cupy.uint16)   # NaN bits: an unwritten output fails any check


def launch_entry(r: Rung, m: int, n: int, defines=None) -> dict:
    grid, block, smem = geometry(r, m, n, sm_count(), defines)
    res = cuda.compile_family(FAMILY, ARCH, defines_to_options(defines)).resources[r.kernel]
    return launch_record(grid, block, res, smem)


SMOKE_SHAPES = ((1, 8, 8), (130, 257, 200), (256, 512, 320))


def require_bf16_close(c_bits, want, what: str) -> None:
    """A smoke launch's raw-bf16 output within ``bf16_tolerance`` of its float64 ``want``, or an
    AssertionError saying ``what`` and the error (NaN, an unwritten output, fails too)."""
    import cupy

    err = float(cupy.abs(bf16_bits_to_float32(c_bits) - want).max())
    if not err <= bf16_tolerance(want):
        raise AssertionError(f"{what}: max error {err}")


@covers(FAMILY, *RUNG_KERNELS)
def hopper_smoke() -> None:
    """Every rung at small edge shapes, checked against float64 (skipped, saying so, off Hopper)."""
    import cupy

    cc = detect().compute_capability
    if str(cc) != HOPPER_CC:
        print(f"skip {FAMILY}: needs compute capability {HOPPER_CC}, this GPU is {cc}")
        return
    for m, n, k in SMOKE_SHAPES:
        a, b, _, _ = operands(m, n, k, 41)
        exact = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64).T
        for r in RUNGS:
            c = nan_output(m, n)
            run(r, a, b, c)
            require_bf16_close(c, exact, f"{FAMILY}.{r.kernel} wrong at {m}x{n}x{k}")
    fused_epilogue_check(EPILOGUE_SMOKE_SHAPES)


# (M, N, K, blocks): the fused epilogue needs N % 8 == 0. The last runs one cluster over all 20 tile pairs,
# so each consumer's residual barrier flips phase and each stage is stored, then loaded again, many times.
EPILOGUE_SMOKE_SHAPES = ((1, 8, 8, None), (130, 264, 200, None), (256, 512, 320, None), (1000, 1032, 200, 2))


def epilogue_operands(m: int, n: int, seed: int):
    """Random raw-bf16 bias (N) and residual (M×N) for the fused epilogue."""
    return to_bf16_bits(random_operand((n,), seed)), to_bf16_bits(random_operand((m, n), seed + 1))


def fused_epilogue_check(shapes) -> None:
    """Rung 7 with each fused epilogue at ``shapes`` against float64: GELU(A·Bᵀ + bias) (+ residual)."""
    import cupy

    def f64(bits):
        return bf16_bits_to_float32(bits).astype(cupy.float64)

    for m, n, k, blocks in shapes:
        a, b, _, _ = operands(m, n, k, 45)
        bias, residual = epilogue_operands(m, n, 47)
        activated = gelu_tanh_reference(f64(a) @ f64(b).T + f64(bias)[None, :])
        for name, defines in FUSED_EPILOGUES.items():
            ref = activated + f64(residual) if epilogue_of(defines) == 2 else activated
            c = nan_output(m, n)
            run(7, a, b, c, defines, bias_bits=bias, residual_bits=residual, blocks=blocks)
            require_bf16_close(c, ref, f"{FAMILY}.{RUNGS[-1].kernel} with {name} wrong at {m}x{n}x{k}")


@covers(FAMILY, "wgmma_ceiling", "mma_sync_ceiling")
def ceiling_smoke() -> None:
    import cupy
    import numpy as np

    if str(detect().compute_capability) != HOPPER_CC:
        print(f"skip {FAMILY} ceilings: needs compute capability {HOPPER_CC}")
        return
    out = cupy.ones(2 * 256, dtype=cupy.float32)
    fn = kernel_function("wgmma_ceiling")
    smem = ALIGN_SLACK + (64 + hg_macros()["HG_CEIL_N"]) * 128
    fn.max_dynamic_shared_size_bytes = max(fn.max_dynamic_shared_size_bytes, smem)
    fn((2,), (256,), (out, np.int32(4)), shared_mem=smem)
    kernel_function("mma_sync_ceiling")((2,), (256,), (out, np.int32(4)))
    cupy.cuda.Device().synchronize()


@covers(FAMILY, SPLIT_K_KERNEL, SPLIT_K_FINISH)
def split_k_smoke() -> None:
    """Split-K at small edge shapes (an odd output count, splits that do not divide K's slices)."""
    import cupy

    if str(detect().compute_capability) != HOPPER_CC:
        print(f"skip {FAMILY} split-K: needs compute capability {HOPPER_CC}")
        return
    for (m, n, k), splits in (((1, 7, 8), 1), ((130, 257, 200), 3), ((256, 512, 320), 5)):
        a, b, _, _ = operands(m, n, k, 43)
        exact = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64).T
        c = nan_output(m, n)
        run_split_k(a, b, c, splits)
        require_bf16_close(c, exact, f"{FAMILY}.{SPLIT_K_KERNEL} x{splits} wrong at {m}x{n}x{k}")


def release_before_wait_launch() -> None:
    """Rung 5 releasing each slot before waiting for its wgmmas, launched once: what racecheck runs."""
    import cupy

    a, b, _, _ = operands(256, 512, 320, 71)
    run("hgemm_5_persistent", a, b, nan_output(256, 512), {"HG_RELEASE_BEFORE_WAIT": 1})
    cupy.cuda.Device().synchronize()


def stuck_slot_launch() -> None:
    """Rung 5 expecting 16 bytes more per slot than the TMA brings, launched once: what the child
    process of ``_wrong_byte_count`` runs. It prints how long the launch took to fail and why."""
    import time

    import cupy

    a, b, _, _ = operands(256, 512, 320, 81)
    c = nan_output(256, 512)
    kernel_function("hgemm_5_persistent", ("-DHG_EXTRA_EXPECT_BYTES=16",))
    t = time.perf_counter()
    try:
        run("hgemm_5_persistent", a, b, c, {"HG_EXTRA_EXPECT_BYTES": 16})
        cupy.cuda.Device().synchronize()
    except Exception as exc:  # noqa: BLE001  (the trap's error is the finding)
        print(f"after {time.perf_counter() - t:.2f} s: {type(exc).__name__}: {exc}")


_MAPS: dict[tuple, object] = {}
_WORKSPACE: dict[tuple[int, int], object] = {}
