"""Host launcher of ``kernels/gemm_fp32.cu``: the fp32 SIMT ladder's nine rungs as named variants, each
with the launch geometry its kernel's contract asks for (read from the file's macro defaults, so a
``-D`` option used while tuning cannot drift from what the launch assumes), and its smoke launch."""
from __future__ import annotations

from dataclasses import dataclass

from course_lib.core import cuda
from course_lib.core.cuda import macros
from course_lib.launch.operands import random_operand
from course_lib.measure.smoke import covers
from course_lib.models.launch_geometry import cdiv

FP32 = "gemm_fp32"


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
         "about one shared-memory load per multiply-add (the SASS has 40 per 32 FFMAs: A's broadcast values come "
         "16 bytes at a time), so the shared-memory queue, not HBM, is now the limit "
         "(mio_throttle is the top stall)",
         "keep several outputs per thread in registers so each shared load feeds several FMAs", (32, 32, 32), 1024, (1, 1)),
    Step(4, "1-D register tiles", "sgemm_reg1d", "8 outputs of a column per thread",
         "each shared load still feeds few FMAs (the compiler reads A's broadcast values as LDS.128: 3 loads per 8 "
         "FFMAs in the SASS, where the source reads 9), so the shared-memory queue fills; the transposed store of A "
         "is 8-way conflicted (all of this step's conflict wavefronts)",
         "give each thread an 8x8 block (16 loads per 64 FMAs) and the block a 128x128 tile", (64, 64, 8), 512, (8, 1)),
    Step(5, "2-D register tiles", "sgemm_reg2d", "8x8 outputs per thread, 128x128 tile per block",
         "scalar global loads (8 per thread per stage), and bank conflicts in two places: the transposed store "
         "of A, and the B reads, where a thread's 8 values start 32 bytes after its neighbour's",
         "load 16 bytes per instruction (float4 global loads) and store A transposed into a padded tile", (128, 128, 8), 256, (8, 8)),
    Step(6, "vectorised", "sgemm_vec4", "float4 global loads and C stores, A stored into a padded tile",
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
         "one block (8 warps) per SM at about 220 registers per thread; the cycles in which no warp issues: "
         "cuBLAS, with the same occupancy and the same share of FFMAs, keeps the issue slots busier (its profile "
         "in this notebook); its instruction order and its three stages are the remaining hypotheses",
         "for more, change the unit: tensor cores (the bf16 kernel below)", (256, 128, 8), 256, (16, 8), 2),
)
LADDER_KERNELS = [s.kernel for s in LADDER]


def fp32_geometry(kernel: str, m: int, n: int, defines: dict[str, int] | None = None):
    """(grid, block) from each kernel's launch contract."""
    if kernel == "sgemm_naive":
        return (cdiv(m, 32), cdiv(n, 32)), (32, 32)
    if kernel in ("sgemm_coalesced", "sgemm_smem"):
        return (cdiv(n, 32), cdiv(m, 32)), (32, 32)
    if kernel == "sgemm_reg1d":
        return (cdiv(n, 64), cdiv(m, 64)), (512,)
    if kernel in ("sgemm_reg2d", "sgemm_vec4"):
        return (cdiv(n, 128), cdiv(m, 128)), (256,)
    if kernel in ("sgemm_warptile", "sgemm_warptile_db"):
        d = macros(FP32, defines)
        threads = (d["WT_BM"] // d["WT_WM"]) * (d["WT_BN"] // d["WT_WN"]) * 32
        return (cdiv(n, d["WT_BN"]), cdiv(m, d["WT_BM"])), (threads,)
    if kernel == "sgemm_warptile_db_16x8":
        d = macros(FP32, defines)
        threads = (d["WB_BM"] // d["WB_WM"]) * (d["WB_BN"] // d["WB_WN"]) * 32
        return (cdiv(n, d["WB_BN"]), cdiv(m, d["WB_BM"])), (threads,)
    raise KeyError(f"no fp32 GEMM kernel {kernel!r}; the ladder has {', '.join(LADDER_KERNELS)}")


def run_fp32(kernel: str, a, b, c, function=None, defines=None) -> None:
    """C = A·B with one ladder kernel on CuPy float32 arrays (asynchronous)."""
    import numpy as np

    m, k = a.shape
    n = b.shape[1]
    grid, block = fp32_geometry(kernel, m, n, defines)
    fn = function or cuda.kernel(FP32, kernel)
    fn(grid, block, (a, b, c, np.int32(m), np.int32(n), np.int32(k)))


SMOKE_SHAPES = ((37, 45, 19), (130, 129, 33), (64, 256, 40))


@covers(FP32, *LADDER_KERNELS)
def fp32_smoke() -> None:
    import cupy

    for m, n, k in SMOKE_SHAPES:
        a, b = random_operand((m, k), 7), random_operand((k, n), 8)
        ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
        for kernel in LADDER_KERNELS:
            c = cupy.full((m, n), float("nan"), dtype=cupy.float32)
            run_fp32(kernel, a, b, c)
            err = float(cupy.abs(c - ref).max())
            if not err <= 1e-5 * float(cupy.abs(ref).max()):
                raise AssertionError(f"{FP32}.{kernel} wrong at {m}x{n}x{k}: max error {err}")
