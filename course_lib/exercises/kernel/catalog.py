"""The course's write-it-yourself kernel exercises. Each is one ``KernelExercise``: the task, a hint,
its CUDA files (``kernels/exercises/<name>/``: the starter the learner edits, a hidden reference
solution, deliberately wrong solutions that tests pass through the checker to see them rejected),
the sizes a live run uses, the static checks that read the source and the compile report, and
its live cases (``live``, a function of ``cases``) that the checker's child process runs.
``kernel_exercises`` checks a learner's cell against one of them."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from course_lib.core import cuda, hardware, runtime
from course_lib.exercises.kernel import cases
from course_lib.exercises.kernel.cases import (
    DECODE_GROUP,
    DECODE_SHAPES,
    DECODE_TIMED_SHAPE,
    FUSED_SHAPES,
    GEMM_SHAPES,
    MYSTERY_SHAPES,
    MYSTERY_TIMED_SHAPE,
    PIPELINE_THREADS,
    TILE_SHAPES,
    TILE_TIMED_SHAPE,
    WGMMA_SHAPES,
    persistent_blocks,
)
from course_lib.launch.exercise_kernels import (
    MYSTERY_RMS_NORM,
    MYSTERY_THREADS,
    TRANSPOSE_TILE,
    ExerciseKernel,
    numeric_defines,
    rows_per_block,
    strip_comments,
)
from course_lib.models import memory, occupancy, waves


def _shape_cases(shapes: tuple[tuple[int, int], ...]) -> dict:
    """An exercise run at rows × cols shapes: the runner gets each shape's index, the learner reads the shape."""
    return {"sizes": tuple(range(len(shapes))), "size_labels": tuple(f"{r}×{c}" for r, c, *_ in shapes)}


@dataclass(frozen=True)
class Finding:
    ok: bool
    text: str
    counted: bool = False   # a model's reading of what a count of the live kernel decides where the counters are open


@dataclass(frozen=True)
class Traffic:
    """A byte count the checker takes with Nsight Compute at the exercise's timed size (one launch, through
    the cases function's ``profile``) and holds against the bytes the exercise's plan must move."""

    metric: str          # an ncu counter of 32-byte sectors
    counted: str         # what it counts, as the learner reads it
    model_bytes: int     # what the plan the exercise teaches moves at the timed size
    model: str           # that model, in words
    max_ratio: float     # past this multiple of the model the kernel does not do what the exercise teaches

    @property
    def metrics(self) -> tuple[str, ...]:
        return (self.metric,)


@dataclass(frozen=True)
class SectorUse:
    """Coalescing, counted: of the 32-byte sectors a kernel's global loads (``op`` "ld") or stores ("st") touch,
    the share of bytes its instructions asked for, over one launch at the exercise's timed size (Nsight
    Compute; the cases function's ``profile``). 100% when the lanes of every warp access neighbouring
    addresses; 12.5% when each lane's 4 bytes sit in a sector of their own."""

    op: str                 # "ld" or "st"
    min_used: float = 0.8   # below this share of each sector used, the accesses are not coalesced

    @property
    def metrics(self) -> tuple[str, ...]:
        return (f"sm__sass_data_bytes_mem_global_op_{self.op}.sum", f"l1tex__t_sectors_pipe_lsu_mem_global_op_{self.op}.sum")

    @property
    def accesses(self) -> str:
        return {"ld": "loads", "st": "stores"}[self.op]


@dataclass(frozen=True)
class BankWavefronts:
    """Bank conflicts, counted: the shared-memory wavefronts a kernel's shared loads (``op`` "ld") or stores
    ("st") take per warp-wide instruction, over one launch at the exercise's timed size (Nsight Compute). One
    wavefront per instruction is conflict-free; an n-way conflict takes n. The H200's conflict-free transposes
    of 05 counted 1.01–1.12 (padded and swizzled tiles), the 32 × 32 tile's column reads 32.5."""

    op: str                              # "ld" or "st"
    max_per_instruction: float = 1.5     # past this, some warp's access is split by a bank conflict

    @property
    def metrics(self) -> tuple[str, ...]:
        return (f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{self.op}.sum",
                f"smsp__sass_inst_executed_op_shared_{self.op}.sum")

    @property
    def accesses(self) -> str:
        return {"ld": "loads", "st": "stores"}[self.op]


Count = Traffic | SectorUse | BankWavefronts


@dataclass(frozen=True)
class KernelExercise:
    """One exercise: what to write, how it is launched, and what is checked."""

    files: ExerciseKernel            # its folder under kernels/exercises/ and the entry point the learner defines
    notebook: str
    task: str
    hint: str
    wrong_files: dict[str, str]      # label the checker shows -> file of a deliberately wrong solution (tested to be rejected)
    sizes: tuple[int, ...]           # the adversarial problem sizes a live run uses
    live: Callable[..., dict]        # cases.*_cases: builds and runs the cases in the child process, times beside the course kernel
    # (source, compile report, the kernel's SASS or None where nvdisasm is missing) -> findings
    static: Callable[[str, cuda.KernelResources, "list[str] | None"], list[Finding]] = field(
        default=lambda src, res, sass=None: [])
    min_cc: float = 7.5
    # an architecture-specific target ("sm_90a": wgmma): compiled for it alone, run only on a GPU of it
    arch: str | None = None
    size_labels: tuple[str, ...] = ()   # how the sizes read when they are not element counts (GEMM shapes)
    launch: Callable[[str], dict | None] = field(default=lambda src: {})   # what the runner's launch reads from the source
    fault_hint: str = ""   # what a failed launch most likely means for this exercise (default: an out-of-bounds access)
    # A correct kernel is held to this multiple of the reference solution's time, the two timed in turn in one
    # process at the exercise's timed size: past it, it does not yet do what the exercise teaches.
    max_slowdown: float = 1.25
    slow_hint: str = ("Look for work the reference does not do: a loop that visits elements more than once, loads "
                      "that are not coalesced, or a launch that leaves SMs idle.")
    # What Nsight Compute counts of the learner's kernel, where the exercise is about bytes (Traffic), coalescing
    # (SectorUse) or bank conflicts (BankWavefronts)
    counts: tuple[Count, ...] = ()

    @property
    def name(self) -> str:
        return self.files.name

    @property
    def kernel(self) -> str:
        return self.files.kernel

    @property
    def starter(self) -> str:
        return self.files.source("starter")

    @property
    def solution(self) -> str:
        return self.files.source("solution")

    @property
    def wrong(self) -> dict[str, str]:
        """label -> source of each deliberately wrong solution."""
        return {label: self.files.source(file) for label, file in self.wrong_files.items()}

    @property
    def sanitize_sizes(self) -> tuple[int, ...]:
        """The sizes the default compute-sanitizer runs use: the three smallest (every exercise lists its
        sizes smallest first), odd ones among them, so that the tools' slowdown stays inside the time limit."""
        return self.sizes[:3]

    def sizes_text(self, sizes: tuple[int, ...] | None = None) -> str:
        sizes = self.sizes if sizes is None else sizes
        if self.size_labels:
            return ", ".join(self.size_labels[self.sizes.index(s)] for s in sizes)
        return "n = " + ", ".join(f"{s:,}" for s in sizes)

    def static_findings(self, source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
        return list(self.static(source, res, sass))


# --------------------------------------------------------------------------- reading the compiled kernel

def mnemonic(instruction: str) -> str:
    """A SASS instruction's mnemonic with its modifiers, its predicate (``@P0``) left out."""
    words = instruction.split()
    return words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "")


