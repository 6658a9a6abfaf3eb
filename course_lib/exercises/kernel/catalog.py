"""The course's write-it-yourself kernel exercises. Each is one ``KernelExercise``: the task, a hint,
its CUDA files (``kernels/exercises/<name>/``: the starter the learner edits, a hidden reference
solution, deliberately wrong solutions that tests pass through the checker to see them rejected),
the sizes a live run uses, the static checks that read the compiled kernel (ptxas's report, the SASS, the PTX,
and the PTX run on the CPU for one block: ``measure.sass.emulate``), never the spelling of the source, and
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
    rows_per_block,
)
from course_lib.measure.sass import (
    Array,
    ControlFlowUnknown,
    Listing,
    NotEmulated,
    PtxKernel,
    Trace,
    emulate,
    entry_points,
    first_unguarded,
    kernel_ptx,
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
    judged: bool = True     # False: the check could not be made here (a tool missing, code the emulator cannot
                            # follow); it passes, and its text says what judges it instead


def not_judged(text: str, counted: bool = False) -> Finding:
    return Finding(True, text, counted=counted, judged=False)


@dataclass(frozen=True)
class Compiled:
    """What the static checks read of a learner's kernel: ptxas's report, its SASS (None where nvdisasm is not
    installed), its PTX (None where the cubin carries none) and the kernels the cubin holds."""

    res: cuda.KernelResources
    sass: Listing | None = None
    ptx: PtxKernel | None = None
    kernels: tuple[str, ...] = ()


def compiled(cubin: bytes, res: cuda.KernelResources, kernel: str, sass: Listing | None) -> Compiled:
    try:
        kernels = tuple(entry_points(cubin))
    except ValueError:
        kernels = ()
    return Compiled(res, sass, kernel_ptx(cubin, kernel) if cubin else None, kernels)


NO_SASS = "not judged here: nvdisasm is not installed, and this check reads the compiled SASS"
NO_PTX = "not judged here: the cubin carries no PTX to read"


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
    # (source, the compiled kernel) -> findings. The source is read for launch parameters alone (ROWS_PER_BLOCK)
    static: Callable[[str, Compiled], list[Finding]] = field(default=lambda src, k: [])
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
    # label -> file of a correct solution written otherwise than the reference (tested to be accepted)
    correct_files: dict[str, str] = field(default_factory=dict)

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
    def correct(self) -> dict[str, str]:
        """label -> source of each correct solution written otherwise than the reference."""
        return {label: self.files.source(file) for label, file in self.correct_files.items()}

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

    def static_findings(self, source: str, k: Compiled) -> list[Finding]:
        return list(self.static(source, k))


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


def _is(prefix: str) -> Callable[[str], bool]:
    return lambda instruction: mnemonic(instruction).startswith(prefix)


def _path_rule(sass: Listing, start: Callable[[str], bool], hazard: Callable[[str], bool], guard: Callable[[str], bool],
               entry_is_hazard: bool = False) -> tuple[int, int]:
    """(instructions ``start`` accepts, those some control-flow path reaches from a ``hazard`` instruction (or from
    the kernel's entry, with ``entry_is_hazard``) with no ``guard`` instruction between). A rule about what must
    stand between two instructions on every path, however far apart the compiler put them.
    ``ControlFlowUnknown`` where the SASS branches where the listing cannot say."""
    at = [n for n, i in enumerate(sass) if start(i)]
    return len(at), sum(first_unguarded(sass, n, hazard, guard, entry_is_hazard) is not None for n in at)


RELEASE = "SYNCS.ARRIVE.TRANS64.A1T0"      # a plain mbarrier arrival (no byte count): a consumer frees a slot
WAIT = "SYNCS.PHASECHK"                      # an mbarrier wait (try_wait in a loop)
SHARED_GENERIC = ("LDS", "LDSM", "STS", "STSM", "ATOMS")   # shared-memory accesses of the generic proxy


def unfenced_releases(sass: Listing) -> tuple[int, int]:
    """(slot releases, those some path reaches from a shared-memory access (LDS, STS, ...) with no
    ``FENCE.VIEW.ASYNC`` (fence.proxy.async) between): the consumers' reads are then not ordered before the
    TMA's next write of the slot. Where the fence stands on the path does not matter, only that it does."""
    return _path_rule(sass, _is(RELEASE), lambda i: mnemonic(i).split(".")[0] in SHARED_GENERIC,
                      _is("FENCE.VIEW.ASYNC"))


def releases_before_wgmma_wait(sass: Listing) -> tuple[int, int]:
    """(slot releases, those some path reaches from an HGMMA (a wgmma issued) with no ``WARPGROUP.DEPBAR``
    (wgmma.wait_group) between, around loops too: a release at the top of the K loop follows the HGMMAs at its
    bottom). The wait's count is not read: a ``wgmma_wait<1>`` that leaves the released slot's own group running
    passes here, and only a live run can catch it."""
    return _path_rule(sass, _is(RELEASE), _is("HGMMA"), _is("WARPGROUP.DEPBAR"))


def local_memory(sass: list[str]) -> int:
    """Local-memory loads and stores (LDL, STL): a thread's array the compiler could not keep in registers."""
    return count_ops(sass, "LDL") + count_ops(sass, "STL")


def in_registers(k: Compiled, kept: str, why: str) -> Finding:
    """A thread's arrays held in registers: no stack frame, no spills and, where the SASS is read, no LDL/STL.
    ``kept`` is the finding when they are; ``why`` follows the counts when they are not."""
    res = k.res
    local = local_memory(k.sass) if k.sass is not None else 0
    ok = res.stack_frame_bytes == 0 and not res.spills and local == 0
    counted = f"{local} LDL/STL in the SASS" if k.sass is not None else "LDL/STL not counted (nvdisasm is not installed)"
    return Finding(ok, kept if ok else f"local memory: a {res.stack_frame_bytes} B stack frame, "
                                       f"{res.spill_store_bytes} B of spills, {counted}. {why}")


def _reads_grid_size(k: Compiled) -> bool:
    """gridDim.x read by the compiled kernel: %nctaid.x in its PTX."""
    return k.ptx.reads("%nctaid.x")


def _takes_work_from_an_atomic(k: Compiled) -> bool:
    """A global atomic in the PTX: a kernel that hands out work through a counter needs no gridDim."""
    return any(op.split(".")[0] in ("atom", "red") and ".shared" not in op for op in k.ptx.opcodes())


def _emulated(k: Compiled, args: list, block: tuple[int, int, int], grid: tuple[int, int, int] = (1, 1, 1),
              block_idx: tuple[int, int, int] = (0, 0, 0), threads=None) -> tuple[Trace | None, str]:
    """(what one block of the compiled kernel did, run from its PTX on the CPU (``measure.sass.emulate``), or
    None and why it could not be run)."""
    if k.ptx is None:
        return None, "the cubin carries no PTX to run"
    try:
        return emulate(k.ptx, args, block, grid, block_idx, threads), ""
    except NotEmulated as why:
        return None, f"the emulator could not follow it: {why}"
    except ValueError as why:
        return None, str(why)


def variable_name(ptx_name: str) -> str:
    """A shared variable as the learner named it: ``_ZZ9transposeE4tile`` -> ``tile``."""
    m = re.search(r"E(\d+)(\w+)$", ptx_name)
    if m and int(m.group(1)) <= len(m.group(2)):
        return m.group(2)[:int(m.group(1))]
    return ptx_name


def _warp_accesses(trace: Trace, kind: str) -> list[tuple[int, list[int | None]]]:
    """One entry per warp-wide shared-memory instruction of ``kind`` (ld, st): (its access size, the 32 lanes'
    byte offsets into the variable, None for a lane that did not take part). Lanes of a warp line up by the
    how-many-th time each reached the instruction. (Variables start at bank 0 here; the bank of a whole access
    shifts alike for every lane, which leaves its conflicts as they are.)"""
    warps: dict[tuple, tuple[int, list]] = {}
    for a in trace.shared:
        if a.kind == kind:
            size, lanes = warps.setdefault((a.warp, a.statement, a.occurrence), (a.size_bytes, [None] * 32))
            lanes[a.lane] = a.offset
    return list(warps.values())


def bank_finding(trace: Trace, bank: BankWavefronts, launched: str) -> Finding:
    """The bank model over the addresses an emulated block computed: wavefronts per warp-wide shared
    instruction, against the count's bar (what Nsight Compute counts live, ``BankWavefronts``)."""
    accesses = _warp_accesses(trace, bank.op)
    if not accesses:
        return Finding(False, f"no shared-memory {bank.accesses} in {launched}: the exercise goes through a shared tile",
                       counted=True)
    try:
        counts = [memory.bank_conflicts(lanes, size, store=bank.op == "st") for size, lanes in accesses]
    except ValueError as why:   # a misaligned shared access: it faults on the GPU
        return Finding(False, f"the tile's {bank.accesses} ({launched}): {why}")
    wavefronts = sum(c.wavefronts for c in counts)
    per = wavefronts / len(counts)
    worst = max(c.ways for c in counts)
    text = (f"the tile's {bank.accesses}: {len(counts):,} warp-wide {bank.accesses} took {wavefronts:,} wavefronts, "
            f"{per:.2f} per instruction (the bank model over the addresses the compiled kernel computes, {launched}; "
            "1 is conflict-free)")
    if per <= bank.max_per_instruction:
        return Finding(True, text, counted=True)
    return Finding(False, f"{text}: the worst is a {worst}-way conflict, {worst} words of one bank in one warp's "
                          "access. Pad the tile's pitch, or rotate or swizzle its column index, so that the 32 elements "
                          "a warp touches at once fall in 32 different banks", counted=True)


def race_finding(trace: Trace, launched: str, fix: str) -> Finding:
    """Shared memory between two barriers: a word one warp writes that another warp reads or writes in the same
    interval is a race (what racecheck reports live). Atomics are not races."""
    words: dict[tuple, dict[int, set[str]]] = {}
    for a in trace.shared:
        if a.kind == "atom":
            continue
        for word in range(a.offset // 4, (a.offset + a.size_bytes + 3) // 4):
            words.setdefault((a.phase, a.variable, word), {}).setdefault(a.warp, set()).add(a.kind)
    racy = [(key, warps) for key, warps in words.items()
            if len(warps) > 1 and any("st" in kinds for kinds in warps.values())]
    if not trace.shared:
        return Finding(True, f"no race on shared memory: the kernel touches none ({launched})")
    if not racy:
        return Finding(True, f"no race on shared memory: between two barriers, no word one warp writes is read or "
                             f"written by another ({launched})")
    (_, variable, word), warps = racy[0]
    writer = min(w for w, kinds in warps.items() if "st" in kinds)
    other = min(w for w in warps if w != writer)
    does = "reads" if "ld" in warps[other] else "writes"
    return Finding(False, f"a race on shared memory: between two barriers, warp {writer} writes {variable_name(variable)}"
                          f"'s word {word} and warp {other} {does} it, and so for {len(racy):,} words ({launched}). {fix}")


def outside_finding(trace: Trace, spaces: tuple[str, ...]) -> str | None:
    """The first access in ``spaces`` that fell outside its variable or array, in words, or None."""
    for a in trace.outside:
        if a.space in spaces:
            who = f"thread {a.thread[0]} (warp {a.warp}) {({'ld': 'reads', 'st': 'writes'}).get(a.kind, 'updates')}"
            size = trace.sizes.get(a.variable, 0)
            if a.variable == "(no variable)":
                return f"{who} {a.space} memory outside every array"
            if a.space == "local":
                return f"{who} byte {a.offset:,} of its local memory, past the {size:,} B its arrays take (its stack frame)"
            if a.space == "shared":
                return f"{who} byte {a.offset:,} of {variable_name(a.variable)} (shared memory), past its {size:,} B"
            return f"{who} byte {a.offset:,} of {a.variable}, past its {size:,} B"
    return None


# --------------------------------------------------------------------------- the exercises

def _uses_grid_stride(source: str, k: Compiled) -> list[Finding]:
    """A kernel launched with fewer threads than elements reaches them all only if it knows how many threads the
    grid has: its PTX reads %nctaid.x (gridDim.x), however the source spells it. (Or it hands out work through a
    global atomic counter; the live run's two grids judge that.)"""
    if k.ptx is None:
        return [not_judged(f"whether the kernel reads gridDim: {NO_PTX}; the live run's two grids judge it")]
    if _reads_grid_size(k):
        return [Finding(True, "the compiled kernel reads gridDim.x (%nctaid.x in its PTX): a grid-stride loop can "
                              "cover any n")]
    if _takes_work_from_an_atomic(k):
        return [Finding(True, "the compiled kernel does not read gridDim.x but takes its work through a global atomic: "
                              "the live run's two grids judge whether it reaches every element")]
    return [Finding(False, "the compiled kernel never reads gridDim.x (no %nctaid.x in its PTX): launched with fewer "
                           "threads than elements (as here), it cannot reach them all. Step by gridDim.x * blockDim.x.")]


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
    correct_files={"the grid's size read with inline PTX, gridDim never spelled": "correct_grid_size_read_in_ptx"},
    live=cases.scale_cases,
    sizes=(1, 255, 257, 4096, 100_003, cases.SCALE_TIMED_SIZE, cases.SCALE_HUGE_SIZE),
    static=_uses_grid_stride,
)


REGISTER_BUDGET = 32


def _within_budget(source: str, k: Compiled) -> list[Finding]:
    """Registers from ptxas's report; local memory from the stack frame, the spills and the SASS's LDL/STL: a
    small array indexed at run time lives in a stack frame with no spill reported."""
    return [Finding(k.res.registers <= REGISTER_BUDGET,
                    f"{k.res.registers} registers per thread (budget {REGISTER_BUDGET})"),
            in_registers(k, "no local memory (no stack frame, no spills, no LDL/STL): the partial sums stay in registers",
                         "The budget was met by putting values in local memory (off-chip, cached in L1 and L2), each "
                         "use a load or a store, which costs more than the registers saved: an array indexed by a value "
                         "known only at run time (part[c % 16]) lives there, and so do spills. Keep the partial sums in "
                         "scalars, or index the array with constants only (an unrolled loop)")]


ROW_SUMS = KernelExercise(
    files=ExerciseKernel("row_sum_squares_budget", "row_sum_squares"), notebook="03_occupancy",
    task=(f"`row_sum_squares(float* out, const float* in, int rows, int cols)`: one thread per row, "
          f"out[r] = Σ_c in[r·cols + c]². The starter is correct but keeps 32 partial sums; "
          f"make it compile to at most {REGISTER_BUDGET} registers per thread with no spills and no local memory "
          "(the checker reads ptxas's report and the SASS), and keep it correct at every size."),
    hint=("Registers hold what is live at once: 32 partial sums are 32 registers before anything else. Two to four "
          "partial sums and a loop unrolled a few times keep enough loads in flight. Capping registers with "
          "__launch_bounds__ alone makes ptxas spill instead."),
    wrong_files={
        "the starter (too many registers)": "starter",
        "rows past the end": "wrong_rows_past_the_end",
        "an unrolled loop that drops the last 4 when cols is a multiple of 4": "wrong_unroll_drops_the_last_four",
        "partial sums in an array indexed at run time (local memory, no spills)": "wrong_partial_sums_in_local_memory",
    },
    correct_files={"two partial sums, the loop unrolled by hand": "correct_two_sums_unrolled_by_hand"},
    live=cases.row_sum_cases,
    sizes=tuple(cases.ROW_SUM_COLS),
    size_labels=tuple(f"{rows:,}×{cols:,}" for rows, cols in cases.ROW_SUM_COLS.items()),   # rows × cols
    static=_within_budget,
)

TRANSPOSE_BANKS = (BankWavefronts("ld"), BankWavefronts("st"))
TRANSPOSE_EMULATED = 64   # rows = cols of the block the static checks emulate: a full 32 × 32 tile, inside the matrix


def _transpose_tile_checks(source: str, k: Compiled) -> list[Finding]:
    """A shared tile (the compile report), its accesses through the bank model and the barrier between its writes
    and its reads, both from one block of the compiled kernel run on the CPU: the addresses it computes, however
    the source lays the tile out (padded, swizzled, rotated)."""
    smem = k.res.static_smem_bytes
    if smem < 32 * 32 * 4:
        return [Finding(False, f"{smem} B of static shared memory: the transpose goes through a shared-memory tile of at "
                               "least 32 × 32 floats (`__shared__ float tile[32][PITCH]`)")]
    out = [Finding(True, f"{smem:,} B of static shared memory: room for a 32 × 32 float tile")]
    n = TRANSPOSE_EMULATED
    launched = f"one block of 32 × 8 threads at {n} × {n}"
    trace, why = _emulated(k, [Array("out", n * n * 4), Array("in", n * n * 4), n, n], (32, 8, 1), (n // 32, n // 32, 1))
    if trace is None:
        return out + [not_judged(f"the tile's {bank.accesses} through the bank model: not judged here ({why}); the "
                                 "count of the live run judges them", counted=True) for bank in TRANSPOSE_BANKS] + [
            not_judged(f"the barrier between the tile's writes and its reads: not judged here ({why}); racecheck "
                       "judges it in the live run")]
    return out + [bank_finding(trace, bank, launched) for bank in TRANSPOSE_BANKS] + [
        race_finding(trace, launched, "Threads read tile elements other threads have not written yet: put a "
                                      "__syncthreads() between the tile's writes and its reads")]


TRANSPOSE = KernelExercise(
    files=TRANSPOSE_TILE, notebook="05_shared_memory",
    task=("Write `transpose(float* out, const float* in, int rows, int cols)`: out (cols × rows) = inᵀ, through a "
          "32×32 shared-memory tile, reading rows of `in` and writing rows of `out` (both coalesced). The launch is "
          "block (32, 8), grid (⌈cols/32⌉, ⌈rows/32⌉). The checker puts the addresses your compiled kernel computes "
          "through the bank model (and, on a GPU, counts the conflicts): reading one column must not make a warp hit "
          "one bank many times. Step each thread's rows by the "
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
    correct_files={"an unpadded tile, each row rotated by its index": "correct_rotated_unpadded_tile"},
    live=cases.transpose_cases,
    sizes=cases.TRANSPOSE_SIZES,
    size_labels=tuple(f"{rows:,}×{cols:,}" for rows, cols in cases.TRANSPOSE_COLS.items()),   # rows × cols
    static=_transpose_tile_checks,
    counts=(SectorUse("ld"), SectorUse("st"), *TRANSPOSE_BANKS),
)


GEMM_EMULATED = (64, 64, 16)   # M, N, K of the block the static checks emulate: two steps of K


def _register_tile_checks(source: str, k: Compiled) -> list[Finding]:
    """The stage tiles (the compile report), the barriers between their writes and reads (one block of the compiled
    kernel run on the CPU over two steps of K: a race is a word one warp writes and another touches between the
    same two barriers) and the accumulators in registers."""
    m, n, kk = GEMM_EMULATED
    launched = f"one block of 512 threads at M = {m}, N = {n}, K = {kk}: two steps"
    trace, why = _emulated(k, [Array("A", m * kk * 4), Array("B", kk * n * 4), Array("C", m * n * 4), m, n, kk],
                           (512, 1, 1))
    race = (race_finding(trace, launched, "A stage needs a barrier after its tiles are written and one after they are "
                                          "read (or a second buffer for the next stage): otherwise a stage's stores "
                                          "overwrite tiles other threads are still reading") if trace is not None else
            not_judged(f"the barriers around the stage tiles: not judged here ({why}); racecheck judges them in the "
                       "live run"))
    return [
        Finding(k.res.static_smem_bytes >= 2 * 8 * 64 * 4,
                f"{k.res.static_smem_bytes} B of static shared memory (the 64×8 and 8×64 stage tiles need 4,096)"),
        race,
        in_registers(k, "the 8 accumulators stay in registers (no stack frame, no spills, no LDL/STL)",
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
    correct_files={"double-buffered stage tiles, one barrier a step": "correct_double_buffered_one_barrier"},
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
MYSTERY_EDGE_COLS = 33   # the emulated ragged launch's row length: short, odd


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


def _row_arrays(rows: int, cols: int) -> list:
    return [Array("out", rows * cols * 4), Array("in", rows * cols * 4), Array("weight", cols * 4), rows, cols]


def _row_buffer_finding(k: Compiled, per_block: int) -> Finding:
    """A row kept in a fixed-size array, local or shared: the compiled kernel run on the CPU for one row as wide as
    the widest the checker tests (the threads of that row, in block 0); an access past its array's end overflows."""
    widest = max(c for _, c in MYSTERY_SHAPES)
    trace, why = _emulated(k, _row_arrays(per_block, widest), (MYSTERY_THREADS, 1, 1),
                           threads=range(max(1, MYSTERY_THREADS // per_block)))
    if trace is None:
        return not_judged(f"buffer overflow: not judged here ({why}); the live run's rows of up to {widest:,} floats "
                          "and memcheck judge it")
    past = outside_finding(trace, ("local", "shared"))
    launched = f"the compiled kernel run on the CPU for one row of {widest:,} floats, the widest the checker tests"
    if past is None:
        return Finding(True, f"buffer overflow: none ({launched}: every access stays inside its array)")
    return Finding(False, f"buffer overflow: {launched}, {past}: a fixed-size array holds the row and nothing stops a "
                          "longer one, so each column past its end writes memory the array does not own")


def _row_edges_finding(k: Compiled, per_block: int) -> Finding:
    """The last block of a launch whose row count is one past a multiple of ROWS_PER_BLOCK, run on the CPU from
    the compiled kernel: its rows past the last must read and write nothing, however the guard is written."""
    rows = per_block + 1
    trace, why = _emulated(k, _row_arrays(rows, MYSTERY_EDGE_COLS), (MYSTERY_THREADS, 1, 1), (2, 1, 1), (1, 0, 0))
    if trace is None:
        return not_judged(f"edges: not judged here ({why}); the live run's shapes (4,097 rows among them) and memcheck "
                          "judge them")
    past = outside_finding(trace, ("global",))
    launched = (f"the compiled kernel run on the CPU for the last block of a {rows} × {MYSTERY_EDGE_COLS} launch, one row "
                "past a multiple of ROWS_PER_BLOCK")
    if past is None:
        return Finding(True, f"edges: the rows past the last touch nothing ({launched})")
    return Finding(False, f"edges: {launched}, {past}: the last block's extra rows read and write past the arrays "
                          "when rows is not a multiple of ROWS_PER_BLOCK. Leave the rows past `rows` out")


def _row_launch_problem(per_block: int | None) -> Finding | None:
    if per_block is None or per_block < 1 or MYSTERY_THREADS % per_block:
        return Finding(False, "define ROWS_PER_BLOCK as a divisor of 256 (#define ROWS_PER_BLOCK 8, say): the "
                              f"checker launches ⌈rows / ROWS_PER_BLOCK⌉ blocks of {MYSTERY_THREADS} threads")
    return None


def _row_launch(source: str) -> dict | None:
    per_block = rows_per_block(source)
    return None if _row_launch_problem(per_block) else {"rows_per_block": per_block}


def _mystery_checks(source: str, k: Compiled) -> list[Finding]:
    """One finding per defect of the capstone: the launch (ROWS_PER_BLOCK, read from the source) through the wave,
    occupancy and sector models, the compile report and SASS for local memory, and the compiled kernel run on the
    CPU for the buffer and the edges."""

    res = k.res
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
    local = local_memory(k.sass) if k.sass is not None else 0
    in_local = res.stack_frame_bytes or res.spills or local
    counted = f", {local} LDL/STL in the SASS" if k.sass is not None else ""
    out.append(Finding(not in_local, f"local memory: none (no stack frame, no spills{', no LDL/STL' * (k.sass is not None)})"
                       if not in_local else
                       f"local memory: {res.stack_frame_bytes:,} B stack frame per thread, {res.spill_store_bytes} B "
                       f"spilled{counted}: an array indexed at run time cannot live in registers, so it lives in local "
                       "memory (device memory, cached in L1 and L2)"))
    out.append(_row_buffer_finding(k, per_block))
    out.append(_row_edges_finding(k, per_block))
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
    correct_files={"the row guard written against the rows the block has left": "correct_guard_on_rows_left"},
    live=cases.rms_norm_cases,
    **_shape_cases(MYSTERY_SHAPES),
    static=_mystery_checks,
    launch=_row_launch,
    counts=(SectorUse("ld"),),
)

# ---- notebook 04: row sums whose loads are coalesced

def _combines_across_threads(k: Compiled) -> bool:
    """A shuffle, a warp reduction, an atomic or a shared-memory access in the PTX: a way for one thread's value
    to reach another."""
    for op in k.ptx.opcodes():
        base, *modifiers = op.split(".")
        if base in ("shfl", "redux", "atom", "red") or (base in ("ld", "st") and any(m.startswith("shared")
                                                                                       for m in modifiers)):
            return True
    return False


def _warp_row_sum_checks(source: str, k: Compiled) -> list[Finding]:
    per_block = rows_per_block(source)
    if (problem := _row_launch_problem(per_block)) is not None:
        return [problem]
    out = [_lanes_per_row_finding(per_block, MYSTERY_TIMED_SHAPE[1])]
    if MYSTERY_THREADS // per_block > 1:
        if k.ptx is None:
            out.append(not_judged(f"whether the partial sums of a row's threads are combined: {NO_PTX}; the live run's "
                                  "results judge it"))
        elif _combines_across_threads(k):
            out.append(Finding(True, "the partial sums of a row's threads can be combined (the compiled kernel shuffles "
                                     "between lanes, uses shared memory or an atomic)"))
        else:
            out.append(Finding(False, "several threads share a row, but the compiled kernel never combines their "
                                      "partial sums (no shuffle, shared memory or atomic in its PTX): use "
                                      "__shfl_xor_sync (or shared memory)"))
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
    correct_files={"half a warp per row, summed by the course's half_warp_sum": "correct_half_warp_per_row_course_sum"},
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


TILE_EDGE_SHAPE = (65, 63)   # a shape of the live run whose last tile is ragged both ways: the emulated corner


def _persistent_tile_checks(source: str, k: Compiled) -> list[Finding]:
    """gridDim read by the compiled kernel (a persistent grid smaller than the tiles must step by it), and the
    block of the corner tile run on the CPU: an edge tile must read and write nothing outside the matrix."""
    rows, cols = TILE_TIMED_SHAPE
    grid = waves.tile_grid(rows, cols, TILE_EDGE, TILE_EDGE)
    blocks = persistent_blocks(_target_sm_count(), _target_threads_per_sm())
    most, fewest = -(-grid.blocks // blocks), grid.blocks // blocks
    if k.ptx is None:
        return [not_judged(f"whether the kernel reads gridDim: {NO_PTX}; the live run's two grids judge it"),
                not_judged(f"the edge tiles: {NO_PTX}; the live run's shapes and memcheck judge them")]
    if _reads_grid_size(k):
        out = [Finding(True, f"the compiled kernel reads gridDim.x (%nctaid.x in its PTX), so its {blocks:,} blocks can "
                             f"walk all the tiles (at {rows:,}²: {grid.blocks:,} tiles of {TILE_EDGE}², {fewest} or {most} "
                             "per block)")]
    else:
        out = [Finding(False, f"the compiled kernel never reads gridDim.x (no %nctaid.x in its PTX): with {blocks:,} blocks "
                              f"(all the SMs hold at once) it cannot reach the {grid.blocks:,} tiles of a matrix of "
                              f"{rows:,}²; loop over tiles, stepping by gridDim.x")]
    edge_rows, edge_cols = TILE_EDGE_SHAPE
    tiles = waves.tile_grid(edge_rows, edge_cols, TILE_EDGE, TILE_EDGE).blocks
    launched = (f"the compiled kernel run on the CPU for the block of the last tile of a {edge_rows} × {edge_cols} "
                f"matrix, {tiles} blocks of 256 threads")
    trace, why = _emulated(k, [Array("out", edge_rows * edge_cols * 4), Array("in", edge_rows * edge_cols * 4), 2.0,
                               edge_rows, edge_cols], (256, 1, 1), (tiles, 1, 1), (tiles - 1, 0, 0))
    if trace is None:
        out.append(not_judged(f"the edge tiles: not judged here ({why}); the live run's shapes and memcheck judge them"))
    elif (past := outside_finding(trace, ("global",))) is None:
        out.append(Finding(True, f"the edge tiles stay inside the matrix ({launched}: nothing read or written past it)"))
    else:
        out.append(Finding(False, f"the edge tiles reach outside the matrix: {launched}, {past}. Mask the edge tiles "
                                  "against rows and cols"))
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
    correct_files={"the edges clamped with min() instead of compared": "correct_edges_clamped_with_min"},
    live=cases.scale_tiles_cases,
    **_shape_cases(TILE_SHAPES),
    static=_persistent_tile_checks,
)


# ---- notebook 08: the epilogue fused into one pass


def _fused_epilogue_checks(source: str, k: Compiled) -> list[Finding]:
    """The kernels the cubin holds (a kernel declared before it is defined is still one), and local memory."""
    kernels = k.kernels
    if not kernels:   # the cubin's symbol table could not be read
        return [not_judged("how many kernels the cell holds: not judged here (the cubin's symbol table could not be "
                           "read); the live run times the kernel the checker launches"),
                in_registers(k, "no local memory (no stack frame, no spills, no LDL/STL)",
                             "The fused kernel keeps values in local memory, a load and a store each")]
    out = [Finding(len(kernels) == 1, "one kernel in the compiled cell: the three steps in one pass" if len(kernels) == 1
                   else f"{len(kernels)} kernels in the compiled cell ({', '.join(kernels)}): fuse the steps into "
                   "bias_gelu_residual alone (each extra pass would write its result to HBM and read it back)")]
    out.append(in_registers(k, "no local memory (no stack frame, no spills, no LDL/STL)",
                            "The fused kernel keeps values in local memory, a load and a store each"))
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
    correct_files={"the kernel declared before it is defined": "correct_declared_before_defined"},
    live=cases.fused_epilogue_cases,
    **_shape_cases(FUSED_SHAPES),
    static=_fused_epilogue_checks,
)


# ---- notebook 09: a two-stage cp.async pipeline

PIPELINE_TILE_BYTES = PIPELINE_THREADS * 4 * 16        # 16 KiB: four float4s per thread
PIPELINE_SIZES = (4, 1028, 65540, 1 << 20, (1 << 26) + 4)


def _pipeline_checks(source: str, k: Compiled) -> list[Finding]:
    sass, res = k.sass, k.res
    if sass is None:
        out = [not_judged(f"the cp.async copies and their waits: {NO_SASS}; the live run's speed bar judges them")]
    else:
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


def _handoff(sass: Listing) -> Finding:
    """The slots' hand-off, as rules on every path of the SASS: the producer waits on an mbarrier before each bulk
    copy (none copies straight from the kernel's entry), the consumers wait on one between one release and the
    next, and a proxy fence stands between the consumers' reads of a slot and its release."""
    releases, unwaited = _path_rule(sass, _is(RELEASE), _is(RELEASE), _is(WAIT), entry_is_hazard=True)
    copies, uncopied = _path_rule(sass, _is("UBLKCP"), lambda i: False, _is(WAIT), entry_is_hazard=True)
    _, unfenced = unfenced_releases(sass)
    problems = []
    if not releases:
        problems.append("no slot is released: the consumers must arrive on empty[s] once they have read slot s")
    if unwaited:
        problems.append(f"{unwaited} slot release{'s' * (unwaited != 1)} with no mbarrier wait before it since the "
                        "last release (or the kernel's start): the consumers must wait on full[s] before they read "
                        "and release slot s")
    if uncopied:
        problems.append(f"{uncopied} bulk cop{'ies' if uncopied != 1 else 'y'} some path reaches from the kernel's start "
                        "with no mbarrier wait: the producer must wait on empty[s] before it refills slot s")
    if unfenced:
        problems.append(f"{unfenced} slot release{'s' * (unfenced != 1)} some path reaches from a read of shared memory "
                        "with no fence.proxy.async between: the consumers' reads must be ordered before the TMA "
                        "refills the slot; release through the fenced helper, after the reads")
    if problems:
        return Finding(False, "; ".join(problems))
    return Finding(True, "both roles wait on a barrier before they touch a slot, and every path from the consumers' "
                         "reads to a release passes a proxy fence (rules on every path of the SASS)")


def _specialized_checks(source: str, k: Compiled) -> list[Finding]:
    sass, res = k.sass, k.res
    out = []
    if sass is None:
        out.append(not_judged(f"the bulk copies and the slots' hand-off: {NO_SASS}; the live run judges them"))
    else:
        loads = count_ops(sass, "UBLKCP") > 0
        counts = any(mnemonic(i) == "SYNCS.ARRIVE.TRANS64" for i in sass)   # an arrival that sets a byte count
        if loads and counts:
            out.append(Finding(True, "the producer bulk-loads tiles and sets the bytes each full barrier expects"))
        elif not loads:
            out.append(Finding(False, "no tile is loaded: the producer must call mbar_expect_bytes and bulk_load"))
        else:
            out.append(Finding(False, "the bulk loads are never counted: call mbar_expect_bytes before each bulk_load"))
        try:
            out.append(_handoff(sass))
        except ControlFlowUnknown as why:
            out.append(not_judged(f"the slots' hand-off: not judged here ({why}); the live run judges it"))
        if not loads:   # the compiler drops slots nothing writes or reads: their size says nothing yet
            return out
    stages = res.static_smem_bytes // SPECIALIZED_TILE_BYTES
    out.append(Finding(stages >= 2, f"{res.static_smem_bytes:,} B of shared memory: {stages} slot"
                       f"{'s' * (stages != 1)} of {SPECIALIZED_TILE_BYTES // 1024} KiB"))
    return out


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
        "the proxy fence before the slot's reads": "wrong_fence_before_the_reads",
    },
    correct_files={"the proxy fence far from the release, on its path": "correct_fence_far_from_the_release"},
    live=cases.warp_specialized_cases,
    sizes=PIPELINE_SIZES,
    static=_specialized_checks,
    min_cc=9.0,
    fault_hint=("Here that most likely means a barrier wait that never completed: after 0.5 s mbar_wait traps. "
                "Check each wait's parity and that each mbar_expect_bytes counts exactly the bytes its copy brings"),
)


# ---- notebook 10: the consumers of a warp-specialized wgmma GEMM

def _wgmma_consumer_checks(source: str, k: Compiled) -> list[Finding]:
    """The consumers' protocol as rules on every path of the SASS: a wgmma (HGMMA) reads a slot only after an
    mbarrier wait since the last release (or the kernel's start), and a release comes only after a wgmma wait
    (WARPGROUP.DEPBAR) since the last HGMMA."""
    sass = k.sass
    if sass is None:
        return [not_judged(f"the consumers' wgmmas, waits and releases: {NO_SASS}; the live run judges them")]
    multiplies = count_ops(sass, "HGMMA")
    wgmma = Finding(multiplies > 0, f"the consumers multiply with wgmma ({multiplies} HGMMA instructions in the SASS)"
                    if multiplies else "no wgmma in the kernel's SASS (no HGMMA): the consumers multiply nothing")
    try:
        _, unwaited = _path_rule(sass, _is("HGMMA"), _is(RELEASE), _is(WAIT), entry_is_hazard=True)
        releases, early = releases_before_wgmma_wait(sass)
    except ControlFlowUnknown as why:
        return [wgmma, not_judged(f"the consumers' waits and releases: not judged here ({why}); the live run judges "
                                  "them")]
    if not multiplies:
        wait = Finding(False, "no wgmma waits on a slot's full barrier, since there is none: the consumers must wait on "
                              "full[slot] before their wgmmas read it")
    elif unwaited:
        wait = Finding(False, f"{unwaited} HGMMA{'s' * (unwaited != 1)} some path reaches from the kernel's start or "
                              "from a slot release with no mbarrier wait between: the consumers must wait on "
                              "full[slot] before their wgmmas read it")
    else:
        wait = Finding(True, "the consumers wait on a slot's full barrier before their wgmmas read it (an mbarrier wait "
                             "on every path to an HGMMA since the last release)")
    if not releases:
        freed = Finding(False, "no slot is ever freed: the producer waits on empty[slot] for the consumers, and after "
                               "STAGES slots the wait traps. Arrive on empty once the wgmmas are done with the slot")
    elif early:
        freed = Finding(False, f"{early} slot release{'s' * (early != 1)} some path reaches from a wgmma issued with no "
                               "wgmma wait between (no WARPGROUP.DEPBAR between the HGMMA and the arrive): the TMA may "
                               "refill the slot while the tensor cores still read it. Call wgmma_wait before release")
    else:
        freed = Finding(True, "each slot is freed after a wgmma wait (a WARPGROUP.DEPBAR on every path from an HGMMA to "
                              "a release)")
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

def _decode_checks(source: str, k: Compiled) -> list[Finding]:
    """The running softmaxes and the query rows stay in registers: a per-head array indexed by a loop the
    compiler could not unroll lands in local memory, read and written on every token."""
    return [in_registers(k, f"the {DECODE_GROUP} query heads' state stays in registers (no spills, no local "
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


# ---- notebook 13: the online softmax of one tile of keys

def _softmax_tile_checks(source: str, k: Compiled) -> list[Finding]:
    """The running maximum, sum and accumulator stay in registers across the tiles."""
    return [in_registers(k, "the running maximum, sum and accumulator stay in registers (no spills, no local memory)",
                         "Something of the row's state lives in local memory, read and written every tile: keep it in "
                         "scalars (m, l, acc0, acc1) or arrays indexed by constants")]


SOFTMAX_TILE = KernelExercise(
    files=ExerciseKernel("online_softmax_tile", "attention_rows"), notebook="13_attention",
    task=("`attention_rows` gives each query row one warp and walks the keys in tiles of 32, lane i scoring key "
          "t0 + i. Write the update that folds one tile into the row's running state: its maximum m, the sum l of "
          "exp2(score − m) and the accumulator acc of exp2(score − m) · v. As given it takes exp2f of each raw score, "
          "which is right while scores are small and overflows to inf (then NaN) once a base-2 score passes 128. "
          "The checker runs it at one key, tails of a tile, the causal diagonal, rows that see no key, and scores "
          "grown a hundred times, and times it against the reference solution."),
    hint=("Per tile: the tile's maximum over the 32 lanes (__shfl_xor_sync with fmaxf), m_new = max(m, tile max); "
          "every term summed so far was taken against m, so multiply l and acc by exp2f(m − m_new) before adding "
          "this tile's exp2f(score − m_new) terms; then m = m_new. On the first tile m is −inf and the factor is 0."),
    wrong_files={
        "the starter (no running maximum: exp2f of a large score overflows)": "starter",
        "the maximum moves but l and acc keep their old scale": "wrong_no_rescale",
        "each lane's own score as the maximum": "wrong_lane_own_maximum",
        "the tile's terms rescaled with the old ones": "wrong_tile_rescaled_with_the_old_terms",
    },
    live=cases.softmax_tile_cases,
    sizes=tuple(range(len(cases.SOFTMAX_TILE_SHAPES))),
    size_labels=tuple(f"{q}×{k}" + (" causal" if c else "") + (f" ×{s:g}" if s != 1 else "")
                      for q, k, c, s in cases.SOFTMAX_TILE_SHAPES),
    static=_softmax_tile_checks,
    slow_hint=("The update is a handful of instructions a tile: look for work done per key that the reference does "
               "once per tile (a maximum or a sum recomputed for every key, a division inside the loop)."),
)

EXERCISES: dict[str, KernelExercise] = {e.name: e for e in (SCALE, ROW_SUMS, WARP_ROW_SUMS, TRANSPOSE, TILE_GEMM,
                                                            PERSISTENT_TILES, FUSED_EPILOGUE, ASYNC_PIPELINE,
                                                            WARP_SPECIALIZED, WGMMA_CONSUMER, GROUPED_DECODE, MYSTERY,
                                                            SOFTMAX_TILE)}


def exercise(name: str) -> KernelExercise:
    if name not in EXERCISES:
        raise KeyError(f"no kernel exercise {name!r}; there are: {', '.join(EXERCISES)}")
    return EXERCISES[name]
