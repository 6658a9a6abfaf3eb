"""The write-it-yourself kernel checker without a GPU: every reference solution compiles and passes
its static checks; wrong solutions the static checks can see are rejected with the learner's
message, and correct ones written otherwise than the reference are accepted (the checks read the
compiled kernel, never the source's spelling); compile errors name the cell's own lines; bad input
is told what to do."""
import re

import pytest

from course_lib import magic
from course_lib.core import cuda, runtime
from course_lib.exercises.kernel import catalog
from course_lib.exercises.kernel import checker as ke
from course_lib.measure import sass


@pytest.fixture(autouse=True)
def replay(monkeypatch):
    monkeypatch.setenv("COURSE_MODE", "replay")


@pytest.mark.parametrize("name", list(catalog.EXERCISES))
def test_every_reference_solution_passes_what_replay_can_check(name):
    verdict = ke.check(name, ke.exercise(name).solution)
    assert verdict.correct, verdict
    assert "Not run: no GPU here" in verdict and "Not checked: its results" in verdict


def test_a_kernel_that_cannot_stride_is_rejected_before_it_runs():
    verdict = ke.check("scale_grid_stride", catalog.SCALE.wrong["one element per thread"])
    assert not verdict.correct and "never reads gridDim" in verdict


def test_the_register_starter_is_over_budget_and_says_by_how_much():
    verdict = ke.check("row_sum_squares_budget", catalog.ROW_SUMS.starter)
    assert not verdict.correct
    assert f"(budget {catalog.REGISTER_BUDGET})" in verdict and "✘" in verdict


def test_a_budget_met_by_spilling_is_rejected():
    capped = '__launch_bounds__(1024, 2)\n'.join(catalog.ROW_SUMS.starter.split("__global__ ", 1))
    capped = capped.replace('extern "C" __launch_bounds__', 'extern "C" __global__ __launch_bounds__')
    verdict = ke.check("row_sum_squares_budget", capped)
    assert not verdict.correct and ("spills" in verdict or "registers per thread" in verdict)


def test_a_budget_met_with_an_array_in_local_memory_and_no_spill_is_rejected_naming_local_memory():
    """Class 6 of issue 63: sixteen partial sums indexed by c % 16 live in a stack frame. ptxas reports no spill
    and the registers are within the budget, so the spill count alone would pass it; the stack frame and the
    SASS's LDL/STL do not."""
    ex = catalog.ROW_SUMS
    source = ex.wrong["partial sums in an array indexed at run time (local memory, no spills)"]
    _, res, _ = ke.compile_exercise(ex, source, ke.exercise_arch(ex)[0])
    assert res.registers <= catalog.REGISTER_BUDGET and not res.spills and res.stack_frame_bytes > 0, res
    verdict = ke.check("row_sum_squares_budget", source)
    assert not verdict.correct and f"✔ {res.registers} registers per thread" in verdict, verdict
    assert "no spills, a 64 B stack frame (local memory)." in verdict.splitlines()[0], verdict
    failed = [f.text for f in _static("row_sum_squares_budget", source) if not f.ok]
    assert len(failed) == 1 and failed[0].startswith("local memory: a 64 B stack frame, 0 B of spills")
    assert re.search(r"[1-9]\d* LDL/STL in the SASS", failed[0]), failed


def test_wrong_solutions_the_static_checks_cannot_see_are_left_to_the_live_run():
    # an off-by-one tail and rows past the end compile and pass the static checks: only a run finds them
    for name, label in (("scale_grid_stride", "off by one at the tail"), ("row_sum_squares_budget", "rows past the end")):
        verdict = ke.check(name, ke.exercise(name).wrong[label])
        assert "Not run: no GPU here" in verdict


def test_compile_errors_name_the_cells_own_line():
    verdict = ke.check("scale_grid_stride", 'extern "C" __global__ void scale(float* y) {\n    y[0] = nope;\n}\n')
    assert not verdict.correct and "your cell(2): error" in verdict and "nope" in verdict


def test_a_cell_without_the_kernel_says_which_name_is_launched():
    verdict = ke.check("scale_grid_stride", 'extern "C" __global__ void scal(float* y) {}\n')
    assert not verdict.correct and "void scale(...)" in verdict


def test_empty_cell_and_unknown_exercise():
    assert not ke.check("scale_grid_stride", "   \n").correct
    with pytest.raises(KeyError, match="there are: scale_grid_stride"):
        ke.check("no_such", "x")


def test_the_magic_prints_the_verdict_and_its_usage(capsys):
    magic.cuda_exercise("scale_grid_stride", catalog.SCALE.solution)
    assert "reads gridDim" in capsys.readouterr().out
    magic.cuda_exercise("", "x")
    assert "usage: %%cuda_exercise NAME" in capsys.readouterr().out
    magic.cuda_exercise("scale_grid_stride --fast", "x")
    assert "usage" in capsys.readouterr().out
    magic.cuda_exercise("nope", "x")
    assert "no kernel exercise 'nope'" in capsys.readouterr().out


def test_the_extension_registers_a_cell_magic_and_the_name_its_hint_line_uses():
    got, namespace = {}, {}

    class Shell:
        def register_magic_function(self, fn, magic_kind, magic_name):
            got.update(fn=fn, kind=magic_kind, name=magic_name)

        def push(self, variables):
            namespace.update(variables)

    magic.load_ipython_extension(Shell())
    assert got == {"fn": magic.cuda_exercise, "kind": "cell", "name": "cuda_exercise"}
    # a verdict's "Stuck? print(kernel_exercises.hint(...))" runs in the next cell as printed
    hint_line = ke.check("scale_grid_stride", catalog.SCALE.starter).splitlines()[-1]
    call = hint_line.split("Stuck? ", 1)[1]
    assert eval(call.removeprefix("print(")[:-1], namespace) == catalog.SCALE.hint


def test_the_time_limit_starts_when_the_child_is_ready_and_a_hang_is_stopped():
    import subprocess
    import sys
    import time

    slow_start = "import time; time.sleep(1.5); print('READY', flush=True); print('{}')"
    p = subprocess.Popen([sys.executable, "-c", slow_start], stdout=subprocess.PIPE, text=True)
    assert ke._communicate(p, 1.0) == (["READY", "{}"], None)       # start-up is not the kernel's time
    hang = "print('READY', flush=True); import time; time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", hang], stdout=subprocess.PIPE, text=True)
    t = time.monotonic()
    assert ke._communicate(p, 1.0) == (["READY"], "hung")
    assert time.monotonic() - t < 10 and p.returncode is not None     # stopped, not left running


def test_the_transpose_tile_goes_through_the_bank_model_over_the_addresses_the_compiled_kernel_computes():
    t = catalog.TRANSPOSE
    unpadded = ke.check("transpose_tile", t.wrong["no padding (32-way conflicts)"])
    assert not unpadded.correct and "✘ the tile's loads: 32 warp-wide loads took 1,024 wavefronts" in unpadded
    assert "32-way conflict" in unpadded and "✔ the tile's stores" in unpadded, unpadded
    nothing = ke.check("transpose_tile", t.wrong["an XOR that moves nothing (dy >> 5 is 0 in a 32-row tile)"])
    assert not nothing.correct and "32-way conflict" in nothing   # an XOR in the source is no longer taken on trust
    no_barrier = ke.check("transpose_tile", t.wrong["no barrier"])
    assert not no_barrier.correct and "✘ a race on shared memory: between two barriers, warp 0 writes tile's" in no_barrier
    swizzled = (t.solution.replace("tile[32][33];   // one float of padding per row: a column spans 32 banks", "tile[32][32];")
                .replace("tile[dy][threadIdx.x] =", "tile[dy][threadIdx.x ^ dy] =")
                .replace("= tile[threadIdx.x][dy];", "= tile[threadIdx.x][dy ^ threadIdx.x];"))
    assert ke.check("transpose_tile", swizzled).correct
    rotated = t.correct["an unpadded tile, each row rotated by its index"]
    assert "[32][32]" in rotated and "^" not in rotated   # neither padded nor XOR-swizzled: only the addresses tell
    verdict = ke.check("transpose_tile", rotated)
    assert verdict.correct and "1.00 per instruction" in verdict and "✘" not in verdict, verdict
    assert "tile of at least 32 × 32 floats" in ke.check("transpose_tile", catalog.SCALE.solution.replace("scale", "transpose"))
    pitch_34 = t.solution.replace("tile[32][33]", "tile[32][34]")
    assert "2-way conflict" in ke.check("transpose_tile", pitch_34)   # even pitches pair lanes up