def count_ops(sass: list[str], prefix: str) -> int:
    return sum(mnemonic(i).startswith(prefix) for i in sass)


def depbar_waits(sass: list[str]) -> list[int]:
    """The group counts of the kernel's cp.async waits: ``DEPBAR.LE SB0, 0x1`` (cp.async.wait_group 1)
    lets one group stay in flight; 0 waits for every copy issued."""
    waits = []
    for i in sass:
        if mnemonic(i).startswith("DEPBAR") and (m := re.search(r"SB0\s*,\s*(0x[0-9a-f]+|\d+)", i)):
            waits.append(int(m.group(1), 0))
    return waits


def wait_sites(sass: list[str], op: str = "SYNCS.PHASECHK", gap: int = 32) -> int:
    """How many separate places the kernel waits on an mbarrier: runs of ``op`` further than ``gap``
    instructions apart (one wait loop compiles to a few of them in a row)."""
    at = [n for n, i in enumerate(sass) if mnemonic(i).startswith(op)]
    return sum(1 for k, n in enumerate(at) if k == 0 or n - at[k - 1] > gap)


def unfenced_releases(sass: list[str], window: int = 4) -> int:
    """Plain mbarrier arrivals (``SYNCS.ARRIVE.TRANS64.A1T0``, no bytes) with no ``FENCE.VIEW.ASYNC``
    (fence.proxy.async) in the ``window`` instructions before them."""
    out = 0
    for n, i in enumerate(sass):
        if mnemonic(i).startswith("SYNCS.ARRIVE.TRANS64.A1T0"):
            if not any(mnemonic(j).startswith("FENCE.VIEW.ASYNC") for j in sass[max(0, n - window):n]):
                out += 1
    return out


def releases_before_wgmma_wait(sass: list[str]) -> tuple[int, int]:
    """(slot releases, those with no wgmma wait after the last wgmma issued): plain mbarrier arrivals
    (``SYNCS.ARRIVE.TRANS64.A1T0``) whose nearest HGMMA before them, going back through the listing and on
    from its end (a loop's back edge: a release at the top of the K loop follows the HGMMAs at its bottom),
    comes with no ``WARPGROUP.DEPBAR`` (wgmma.wait_group) between. The wait's count is not read: a
    ``wgmma_wait<1>`` that leaves the released slot's own group running passes here, and only a live run
    can catch it."""
    releases = early = 0
    for n, i in enumerate(sass):
        if mnemonic(i).startswith("SYNCS.ARRIVE.TRANS64.A1T0"):
            releases += 1
            for j in [*reversed(sass[:n]), *reversed(sass[n + 1:])]:
                if mnemonic(j).startswith("WARPGROUP.DEPBAR"):
                    break
                if mnemonic(j).startswith("HGMMA"):
                    early += 1
                    break
    return releases, early


def _from_entry(source: str, kernel: str) -> str:
    """The source from the kernel's name on (helpers above it left out), however its signature is spaced."""
    body = strip_comments(source)
    found = re.search(rf"\b{kernel}\s*\(", body)
    return body[found.start():] if found else body


def local_memory(sass: list[str]) -> int:
    """Local-memory loads and stores (LDL, STL): a thread's array the compiler could not keep in registers."""
    return count_ops(sass, "LDL") + count_ops(sass, "STL")


def in_registers(res: cuda.KernelResources, sass: list[str] | None, kept: str, why: str) -> Finding:
    """A thread's arrays held in registers: no stack frame, no spills and, where the SASS is read, no LDL/STL.
    ``kept`` is the finding when they are; ``why`` follows the counts when they are not."""
    local = local_memory(sass) if sass is not None else 0
    ok = res.stack_frame_bytes == 0 and not res.spills and local == 0
    return Finding(ok, kept if ok else f"local memory: a {res.stack_frame_bytes} B stack frame, "
                                       f"{res.spill_store_bytes} B of spills, {local} LDL/STL in the SASS. {why}")


# --------------------------------------------------------------------------- the exercises

