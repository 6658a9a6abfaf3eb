"""The course's write-it-yourself kernel exercises: for each, the task, the starter the learner
edits, a hint, a hidden reference solution, deliberately wrong solutions (tests pass them through the
checker to see them rejected), the sizes a live run uses and the static checks that read the source
and the compile report. ``kernel_exercises`` checks a learner's cell against one of them."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from course_lib.core import cuda, hardware, runtime
from course_lib.models import memory, occupancy, waves


def _shape_cases(shapes: tuple[tuple[int, int], ...]) -> dict:
    """An exercise run at rows × cols shapes: the runner gets each shape's index, the learner reads the shape."""
    return {"sizes": tuple(range(len(shapes))), "size_labels": tuple(f"{r}×{c}" for r, c in shapes)}


@dataclass(frozen=True)
class Finding:
    ok: bool
    text: str


@dataclass(frozen=True)
class KernelExercise:
    """One exercise: what to write, how it is launched, and what is checked."""

    name: str
    notebook: str
    kernel: str                      # the extern "C" __global__ entry point the learner defines
    task: str
    starter: str
    hint: str
    solution: str
    wrong: dict[str, str]            # label -> a deliberately wrong solution (tested to be rejected)
    sizes: tuple[int, ...]           # the adversarial problem sizes a live run uses
    static: Callable[[str, cuda.KernelResources], list[Finding]] = field(default=lambda src, res: [])
    min_cc: float = 7.5
    size_labels: tuple[str, ...] = ()   # how the sizes read when they are not element counts (GEMM shapes)
    launch: Callable[[str], dict | None] = field(default=lambda src: {})   # what the runner's launch reads from the source
    fault_hint: str = ""   # what a failed launch most likely means for this exercise (default: an out-of-bounds access)

    def sizes_text(self) -> str:
        return ", ".join(self.size_labels) if self.size_labels else "n = " + ", ".join(f"{s:,}" for s in self.sizes)

    def static_findings(self, source: str, res: cuda.KernelResources) -> list[Finding]:
        return list(self.static(source, res))