def test_the_register_tile_gemm_needs_its_tiles_and_no_race_between_its_barriers():
    """One barrier a step lets the next step's stores overwrite a tile other warps still read: a race the block
    run on the CPU shows. Double-buffered tiles need only one barrier a step (and two copies of the tiles): no race."""
    t = catalog.TILE_GEMM
    one = ke.check("register_tile_gemm", t.wrong["one barrier per step"])
    assert not one.correct and "✘ a race on shared memory: between two barriers, warp 0 writes a_tile's" in one, one
    double = t.correct["double-buffered stage tiles, one barrier a step"]
    assert double.count("__syncthreads()") == 2   # one before the loop, one a step
    verdict = ke.check("register_tile_gemm", double)
    assert verdict.correct and "✔ no race on shared memory" in verdict and "8192 B of static shared memory" in verdict
    starter = ke.check("register_tile_gemm", t.starter)
    assert not starter.correct and "0 B of static shared memory" in starter
    assert "1000×333×77" in ke.check("register_tile_gemm", t.solution)   # the shapes a live run uses, named


def _marks(verdict) -> dict[str, bool]:
    """The capstone's defect lines: defect name -> passed."""
    out = {}
    for ln in str(verdict).splitlines():
        for d in catalog.MYSTERY_DEFECTS:
            if ln.strip()[2:].startswith(d + ":"):
                out[d] = ln.strip().startswith("✔")
    return out


@pytest.mark.parametrize("label,remaining", [
    ("the mystery as given", set(catalog.MYSTERY_DEFECTS)),
    ("one warp per row, no row guard", {"edges"}),
    ("one warp per row, the row kept in a local array", {"local memory", "buffer overflow"}),
    ("one thread per row, guarded", {"too little parallelism", "uncoalesced loads", "local memory", "buffer overflow"}),
    ("the row in a fixed 8,192-float shared buffer", {"buffer overflow"}),
])
def test_the_capstone_names_exactly_the_defects_that_remain(label, remaining):
    verdict = ke.check("mystery_rms_norm", catalog.MYSTERY.wrong[label], live=False)
    marks = _marks(verdict)
    assert set(marks) == set(catalog.MYSTERY_DEFECTS), verdict
    assert {d for d, ok in marks.items() if not ok} == remaining, verdict
    assert not verdict.correct


def test_the_capstone_solution_clears_every_defect():
    marks = _marks(ke.check("mystery_rms_norm", catalog.MYSTERY.solution, live=False))
    assert marks == {d: True for d in catalog.MYSTERY_DEFECTS}


def test_the_capstone_judges_its_edges_and_buffers_by_running_the_compiled_kernel_not_by_reading_it():
    """A guard against the rows the block has left (no comparison with `rows` in sight) passes; a row guard in a
    comment, with none in the code, does not; a fixed array whose loop is written as a while loop still overflows."""
    ex = catalog.MYSTERY
    alternative = ex.correct["the row guard written against the rows the block has left"]
    assert not re.search(r"[<>]=?\s*rows\b|\brows\s*[<>]", alternative)   # what the old source search looked for
    assert _marks(ke.check("mystery_rms_norm", alternative, live=False)) == {d: True for d in catalog.MYSTERY_DEFECTS}
    unguarded = ex.wrong["one warp per row, no row guard"].replace("extern", "// if (row >= rows) return;\nextern", 1)
    verdict = ke.check("mystery_rms_norm", unguarded, live=False)
    assert _marks(verdict)["edges"] is False and "reads byte 1,188 of in, past its 1,188 B" in verdict, verdict
    local = ex.wrong["one warp per row, the row kept in a local array"]
    loop = re.search(r"for \(int (\w+) = ([^;]+); \1 < cols; \1 \+= 32\)", local)
    assert loop, "the local-array variant's loop moved: update this test"
    as_while = local.replace(loop.group(0), f"for (int {loop.group(1)} = {loop.group(2)}; cols > {loop.group(1)}; "
                                            f"{loop.group(1)} += 32)")
    verdict = ke.check("mystery_rms_norm", as_while, live=False)
    assert _marks(verdict)["buffer overflow"] is False and "past the 512 B its arrays take" in verdict, verdict


def test_the_capstone_reads_its_launch_from_the_source():
    from course_lib.launch.exercise_kernels import rows_per_block

    assert rows_per_block(catalog.MYSTERY.solution) == 8
    no_define = catalog.MYSTERY.solution.replace("#define ROWS_PER_BLOCK 8", "#define ROWS 8").replace("ROWS_PER_BLOCK", "8")
    verdict = ke.check("mystery_rms_norm", no_define, live=False)
    assert not verdict.correct and "define ROWS_PER_BLOCK" in verdict
    assert catalog.MYSTERY.launch(no_define) is None
    assert catalog.MYSTERY.launch(catalog.MYSTERY.solution.replace("ROWS_PER_BLOCK 8", "ROWS_PER_BLOCK 3")) is None
    assert catalog.MYSTERY.launch(catalog.MYSTERY.solution) == {"rows_per_block": 8}


@pytest.mark.parametrize("name", list(catalog.EXERCISES))
def test_each_exercise_has_its_cell_in_its_notebook_starting_from_the_starter(name):
    import re
    from pathlib import Path

    ex = ke.exercise(name)
    root = Path(__file__).resolve().parents[1]
    # a notebook waiting for its first GPU run keeps its source in drafts/ (notebook 13's exercise)
    path = next(p for p in (root / "notebooks" / f"{ex.notebook}.md", root / "drafts" / f"{ex.notebook}.md")
                if p.exists())
    text = path.read_text(encoding="utf-8")
    cell = re.search(r"```\{code-cell\}[^\n]*\n%%cuda_exercise " + re.escape(name) + r"\n(.*?)```", text, re.S)
    assert cell, f"{ex.notebook} has no %%cuda_exercise {name} cell"
    assert cell.group(1) == ex.starter
    assert "%load_ext course_lib.magic" in text[:cell.start()]


def test_an_exercise_for_a_newer_gpu_says_so_and_checks_what_it_can(monkeypatch):
    from course_lib.core import cuda

    monkeypatch.setattr(cuda, "target_arch", lambda: "sm_75")
    verdict = ke.check("async_pipeline", catalog.ASYNC_PIPELINE.solution, live=True)
    assert not verdict.correct and "needs compute capability 8 or newer" in verdict and "7.5" in verdict
    assert "Compiled for sm_80" in verdict and "✔ the kernel copies with cp.async" in verdict
    assert ke.check("scale_grid_stride", catalog.SCALE.solution, live=False).correct   # 7.5 is enough for the others


def test_every_exercise_is_its_files_and_carries_its_live_cases():
    from course_lib.exercises.kernel import cases, runner
    from course_lib.launch.exercise_kernels import EXERCISE_DIR

    assert {p.name for p in EXERCISE_DIR.iterdir() if p.is_dir()} == set(catalog.EXERCISES)
    for ex in catalog.EXERCISES.values():
        files = set(ex.files.files())
        assert {"starter", "solution", *ex.wrong_files.values(), *ex.correct_files.values()} <= files, ex.name
        assert all(f.startswith(("wrong_", "correct_")) or f in ("starter", "solution", "scalar_fix") for f in files), files
        assert all(f.startswith("correct_") for f in ex.correct_files.values()), ex.correct_files
        # every file is wired: a wrong one to be rejected, a correct one to be accepted
        assert {f for f in files if f.startswith(("wrong_", "correct_"))} <= {*ex.wrong_files.values(),
                                                                                *ex.correct_files.values()}, ex.name
        assert ex.live.__module__ == cases.__name__ and runner.resolve(runner.cases_address(ex.live)) is ex.live


@pytest.mark.parametrize("name,label", [(n, label) for n, e in catalog.EXERCISES.items() for label in e.wrong_files])
def test_each_wrong_file_is_rejected_where_the_static_checks_can_see_it(name, label):
    ex = ke.exercise(name)
    source = ex.wrong[label]
    verdict = ke.check(name, source)
    cubin, res, problems = ke.compile_exercise(ex, source, ke.exercise_arch(ex)[0])
    if problems or not all(f.ok for f in ex.static_findings(source, catalog.compiled(cubin, res, ex.kernel,
                                                                                     ke.kernel_sass(cubin, ex.kernel)))):
        assert not verdict.correct, verdict
    else:
        assert "Not run: no GPU here" in verdict   # only a live run can see this one