def _uses_grid_stride(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    body = strip_comments(source)
    if "gridDim" not in body:
        return [Finding(False, "the kernel never reads gridDim: launched with fewer threads than elements "
                               "(as here), it cannot reach them all. Step by gridDim.x * blockDim.x.")]
    return [Finding(True, "the kernel reads gridDim (a grid-stride loop can cover any n)")]


SCALE = KernelExercise(
    files=ExerciseKernel("scale_grid_stride", "scale"), notebook="02_threads_warps",
    task=("Write `scale(float* y, const float* x, float a, long long n)`: y[i] = a · x[i] for every i < n. "
          "The checker launches it with a fixed grid (4 blocks of 256 threads per SM, and once a grid of 3 blocks), "
          "far fewer threads than elements at the large sizes, so each thread must handle several elements, and "
          "none past n. The largest n is past 2^31 elements (run where the GPU has 18 GB free)."),
    hint=("Start at the thread's global index and step by the number of threads in the whole grid, "
          "gridDim.x * blockDim.x, while the index is below n. Use long long: n can exceed 2^31."),
    wrong_files={
        "one element per thread": "wrong_one_element_per_thread",
        "off by one at the tail": "wrong_off_by_one_at_the_tail",
        "an int index (it wraps past 2^31)": "wrong_int_index",
        "a stride written for one grid": "wrong_stride_for_one_grid",
        "a stride of gridDim.x alone (each element written blockDim.x times)": "wrong_stride_of_gridDim_only",
    },
    live=cases.scale_cases,
    sizes=(1, 255, 257, 4096, 100_003, cases.SCALE_TIMED_SIZE, cases.SCALE_HUGE_SIZE),
    static=_uses_grid_stride,
)


REGISTER_BUDGET = 32


def _within_budget(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    out = [Finding(res.registers <= REGISTER_BUDGET,
                   f"{res.registers} registers per thread (budget {REGISTER_BUDGET})")]
    out.append(Finding(not res.spills, "no spills" if not res.spills else
                       f"spills {res.spill_store_bytes} B stored / {res.spill_load_bytes} B loaded: the budget was "
                       "met by moving values to local memory (off-chip), which costs more than it saves"))
    return out


ROW_SUMS = KernelExercise(
    files=ExerciseKernel("row_sum_squares_budget", "row_sum_squares"), notebook="03_occupancy",
    task=(f"`row_sum_squares(float* out, const float* in, int rows, int cols)`: one thread per row, "
          f"out[r] = Σ_c in[r·cols + c]². The starter is correct but keeps 32 partial sums; "
          f"make it compile to at most {REGISTER_BUDGET} registers per thread with no spills (the checker "
          "reads ptxas's report), and keep it correct at every size."),
    hint=("Registers hold what is live at once: 32 partial sums are 32 registers before anything else. Two to four "
          "partial sums and a loop unrolled a few times keep enough loads in flight. Capping registers with "
          "__launch_bounds__ alone makes ptxas spill instead."),
    wrong_files={
        "the starter (too many registers)": "starter",
        "rows past the end": "wrong_rows_past_the_end",
        "an unrolled loop that drops the last 4 when cols is a multiple of 4": "wrong_unroll_drops_the_last_four",
    },
    live=cases.row_sum_cases,
    sizes=tuple(cases.ROW_SUM_COLS),
    size_labels=tuple(f"{rows:,}×{cols:,}" for rows, cols in cases.ROW_SUM_COLS.items()),   # rows × cols
    static=_within_budget,
)

_SHARED_TILE = re.compile(r"__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?float\s+(\w+)\s*\[")


def _transpose_tile_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    """The tile's declared shape through the bank model (a warp reading one column of it), and the
    barrier between the tile's writes and its reads."""

    body = strip_comments(source)
    # The tile's pitch from what ptxas allocated (32 rows of 4-byte words), however the source spells it.
    smem = res.static_smem_bytes
    if smem < 32 * 32 * 4 or smem % (32 * 4):
        return [Finding(False, f"{smem} B of static shared memory is not a 32-row float tile of at least 32 columns "
                               "(`__shared__ float tile[32][PITCH]`): the transpose goes through a shared-memory tile")]
    pitch = smem // (32 * 4)
    out = [Finding(True, f"{smem:,} B of static shared memory: a 32 × {pitch} float tile")]
    m = _SHARED_TILE.search(body)
    name = m.group(1) if m else r"\w+"
    swizzled = re.search(r"\b" + name + r"\s*\[[^\]]*\]\s*\[[^\]]*\^", body) is not None
    column = memory.bank_conflicts([lane * pitch * 4 for lane in range(32)])
    if column.ways == 1:
        out.append(Finding(True, f"a column of the 32 × {pitch} tile spans all 32 banks (bank model: 1 wavefront)",
                           counted=True))
    elif swizzled:
        out.append(Finding(True, "the tile's column index is XORed: a swizzle can put a column's 32 elements in 32 "
                                 "banks (bank model of the declared tile: not judged further without the count)",
                           counted=True))
    else:
        out.append(Finding(False, f"a warp reading one column of a 32 × {pitch} tile hits one bank {column.ways} "
                                  f"times (bank model, {column.wavefronts} wavefronts instead of 1): pad the pitch "
                                  "or swizzle the column", counted=True))
    barriers = count_ops(sass, "BAR.SYNC") if sass is not None else body.count("__syncthreads")
    where = "in its SASS (BAR.SYNC)" if sass is not None else "in the source"
    out.append(Finding(barriers >= 1, f"{barriers} barrier{'s' * (barriers != 1)} {where}" + (
        "" if barriers else ": threads would read tile elements other threads have not written yet")))
    return out


TRANSPOSE = KernelExercise(
    files=TRANSPOSE_TILE, notebook="05_shared_memory",
    task=("Write `transpose(float* out, const float* in, int rows, int cols)`: out (cols × rows) = inᵀ, through a "
          "32×32 shared-memory tile, reading rows of `in` and writing rows of `out` (both coalesced). The launch is "
          "block (32, 8), grid (⌈cols/32⌉, ⌈rows/32⌉). The checker puts your tile's declared shape through the bank "
          "model: reading one column must not make a warp hit one bank many times. Step each thread's rows by the "
          "constant 8, the block's height, so that the compiler can unroll the loops, as the course's kernel and the "
          "reference solution do: yours is timed against them."),
    hint=("Element (r, c) of the tile is at word r·PITCH + c, in bank (r·PITCH + c) mod 32. A warp reading a column "
          "keeps c fixed and steps r: with PITCH 32 every lane lands in the same bank. Which PITCH spreads them?"),
    slow_hint=("Compare your loops with the reference solution's: a step of blockDim.y is a value the compiler does not "
               "know, so it keeps the loop, and a thread's loads may go out one row at a time; step by 8 and let the "
               "compiler unroll it."),
    wrong_files={
        "no padding (32-way conflicts)": "wrong_no_padding",
        "no barrier": "wrong_no_barrier",
        "no edge check on the writes": "wrong_no_edge_check_on_the_writes",
        "writes not transposed through the tile (uncoalesced)": "wrong_uncoalesced_writes",
        "an XOR that moves nothing (dy >> 5 is 0 in a 32-row tile)": "wrong_swizzle_that_moves_nothing",
    },
    live=cases.transpose_cases,
    sizes=cases.TRANSPOSE_SIZES,
    size_labels=tuple(f"{rows:,}×{cols:,}" for rows, cols in cases.TRANSPOSE_COLS.items()),   # rows × cols
    static=_transpose_tile_checks,
    counts=(SectorUse("ld"), SectorUse("st"), BankWavefronts("ld"), BankWavefronts("st")),
)


def _register_tile_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    body = strip_comments(source)
    barriers = count_ops(sass, "BAR.SYNC") if sass is not None else body.count("__syncthreads")
    where = "in its SASS (BAR.SYNC)" if sass is not None else "__syncthreads() in the source"
    return [
        Finding(res.static_smem_bytes >= 2 * 8 * 64 * 4,
                f"{res.static_smem_bytes} B of static shared memory (the 64×8 and 8×64 stage tiles need 4,096)"),
        Finding(barriers >= 2, f"{barriers} barrier{'s' * (barriers != 1)} {where}" + (
            "" if barriers >= 2 else ": a stage needs one after its tiles are written and one after they are read, "
                                     "or the next stage's loads overwrite tiles other threads are still reading")),
        in_registers(res, sass, "the 8 accumulators stay in registers (no stack frame, no spills, no LDL/STL)",
                     "An accumulator array indexed by a loop the compiler does not unroll lives in local memory: "
                     "unroll the loops over the 8 outputs (#pragma unroll, constant bounds)"),
    ]


TILE_GEMM = KernelExercise(
    files=ExerciseKernel("register_tile_gemm", "sgemm_tile"), notebook="06_gemm_ladder",
    task=("Write the ladder's 1-D register-tile rung yourself: `sgemm_tile(const float* A, const float* B, float* C, "
          "int M, int N, int K)`, fp32, row-major, C = A·B. Launch: block (512), grid (⌈N/64⌉, ⌈M/64⌉): a block owns a "
          "64×64 tile of C, stages 64×8 of A and 8×64 of B in shared memory per step of K, and each thread keeps 8 "
          "outputs of one column in registers, so one shared load of B feeds 8 multiply-adds. Any M, N, K must work."),
    hint=("512 threads load 512 elements of each tile: thread t takes A's row t/8, column t%8, and B's row t/64, "
          "column t%64. Store A transposed (a_tile[k][row]) so a thread's 8 rows are adjacent. Two barriers per step."),
    wrong_files={
        "one barrier per step": "wrong_one_barrier_per_step",
        "no zeros outside the matrices": "wrong_no_zeros_outside_the_matrices",
        "A loaded down its columns (uncoalesced)": "wrong_a_loaded_down_its_columns",
        "B's tile stored transposed (8-way conflicts on every B read)": "wrong_b_tile_transposed",
    },
    live=cases.tile_gemm_cases,
    sizes=tuple(range(len(GEMM_SHAPES))),
    size_labels=tuple(f"{m}×{n}×{k}" for m, n, k in GEMM_SHAPES),
    static=_register_tile_checks,
    # Conflict-free, a step of k reads B's row (1 wavefront) and A's 8 values as two 16-byte broadcasts, which
    # take 2 wavefronts each (banks.wide_probe): 5 over 3 loads, 1.67 on the H200. B's tile read down a column
    # takes 8 a read, 4 on average. (The stores of A's transposed tile conflict, in the course's rung too.)
    counts=(SectorUse("ld"), SectorUse("st"), BankWavefronts("ld", max_per_instruction=2.0)),
)

# ---- notebook 11's capstone: a kernel with several defects, none of them named in its source

MYSTERY_DEFECTS = ("too little parallelism", "uncoalesced loads", "local memory", "buffer overflow", "edges")
_COMPARES_ROWS = re.compile(r"[<>]=?\s*rows\b|\brows\s*[<>]")
_COLUMN_LOOP = re.compile(r"for\s*\(\s*(?:int\s+)?(\w+)\s*=[^;]*;\s*\1\s*<\s*cols\b")
_FIXED_ARRAY = re.compile(r"(__shared__\s+)?\b(?:float|double|int|float4)\s+(\w+)\s*\[\s*(\w+)\s*\]\s*;")


def _target_sm_count() -> int:
    """This GPU's SMs live; the recorded GPU's in replay."""

    info = hardware.detect() if runtime.shows_gpu_run() else None
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
    return Finding(sc.efficiency >= 1.0, text, counted=True)


def _target_resident_blocks(threads: int, res: cuda.KernelResources) -> int:
    """Resident blocks per SM of a kernel on this GPU (the recorded GPU's in replay): the occupancy model."""

    info = hardware.detect() if runtime.shows_gpu_run() else None
    budget = occupancy.budget_from_device(info) if info else occupancy.budget(runtime.replay_gpu())
    return occupancy.residency(budget, threads, res.registers, res.static_smem_bytes).resident_blocks


def _row_buffer_finding(body: str, per_block: int) -> Finding:
    """A fixed-size array indexed by a loop that runs to ``cols`` holds (part of) a row; what it holds per row
    (its size times the threads of a row for a per-thread array, over the rows of a block for a shared one)
    against the widest row the checker runs."""

    widest = max(c for _, c in MYSTERY_SHAPES)
    defines = numeric_defines(body)
    column_vars = set(_COLUMN_LOOP.findall(body))
    short = []
    for shared, name, size in _FIXED_ARRAY.findall(body):
        n = int(size) if size.isdigit() else defines.get(size)
        index = re.search(rf"\b{name}\s*\[([^\]]*)\]\s*=", body)
        if n is None or not index or not column_vars & set(re.findall(r"\w+", index.group(1))):
            continue
        per_row = n // per_block if shared else n * max(1, MYSTERY_THREADS // per_block)
        if per_row < widest:
            short.append(f"{name}[{size}] ({'shared' if shared else 'per thread'}) holds {per_row:,} columns of a row")
    if not short:
        return Finding(True, "buffer overflow: no fixed-size array holds a row")
    return Finding(False, "buffer overflow: " + "; ".join(short) + f", and nothing stops a longer row: the checker's "
                   f"rows run to {widest:,} columns, and each one past the end writes memory the array does not own")


def _row_launch_problem(per_block: int | None) -> Finding | None:
    if per_block is None or per_block < 1 or MYSTERY_THREADS % per_block:
        return Finding(False, "define ROWS_PER_BLOCK as a divisor of 256 (#define ROWS_PER_BLOCK 8, say): the "
                              f"checker launches ⌈rows / ROWS_PER_BLOCK⌉ blocks of {MYSTERY_THREADS} threads")
    return None


def _row_launch(source: str) -> dict | None:
    per_block = rows_per_block(source)
    return None if _row_launch_problem(per_block) else {"rows_per_block": per_block}


def _mystery_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    """One finding per defect of the capstone, each from a course model or the compile report."""

    body = strip_comments(source)
    per_block = rows_per_block(source)
    if (problem := _row_launch_problem(per_block)) is not None:
        return [problem]
    rows, cols = MYSTERY_TIMED_SHAPE
    sms = _target_sm_count()
    blocks = -(-rows // per_block)
    resident = _target_resident_blocks(MYSTERY_THREADS, res)
    s = waves.schedule(blocks, sms, resident)
    out = [Finding(blocks >= 2 * sms,
                   f"too little parallelism: {blocks:,} blocks of {MYSTERY_THREADS} threads for {rows:,} rows (the timed shape) on "
                   f"{sms} SMs, up to {resident} resident per SM (occupancy model): {s.waves} wave{'s' if s.waves > 1 else ''}"
                   + (f", and {sms - blocks} SMs with no work at all" if blocks < sms else
                      f", {blocks / sms:.1f} blocks per SM" + (": too few to hide latency" if blocks < 2 * sms else "")))]
    out.append(_lanes_per_row_finding(per_block, cols))
    local = res.stack_frame_bytes + res.spill_store_bytes
    out.append(Finding(local == 0, "local memory: none (no stack frame, no spills)" if local == 0 else
                       f"local memory: {res.stack_frame_bytes:,} B stack frame per thread, {res.spill_store_bytes} B "
                       "spilled: an array indexed at run time cannot live in registers, so it lives in local memory (device "
                       "memory, cached in L1 and L2)"))
    out.append(_row_buffer_finding(body, per_block))
    guarded = _COMPARES_ROWS.search(body) is not None
    out.append(Finding(guarded, "edges: the kernel compares a row index with rows (the live run tests every edge)"
                       if guarded else "edges: nothing compares a row index with rows, so the last block's extra "
                       "rows read and write past the arrays when rows is not a multiple of ROWS_PER_BLOCK"))
    return out


MYSTERY = KernelExercise(
    files=MYSTERY_RMS_NORM, notebook="11_failure_lab",
    task=("Make `rms_norm(out, in, weight, rows, cols)` correct at every shape and fast: out[r, c] = in[r, c] · "
          "weight[c] / √(mean_c in[r, c]² + 10⁻⁶), rows × cols float32, row-major. The checker launches "
          f"⌈rows / ROWS_PER_BLOCK⌉ blocks of {MYSTERY_THREADS} threads, with ROWS_PER_BLOCK read from your source."),
    hint=("Ask of the kernel what the course asked of every other: how many warps does the launch give each SM, how "
          "many sectors does one warp's load touch, where does the compiler put `x`, and what happens to the last block."),
    wrong_files={
        "the mystery as given": "starter",
        "one warp per row, no row guard": "wrong_no_row_guard",
        "one warp per row, the row kept in a local array": "wrong_row_in_local_array",
        "one thread per row, guarded": "wrong_one_thread_per_row_guarded",
        "ε outside the square root": "wrong_epsilon_outside_the_root",
        "the row in a fixed 8,192-float shared buffer": "wrong_row_in_a_fixed_shared_buffer",
    },
    live=cases.rms_norm_cases,
    **_shape_cases(MYSTERY_SHAPES),
    static=_mystery_checks,
    launch=_row_launch,
    counts=(SectorUse("ld"),),
)

# ---- notebook 04: row sums whose loads are coalesced

def _warp_row_sum_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    body = strip_comments(source)
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


WARP_ROW_SUMS = KernelExercise(
    files=ExerciseKernel("warp_row_sums", "row_sums"), notebook="04_coalescing",
    task=("Write `row_sums(float* out, const float* in, int rows, int cols)`: out[r] = Σ_c in[r, c], rows × cols "
          f"float32, row-major, launched as ⌈rows / ROWS_PER_BLOCK⌉ blocks of {MYSTERY_THREADS} threads with "
          "ROWS_PER_BLOCK read from your source. The starter gives each thread a row, so a warp's 32 lanes read 32 "
          "rows at once; make the lanes of a warp read neighbouring elements of one row."),
    hint=("Give each row a whole warp (ROWS_PER_BLOCK 8): lane i starts at column i and steps by 32, so one load "
          "instruction covers 32 consecutive floats. Each lane then holds a partial sum; five __shfl_xor_sync steps "
          "(16, 8, 4, 2, 1) add them, and lane 0 writes the row's result."),
    wrong_files={
        "the starter (one thread per row)": "starter",
        "a warp per row, partial sums never combined": "wrong_partial_sums_never_combined",
        "a warp per row, no row guard": "wrong_no_row_guard",
        "a warp per row, each lane a contiguous piece (uncoalesced)": "wrong_lane_chunks",
    },
    live=cases.warp_row_sums_cases,
    **_shape_cases(MYSTERY_SHAPES),
    static=_warp_row_sum_checks,
    launch=_row_launch,
    counts=(SectorUse("ld"),),
)

# ---- notebook 07: a persistent grid that walks the tiles

TILE_EDGE = 64


def _target_threads_per_sm() -> int:
    info = hardware.detect() if runtime.shows_gpu_run() else None
    return info.max_threads_per_sm if info else hardware.spec(runtime.replay_gpu()).max_threads_per_sm


def _persistent_tile_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    body = strip_comments(source)
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


PERSISTENT_TILES = KernelExercise(
    files=ExerciseKernel("persistent_tiles", "scale_tiles"), notebook="07_waves",
    task=("Write `scale_tiles(out, in, a, rows, cols)`: out = a · in over a rows × cols float32 matrix cut into "
          f"{TILE_EDGE} × {TILE_EDGE} tiles, launched as a persistent grid: as many blocks of 256 threads as the SMs "
          "hold at once, however many tiles there are (and once a grid of 3 blocks). Each block must loop over tiles, and "
          "the edge tiles must be masked."),
    hint=("Number the tiles 0 … tiles − 1 in row-major order and let block b take tiles b, b + gridDim.x, "
          "b + 2·gridDim.x, …: the same order a persistent GEMM uses. Keep the starter's tile body."),
    wrong_files={
        "the starter (one tile per block)": "starter",
        "no edge mask": "wrong_no_edge_mask",
        "a stride written for one grid": "wrong_stride_for_one_grid",
    },
    live=cases.scale_tiles_cases,
    **_shape_cases(TILE_SHAPES),
    static=_persistent_tile_checks,
)


# ---- notebook 08: the epilogue fused into one pass


def _fused_epilogue_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    body = strip_comments(source)
    kernels = re.findall(r"__global__", body)
    out = [Finding(len(kernels) == 1, "one kernel: the three steps in one pass" if len(kernels) == 1 else
                   f"{len(kernels)} kernels in the cell: fuse the steps into bias_gelu_residual alone (each extra "
                   "pass would write its result to HBM and read it back)")]
    out.append(Finding(not res.spills, "no spills" if not res.spills else
                       f"spills {res.spill_store_bytes} B: the fused kernel keeps too much per thread"))
    return out


FUSED_EPILOGUE = KernelExercise(
    files=ExerciseKernel("fused_epilogue", "bias_gelu_residual"), notebook="08_fusion",
    task=("Fuse three elementwise passes (add a bias per column, GELU, add a residual) into one kernel, "
          "`bias_gelu_residual(out, x, bias, residual, cols, total)` on a row-major float32 matrix of `total` "
          "elements, launched as ⌈total / 256⌉ blocks of 256. Delete the three unfused kernels when you are done."),
    hint=("Compute v = x[i] + bias[i % cols] into a register, apply GELU to v, add residual[i], and store once: "
          "the kernel reads x and residual and writes out, one pass, where the three kernels made three."),
    wrong_files={
        "the starter (empty fused kernel, three passes left)": "starter",
        "bias indexed by row": "wrong_bias_indexed_by_row",
        "tanh through exp (NaN for large inputs)": "wrong_tanh_through_exp",
    },
    live=cases.fused_epilogue_cases,
    **_shape_cases(FUSED_SHAPES),
    static=_fused_epilogue_checks,
)


# ---- notebook 09: a two-stage cp.async pipeline

PIPELINE_TILE_BYTES = PIPELINE_THREADS * 4 * 16        # 16 KiB: four float4s per thread
PIPELINE_SIZES = (4, 1028, 65540, 1 << 20, (1 << 26) + 4)


def _pipeline_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    if sass is not None:
        copies, waits = count_ops(sass, "LDGSTS") > 0, depbar_waits(sass)
        if not copies:
            out = [Finding(False, "no cp.async copy in the kernel's SASS (no LDGSTS): its loads are still synchronous")]
        elif not waits:
            out = [Finding(False, "the kernel never waits on its copies (no DEPBAR in its SASS): it could sum a tile "
                                  "before its bytes have landed")]
        elif max(waits) == 0:
            out = [Finding(False, "every wait is for all the copies issued (DEPBAR.LE SB0, 0x0: wait_copies<0>), so "
                                  "nothing is in flight while a tile is summed: wait for all but the newest group")]
        else:
            out = [Finding(True, f"the kernel copies with cp.async and waits for all but {max(waits)} group"
                                 f"{'s' * (max(waits) != 1)} (DEPBAR.LE SB0, {max(waits):#x}): a tile stays in flight "
                                 "while one is summed")]
    else:   # no nvdisasm here: the source's calls stand in
        kernel_body = _from_entry(source, "sum_squares")
        copies, waits = "copy16_async(" in kernel_body, "wait_copies<" in kernel_body
        out = [Finding(copies and waits, "the kernel copies with cp.async and waits on its groups" if copies and waits
                       else "the kernel never waits (wait_copies): it could sum a tile before its bytes have landed"
                       if copies else "the kernel does not call copy16_async: its loads are still synchronous")]
    stages = res.static_smem_bytes // PIPELINE_TILE_BYTES
    out.append(Finding(stages >= 2, f"{res.static_smem_bytes:,} B of shared memory: {stages} stage"
                       f"{'s' if stages != 1 else ''} of {PIPELINE_TILE_BYTES // 1024} KiB"
                       + (f", so {stages - 1} tile{'s' if stages > 2 else ''} can be in flight while one is summed"
                          if stages >= 2 else ": with fewer than two stages nothing is in flight during the math")))
    return out


ASYNC_PIPELINE = KernelExercise(
    files=ExerciseKernel("async_pipeline", "sum_squares"), notebook="09_async_pipelines",
    task=("Turn a synchronous sum of squares into a two-stage cp.async pipeline: one block of 256 threads per SM, "
          "16 KiB tiles, each block copying its next tile into shared memory while it sums the current one (and once a "
          "grid of 3 blocks). The helpers for the copies are given; write the loop."),
    hint=("Declare two 16 KiB slots. Before the loop, issue (copy and commit) the block's first tile. In the loop, "
          "issue the next tile into the other slot, then wait_copies<1>() (all but the newest group have landed), "
          "then sum the current slot. If a thread reads only what it copied itself, it needs no barrier."),
    wrong_files={
        "the starter (synchronous loads)": "starter",
        "waits for nothing": "wrong_waits_for_nothing",
    },
    live=cases.async_pipeline_cases,
    sizes=PIPELINE_SIZES,
    static=_pipeline_checks,
    min_cc=8.0,
)

# ---- notebook 10: a warp-specialized pipeline with full and empty mbarriers

SPECIALIZED_TILE_BYTES = 8 * 1024


def _specialized_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    if sass is not None:
        loads = count_ops(sass, "UBLKCP") > 0
        counts = any(mnemonic(i) == "SYNCS.ARRIVE.TRANS64" for i in sass)   # an arrival that sets a byte count
        sites, unfenced = wait_sites(sass), unfenced_releases(sass)
        releases = count_ops(sass, "SYNCS.ARRIVE.TRANS64.A1T0") > 0
    else:   # no nvdisasm here: the source's calls stand in
        kernel_body = _from_entry(source, "sum_squares")
        loads, counts = "bulk_load(" in kernel_body, "mbar_expect_bytes(" in kernel_body
        sites, unfenced = kernel_body.count("mbar_wait("), 0
        releases = "release(" in kernel_body or "mbar_arrive(" in kernel_body
    if loads and counts:
        copies = Finding(True, "the producer bulk-loads tiles and sets the bytes each full barrier expects")
    elif not loads:
        copies = Finding(False, "no tile is loaded: the producer must call mbar_expect_bytes and bulk_load")
    else:
        copies = Finding(False, "the bulk loads are never counted: call mbar_expect_bytes before each bulk_load")
    if sites >= 2 and releases and not unfenced:
        handoff = Finding(True, "both roles wait on a barrier (two wait loops in the SASS) and the consumers release "
                                "their slots after a proxy fence" if sass is not None else
                                "both roles wait on a barrier and the consumers release their slots")
    elif unfenced:
        handoff = Finding(False, f"{unfenced} slot release{'s' * (unfenced != 1)} without fence.proxy.async before "
                                 "it: the consumers' reads must be ordered before the TMA refills the slot; release "
                                 "through the fenced helper")
    else:
        handoff = Finding(False, f"{sites} place{'s' * (sites != 1)} that wait{'s' * (sites == 1)} on a barrier"
                          + ("" if releases else " and no slot released")
                          + ": the consumers must wait on full[s] and release it; the producer must wait on empty[s]")
    if not loads:   # the compiler drops slots nothing writes or reads: their size says nothing yet
        return [copies, handoff]
    stages = res.static_smem_bytes // SPECIALIZED_TILE_BYTES
    ring = Finding(stages >= 2, f"{res.static_smem_bytes:,} B of shared memory: {stages} slot"
                   f"{'s' * (stages != 1)} of {SPECIALIZED_TILE_BYTES // 1024} KiB")
    return [copies, handoff, ring]


WARP_SPECIALIZED = KernelExercise(
    files=ExerciseKernel("warp_specialized", "sum_squares"), notebook="10_hopper_gemm",
    task=("Fill in the two roles of a warp-specialized pipeline: a producer that refills four 8 KiB slots with TMA "
          "bulk copies, and four consumer warps that sum squares out of them, handing slots back and forth through "
          "a full and an empty mbarrier per slot. The barriers, the helpers and the loops are given; write the "
          "waits, the byte counts, the copies, the reads and the releases."),
    hint=("Tile j of the block uses slot s = j % STAGES for the (j / STAGES)-th time, so the phase it waits for "
          "has parity (j / STAGES) & 1. Consumers wait on full[s] with that parity. The producer waits on empty[s] "
          "for the phase before it, parity ((j / STAGES) & 1) ^ 1, which a fresh barrier counts as complete: on "
          "the first round the wait succeeds at once. The last tile may be short: expect and copy "
          "min(TILE4, n4 - t * TILE4) * 16 bytes, and read no float4 past n4."),
    wrong_files={
        "the starter (nothing loaded)": "starter",
        "the consumers never flip the phase": "wrong_phase_never_flipped",
        "a whole tile expected for the short last one": "wrong_whole_tile_expected",
    },
    live=cases.warp_specialized_cases,
    sizes=PIPELINE_SIZES,
    static=_specialized_checks,
    min_cc=9.0,
    fault_hint=("Here that most likely means a barrier wait that never completed: after 0.5 s mbar_wait traps. "
                "Check each wait's parity and that each mbar_expect_bytes counts exactly the bytes its copy brings"),
)


# ---- notebook 10: the consumers of a warp-specialized wgmma GEMM

def _wgmma_consumer_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    if sass is not None:
        multiplies, waits = count_ops(sass, "HGMMA"), wait_sites(sass)
        releases, early = releases_before_wgmma_wait(sass)
        wgmma = Finding(multiplies > 0, f"the consumers multiply with wgmma ({multiplies} HGMMA instructions in the SASS)"
                        if multiplies else "no wgmma in the kernel's SASS (no HGMMA): the consumers multiply nothing")
        wait = Finding(waits >= 2, "the consumers wait on each slot's full barrier (a second mbarrier wait loop in the "
                                   "SASS beside the producer's)" if waits >= 2 else
                       f"{waits} mbarrier wait loop{'s' * (waits != 1)} in the SASS: the producer's. The consumers must "
                       "wait on full[slot] before their wgmmas read it")
    else:   # no nvdisasm here: the source's calls stand in
        body = strip_comments(source)
        multiplies = "wgmma_slot<" in body or "wgmma_m64n" in body or "wgmma_smem<" in body
        wgmma = Finding(multiplies, "the consumers call wgmma" if multiplies else
                        "the consumers never call wgmma (wgmma_slot): they multiply nothing")
        wait = Finding(body.count("mbar_wait(") >= 1, "the consumers wait on a slot's full barrier"
                       if "mbar_wait(" in body else "the consumers never wait on full[slot] (mbar_wait)")
        releases = int("release(" in body or "mbar_arrive(" in body)
        early = 0
    if not releases:
        freed = Finding(False, "no slot is ever freed: the producer waits on empty[slot] for the consumers, and after "
                               "STAGES slots the wait traps. Arrive on empty once the wgmmas are done with the slot")
    elif early:
        freed = Finding(False, f"{early} slot release{'s' * (early != 1)} with a wgmma issued and not waited for "
                               "before it (no WARPGROUP.DEPBAR between the HGMMA and the arrive): the TMA may refill "
                               "the slot while the tensor cores still read it. Call wgmma_wait before release")
    else:
        freed = Finding(True, "each slot is freed after a wgmma wait (a wait after the last wgmma before every release)"
                        if sass is not None else "the consumers free slots")
    return [wgmma, wait, freed]


WGMMA_CONSUMER = KernelExercise(
    files=ExerciseKernel("wgmma_consumer", "gemm_ring"), notebook="10_hopper_gemm",
    task=("Write the consumers of a warp-specialized bf16 GEMM: rung 3's kernel with its consumer loop taken out. "
          "The producer warpgroup's one thread fills a ring of four shared-memory slots by TMA (a 128 × 64 A tile "
          "and a 128 × 64 B tile each, full and empty mbarriers per slot); each of the two consumer warpgroups "
          "multiplies its 64 rows of every slot by the slot's B with wgmma, accumulating a 64 × 128 fp32 tile in "
          "registers. Write `consume`: for each k-tile, wait, multiply, free the slot, move on."),
    # The rules a consumer must keep, not the calls in order: the hint must not be the solution.
    hint=("Four rules for each k-tile. (1) Read a slot only after its full barrier says the TMA has landed it, with "
          "the phase the ring is on. (2) The first k-tile must overwrite the accumulators, which hold garbage "
          "before it; later ones add to them. (3) wgmma is asynchronous: a slot is still being read until the "
          "group that reads it has been waited for, so free it only after that wait. (4) The empty barrier counts "
          "one arrival per consumer warpgroup, and the phase flips each time the ring wraps. The starter's include "
          "line lists the calls hopper_ring.cuh gives you for these."),
    wrong_files={
        "the starter (nothing consumed)": "starter",
        "frees the slot before the wgmma wait": "wrong_release_before_wait",
        "never flips the phase": "wrong_phase_never_flipped",
        "overwrites the accumulators every k-tile": "wrong_overwrites_each_k_tile",
        "every consumer thread arrives on empty": "wrong_every_thread_arrives",
    },
    live=cases.wgmma_gemm_cases,
    sizes=tuple(range(len(WGMMA_SHAPES))),
    size_labels=tuple(f"{m}×{n}×{k}" for m, n, k in WGMMA_SHAPES),
    static=_wgmma_consumer_checks,
    arch="sm_90a",
    fault_hint=("Here that most likely means a barrier wait that never completed: after 0.5 s mbar_wait traps. "
                "Check that the consumers wait with ring.phase, free every slot they read, and that ring.advance "
                "runs once per k-tile"),
    slow_hint=("Look for a wait that serializes more than it must (a wgmma_wait inside the k16 steps) or a "
               "__syncthreads in the loop: the producer and the consumers should only meet at the barriers."),
)


# ---- notebook 12: decode attention that reads each KV row once for its group of query heads

def _decode_checks(source: str, res: cuda.KernelResources, sass: list[str] | None = None) -> list[Finding]:
    """The running softmaxes and the query rows stay in registers: a per-head array indexed by a loop the
    compiler could not unroll lands in local memory, read and written on every token."""
    return [in_registers(res, sass, f"the {DECODE_GROUP} query heads' state stays in registers (no spills, no local "
                                    "memory)",
                         "The per-query-head state is in local memory, touched on every token. Loops over the group "
                         "need a bound the compiler knows (GROUP) so it can unroll them and keep the arrays in registers")]


GROUPED_DECODE = KernelExercise(
    files=ExerciseKernel("grouped_decode", "decode_gqa"), notebook="12_transformer_layer",
    task=(f"`decode_gqa` is one decode step's attention for the {DECODE_GROUP} query heads that share a KV head, "
          "one block of 128 threads per (KV head, sequence), each half-warp taking one cached token at a time. "
          "The starter is correct but walks the cache once per query head, reading every K and V row "
          f"{DECODE_GROUP} times. Make it read each row once, for all {DECODE_GROUP} heads."),
    hint=(f"Swap the loops: load and scale the {DECODE_GROUP} query rows into qr[GROUP][8] first, then walk the "
          "tokens, and for each token load its K and V rows once and fold them into every head's running softmax "
          "(r[g].add). Keep r.add: a softmax that takes 2^s of a raw score overflows when the scores are large, "
          "and two of the checker's cases make them large."),
    wrong_files={
        "the starter (the cache read once per query head)": "starter",
        "no running maximum": "wrong_no_running_max",
        "steps by the warps, not the half-warps": "wrong_steps_by_warps",
    },
    live=cases.grouped_decode_cases,
    sizes=tuple(range(len(DECODE_SHAPES))),
    size_labels=tuple(f"{b}×{h}×{t}" for b, h, t, _ in DECODE_SHAPES),
    static=_decode_checks,
    slow_hint=(f"Count the bytes: a kernel that reads the cache once per query head moves {DECODE_GROUP} times "
               "what the reference moves. Load each token's K and V rows once for the whole group."),
    # The starter's count is 4.00x this and the reference solution's 1.001x (H200, ncu 2025).
    counts=(Traffic("lts__t_sectors_srcunit_tex_op_read.sum", "read by the SMs from L2",
                    cases.decode_cache_bytes(*DECODE_TIMED_SHAPE),
                    f"of K and V, each byte read once for its group of {DECODE_GROUP} query heads", max_ratio=1.5),),
)


EXERCISES: dict[str, KernelExercise] = {e.name: e for e in (SCALE, ROW_SUMS, WARP_ROW_SUMS, TRANSPOSE, TILE_GEMM,
                                                            PERSISTENT_TILES, FUSED_EPILOGUE, ASYNC_PIPELINE,
                                                            WARP_SPECIALIZED, WGMMA_CONSUMER, GROUPED_DECODE, MYSTERY)}


def exercise(name: str) -> KernelExercise:
    if name not in EXERCISES:
        raise KeyError(f"no kernel exercise {name!r}; there are: {', '.join(EXERCISES)}")
    return EXERCISES[name]