def _strip_comments(source: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", source, flags=re.S)


# --------------------------------------------------------------------------- the exercises

def _uses_grid_stride(source: str, res: cuda.KernelResources) -> list[Finding]:
    body = _strip_comments(source)
    if "gridDim" not in body:
        return [Finding(False, "the kernel never reads gridDim: launched with fewer threads than elements "
                               "(as here), it cannot reach them all. Step by gridDim.x * blockDim.x.")]
    return [Finding(True, "the kernel reads gridDim (a grid-stride loop can cover any n)")]


SCALE = KernelExercise(
    name="scale_grid_stride", notebook="02_threads_warps", kernel="scale",
    task=("Write `scale(float* y, const float* x, float a, long long n)`: y[i] = a · x[i] for every i < n. "
          "The checker launches it with a fixed grid (4 blocks of 256 threads per SM), far fewer threads "
          "than elements at the large sizes, so each thread must handle several elements, and none past n."),
    starter='''extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];   // one element per thread: not enough threads for large n
}
''',
    hint=("Start at the thread's global index and step by the number of threads in the whole grid, "
          "gridDim.x * blockDim.x, while the index is below n. Use long long: n can exceed 2^31."),
    solution='''extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = a * x[i];
}
''',
    wrong={
        "one element per thread": '''extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
''',
        "off by one at the tail": '''extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i <= n; i += stride)
        y[i] = a * x[i];
}
''',
    },
    sizes=(1, 255, 257, 100_003, 1 << 24 | 5),
    static=_uses_grid_stride,
)


REGISTER_BUDGET = 32


def _within_budget(source: str, res: cuda.KernelResources) -> list[Finding]:
    out = [Finding(res.registers <= REGISTER_BUDGET,
                   f"{res.registers} registers per thread (budget {REGISTER_BUDGET})")]
    out.append(Finding(not res.spills, "no spills" if not res.spills else
                       f"spills {res.spill_store_bytes} B stored / {res.spill_load_bytes} B loaded: the budget was "
                       "met by moving values to local memory (off-chip), which costs more than it saves"))
    return out


ROW_SUMS = KernelExercise(
    name="row_sum_squares_budget", notebook="03_occupancy", kernel="row_sum_squares",
    task=(f"`row_sum_squares(float* out, const float* in, int rows, int cols)`: one thread per row, "
          f"out[r] = Σ_c in[r·cols + c]². The starter is correct but keeps 32 partial sums; "
          f"make it compile to at most {REGISTER_BUDGET} registers per thread with no spills (the checker "
          "reads ptxas's report), and keep it correct at every size."),
    starter='''extern "C" __global__ void row_sum_squares(float* out, const float* in, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = in + (long long)r * cols;
    float part[32] = {0.f};   // 32 partial sums, all live until the end
    int c = 0;
    for (; c + 32 <= cols; c += 32) {
#pragma unroll
        for (int j = 0; j < 32; ++j) part[j] += row[c + j] * row[c + j];
    }
    for (; c < cols; ++c) part[0] += row[c] * row[c];
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 32; ++j) s += part[j];
    out[r] = s;
}
''',
    hint=("Registers hold what is live at once: 32 partial sums are 32 registers before anything else. Two to four "
          "partial sums and a loop unrolled a few times keep enough loads in flight. Capping registers with "
          "__launch_bounds__ alone makes ptxas spill instead."),
    solution='''extern "C" __global__ void row_sum_squares(float* out, const float* in, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = in + (long long)r * cols;
    float s0 = 0.f, s1 = 0.f;
    int c = 0;
#pragma unroll 2
    for (; c + 2 <= cols; c += 2) {
        s0 += row[c] * row[c];
        s1 += row[c + 1] * row[c + 1];
    }
    if (c < cols) s0 += row[c] * row[c];
    out[r] = s0 + s1;
}
''',
    wrong={
        "the starter (too many registers)": "",   # filled below: the starter itself
        "rows past the end": '''extern "C" __global__ void row_sum_squares(float* out, const float* in, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    const float* row = in + (long long)r * cols;
    float s = 0.f;
    for (int c = 0; c < cols; ++c) s += row[c] * row[c];
    out[r] = s;
}
''',
    },
    sizes=(1, 3, 255, 1001, 4099),
    static=_within_budget,
)
ROW_SUMS.wrong["the starter (too many registers)"] = ROW_SUMS.starter

_SHARED_TILE = re.compile(r"__shared__\s+float\s+(\w+)\s*\[\s*(\d+)\s*\]\s*\[\s*(\d+)\s*\]")


def _transpose_tile_checks(source: str, res: cuda.KernelResources) -> list[Finding]:
    """The tile's declared shape through the bank model (a warp reading one column of it), and the
    barrier between the tile's writes and its reads."""

    body = _strip_comments(source)
    m = _SHARED_TILE.search(body)
    if not m:
        return [Finding(False, "no shared tile declared as `__shared__ float tile[32][PITCH]`: the transpose "
                               "goes through a shared-memory tile")]
    name, rows, pitch = m.group(1), int(m.group(2)), int(m.group(3))
    out = []
    if rows < 32 or pitch < 32:
        out.append(Finding(False, f"{name}[{rows}][{pitch}] is smaller than the 32×32 tile a block moves"))
    swizzled = re.search(re.escape(name) + r"\s*\[[^\]]*\]\s*\[[^\]]*\^", body) is not None
    column = memory.bank_conflicts([lane * pitch * 4 for lane in range(32)])
    if swizzled:
        out.append(Finding(True, f"{name}'s column index is XORed: a swizzle puts a column's 32 elements in 32 banks"))
    elif column.ways > 1:
        out.append(Finding(False, f"a warp reading one column of {name}[{rows}][{pitch}] hits one bank {column.ways} "
                                  f"times (bank model, {column.wavefronts} wavefronts instead of 1): pad the pitch "
                                  "or swizzle the column"))
    else:
        out.append(Finding(True, f"a column of {name}[{rows}][{pitch}] spans all 32 banks (bank model: 1 wavefront)"))
    if "__syncthreads" not in body:
        out.append(Finding(False, "no __syncthreads(): threads would read tile elements other threads have not "
                                  "written yet"))
    else:
        out.append(Finding(True, "a barrier separates the tile's writes from its reads"))
    out.append(Finding(res.static_smem_bytes >= 32 * 32 * 4, f"{res.static_smem_bytes} B of static shared memory"))
    return out


_TRANSPOSE_SOLUTION = '''extern "C" __global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][33];   // one float of padding per row: a column spans 32 banks
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {   // read rows of in, coalesced
        int r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x] = in[(long long)r * cols + c];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < 32; dy += blockDim.y) {   // write rows of out (columns of in)
        int r = r0 + threadIdx.x, c = c0 + dy;
        if (r < rows && c < cols) out[(long long)c * rows + r] = tile[threadIdx.x][dy];
    }
}
'''

TRANSPOSE = KernelExercise(
    name="transpose_tile", notebook="05_shared_memory", kernel="transpose",
    task=("Write `transpose(float* out, const float* in, int rows, int cols)`: out (cols × rows) = inᵀ, through a "
          "32×32 shared-memory tile, reading rows of `in` and writing rows of `out` (both coalesced). The launch is "
          "block (32, 8), grid (⌈cols/32⌉, ⌈rows/32⌉). The checker puts your tile's declared shape through the bank "
          "model: reading one column must not make a warp hit one bank many times."),
    starter='''extern "C" __global__ void transpose(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[32][32];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    // 1. each thread copies tile rows dy = threadIdx.y, threadIdx.y + 8, ... from in (mind the edges)
    // 2. wait until the whole tile is written
    // 3. write out's rows from the tile's columns (mind the edges)
}
''',
    hint=("Element (r, c) of the tile is at word r·PITCH + c, in bank (r·PITCH + c) mod 32. A warp reading a column "
          "keeps c fixed and steps r: with PITCH 32 every lane lands in the same bank. Which PITCH spreads them?"),
    solution=_TRANSPOSE_SOLUTION,
    wrong={
        "no padding (32-way conflicts)": _TRANSPOSE_SOLUTION.replace("tile[32][33];   // one float of padding per row: "
                                                                     "a column spans 32 banks", "tile[32][32];"),
        "no barrier": _TRANSPOSE_SOLUTION.replace("    __syncthreads();\n", ""),
        "no edge check on the writes": _TRANSPOSE_SOLUTION.replace(
            "        if (r < rows && c < cols) out[(long long)c * rows + r] = tile[threadIdx.x][dy];",
            "        out[(long long)c * rows + r] = tile[threadIdx.x][dy];"),
    },
    sizes=(1, 31, 257, 1024, 3001),
    static=_transpose_tile_checks,
)

GEMM_SHAPES = ((1, 1, 1), (65, 63, 9), (127, 129, 33), (512, 512, 512), (1000, 333, 77))


def _register_tile_checks(source: str, res: cuda.KernelResources) -> list[Finding]:
    body = _strip_comments(source)
    barriers = body.count("__syncthreads")
    return [
        Finding(res.static_smem_bytes >= 2 * 8 * 64 * 4,
                f"{res.static_smem_bytes} B of static shared memory (the 64×8 and 8×64 stage tiles need 4,096)"),
        Finding(barriers >= 2, f"{barriers} __syncthreads() in the source" + (
            "" if barriers >= 2 else ": a stage needs one after its tiles are written and one after they are read, "
                                     "or the next stage's loads overwrite tiles other threads are still reading")),
        Finding(not res.spills, "no spills" if not res.spills else f"spills {res.spill_store_bytes} B: the "
                                                                  "accumulators went to local memory"),
    ]


_TILE_GEMM_SOLUTION = '''extern "C" __global__ __launch_bounds__(512) void sgemm_tile(const float* A, const float* B, float* C,
                                                             int M, int N, int K) {
    __shared__ float a_tile[8][64];   // a_tile[k][row]: a thread's 8 rows are adjacent
    __shared__ float b_tile[8][64];   // b_tile[k][col]
    const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64, t = threadIdx.x;
    const int my_col = t % 64, my_rows = (t / 64) * 8;          // 8 outputs of one column
    float out[8] = {0.f};
    for (int k0 = 0; k0 < K; k0 += 8) {
        int r = row0 + t / 8, k = k0 + t % 8;                   // 512 threads load 64 x 8 of A ...
        a_tile[t % 8][t / 8] = (r < M && k < K) ? A[(long long)r * K + k] : 0.f;
        int kb = k0 + t / 64, c = col0 + t % 64;                // ... and 8 x 64 of B
        b_tile[t / 64][t % 64] = (kb < K && c < N) ? B[(long long)kb * N + c] : 0.f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            const float b = b_tile[kk][my_col];                 // one shared load feeds 8 FMAs
#pragma unroll
            for (int i = 0; i < 8; ++i) out[i] += a_tile[kk][my_rows + i] * b;
        }
        __syncthreads();
    }
    for (int i = 0; i < 8; ++i) {
        int r = row0 + my_rows + i, c = col0 + my_col;
        if (r < M && c < N) C[(long long)r * N + c] = out[i];
    }
}
'''

TILE_GEMM = KernelExercise(
    name="register_tile_gemm", notebook="06_gemm_ladder", kernel="sgemm_tile",
    task=("Write the ladder's 1-D register-tile rung yourself: `sgemm_tile(const float* A, const float* B, float* C, "
          "int M, int N, int K)`, fp32, row-major, C = A·B. Launch: block (512), grid (⌈N/64⌉, ⌈M/64⌉): a block owns a "
          "64×64 tile of C, stages 64×8 of A and 8×64 of B in shared memory per step of K, and each thread keeps 8 "
          "outputs of one column in registers, so one shared load of B feeds 8 multiply-adds. Any M, N, K must work."),
    starter='''extern "C" __global__ __launch_bounds__(512) void sgemm_tile(const float* A, const float* B, float* C,
                                                             int M, int N, int K) {
    __shared__ float a_tile[8][64];
    __shared__ float b_tile[8][64];
    const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64, t = threadIdx.x;
    const int my_col = t % 64, my_rows = (t / 64) * 8;
    float out[8] = {0.f};
    // for each step of 8 along K: load the two tiles (zeros outside the matrices), wait,
    // accumulate out[i] += A[my_rows + i][k] * B[k][my_col], wait again
    for (int i = 0; i < 8; ++i) {
        int r = row0 + my_rows + i, c = col0 + my_col;
        if (r < M && c < N) C[(long long)r * N + c] = out[i];
    }
}
''',
    hint=("512 threads load 512 elements of each tile: thread t takes A's row t/8, column t%8, and B's row t/64, "
          "column t%64. Store A transposed (a_tile[k][row]) so a thread's 8 rows are adjacent. Two barriers per step."),
    solution=_TILE_GEMM_SOLUTION,
    wrong={
        "one barrier per step": _TILE_GEMM_SOLUTION.replace(
            "            for (int i = 0; i < 8; ++i) out[i] += a_tile[kk][my_rows + i] * b;\n        }\n        __syncthreads();",
            "            for (int i = 0; i < 8; ++i) out[i] += a_tile[kk][my_rows + i] * b;\n        }"),
        "no zeros outside the matrices": _TILE_GEMM_SOLUTION.replace(
            "(r < M && k < K) ? A[(long long)r * K + k] : 0.f", "A[(long long)r * K + k]").replace(
            "(kb < K && c < N) ? B[(long long)kb * N + c] : 0.f", "B[(long long)kb * N + c]"),
    },
    sizes=tuple(range(len(GEMM_SHAPES))),
    size_labels=tuple(f"{m}×{n}×{k}" for m, n, k in GEMM_SHAPES),
    static=_register_tile_checks,
)

# ---- notebook 11's capstone: a kernel with several defects, none of them named in its source

MYSTERY_THREADS = 256                 # the checker's block size: ⌈rows / ROWS_PER_BLOCK⌉ blocks of 256 threads
MYSTERY_TIMED_SHAPE = (16384, 4096)   # rows × cols of the timed run (256 MiB in, 256 MiB out)
MYSTERY_SHAPES = ((1, 1), (3, 1025), (257, 1000), (1000, 33), (4097, 1024), (16384, 1024), (77, 4099))
MYSTERY_DEFECTS = ("idle SMs", "uncoalesced loads", "local memory", "edges")
_ROWS_PER_BLOCK = re.compile(r"#define\s+ROWS_PER_BLOCK\s+(\d+)")
_COMPARES_ROWS = re.compile(r"[<>]=?\s*rows\b|\brows\s*[<>]")


def rows_per_block(source: str) -> int | None:
    """The ROWS_PER_BLOCK the learner's source defines (the checker's launch reads it), or None."""
    m = _ROWS_PER_BLOCK.search(_strip_comments(source))
    return int(m.group(1)) if m else None


def _target_sm_count() -> int:
    """This GPU's SMs live; the recorded GPU's in replay."""

    info = hardware.detect() if runtime.mode() == "live" else None
    return info.sm_count if info else hardware.spec(runtime.replay_gpu()).sm_count


def _lanes_per_row_finding(per_block: int, cols: int) -> Finding:
    """The sector model for one warp's 4-byte load when ROWS_PER_BLOCK rows share a block's 256 threads
    and lane i of a row reads its element i: coalesced when every fetched byte is used."""

    lanes_per_row = max(1, MYSTERY_THREADS // per_block)
    per_warp = min(32, lanes_per_row)
    addresses = [(lane // per_warp) * cols * 4 + (lane % per_warp) * 4 for lane in range(32)]
    sc = memory.sector_count(addresses, 4)
    rows_hit = 32 // per_warp
    text = (f"uncoalesced loads: {lanes_per_row} thread{'s' if lanes_per_row > 1 else ''} per row, so one warp's load "
            f"covers {rows_hit} row{'s' if rows_hit > 1 else ''}" + (f" {cols * 4:,} B apart (at {cols:,} columns)" if rows_hit > 1 else "")
            + f": {sc.n_sectors} sectors for {sc.requested_bytes} B, {100 * sc.efficiency:.1f}% of the fetched bytes used "
            "(sector model, 4-byte loads, lane i reading element i of its row)")
    return Finding(sc.efficiency >= 1.0, text)


def _target_resident_blocks(threads: int, res: cuda.KernelResources) -> int:
    """Resident blocks per SM of a kernel on this GPU (the recorded GPU's in replay): the occupancy model."""

    info = hardware.detect() if runtime.mode() == "live" else None
    budget = occupancy.budget_from_device(info) if info else occupancy.budget(runtime.replay_gpu())
    return occupancy.residency(budget, threads, res.registers, res.static_smem_bytes).resident_blocks


def _row_launch_problem(per_block: int | None) -> Finding | None:
    if per_block is None or per_block < 1 or MYSTERY_THREADS % per_block:
        return Finding(False, "define ROWS_PER_BLOCK as a divisor of 256 (#define ROWS_PER_BLOCK 8, say): the "
                              f"checker launches ⌈rows / ROWS_PER_BLOCK⌉ blocks of {MYSTERY_THREADS} threads")
    return None


def _row_launch(source: str) -> dict | None:
    per_block = rows_per_block(source)
    return None if _row_launch_problem(per_block) else {"rows_per_block": per_block}


def _mystery_checks(source: str, res: cuda.KernelResources) -> list[Finding]:
    """One finding per defect of the capstone, each from a course model or the compile report."""

    body = _strip_comments(source)
    per_block = rows_per_block(source)
    if (problem := _row_launch_problem(per_block)) is not None:
        return [problem]
    rows, cols = MYSTERY_TIMED_SHAPE
    sms = _target_sm_count()
    blocks = -(-rows // per_block)
    resident = _target_resident_blocks(MYSTERY_THREADS, res)
    s = waves.schedule(blocks, sms, resident)
    out = [Finding(blocks >= 2 * sms,
                   f"idle SMs: {blocks:,} blocks of {MYSTERY_THREADS} threads for {rows:,} rows (the timed shape) on "
                   f"{sms} SMs, up to {resident} resident per SM (occupancy model): {s.waves} wave{'s' if s.waves > 1 else ''}"
                   + (f", and {sms - blocks} SMs with no work at all" if blocks < sms else
                      f", {blocks / sms:.1f} blocks per SM" + (": too few to hide latency" if blocks < 2 * sms else "")))]
    out.append(_lanes_per_row_finding(per_block, cols))
    local = res.stack_frame_bytes + res.spill_store_bytes
    out.append(Finding(local == 0, "local memory: none (no stack frame, no spills)" if local == 0 else
                       f"local memory: {res.stack_frame_bytes:,} B stack frame per thread, {res.spill_store_bytes} B "
                       "spilled: an array indexed at run time cannot live in registers, so it lives in local memory (device "
                       "memory, cached in L1 and L2)"))
    guarded = _COMPARES_ROWS.search(body) is not None
    out.append(Finding(guarded, "edges: the kernel compares a row index with rows (the live run tests every edge)"
                       if guarded else "edges: nothing compares a row index with rows, so the last block's extra "
                       "rows read and write past the arrays when rows is not a multiple of ROWS_PER_BLOCK"))
    return out


_MYSTERY_STARTER = '''#define ROWS_PER_BLOCK 256

extern "C" __global__ void rms_norm(float* out, const float* in, const float* weight, int rows, int cols) {
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x;
    float x[1024];
    float sum_sq = 0.0f;
    for (int c = 0; c < cols; ++c) {
        x[c] = in[row * cols + c];
        sum_sq += x[c] * x[c];
    }
    float scale = rsqrtf(sum_sq / cols + 1e-6f);
    for (int c = 0; c < cols; ++c)
        out[row * cols + c] = x[c] * scale * weight[c];
}
'''

MYSTERY_SCALAR_FIX = '''#define ROWS_PER_BLOCK 8   // one warp per row: 8 warps of a 256-thread block

extern "C" __global__ void rms_norm(float* out, const float* in, const float* weight, int rows, int cols) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= rows) return;                        // a whole warp leaves together: no barrier is skipped
    const float* x = in + (long long)row * cols;
    float sum_sq = 0.0f;
    for (int c = lane; c < cols; c += 32)           // lane i reads element i: 4 sectors per request
        sum_sq += x[c] * x[c];
    for (int step = 16; step > 0; step /= 2)        // the warp's 32 partial sums, added in registers
        sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, step);
    const float scale = rsqrtf(sum_sq / cols + 1e-6f);
    float* y = out + (long long)row * cols;
    for (int c = lane; c < cols; c += 32)           // the row is read twice: ncu's DRAM bytes say from where
        y[c] = x[c] * scale * weight[c];
}
'''

_MYSTERY_SOLUTION = '''#define ROWS_PER_BLOCK 8   // one warp per row: 8 warps of a 256-thread block

extern "C" __global__ void rms_norm(float* out, const float* in, const float* weight, int rows, int cols) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= rows) return;                         // a whole warp leaves together
    const float* x = in + (long long)row * cols;
    float* y = out + (long long)row * cols;
    const int quads = cols % 4 == 0 ? cols / 4 : 0;  // 16-byte loads need 16-byte aligned rows
    float sum_sq = 0.0f;
    for (int i = lane; i < quads; i += 32) {         // lane i reads floats 4i..4i+3
        const float4 v = reinterpret_cast<const float4*>(x)[i];
        sum_sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (int c = 4 * quads + lane; c < cols; c += 32)   // rows whose length is not a multiple of 4
        sum_sq += x[c] * x[c];
    for (int step = 16; step > 0; step /= 2)         // the warp's 32 partial sums, added in registers
        sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, step);
    const float scale = rsqrtf(sum_sq / cols + 1e-6f);
    for (int i = lane; i < quads; i += 32) {
        const float4 v = reinterpret_cast<const float4*>(x)[i], w = reinterpret_cast<const float4*>(weight)[i];
        reinterpret_cast<float4*>(y)[i] = make_float4(v.x * scale * w.x, v.y * scale * w.y, v.z * scale * w.z, v.w * scale * w.w);
    }
    for (int c = 4 * quads + lane; c < cols; c += 32)
        y[c] = x[c] * scale * weight[c];
}
'''

MYSTERY = KernelExercise(
    name="mystery_rms_norm", notebook="11_failure_lab", kernel="rms_norm",
    task=("Make `rms_norm(out, in, weight, rows, cols)` correct at every shape and fast: out[r, c] = in[r, c] · "
          "weight[c] / √(mean_c in[r, c]² + 10⁻⁶), rows × cols float32, row-major. The checker launches "
          f"⌈rows / ROWS_PER_BLOCK⌉ blocks of {MYSTERY_THREADS} threads, with ROWS_PER_BLOCK read from your source."),
    starter=_MYSTERY_STARTER,
    hint=("Ask of the kernel what the course asked of every other: how many warps does the launch give each SM, how "
          "many sectors does one warp's load touch, where does the compiler put `x`, and what happens to the last block."),
    solution=_MYSTERY_SOLUTION,
    wrong={
        "the mystery as given": _MYSTERY_STARTER,
        "one warp per row, no row guard": MYSTERY_SCALAR_FIX.replace(
            "    if (row >= rows) return;                        // a whole warp leaves together: no barrier is skipped\n", ""),
        "one warp per row, the row kept in a local array": MYSTERY_SCALAR_FIX.replace(
            "    float sum_sq = 0.0f;\n", "    float keep[128];                                // up to 4,096 columns\n"
            "    float sum_sq = 0.0f;\n").replace("        sum_sq += x[c] * x[c];", "        keep[c / 32] = x[c], sum_sq += x[c] * x[c];"
            ).replace("        y[c] = x[c] * scale * weight[c];", "        y[c] = keep[c / 32] * scale * weight[c];"),
        "one thread per row, guarded": _MYSTERY_STARTER.replace(
            "    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x;\n",
            "    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x;\n    if (row >= rows) return;\n"),
    },
    **_shape_cases(MYSTERY_SHAPES),
    static=_mystery_checks,
    launch=_row_launch,
)

# ---- notebook 04: row sums whose loads are coalesced

def _warp_row_sum_checks(source: str, res: cuda.KernelResources) -> list[Finding]:
    body = _strip_comments(source)
    per_block = rows_per_block(source)
    if (problem := _row_launch_problem(per_block)) is not None:
        return [problem]
    out = [_lanes_per_row_finding(per_block, MYSTERY_TIMED_SHAPE[1])]
    if MYSTERY_THREADS // per_block > 1:
        combined = "__shfl" in body or "__shared__" in body or "atomicAdd" in body
        out.append(Finding(combined, "the partial sums of a row's threads are combined (a shuffle, shared memory or "
                                     "an atomic)" if combined else "several threads share a row, but nothing combines "
                                     "their partial sums: use __shfl_xor_sync (or shared memory)"))
    return out


_WARP_ROW_SUMS_STARTER = '''#define ROWS_PER_BLOCK 256   // one thread per row

extern "C" __global__ void row_sums(float* out, const float* in, int rows, int cols) {
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x;
    if (row >= rows) return;
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c)
        sum += in[(long long)row * cols + c];
    out[row] = sum;
}
'''

_WARP_ROW_SUMS_SOLUTION = '''#define ROWS_PER_BLOCK 8   // one warp per row

extern "C" __global__ void row_sums(float* out, const float* in, int rows, int cols) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    if (row >= rows) return;                       // the whole warp leaves together
    const float* x = in + (long long)row * cols;
    float sum = 0.0f;
    for (int c = lane; c < cols; c += 32)          // lane i reads element i: one warp load, 4 sectors
        sum += x[c];
    for (int step = 16; step > 0; step /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, step);
    if (lane == 0) out[row] = sum;
}
'''

WARP_ROW_SUMS = KernelExercise(
    name="warp_row_sums", notebook="04_coalescing", kernel="row_sums",
    task=("Write `row_sums(float* out, const float* in, int rows, int cols)`: out[r] = Σ_c in[r, c], rows × cols "
          f"float32, row-major, launched as ⌈rows / ROWS_PER_BLOCK⌉ blocks of {MYSTERY_THREADS} threads with "
          "ROWS_PER_BLOCK read from your source. The starter gives each thread a row, so a warp's 32 lanes read 32 "
          "rows at once; make the lanes of a warp read neighbouring elements of one row."),
    starter=_WARP_ROW_SUMS_STARTER,
    hint=("Give each row a whole warp (ROWS_PER_BLOCK 8): lane i starts at column i and steps by 32, so one load "
          "instruction covers 32 consecutive floats. Each lane then holds a partial sum; five __shfl_xor_sync steps "
          "(16, 8, 4, 2, 1) add them, and lane 0 writes the row's result."),
    solution=_WARP_ROW_SUMS_SOLUTION,
    wrong={
        "the starter (one thread per row)": _WARP_ROW_SUMS_STARTER,
        "a warp per row, partial sums never combined": _WARP_ROW_SUMS_SOLUTION.replace(
            "    for (int step = 16; step > 0; step /= 2)\n        sum += __shfl_xor_sync(0xffffffffu, sum, step);\n", ""),
        "a warp per row, no row guard": _WARP_ROW_SUMS_SOLUTION.replace(
            "    if (row >= rows) return;                       // the whole warp leaves together\n", ""),
    },
    **_shape_cases(MYSTERY_SHAPES),
    static=_warp_row_sum_checks,
    launch=_row_launch,
)

# ---- notebook 07: a persistent grid that walks the tiles

TILE_EDGE = 64
TILE_SHAPES = ((1, 1), (65, 63), (1000, 333), (130, 4099), (4097, 4097))
TILE_TIMED_SHAPE = (8192, 8192)


def persistent_blocks(sm_count: int, max_threads_per_sm: int) -> int:
    """The checker's persistent grid: as many 256-thread blocks as every SM holds at once."""
    return sm_count * max(1, max_threads_per_sm // 256)


def _target_threads_per_sm() -> int:
    info = hardware.detect() if runtime.mode() == "live" else None
    return info.max_threads_per_sm if info else hardware.spec(runtime.replay_gpu()).max_threads_per_sm


def _persistent_tile_checks(source: str, res: cuda.KernelResources) -> list[Finding]:
    body = _strip_comments(source)
    rows, cols = TILE_TIMED_SHAPE
    grid = waves.tile_grid(rows, cols, TILE_EDGE, TILE_EDGE)
    blocks = persistent_blocks(_target_sm_count(), _target_threads_per_sm())
    most, fewest = -(-grid.blocks // blocks), grid.blocks // blocks
    out = [Finding("gridDim" in body, f"the kernel reads gridDim, so its {blocks:,} blocks can walk all the tiles (at "
                                      f"{rows:,}²: {grid.blocks:,} tiles of {TILE_EDGE}², {fewest} or {most} per block)"
                   if "gridDim" in body else f"the kernel never reads gridDim: with {blocks:,} blocks (all the SMs hold "
                   "at once) it "
                   f"cannot reach the {grid.blocks:,} tiles of a matrix of {rows:,}²; loop over tiles, stepping by gridDim.x")]
    masked = _COMPARES_ROWS.search(body) is not None and re.search(r"[<>]=?\s*cols\b|\bcols\s*[<>]", body) is not None
    out.append(Finding(masked, "edge tiles are masked against rows and cols" if masked else
                       "nothing compares with both rows and cols: the edge tiles of a matrix that is not a multiple "
                       f"of {TILE_EDGE} would read and write outside it"))
    return out


_PERSISTENT_STARTER = '''#define TILE 64   // a block scales one 64 x 64 tile at a time; 256 threads, 16 rows each

extern "C" __global__ void scale_tiles(float* out, const float* in, float a, int rows, int cols) {
    const int tiles_n = (cols + TILE - 1) / TILE;
    const int tile = blockIdx.x;                  // one tile per block: only gridDim.x tiles get done
    const int r0 = (tile / tiles_n) * TILE, c0 = (tile % tiles_n) * TILE;
    const int c = c0 + threadIdx.x % TILE;
    for (int r = r0 + threadIdx.x / TILE; r < r0 + TILE; r += 256 / TILE)
        if (r < rows && c < cols) out[(long long)r * cols + c] = a * in[(long long)r * cols + c];
}
'''

_PERSISTENT_SOLUTION = '''#define TILE 64   // a block scales one 64 x 64 tile at a time; 256 threads, 16 rows each

extern "C" __global__ void scale_tiles(float* out, const float* in, float a, int rows, int cols) {
    const int tiles_n = (cols + TILE - 1) / TILE;
    const int tiles = ((rows + TILE - 1) / TILE) * tiles_n;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {   // tile j goes to block j mod gridDim.x
        const int r0 = (tile / tiles_n) * TILE, c0 = (tile % tiles_n) * TILE;
        const int c = c0 + threadIdx.x % TILE;
        for (int r = r0 + threadIdx.x / TILE; r < r0 + TILE; r += 256 / TILE)
            if (r < rows && c < cols) out[(long long)r * cols + c] = a * in[(long long)r * cols + c];
    }
}
'''

PERSISTENT_TILES = KernelExercise(
    name="persistent_tiles", notebook="07_waves", kernel="scale_tiles",
    task=("Write `scale_tiles(out, in, a, rows, cols)`: out = a · in over a rows × cols float32 matrix cut into "
          f"{TILE_EDGE} × {TILE_EDGE} tiles, launched as a persistent grid: as many blocks of 256 threads as the SMs "
          "hold at once, however many tiles there are. Each block must loop over tiles, and the edge tiles must be masked."),
    starter=_PERSISTENT_STARTER,
    hint=("Number the tiles 0 … tiles − 1 in row-major order and let block b take tiles b, b + gridDim.x, "
          "b + 2·gridDim.x, …: the same order a persistent GEMM uses. Keep the starter's tile body."),
    solution=_PERSISTENT_SOLUTION,
    wrong={
        "the starter (one tile per block)": _PERSISTENT_STARTER,
        "no edge mask": _PERSISTENT_SOLUTION.replace("            if (r < rows && c < cols) out", "            out"),
    },
    **_shape_cases(TILE_SHAPES),
    static=_persistent_tile_checks,
)


# ---- notebook 08: the epilogue fused into one pass

FUSED_SHAPES = ((1, 1), (3, 5), (257, 1000), (1000, 33), (4097, 1024))
FUSED_TIMED_SHAPE = (16384, 4096)


def _fused_epilogue_checks(source: str, res: cuda.KernelResources) -> list[Finding]:
    body = _strip_comments(source)
    kernels = re.findall(r"__global__", body)
    out = [Finding(len(kernels) == 1, "one kernel: the three steps in one pass" if len(kernels) == 1 else
                   f"{len(kernels)} kernels in the cell: fuse the steps into bias_gelu_residual alone (each extra "
                   "pass would write its result to HBM and read it back)")]
    out.append(Finding(not res.spills, "no spills" if not res.spills else
                       f"spills {res.spill_store_bytes} B: the fused kernel keeps too much per thread"))
    return out


_FUSED_STARTER = '''// Three passes over HBM: each writes its whole result and the next reads it back.
extern "C" __global__ void add_bias(float* y, const float* x, const float* bias, int cols, long long total) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < total) y[i] = x[i] + bias[i % cols];
}
extern "C" __global__ void gelu(float* y, const float* x, long long total) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < total) y[i] = 0.5f * x[i] * (1.0f + tanhf(0.7978845608f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}
extern "C" __global__ void add_residual(float* y, const float* x, const float* residual, long long total) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < total) y[i] = x[i] + residual[i];
}

// One pass: out = gelu(x + bias[column]) + residual. The checker launches ceil(total / 256) blocks of 256.
extern "C" __global__ void bias_gelu_residual(float* out, const float* x, const float* bias, const float* residual,
                                              int cols, long long total) {
}
'''

_FUSED_SOLUTION = '''// out = gelu(x + bias[column]) + residual, one element per thread, in one pass.
extern "C" __global__ void bias_gelu_residual(float* out, const float* x, const float* bias, const float* residual,
                                              int cols, long long total) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= total) return;
    const float v = x[i] + bias[i % cols];   // the intermediates stay in registers
    out[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))) + residual[i];
}
'''

FUSED_EPILOGUE = KernelExercise(
    name="fused_epilogue", notebook="08_fusion", kernel="bias_gelu_residual",
    task=("Fuse three elementwise passes (add a bias per column, GELU, add a residual) into one kernel, "
          "`bias_gelu_residual(out, x, bias, residual, cols, total)` on a row-major float32 matrix of `total` "
          "elements, launched as ⌈total / 256⌉ blocks of 256. Delete the three unfused kernels when you are done."),
    starter=_FUSED_STARTER,
    hint=("Compute v = x[i] + bias[i % cols] into a register, apply GELU to v, add residual[i], and store once: "
          "the kernel reads x and residual and writes out, one pass, where the three kernels made three."),
    solution=_FUSED_SOLUTION,
    wrong={
        "the starter (empty fused kernel, three passes left)": _FUSED_STARTER,
        "bias indexed by row": _FUSED_SOLUTION.replace("bias[i % cols]", "bias[i / cols]"),
    },
    **_shape_cases(FUSED_SHAPES),
    static=_fused_epilogue_checks,
)


# ---- notebook 09: a two-stage cp.async pipeline

PIPELINE_THREADS = 256
PIPELINE_TILE_BYTES = PIPELINE_THREADS * 4 * 16        # 16 KiB: four float4s per thread
PIPELINE_SIZES = (4, 1028, 65540, 1 << 20, (1 << 26) + 4)

_PIPELINE_HELPERS = '''#define THREADS 256
#define VECS 4                           // float4s per thread per tile
#define TILE (THREADS * VECS)            // float4s per tile: 16 KiB

// Copy 16 bytes global -> shared without passing through registers; zero-fill when !valid.
__device__ void copy16_async(float4* smem, const float4* gmem, bool valid) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(s), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
}
__device__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Wait until at most N of this thread's committed groups are still in flight.
template <int N> __device__ void wait_copies() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

__device__ float sum_squares4(float4 v) { return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }
__device__ void add_block_total(float* out, float acc) {   // one atomic per warp
    for (int step = 16; step > 0; step /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, step);
    if (threadIdx.x % 32 == 0) atomicAdd(out, acc);
}
'''

_PIPELINE_STARTER = _PIPELINE_HELPERS + '''
// out[0] += the sum of squares of in[0 .. n), n a multiple of 4. Launch: one block of 256 threads per SM.
extern "C" __global__ void sum_squares(float* out, const float* in, long long n) {
    const long long n4 = n / 4;
    const float4* in4 = reinterpret_cast<const float4*>(in);
    float acc = 0.0f;
#pragma unroll 1
    for (long long i = blockIdx.x * (long long)THREADS + threadIdx.x; i < n4; i += (long long)gridDim.x * THREADS)
        acc += sum_squares4(in4[i]);     // one 16-byte load in flight per thread, waited for at once
    add_block_total(out, acc);
}
'''

_PIPELINE_SOLUTION = _PIPELINE_HELPERS + '''
// out[0] += the sum of squares of in[0 .. n), n a multiple of 4. Launch: one block of 256 threads per SM.
extern "C" __global__ void sum_squares(float* out, const float* in, long long n) {
    __shared__ __align__(16) float4 slot[2][TILE];            // two stages of 16 KiB
    const long long n4 = n / 4, tiles = (n4 + TILE - 1) / TILE;
    const float4* in4 = reinterpret_cast<const float4*>(in);
    auto issue = [&](long long tile, int s) {                 // this thread's four float4s of a tile
        for (int v = 0; v < VECS; ++v) {
            const long long i = tile * TILE + v * THREADS + threadIdx.x;
            copy16_async(&slot[s][v * THREADS + threadIdx.x], in4 + (i < n4 ? i : 0), i < n4);
        }
        commit_copies();
    };
    float acc = 0.0f;
    int s = 0;
    if (blockIdx.x < tiles) issue(blockIdx.x, 0);
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x, s ^= 1) {
        if (tile + gridDim.x < tiles) issue(tile + gridDim.x, s ^ 1);   // the next tile flies while this one is summed
        else commit_copies();                                         // an empty group: the count stays right
        wait_copies<1>();                                             // this tile's group has landed
        for (int v = 0; v < VECS; ++v)                                // each thread reads only what it copied
            acc += sum_squares4(slot[s][v * THREADS + threadIdx.x]);
    }
    add_block_total(out, acc);
}
'''


def _pipeline_checks(source: str, res: cuda.KernelResources) -> list[Finding]:
    body = _strip_comments(source)
    kernel_body = body[body.find("sum_squares(float* out"):]
    copies, waits = "copy16_async(" in kernel_body, "wait_copies<" in kernel_body
    out = [Finding(copies and waits, "the kernel copies with cp.async and waits on its groups" if copies and waits else
                   "the kernel never waits (wait_copies): it could sum a tile before its bytes have landed" if copies
                   else "the kernel does not call copy16_async: its loads are still synchronous")]
    stages = res.static_smem_bytes // PIPELINE_TILE_BYTES
    out.append(Finding(stages >= 2, f"{res.static_smem_bytes:,} B of shared memory: {stages} stage"
                       f"{'s' if stages != 1 else ''} of {PIPELINE_TILE_BYTES // 1024} KiB"
                       + (f", so {stages - 1} tile{'s' if stages > 2 else ''} can be in flight while one is summed"
                          if stages >= 2 else ": with fewer than two stages nothing is in flight during the math")))
    return out


ASYNC_PIPELINE = KernelExercise(
    name="async_pipeline", notebook="09_async_pipelines", kernel="sum_squares",
    task=("Turn a synchronous sum of squares into a two-stage cp.async pipeline: one block of 256 threads per SM, "
          "16 KiB tiles, each block copying its next tile into shared memory while it sums the current one. The "
          "helpers for the copies are given; write the loop."),
    starter=_PIPELINE_STARTER,
    hint=("Declare two 16 KiB slots. Before the loop, issue (copy and commit) the block's first tile. In the loop, "
          "issue the next tile into the other slot, then wait_copies<1>() (all but the newest group have landed), "
          "then sum the current slot. If a thread reads only what it copied itself, it needs no barrier."),
    solution=_PIPELINE_SOLUTION,
    wrong={
        "the starter (synchronous loads)": _PIPELINE_STARTER,
        "waits for nothing": _PIPELINE_SOLUTION.replace("        wait_copies<1>();                                             // this tile's group has landed\n", ""),
    },
    sizes=PIPELINE_SIZES,
    static=_pipeline_checks,
    min_cc=8.0,
)

# ---- notebook 10: a warp-specialized pipeline with full and empty mbarriers

SPECIALIZED_TILE_BYTES = 8 * 1024
SPECIALIZED_THREADS = 160   # warp 0: the producer (lane 0); warps 1-4: the consumers

_SPECIALIZED_HEAD = '''#define ASYNC_WAIT_NS 500000000ull   // a barrier wait that lasts 0.5 s traps instead of hanging
#include "async_copy.cuh"            // smem_u32, mbar_init, mbar_init_fence, mbar_arrive, mbar_expect_bytes, mbar_wait
#define STAGES 4
#define CONSUMERS 128                // warps 1-4 sum; lane 0 of warp 0 is the producer
#define TILE4 512                    // float4s per tile (8 KiB): four per consumer thread

// One TMA bulk copy, global -> shared; the barrier counts its bytes as they land.
__device__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// A consumer is done with a slot: order its reads before the TMA's refill, then count it on `empty`.
__device__ void release(u32 empty) { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); mbar_arrive(empty); }
__device__ float sum_squares4(float4 v) { return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }

// out[0] += the sum of squares of in[0 .. n), n a multiple of 4. Launch: one block of 160 threads per SM.
extern "C" __global__ void sum_squares(float* out, const float* in, long long n) {
    __shared__ __align__(128) float4 slot[STAGES][TILE4];
    __shared__ __align__(8) u64 full[STAGES], empty[STAGES];
    const long long n4 = n / 4, tiles = (n4 + TILE4 - 1) / TILE4;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) { mbar_init(smem_u32(&full[s]), 1); mbar_init(smem_u32(&empty[s]), CONSUMERS); }
        mbar_init_fence();
    }
    __syncthreads();
    float acc = 0.0f;
    if (threadIdx.x == 0) {                               // the producer
        for (long long t = blockIdx.x, j = 0; t < tiles; t += gridDim.x, ++j) {
            const int s = (int)(j % STAGES);
'''
_SPECIALIZED_MIDDLE = '''        }
    } else if (threadIdx.x >= 32) {                       // the consumers
        const int c = threadIdx.x - 32;
        for (long long t = blockIdx.x, j = 0; t < tiles; t += gridDim.x, ++j) {
            const int s = (int)(j % STAGES);
'''
_SPECIALIZED_TAIL = '''        }
    }
    for (int step = 16; step > 0; step /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, step);
    if (threadIdx.x % 32 == 0) atomicAdd(out, acc);
}
'''
_SPECIALIZED_PRODUCER = '''            mbar_wait(smem_u32(&empty[s]), (u32)((j / STAGES) & 1) ^ 1u);   // its previous use is read (none yet: at once)
            const u32 bytes = (u32)min((long long)TILE4, n4 - t * TILE4) * 16;             // the last tile is short
            mbar_expect_bytes(smem_u32(&full[s]), bytes);
            bulk_load(smem_u32(slot[s]), in + t * TILE4 * 4, bytes, smem_u32(&full[s]));
'''
_SPECIALIZED_CONSUMER = '''            mbar_wait(smem_u32(&full[s]), (u32)((j / STAGES) & 1));   // use j / STAGES of slot s has landed
            for (int v = 0; v < TILE4 / CONSUMERS; ++v) {
                const int e = v * CONSUMERS + c;
                if (t * TILE4 + e < n4) acc += sum_squares4(slot[s][e]);
            }
            release(smem_u32(&empty[s]));
'''
_SPECIALIZED_STARTER = (_SPECIALIZED_HEAD
                        + "            // TODO: wait until the consumers have emptied slot s, tell full[s] how many bytes\n"
                          "            // to expect, and bulk-load tile t into it.\n"
                        + _SPECIALIZED_MIDDLE
                        + "            // TODO: wait until slot s is full, sum your float4s of it, release it.\n"
                        + _SPECIALIZED_TAIL)
_SPECIALIZED_SOLUTION = (_SPECIALIZED_HEAD + _SPECIALIZED_PRODUCER + _SPECIALIZED_MIDDLE + _SPECIALIZED_CONSUMER
                         + _SPECIALIZED_TAIL)


def _specialized_checks(source: str, res: cuda.KernelResources) -> list[Finding]:
    body = _strip_comments(source)
    kernel_body = body[body.find("sum_squares(float* out"):]
    loads, counts = "bulk_load(" in kernel_body, "mbar_expect_bytes(" in kernel_body
    waits = kernel_body.count("mbar_wait(")
    releases = "release(" in kernel_body or "mbar_arrive(" in kernel_body
    if loads and counts:
        copies = Finding(True, "the producer bulk-loads tiles and sets the bytes each full barrier expects")
    elif not loads:
        copies = Finding(False, "no tile is loaded: the producer must call mbar_expect_bytes and bulk_load")
    else:
        copies = Finding(False, "the bulk loads are never counted: call mbar_expect_bytes before each bulk_load")
    if waits >= 2 and releases:
        handoff = Finding(True, "both roles wait on a barrier and the consumers release their slots")
    else:
        handoff = Finding(False, f"{waits} barrier wait{'s' * (waits != 1)}"
                          + ("" if releases else " and no slot released")
                          + ": the consumers must wait on full[s] and release it; the producer must wait on empty[s]")
    if not loads:   # the compiler drops slots nothing writes or reads: their size says nothing yet
        return [copies, handoff]
    stages = res.static_smem_bytes // SPECIALIZED_TILE_BYTES
    ring = Finding(stages >= 2, f"{res.static_smem_bytes:,} B of shared memory: {stages} slot"
                   f"{'s' * (stages != 1)} of {SPECIALIZED_TILE_BYTES // 1024} KiB")
    return [copies, handoff, ring]


WARP_SPECIALIZED = KernelExercise(
    name="warp_specialized", notebook="10_hopper_gemm", kernel="sum_squares",
    task=("Fill in the two roles of a warp-specialized pipeline: a producer that refills four 8 KiB slots with TMA "
          "bulk copies, and four consumer warps that sum squares out of them, handing slots back and forth through "
          "a full and an empty mbarrier per slot. The barriers, the helpers and the loops are given; write the "
          "waits, the byte counts, the copies, the reads and the releases."),
    starter=_SPECIALIZED_STARTER,
    hint=("Tile j of the block uses slot s = j % STAGES for the (j / STAGES)-th time, so the phase it waits for "
          "has parity (j / STAGES) & 1. Consumers wait on full[s] with that parity. The producer waits on empty[s] "
          "for the phase before it, parity ((j / STAGES) & 1) ^ 1, which a fresh barrier counts as complete: on "
          "the first round the wait succeeds at once. The last tile may be short: expect and copy "
          "min(TILE4, n4 - t * TILE4) * 16 bytes, and read no float4 past n4."),
    solution=_SPECIALIZED_SOLUTION,
    wrong={
        "the starter (nothing loaded)": _SPECIALIZED_STARTER,
        "the consumers never flip the phase": _SPECIALIZED_SOLUTION.replace(
            "mbar_wait(smem_u32(&full[s]), (u32)((j / STAGES) & 1));", "mbar_wait(smem_u32(&full[s]), 0u);"),
        "a whole tile expected for the short last one": _SPECIALIZED_SOLUTION.replace(
            "mbar_expect_bytes(smem_u32(&full[s]), bytes);", "mbar_expect_bytes(smem_u32(&full[s]), TILE4 * 16);"),
    },
    sizes=PIPELINE_SIZES,
    static=_specialized_checks,
    min_cc=9.0,
    fault_hint=("Here that most likely means a barrier wait that never completed: after 0.5 s mbar_wait traps. "
                "Check each wait's parity and that each mbar_expect_bytes counts exactly the bytes its copy brings"),
)


EXERCISES: dict[str, KernelExercise] = {e.name: e for e in (SCALE, ROW_SUMS, WARP_ROW_SUMS, TRANSPOSE, TILE_GEMM,
                                                            PERSISTENT_TILES, FUSED_EPILOGUE, ASYNC_PIPELINE,
                                                            WARP_SPECIALIZED, MYSTERY)}


def exercise(name: str) -> KernelExercise:
    if name not in EXERCISES:
        raise KeyError(f"no kernel exercise {name!r}; there are: {', '.join(EXERCISES)}")
    return EXERCISES[name]