@pytest.mark.parametrize("name,label", [(n, label) for n, e in catalog.EXERCISES.items() for label in e.correct_files])
def test_each_correct_alternative_passes_every_static_check(name, label):
    """Correct kernels written otherwise than the reference (a rotated tile, a guard spelled differently, a fence
    far from its arrive, ...): every static check judges them, and passes them."""
    source = ke.exercise(name).correct[label]
    assert source != ke.exercise(name).solution
    findings = _static(name, source)
    assert all(f.ok and f.judged for f in findings), [f.text for f in findings if not (f.ok and f.judged)]
    verdict = ke.check(name, source)
    assert verdict.correct and "✘" not in verdict and "–" not in verdict, verdict


def test_the_runner_times_the_learner_and_the_course_kernel_alike(monkeypatch):
    from course_lib.core import timing
    from course_lib.exercises.kernel import cases

    calls = []
    monkeypatch.setattr(cases, "benchmark", lambda fn, samples, **options: (calls.append((fn(), samples)),
                                                                  timing.Timing((2e-6,) * samples))[1])
    got = cases._timed("8×8", lambda: "yours", lambda: "course", "family.kernel")
    assert calls == [("yours", cases.TIMING_SAMPLES), ("course", cases.TIMING_SAMPLES)]
    assert got == {"size": "8×8", "yours_us": pytest.approx(2.0), "course_us": pytest.approx(2.0),
                   "course_kernel": "family.kernel", "samples": cases.TIMING_SAMPLES}


# A correct consumer in another style: one wgmma group kept in flight, the previous slot freed once only the newest runs.
WGMMA_IN_FLIGHT_LOOP = """    int previous = -1;
    for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(sl.full(ring.slot), ring.phase);
        wgmma_fence();
        wgmma_slot<BN>(d, sl.a(ring.slot) + a_offset, sl.b(ring.slot), kt > 0);
        wgmma_commit();
        wgmma_wait<1>();
        if (previous >= 0) release(sl.empty(previous));
        previous = ring.slot;
        ring.advance(STAGES);
    }
    wgmma_wait<0>();
    accumulators_ready(d);
    if (previous >= 0) release(sl.empty(previous));
"""


def wgmma_in_flight() -> str:
    solution = catalog.WGMMA_CONSUMER.solution
    loop = solution[solution.index("    for (int kt = 0; kt < k_tiles; ++kt) {"):solution.index("}\n\n// C[M,N]")]
    return solution.replace(loop, WGMMA_IN_FLIGHT_LOOP)


def test_the_wgmma_consumer_is_judged_on_its_sass_and_a_group_kept_in_flight_passes():
    early = [(f.ok, f.text.split(" (")[0]) for f in _static("wgmma_consumer",
                                                            catalog.WGMMA_CONSUMER.wrong["frees the slot before the wgmma wait"])]
    assert early == [(True, "the consumers multiply with wgmma"),
                     (True, "the consumers wait on a slot's full barrier before their wgmmas read it"),
                     (False, "1 slot release some path reaches from a wgmma issued with no wgmma wait between")], early
    starter = [f.text for f in _static("wgmma_consumer", catalog.WGMMA_CONSUMER.starter) if not f.ok]
    assert len(starter) == 3 and "no HGMMA" in starter[0] and "must wait on full[slot]" in starter[1], starter
    assert all(f.ok for f in _static("wgmma_consumer", wgmma_in_flight()))   # its release after the loop included
    assert all(f.ok for f in _static("wgmma_consumer", catalog.WGMMA_CONSUMER.solution))
    unwaited = _without_line("wgmma_consumer", "mbar_wait(sl.full(ring.slot), ring.phase);")
    failed = [f.text for f in _static("wgmma_consumer", unwaited) if not f.ok]
    assert len(failed) == 1 and "with no mbarrier wait between" in failed[0], failed


def _listing(*lines: str) -> sass.Listing:
    """A SASS listing from lines as nvdisasm prints them, labels (``.L_x_1:``) among them."""
    instructions, labels = [], {}
    for line in lines:
        if line.endswith(":"):
            labels[line[:-1]] = len(instructions)
        else:
            instructions.append(line.rstrip(" ;"))
    return sass.Listing(instructions, labels)


def test_a_release_is_early_when_some_path_reaches_it_from_an_hgmma_with_no_wgmma_wait():
    hgmma, depbar = "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16], R24, gsb0 ;", "WARPGROUP.DEPBAR.LE gsb0, 0x1 ;"
    arrive = "@!P0 SYNCS.ARRIVE.TRANS64.A1T0 RZ, [R6+URZ+0x20020], RZ ;"
    assert catalog.releases_before_wgmma_wait(_listing(hgmma, depbar, arrive)) == (1, 0)
    assert catalog.releases_before_wgmma_wait(_listing(hgmma, arrive, depbar)) == (1, 1)
    # a release at the top of the loop, after the last iteration's HGMMAs at its bottom (the back edge)
    loop = ("NOP ;", ".L_x_1:", arrive, hgmma, "@P0 BRA `(.L_x_1) ;", "EXIT ;")
    assert catalog.releases_before_wgmma_wait(_listing(*loop)) == (1, 1)
    assert catalog.releases_before_wgmma_wait(_listing(*loop[:4], depbar, *loop[4:])) == (1, 0)
    # a wait on one branch only: the other path reaches the release unwaited
    branch = (hgmma, "@P1 BRA `(.L_x_2) ;", depbar, ".L_x_2:", arrive, "EXIT ;")
    assert catalog.releases_before_wgmma_wait(_listing(*branch)) == (1, 1)
    assert catalog.releases_before_wgmma_wait(_listing(hgmma, depbar)) == (0, 0)
    # a predicated wait may not run: it guards nothing
    assert catalog.releases_before_wgmma_wait(_listing(hgmma, "@P2 " + depbar, arrive)) == (1, 1)


def test_a_fence_counts_wherever_it_stands_on_the_path_from_the_reads_to_the_release():
    read, fence = "@!P0 LDS.128 R8, [R28] ;", "FENCE.VIEW.ASYNC.S ;"
    release = "SYNCS.ARRIVE.TRANS64.A1T0 RZ, [R25+URZ], RZ ;"
    math = ["FFMA R4, R8, R8, R4 ;"] * 40
    assert catalog.unfenced_releases(_listing(read, fence, *math, release)) == (1, 0)   # 41 instructions apart
    assert catalog.unfenced_releases(_listing(fence, read, release)) == (1, 1)          # fenced before the reads
    assert catalog.unfenced_releases(_listing(read, release)) == (1, 1)
    loop = (".L_x_0:", read, fence, release, "@P0 BRA `(.L_x_0) ;", "EXIT ;")
    assert catalog.unfenced_releases(_listing(*loop)) == (1, 0)
    with pytest.raises(sass.ControlFlowUnknown):
        catalog.unfenced_releases(_listing(read, "BRX R4 -0x10 ;", release))


@pytest.mark.parametrize("gpu_arch", ["sm_80", "sm_100", "sm_120"])
def test_the_wgmma_exercise_compiles_for_sm_90a_and_says_why_it_cannot_run_on_another_gpu(monkeypatch, gpu_arch):
    monkeypatch.setattr(cuda, "target_arch", lambda: gpu_arch)
    verdict = ke.check("wgmma_consumer", catalog.WGMMA_CONSUMER.solution, live=True)
    assert not verdict.correct and verdict.startswith("Compiled for sm_90a"), verdict
    assert "exist on sm_90a alone" in verdict and "cannot run here" in verdict and "a Hopper GPU" in verdict
    assert "✔ each slot is freed" in verdict or "– the consumers' wgmmas" in verdict   # with or without nvdisasm
    # an exercise with a minimum, not one architecture, runs on every GPU from it on
    arch, why = ke.exercise_arch(catalog.WARP_SPECIALIZED)
    assert (arch, why) == (gpu_arch, None) if gpu_arch != "sm_80" else (arch == "sm_90" and "9 or newer" in why), why


def test_the_warp_specialized_starter_is_rejected_statically_and_a_cell_may_include_a_course_header():
    verdict = ke.check("warp_specialized", catalog.WARP_SPECIALIZED.starter)
    assert not verdict.correct and "no tile is loaded" in verdict and "no slot is released" in verdict
    assert "slots of 8 KiB" not in verdict   # the compiler dropped the unused slots: their size is no finding
    assert "Stuck? print(kernel_exercises.hint('warp_specialized'))" in verdict
    assert "(j / STAGES) & 1" in ke.hint("warp_specialized")
    missing = ke.check("warp_specialized", '#include "nope.cuh"\n')
    assert not missing.correct and "async_copy.cuh, common.cuh, gelu.cuh, hopper_ring.cuh, l2_hints.cuh, online_softmax.cuh, wgmma.cuh" in missing
    unreleased = catalog.WARP_SPECIALIZED.solution.replace("release(smem_u32(&empty[s]));", "")
    assert "no slot is released" in ke.check("warp_specialized", unreleased)


def test_a_failed_launch_names_the_exercises_likely_cause():
    from course_lib.exercises.kernel.checker import _live_lines

    run = {"cases": [], "error": "CUDADriverError: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"}
    _, lines = _live_lines(catalog.WARP_SPECIALIZED, run, 20)
    assert "a barrier wait that never completed" in lines[-1] and "outside an array" not in lines[-1]
    _, lines = _live_lines(catalog.SCALE, run, 20)
    assert "outside an array" in lines[-1]


# --------------------------------------------------------------------------- the static checks read the compiled kernel

def _static(name: str, source: str, arch: str | None = None):
    ex = ke.exercise(name)
    cubin, res, problems = ke.compile_exercise(ex, source, arch or ke.exercise_arch(ex)[0])
    assert not problems, problems
    listing = ke.kernel_sass(cubin, ex.kernel)
    if listing is None:
        pytest.skip("nvdisasm is not installed here: the SASS checks cannot run")
    return ex.static_findings(source, catalog.compiled(cubin, res, ex.kernel, listing))


def _edited(name: str, old: str, new: str) -> str:
    """The reference solution with one edit: a wrong solution written as the difference from the right one."""
    src = ke.exercise(name).solution
    assert old in src, f"{name}'s reference no longer holds {old!r}: update this test"
    return src.replace(old, new)


def _without_line(name: str, holding: str) -> str:
    src = ke.exercise(name).solution
    kept = [ln for ln in src.splitlines(True) if holding not in ln]
    assert len(kept) == len(src.splitlines(True)) - 1, holding
    return "".join(kept)


WRONG_IN_SASS = {
    # the inner loop over the 8 outputs kept rolled: out[i] is indexed by a register, so it lives in local memory
    ("register_tile_gemm", "accumulators in local memory"): lambda: _edited(
        "register_tile_gemm", "#pragma unroll\n            for (int i = 0; i < 8; ++i) out[i]",
        "#pragma unroll 1\n            for (int i = 0; i < 8; ++i) out[i]"),
    # wait_copies<0>: waits for the tile just issued too, so nothing is in flight while one is summed
    ("async_pipeline", "waits for every copy"): lambda: _edited("async_pipeline", "wait_copies<1>", "wait_copies<0>"),
    # a bare arrive: no fence.proxy.async orders the consumers' reads before the TMA's next write of the slot
    ("warp_specialized", "release without the fence"): lambda: _edited(
        "warp_specialized", "release(smem_u32(&empty[s]));", "mbar_arrive(smem_u32(&empty[s]));"),
    # the producer refills a slot without waiting for the consumers to be done with it
    ("warp_specialized", "producer never waits on empty"): lambda: _without_line("warp_specialized",
                                                                                  "mbar_wait(smem_u32(&empty"),
    # the consumers read and release slots the TMA may not have landed yet
    ("warp_specialized", "consumers never wait on full"): lambda: _without_line("warp_specialized",
                                                                                 "mbar_wait(smem_u32(&full"),
    # the group loop held rolled: r[g] is indexed by a register, so the running softmaxes live in local memory
    ("grouped_decode", "running softmaxes in local memory"): lambda: _edited(
        "grouped_decode", "        for (int g = 0; g < GROUP; ++g) {\n            float s",
        "        #pragma unroll 1\n        for (int g = 0; g < GROUP; ++g) {\n            float s"),
}

# Each wrong solution whose defect shows in the compiled kernel, and the finding that must name it.
SEEN_IN_SASS = [
    ("register_tile_gemm", "accumulators in local memory", "local memory"),
    ("register_tile_gemm", "one barrier per step", "a race on shared memory"),
    ("async_pipeline", "waits for every copy", "DEPBAR.LE SB0, 0x0"),
    ("async_pipeline", "waits for nothing", "never waits"),
    ("warp_specialized", "release without the fence", "with no fence.proxy.async between"),
    ("warp_specialized", "the proxy fence before the slot's reads", "with no fence.proxy.async between"),
    ("warp_specialized", "producer never waits on empty", "1 bulk copy some path reaches from the kernel's start"),
    ("warp_specialized", "consumers never wait on full", "with no mbarrier wait before it since the last release"),
    ("transpose_tile", "no padding (32-way conflicts)", "32-way conflict"),
    ("transpose_tile", "an XOR that moves nothing (dy >> 5 is 0 in a 32-row tile)", "32-way conflict"),
    ("transpose_tile", "no barrier", "a race on shared memory"),
    ("grouped_decode", "running softmaxes in local memory", "local memory"),
    ("row_sum_squares_budget", "partial sums in an array indexed at run time (local memory, no spills)", "stack frame"),
    ("scale_grid_stride", "one element per thread", "never reads gridDim.x"),
    ("persistent_tiles", "no edge mask", "the edge tiles reach outside the matrix"),
    ("warp_row_sums", "a warp per row, partial sums never combined", "never combines their partial sums"),
    ("fused_epilogue", "the starter (empty fused kernel, three passes left)", "4 kernels in the compiled cell"),
    ("mystery_rms_norm", "one warp per row, no row guard", "edges: the compiled kernel run on the CPU"),
    ("mystery_rms_norm", "the row in a fixed 8,192-float shared buffer", "of row_copy (shared memory), past its 32,768 B"),
]


@pytest.mark.parametrize("name,label,words", SEEN_IN_SASS, ids=[f"{n}: {lab}" for n, lab, _ in SEEN_IN_SASS])
def test_a_defect_the_compiled_kernel_shows_is_named_and_rejected(name, label, words):
    make = WRONG_IN_SASS.get((name, label))
    source = make() if make else ke.exercise(name).wrong[label]
    findings = _static(name, source)
    if make:   # the whole checker, without a GPU, says so too
        assert not ke.check(name, source).correct
    failed = [f.text for f in findings if not f.ok]
    assert failed and any(words in text for text in failed), failed


def _respelled_transpose() -> str:
    """The reference transpose with its tile spelled as NVIDIA's transpose article spells it."""
    src = ke.exercise("transpose_tile").solution
    decl = re.search(r"__shared__\s+float\s+(\w+)\s*\[\s*32\s*\]\s*\[\s*33\s*\]", src)
    assert decl, "the reference's tile declaration moved: update this test"
    return "#define TILE_DIM 32\n" + src.replace(decl.group(0), f"__shared__ float {decl.group(1)}[TILE_DIM][TILE_DIM + 1]")


# Correct solutions in other spellings: each must pass every static check.
RESPELLED = [
    ("transpose_tile", _respelled_transpose),
    ("async_pipeline", lambda: re.sub(r"float\*\s*out", "float *out", ke.exercise("async_pipeline").solution)),
    ("warp_specialized", lambda: re.sub(r"float\*\s*out", "float *out", ke.exercise("warp_specialized").solution)),
    ("register_tile_gemm", lambda: ke.exercise("register_tile_gemm").solution.replace("__syncthreads()",
                                                                                     "__syncthreads ()")),
]


@pytest.mark.parametrize("name,make", RESPELLED, ids=[n for n, _ in RESPELLED])
def test_a_correct_kernel_spelled_otherwise_passes_every_static_check(name, make):
    source = make()
    assert source != ke.exercise(name).solution
    failed = [f.text for f in _static(name, source) if not f.ok]
    assert not failed, failed


def test_a_fence_far_from_its_release_passes_and_one_before_the_reads_does_not():
    """The old rule wanted fence.proxy.async within 4 instructions of the arrive; what matters is that it stands
    between the slot's reads and the release on every path."""
    ex = catalog.WARP_SPECIALIZED
    far = ex.correct["the proxy fence far from the release, on its path"]
    cubin, res, _ = ke.compile_exercise(ex, far, ke.exercise_arch(ex)[0])
    listing = ke.kernel_sass(cubin, ex.kernel)
    if listing is None:
        pytest.skip("nvdisasm is not installed here: the SASS checks cannot run")
    release = next(n for n, i in enumerate(listing) if catalog.mnemonic(i).startswith(catalog.RELEASE))
    fence = max(n for n, i in enumerate(listing[:release]) if catalog.mnemonic(i).startswith("FENCE.VIEW.ASYNC"))
    assert release - fence > 4, (fence, release)
    assert catalog.unfenced_releases(listing) == (1, 0)
    early = [f.text for f in _static("warp_specialized", ex.wrong["the proxy fence before the slot's reads"]) if not f.ok]
    assert len(early) == 1 and "from a read of shared memory with no fence.proxy.async between" in early[0], early


def test_the_sass_readers_on_listings():
    from course_lib.exercises.kernel import catalog as c

    assert c.depbar_waits(["LDGDEPBAR", "DEPBAR.LE SB0, 0x1", "@P0 DEPBAR.LE SB0, 0x0"]) == [1, 0]
    assert c.local_memory(["@P1 STL [R1], R2", "LDL R3, [R1]", "LDS R4, [R5]"]) == 2
    assert c.mnemonic("@!P2 BRA 0x100") == "BRA" and c.count_ops(["BAR.SYNC.DEFER_BLOCKING 0x0"], "BAR.SYNC") == 1
    listing = _listing("S2R R0, SR_TID.X ;", ".L_x_0:", "@P0 BRA `(.L_x_1) ;", "BRA.DIV UR4, `(.L_x_0) ;", "BRA `(.L_x_0) ;",
                       ".L_x_1:", "@P1 EXIT ;", "EXIT ;")
    assert [sass.successors(listing, n) for n in range(len(listing))] == [[1], [2, 4], [3, 1], [1], [5], []]


# Each static check that reads the SASS, and what a cell the check cannot judge without nvdisasm still shows.
SASS_ONLY = ["async_pipeline", "warp_specialized", "wgmma_consumer", "register_tile_gemm", "transpose_tile"]


@pytest.mark.parametrize("name", SASS_ONLY)
def test_without_nvdisasm_a_sass_check_says_it_was_not_judged_and_never_reads_the_source(name, monkeypatch):
    """Where no disassembler is installed a check that reads the SASS passes as not judged and says so (it does
    not fall back to the source's spelling); the checks that read the compile report and the PTX still judge."""
    ex = ke.exercise(name)
    for source in (ex.solution, ex.starter):
        cubin, res, problems = ke.compile_exercise(ex, source, ke.exercise_arch(ex)[0])
        assert not problems, problems
        findings = ex.static_findings(source, catalog.compiled(cubin, res, ex.kernel, None))
        unjudged = [f for f in findings if not f.judged]
        assert all(f.ok and "nvdisasm is not installed" in f.text for f in unjudged), [f.text for f in unjudged]
        if source == ex.solution:
            assert all(f.ok for f in findings)
    monkeypatch.setattr(ke, "kernel_sass", lambda cubin, kernel: None)
    verdict = ke.check(name, ex.solution)
    assert verdict.correct and "(nvdisasm is not installed here" in verdict, verdict
    if name in ("async_pipeline", "warp_specialized", "wgmma_consumer"):
        assert "  – " in verdict, verdict


SPELLED_AWAY = [
    # (exercise, a wrong file, a comment that spells the fix the kernel does not make)
    ("scale_grid_stride", "one element per thread", "// i += gridDim.x * blockDim.x"),
    ("warp_row_sums", "a warp per row, partial sums never combined", "// sum += __shfl_xor_sync(0xffffffffu, sum, 16);"),
    ("persistent_tiles", "no edge mask", "// if (r < rows && c < cols)"),
    ("fused_epilogue", "the starter (empty fused kernel, three passes left)", ""),
    ("mystery_rms_norm", "one warp per row, no row guard", "// if (row >= rows) return;"),
]


@pytest.mark.parametrize("name,label,comment", SPELLED_AWAY, ids=[n for n, *_ in SPELLED_AWAY])
def test_what_the_source_says_in_words_changes_no_verdict(name, label, comment):
    """A comment that spells the missing fix (or a kernel's name left in one) leaves the verdict as it was: the
    checks read the compiled kernel."""
    ex = ke.exercise(name)
    source = ex.wrong[label]
    if name == "fused_epilogue":   # the three unfused kernels' definitions behind #if 0: gone from the cubin
        kernels = source[:source.index("// One pass")]
        spelled = source.replace(kernels, "#if 0\n" + kernels + "#endif\n")
        assert [f.ok for f in _static(name, spelled)][0], "a kernel the preprocessor drops is not compiled"
        spelled = "// __global__ __global__ __global__\n" + ex.solution
        assert all(f.ok for f in _static(name, spelled))
        return
    spelled = comment + "\n" + source
    assert [f.ok for f in _static(name, spelled)] == [f.ok for f in _static(name, source)]
    assert not ke.check(name, spelled).correct


def test_the_ptx_a_cubin_carries_and_its_kernels():
    ex = catalog.FUSED_EPILOGUE
    cubin, _, _ = ke.compile_exercise(ex, ex.starter, ke.exercise_arch(ex)[0])
    assert sass.entry_points(cubin) == ["add_bias", "add_residual", "bias_gelu_residual", "gelu"]
    ptx = sass.kernel_ptx(cubin, "gelu")
    assert ptx.params == (("gelu_param_0", "u64"), ("gelu_param_1", "u64"), ("gelu_param_2", "u64"))
    assert not ptx.reads("%nctaid.x") and ptx.reads("%tid.x")
    assert sass.embedded_ptx(b"not an ELF") is None
    with pytest.raises(ValueError, match="ELF"):
        sass.entry_points(b"not an ELF")


# --------------------------------------------------------------------------- the PTX emulator

def _emulate(body: str, params: str = ".param .u64 k_param_0", args=None, block=(32, 1, 1), **kw):
    """Run ``body`` (PTX statements) as the kernel ``k`` with one ``Array("out", 4096)`` parameter by default."""
    text = f".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n{params}\n)\n{{\n{body}\n}}\n"
    kernel = sass.ptx_kernels(text)["k"]
    return kernel, sass.emulate(kernel, args if args is not None else [sass.Array("out", 4096)], block, **kw)


def test_the_emulator_computes_integer_ptx_as_the_gpu_does():
    """Each lane stores its result to out[lane]: the stored offset is what the emulator computed."""
    def stored(expr_body: str, reg: str = "%r9") -> list[int]:
        body = (".reg .b32 %r<12>;\n.reg .b64 %rd<8>;\n.reg .pred %p<4>;\n.shared .align 4 .b8 s[65536];\n"
                "mov.u32 %r1, %tid.x;\n" + expr_body +
                f"\nmov.u64 %rd1, s;\ncvt.u64.u32 %rd2, {reg};\nadd.s64 %rd3, %rd1, %rd2;\nst.shared.u8 [%rd3], %r1;\n")
        _, trace = _emulate(body)
        return [a.offset for a in sorted(trace.shared, key=lambda a: a.lane)]

    assert stored("sub.s32 %r2, %r1, 16;\nshr.s32 %r9, %r2, 1;\nand.b32 %r9, %r9, 255;")[:2] == [248, 248]  # -8 >> 1
    assert stored("sub.s32 %r2, %r1, 16;\nshr.u32 %r9, %r2, 28;")[0] == 15              # logical shift of -16
    assert stored("mul.lo.s32 %r9, %r1, 7;\nrem.u32 %r9, %r9, 5;")[:4] == [0, 2, 4, 1]
    assert stored("sub.s32 %r2, %r1, 3;\nrem.s32 %r9, %r2, 2;\nadd.s32 %r9, %r9, 1;")[:2] == [0, 1]  # -3 % 2 = -1
    assert stored("setp.lt.s32 %p1, %r1, 3;\nselp.b32 %r9, 100, 200, %p1;")[2:4] == [100, 200]
    assert stored("sub.s32 %r2, %r1, 1;\nsetp.lt.u32 %p1, %r2, 5;\nselp.b32 %r9, 1, 2, %p1;")[0] == 2  # -1 unsigned
    assert stored("xor.b32 %r9, %r1, 5;")[:3] == [5, 4, 7]
    assert stored("bfi.b32 %r9, %r1, 0, 4, 4;")[:3] == [0, 16, 32]
    assert stored("bfe.u32 %r9, %r1, 1, 2;")[:8] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert stored("mov.u32 %r9, %laneid;\nmul.lo.s32 %r9, %r9, 4;")[:2] == [0, 4]
    assert stored("cvt.s64.s32 %rd4, %r1;\nsub.s64 %rd4, %rd4, 2;\nshr.s64 %rd4, %rd4, 60;\n"
                  "cvt.u32.u64 %r9, %rd4;\nand.b32 %r9, %r9, 255;")[:3] == [255, 255, 0]
    assert stored("{ .reg .b32 t; add.s32 t, %r1, 1; mul.lo.s32 %r9, t, 2; }")[:2] == [2, 4]   # inline asm's scope
    # two inlined copies of one asm block, each with its own labels L and E
    copies = ("mov.u32 %r9, %r1;\n{ .reg .pred q; setp.eq.s32 q, %r1, 0; @q bra L; bra.uni E; L: mov.u32 %r9, 7; E: }\n"
              "{ .reg .pred q; setp.eq.s32 q, %r1, 1; @q bra L; bra.uni E; L: mov.u32 %r9, 9; E: }")
    assert stored(copies)[:3] == [7, 9, 2]


def test_the_emulator_finds_accesses_past_an_array_and_stops_the_thread_there():
    body = (".reg .b32 %r<4>;\n.reg .b64 %rd<6>;\nld.param.u64 %rd1, [k_param_0];\ncvta.to.global.u64 %rd2, %rd1;\n"
            "mov.u32 %r1, %tid.x;\nmul.wide.u32 %rd3, %r1, 512;\nadd.s64 %rd4, %rd2, %rd3;\n"
            "st.global.v4.f32 [%rd4], {%r1, %r1, %r1, %r1};\nst.global.f32 [%rd4+-4], %r1;")
    _, trace = _emulate(body)
    # thread 0's second store falls before the array, in no array at all; threads 8 … 31 store past its end
    assert [(a.thread[0], a.size_bytes, a.variable) for a in trace.outside[:2]] == [(0, 4, "(no variable)"),
                                                                                  (8, 16, "out")]
    assert [(a.thread[0], a.offset) for a in trace.outside[1:]] == [(t, 512 * t) for t in range(8, 32)]
    assert trace.sizes["out"] == 4096


def test_the_emulator_runs_threads_from_barrier_to_barrier_and_says_what_it_cannot_follow():
    body = (".reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n.shared .align 4 .b8 t[256];\nmov.u32 %r1, %tid.x;\n"
            "mov.u64 %rd1, t;\nmul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\nst.shared.u32 [%rd3], %r1;\n"
            "bar.sync 0;\nld.shared.u32 %r2, [%rd3+4];")
    _, trace = _emulate(body, block=(64, 1, 1))
    assert {(a.kind, a.phase) for a in trace.shared} == {("st", 0), ("ld", 1)}
    assert [(a.thread[0], a.offset) for a in trace.outside] == [(63, 256)]   # t[64]: one past the end
    for what, why in (("call f;", "a call"), ("ld.global.u32 %r2, [%rd3];\nmul.wide.u32 %rd2, %r2, 4;\n"
                                                  "st.shared.u32 [%rd2], %r1;", "a value the emulator does not know")):
        with pytest.raises(sass.NotEmulated, match=why):
            _emulate(".reg .b32 %r<4>;\n.reg .b64 %rd<4>;\nmov.u32 %r1, %tid.x;\nld.param.u64 %rd3, [k_param_0];\n"
                     + what)
    with pytest.raises(sass.NotEmulated, match="past 1,000 instructions"):
        _emulate("$L_top:\nbra.uni $L_top;", max_steps=1000)


def test_a_correct_kernel_slower_than_the_bar_against_the_reference_is_not_yet_correct():
    from course_lib.exercises.kernel.checker import _live_lines, slowdown

    def run(yours_us, reference_us=None):
        timing = {"size": 1 << 20, "yours_us": yours_us, "course_us": 10.0, "course_kernel": "elementwise.copy",
                  "samples": 20, **({"reference_us": reference_us} if reference_us else {})}
        return {"cases": [{"size": 1 << 20, "passed": True, "first_wrong": None}], "timing": timing}

    bar = catalog.SCALE.max_slowdown
    ok, lines = _live_lines(catalog.SCALE, run(10.0 * bar * 0.99, 10.0), 20)
    assert ok and "reference solution 10.0 µs" in lines[-1]
    ok, lines = _live_lines(catalog.SCALE, run(10.0 * 256, 10.0), 20)   # a loop that does 256× the work
    assert not ok and "256.00× the reference solution's time" in lines[-1] and f"{bar:g}×" in lines[-1]
    assert _live_lines(catalog.SCALE, run(50.0), 20)[0]   # no reference timed (a fix-the-kernel check): no bar
    assert slowdown({"yours_us": 3.0, "reference_us": 2.0}) == 1.5 and slowdown({"yours_us": 3.0}) is None
    wrong = run(10.0, 10.0)
    wrong["cases"][0]["passed"] = False
    wrong["cases"][0]["first_wrong"] = "index 0"
    ok, lines = _live_lines(catalog.SCALE, wrong, 20)
    assert not ok and not any("not yet what" in ln for ln in lines)   # wrong results are the finding, not speed


def test_the_decode_byte_count_rejects_the_cache_read_once_per_query_head_and_passes_it_read_once():
    traffic = catalog.GROUPED_DECODE.counts[0]
    assert traffic.model_bytes == 2 * 32 * 8 * 2048 * 128 * 2   # K and V of 32 sequences x 8 KV heads x 2,048 tokens
    ok, lines = ke.traffic_lines(traffic, 4.0 * traffic.model_bytes)   # the starter's count: 4 query heads, 4 reads
    assert not ok and "✘" in lines[0] and "4.00×" in lines[0] and "not yet what this exercise asks" in lines[1]
    ok, lines = ke.traffic_lines(traffic, 1.001 * traffic.model_bytes)   # the reference solution's count
    assert ok and lines == [lines[0]] and "✔" in lines[0] and "1.00×" in lines[0]
    assert not ke.traffic_lines(traffic, 1.51 * traffic.model_bytes)[0]


def test_without_ncu_the_byte_count_says_it_was_not_taken_and_the_speed_bar_stands(monkeypatch):
    from course_lib.exercises.kernel import checker
    from course_lib.measure import profiler

    monkeypatch.setattr(profiler, "ncu_path", lambda: None)
    ok, lines = checker._counts_verdict(catalog.GROUPED_DECODE, b"", {}, 20)
    assert ok is None and lines[0].startswith("(Not counted: Nsight Compute (ncu) is not installed")


def test_a_byte_count_that_fails_fails_the_check_and_says_why(monkeypatch):
    from course_lib.exercises.kernel import checker
    from course_lib.measure import profiler

    def timed_out(*a, **k):
        raise profiler.ProfilerUnavailable("ncu did not finish within 180 s")

    monkeypatch.setattr(checker, "counted_values", timed_out)
    ok, lines = checker._counts_verdict(catalog.GROUPED_DECODE, b"", {}, 20)
    assert not ok and "The count failed: ncu did not finish" in lines[0]
    monkeypatch.undo()
    monkeypatch.setattr(profiler, "ncu_command", lambda *a, **k: ["ncu"])
    monkeypatch.setattr(profiler, "run_ncu", lambda *a, **k: [profiler.KernelProfile(
        1, "decode_gqa", "", "", {catalog.GROUPED_DECODE.counts[0].metric: "n/a"})])
    ok, lines = checker._counts_verdict(catalog.GROUPED_DECODE, b"", {}, 20)
    assert not ok and "ncu reported 'n/a'" in lines[0]


def test_the_checker_counts_bytes_only_for_a_kernel_whose_results_are_right(monkeypatch):
    from course_lib.exercises.kernel import checker

    counted = []
    monkeypatch.setattr(checker, "_counts_verdict", lambda *a: counted.append(a) or (True, []))
    for passed in (False, True):
        monkeypatch.setattr(checker, "run_child", lambda *a, passed=passed, **k: {
            "cases": [{"size": s, "passed": passed, "first_wrong": None if passed else "index 0"} for s in a[2]]})
        checker.check("grouped_decode", catalog.GROUPED_DECODE.solution, live=True, sanitize=False)
    assert len(counted) == 1


def test_the_checker_hands_the_child_the_reference_solution_and_its_own_launch(monkeypatch):
    from course_lib.exercises.kernel import checker

    seen = {}

    def fake_child(live, kernel, sizes, cubin, limit, tool, time_it, launch, reference_cubin=None, reference_launch=None,
                   source="", reference_source=None):
        seen.update(kernel=kernel, reference=reference_cubin, reference_launch=reference_launch, time_it=time_it,
                    source=source, reference_source=reference_source)
        return {"cases": [{"size": s, "passed": True, "first_wrong": None} for s in sizes]}

    monkeypatch.setattr(checker, "run_child", fake_child)
    ex = catalog.MYSTERY
    checker.check(ex.name, ex.solution, live=True, sanitize=False)
    assert seen["kernel"] == ex.kernel and isinstance(seen["reference"], bytes) and seen["reference"]
    assert seen["reference_launch"] == ex.launch(ex.solution)
    # what the stored run records the answer was produced from (core.stored_run): both sources
    assert seen["source"] == ex.solution and seen["reference_source"] == ex.solution


def test_the_runner_times_the_reference_after_the_learner_and_survives_a_reference_that_fails(monkeypatch, tmp_path):
    import json
    import sys
    import types

    from course_lib.exercises.kernel import runner

    calls = []

    def fake_cases(fn, sizes, time_it, **launch):
        calls.append((fn, sizes, launch))
        if fn == "broken":
            raise RuntimeError("no such kernel")
        return {"cases": [], "timing": {"yours_us": 4.0 if fn == "reference" else 5.0, "course_us": 2.0}}

    class Module:
        def __init__(self, path):
            self.path = path

        def get_function(self, name):
            return "broken" if "broken" in self.path else ("reference" if "reference" in self.path else "yours")

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(RawModule=Module, cuda=None))
    monkeypatch.setattr(runner, "warm_up", lambda: None)
    monkeypatch.setattr(runner, "resolve", lambda address: fake_cases)
    out = []
    monkeypatch.setattr("builtins.print", lambda *a, **k: out.append(a[0]))
    spec = {"cases": "m:f", "kernel": "k", "sizes": [1, 2, 3], "cubin": "yours.cubin", "launch": {"a": 1},
            "reference_cubin": "reference.cubin", "reference_launch": {"a": 2}}
    runner.main(json.dumps(spec))
    assert calls == [("yours", (1, 2, 3), {"a": 1}), ("reference", (3,), {"a": 2})]
    # the learner's result first, then the marker, then the same result with the reference's times
    assert out[-2] == runner.REFERENCE and json.loads(out[-3])["timing"] == {"yours_us": 5.0, "course_us": 2.0}
    assert json.loads(out[-1])["timing"] == {"yours_us": 5.0, "course_us": 2.0, "reference_us": 4.0,
                                             "reference_course_us": 2.0}
    runner.main(json.dumps({**spec, "reference_cubin": "broken.cubin"}))
    assert "no such kernel" in json.loads(out[-1])["timing"]["reference_error"]


def test_the_bar_cancels_a_clock_drift_between_the_two_runs_and_a_reference_out_of_time_leaves_the_verdict(monkeypatch):
    from course_lib.exercises.kernel import checker

    # the GPU 10% slower during the reference's run: its course kernel too, so the ratio is the learner's own
    assert checker.slowdown({"yours_us": 11.0, "course_us": 10.0, "reference_us": 12.1,
                             "reference_course_us": 11.0}) == pytest.approx(1.0)
    learner = '{"cases": [{"size": 8, "passed": true, "first_wrong": null}], "timing": {"size": 8, "yours_us": 3.0, "course_us": 2.0, "course_kernel": "elementwise.copy", "samples": 20}}'
    monkeypatch.setattr(checker, "_communicate", lambda proc, limit: (["READY", learner, "REFERENCE"], "hung"))
    monkeypatch.setattr(checker.subprocess, "Popen", lambda *a, **k: type("P", (), {"returncode": -9})())
    run = checker.run_child(catalog.SCALE.live, "scale", (8,), b"x", 5.0, None, True, {}, reference_cubin=b"y")
    assert run["cases"][0]["passed"] and "did not finish in 5 s" in run["timing"]["reference_error"]
    ok, lines = checker._live_lines(catalog.SCALE, run, 5.0)
    assert ok and any("no speed bar this time" in ln for ln in lines)


@pytest.mark.parametrize("name", list(catalog.EXERCISES))
def test_every_reference_solutions_launch_parses(name):
    ex = ke.exercise(name)
    assert ex.launch(ex.solution) is not None


# ---- the checker's default memory and race checks, and its counts of the compiled kernel

def _passing_child(calls):
    """A stand-in child process: every case right, a clean sanitizer; ``calls`` gets (tool, sizes)."""
    def child(live, kernel, sizes, cubin, limit, tool, time_it, launch, reference_cubin=None, reference_launch=None,
              **stored_as):
        calls.append((tool, tuple(sizes)))
        return {"cases": [{"size": s, "passed": True, "first_wrong": None} for s in sizes], "returncode": 0}
    return child


def test_a_kernel_that_passed_everything_runs_under_the_sanitizer_by_default_at_the_small_sizes(monkeypatch):
    from course_lib.exercises.kernel import checker

    calls = []
    monkeypatch.setattr(checker, "run_child", _passing_child(calls))
    verdict = checker.check("transpose_tile", catalog.TRANSPOSE.solution, live=True)
    tools = [(tool, sizes) for tool, sizes in calls if tool]
    # the tile kernel has shared memory and a barrier in its SASS: all three tools, each on the three smallest sizes
    assert tools == [(t, catalog.TRANSPOSE.sanitize_sizes) for t in ("memcheck", "racecheck", "synccheck")], calls
    assert "✔ compute-sanitizer racecheck at 1×1, 31×33, 32×64: no errors." in verdict and verdict.correct, verdict
    calls.clear()
    checker.check("scale_grid_stride", catalog.SCALE.solution, live=True)
    assert [t for t, _ in calls if t] == ["memcheck"]   # no shared memory, no barrier: memcheck alone


def test_the_sanitizer_runs_only_once_everything_else_passed_and_its_errors_fail_the_kernel(monkeypatch):
    from course_lib.exercises.kernel import checker

    calls = []

    def wrong_child(live, kernel, sizes, cubin, limit, tool, time_it, launch, **k):
        calls.append(tool)
        return {"cases": [{"size": s, "passed": False, "first_wrong": "index 0"} for s in sizes]}

    monkeypatch.setattr(checker, "run_child", wrong_child)
    assert not checker.check("scale_grid_stride", catalog.SCALE.solution, live=True).correct
    assert calls == [None]   # the results were wrong: no sanitizer run

    def racy_child(live, kernel, sizes, cubin, limit, tool, time_it, launch, **k):
        out = {"cases": [{"size": s, "passed": True, "first_wrong": None} for s in sizes], "returncode": 0}
        if tool == "racecheck":
            out.update(returncode=86, sanitizer_lines=["========= Error: Race reported between Write access"])
        return out

    monkeypatch.setattr(checker, "run_child", racy_child)
    verdict = checker.check("transpose_tile", catalog.TRANSPOSE.solution, live=True)
    assert not verdict.correct and "✘ compute-sanitizer racecheck" in verdict and "Race reported" in verdict


def test_without_compute_sanitizer_the_default_check_says_so_and_an_asked_for_one_fails(monkeypatch):
    from course_lib.exercises.kernel import checker

    def child(live, kernel, sizes, cubin, limit, tool, time_it, launch, **k):
        if tool:
            return {"sanitizer": "compute-sanitizer is not on PATH (it ships with the CUDA toolkit)"}
        return {"cases": [{"size": s, "passed": True, "first_wrong": None} for s in sizes]}

    monkeypatch.setattr(checker, "run_child", child)
    default = checker.check("scale_grid_stride", catalog.SCALE.solution, live=True)
    assert default.correct and "the memory and race checks were not run" in default
    assert default.count("not on PATH") == 1
    assert not checker.check("scale_grid_stride", catalog.SCALE.solution, live=True, sanitize=True).correct


def test_the_sanitizer_tools_follow_the_compiled_kernel():
    from course_lib.exercises.kernel.checker import sanitizer_tools

    assert sanitizer_tools(["LDG.E R2, [R2.64]", "STG.E [R4.64], R2"]) == ("memcheck",)
    assert sanitizer_tools(["STS [R3], R2", "BAR.SYNC.DEFER_BLOCKING 0x0", "LDS R5, [R7]"]) == \
        ("memcheck", "racecheck", "synccheck")
    assert sanitizer_tools(["@P0 SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R3"]) == ("memcheck", "racecheck", "synccheck")
    assert sanitizer_tools(None) == ("memcheck", "racecheck", "synccheck")   # no SASS: every tool


def test_the_sector_count_rejects_lanes_a_sector_apart_and_accepts_coalesced_accesses():
    from course_lib.exercises.kernel.checker import count_lines

    use = catalog.WARP_ROW_SUMS.counts[0]
    asked = 16384 * 4096 * 4.0
    ok, lines = count_lines(use, {use.metrics[0]: asked, use.metrics[1]: asked / 32})
    assert ok and lines == [lines[0]] and "100.0% of each sector" in lines[0] and "✔" in lines[0]
    ok, lines = count_lines(use, {use.metrics[0]: asked, use.metrics[1]: 8 * asked / 32})   # 4 B used of each 32
    assert not ok and "12.5% of each sector" in lines[0] and "not yet what this exercise asks" in lines[1]
    assert not count_lines(use, {use.metrics[0]: asked, use.metrics[1]: asked / 32 / 0.79})[0]


def _recorded_transpose_counts() -> dict[str, dict[str, float]]:
    """variant name -> the ncu counters the H200's transpose ladder recorded for it."""
    import json

    record = json.loads((runtime.REPO_ROOT / "data/recorded/h200/transpose.ladder.json").read_text())
    found = {}
    for case in record["cases"]:
        stack = [case]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if isinstance(node.get("ncu"), dict):
                    found[case["name"]] = node["ncu"]
                    break
                stack += node.values()
            elif isinstance(node, list):
                stack += node
    return found


def test_the_wavefront_count_passes_the_recorded_conflict_free_tiles_and_rejects_the_conflicted_one():
    """Fed the counters the H200 recorded for 05's transposes, the verdict passes every padded and swizzled tile and
    rejects the 32 × 32 tile's column reads (32.5 wavefronts per load), and a kernel with no shared access at all."""
    from course_lib.exercises.kernel.checker import count_lines

    loads, stores = (c for c in catalog.TRANSPOSE.counts if isinstance(c, catalog.BankWavefronts))
    recorded = _recorded_transpose_counts()
    free = [n for n in recorded if n.startswith(("padded", "swizzled"))]
    assert len(free) >= 4 and "shared tile 32×32" in recorded, recorded.keys()
    for name in free:
        for bank in (loads, stores):
            ok, lines = count_lines(bank, recorded[name])
            assert ok and len(lines) == 1, (name, lines)
    ok, lines = count_lines(loads, recorded["shared tile 32×32"])
    assert not ok and re.search(r"32\.\d\d per instruction", lines[0]) and "passes on average" in lines[1], lines
    assert count_lines(stores, recorded["shared tile 32×32"])[0]          # its row writes are conflict-free
    ok, lines = count_lines(loads, {m: 0.0 for m in loads.metrics})
    assert not ok and "no shared-memory loads" in lines[0]


def test_live_the_bank_model_gives_way_to_the_wavefront_count(monkeypatch):
    """Live, the tile's bank model is a model: what it finds over the compiled kernel's addresses waits for what ncu
    counts (the counted conflicts decide, either way); in replay the model is all there is."""
    from course_lib.exercises.kernel import checker

    monkeypatch.setattr(checker, "run_child", _passing_child([]))
    recorded = _recorded_transpose_counts()
    sectors_fine = {m: v for c in catalog.TRANSPOSE.counts if isinstance(c, catalog.SectorUse)
                    for m, v in zip(c.metrics, (1e6 * 32, 1e6))}
    nothing = catalog.TRANSPOSE.wrong["an XOR that moves nothing (dy >> 5 is 0 in a 32-row tile)"]
    replay = ke.check("transpose_tile", nothing, live=False)   # in replay the bank model is all there is
    assert not replay.correct and "32-way conflict" in replay and checker.MODEL_NOTE not in replay
    monkeypatch.setattr(checker, "counted_values", lambda *a: {**recorded["shared tile 32×32"], **sectors_fine})
    verdict = checker.check("transpose_tile", nothing, live=True)
    assert not verdict.correct and "32-way conflict" in verdict and checker.MODEL_NOTE in verdict
    assert re.search(r"32\.\d\d per instruction", str(verdict)), verdict   # the 32 x 32 tile's count, recorded
    monkeypatch.setattr(checker, "counted_values", lambda *a: {**recorded["padded tile 32×33"], **sectors_fine})
    assert checker.check("transpose_tile", catalog.TRANSPOSE.solution, live=True).correct


def test_live_the_sector_count_decides_what_the_launch_model_only_reads(monkeypatch):
    """A row-per-thread launch the model calls uncoalesced, staged through shared memory so that its loads
    are coalesced: the count passes it. Where the counters are closed, the model's finding stands."""
    from course_lib.exercises.kernel import checker
    from course_lib.measure import profiler

    staged = catalog.WARP_ROW_SUMS.starter   # ROWS_PER_BLOCK 256: the model says uncoalesced
    monkeypatch.setattr(checker, "run_child", _passing_child([]))
    use = catalog.WARP_ROW_SUMS.counts[0]
    monkeypatch.setattr(checker, "counted_values", lambda *a: {use.metrics[0]: 3.2e7, use.metrics[1]: 1e6})
    verdict = checker.check("warp_row_sums", staged, live=True)
    assert "✘ uncoalesced loads" in verdict and checker.MODEL_NOTE in verdict
    assert verdict.correct and "100.0% of each sector" in verdict, verdict

    def closed(*a):
        raise profiler.CountersUnavailable("ERR_NVGPUCTRPERM")

    monkeypatch.setattr(checker, "counted_values", closed)
    verdict = checker.check("warp_row_sums", staged, live=True)
    assert not verdict.correct and "(Not counted: the GPU's performance counters are closed" in verdict
    assert not checker.check("warp_row_sums", staged, live=False).correct   # replay: the model is all there is


def test_hostile_sizes_are_in_every_exercise_that_takes_them():
    from course_lib.exercises.kernel import cases

    assert any(s > 2 ** 31 for s in catalog.SCALE.sizes)                        # an int index overflows
    assert any(c % 4 == 0 and c > 4 for c in cases.ROW_SUM_COLS.values())       # an unroll's empty remainder
    assert any(c > 8192 for _, c in cases.MYSTERY_SHAPES)                        # a fixed 8,192-float buffer
    # a float4 path chosen by cols % 4 alone, on arrays that start off 16-byte alignment
    assert cases.MISALIGNED_SHAPES and cases.MISALIGNED_SHAPES <= set(cases.MYSTERY_SHAPES)
    assert all(c % 4 == 0 for _, c in cases.MISALIGNED_SHAPES)
    assert "64×257" in catalog.FUSED_EPILOGUE.size_labels and "33×1024" in catalog.MYSTERY.size_labels   # each its own shapes
    assert any(cases.ROW_VALUE_SCALE.get(s, 1) < 1e-3 for s in cases.MYSTERY_SHAPES)   # ε inside the root matters
    assert any(scale >= 10 for *_, scale in cases.FUSED_SHAPES)                  # tanh through exp overflows
    assert any(r % 32 == 0 and c % 32 == 0 for r, c in cases.TRANSPOSE_COLS.items())
    assert any(m % 64 == 0 and n % 64 == 0 for m, n, _ in cases.GEMM_SHAPES)
    for ex in catalog.EXERCISES.values():
        assert ex.sanitize_sizes == ex.sizes[:3] and len(ex.sizes) > 3


def test_the_register_tile_wavefront_bar_passes_the_reference_and_rejects_a_column_read_of_b():
    """Per step of k the reference issues two 16-byte broadcast reads of A and one 4-byte row read of B; the
    transposed-B wrong file reads B down a column instead. The bank model (banks.wide_probe's rules) gives 5 and 12
    wavefronts for those 3 loads: 1.67 and 4 a load, either side of the checker's bar of 2."""
    from course_lib.exercises.kernel.checker import count_lines
    from course_lib.models import memory

    bank = next(c for c in catalog.TILE_GEMM.counts if isinstance(c, catalog.BankWavefronts))
    a_read = memory.bank_conflicts(memory.shared_addresses("broadcast", 16), 16).wavefronts
    b_row = memory.bank_conflicts(memory.shared_addresses("row", 4), 4).wavefronts
    b_column = memory.bank_conflicts([4 * 8 * lane for lane in range(32)], 4).wavefronts   # b_tile[64][8], lanes 8 words apart
    assert (a_read, b_row, b_column) == (2, 1, 8)
    steps = 1_000_000   # warp-steps of k: the bar is on the ratio, so any count will do
    for b_read, passes in ((b_row, True), (b_column, False)):
        counted = {bank.metrics[0]: steps * (2 * a_read + b_read), bank.metrics[1]: steps * 3}
        ok, lines = count_lines(bank, counted)
        assert ok is passes, lines
