"""On a CUDA machine only (COURSE_MODE=live): the kernel checker runs every reference solution
correct at every size, rejects each wrong solution with the message a learner reads, and survives
a kernel that hangs or faults."""
import os

import pytest

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)

from course_lib.exercises.kernel import catalog  # noqa: E402
from course_lib.exercises.kernel import checker as ke  # noqa: E402


@pytest.mark.parametrize("name", list(catalog.EXERCISES))
def test_reference_solutions_are_correct_at_every_size_and_clean_under_the_default_sanitizers(name):
    verdict = ke.check(name, ke.exercise(name).solution)
    assert verdict.correct, verdict
    assert verdict.count(": correct") + verdict.count(": skipped") >= len(ke.exercise(name).sizes), verdict
    assert "Timed at" in verdict or name == "row_sum_squares_budget"
    assert "✔ compute-sanitizer memcheck at" in verdict and "✘" not in verdict, verdict


def test_the_scale_solution_is_timed_beside_the_course_copy():
    assert "the course's elementwise.copy" in ke.check("scale_grid_stride", catalog.SCALE.solution)


@pytest.mark.parametrize("name,label,says", [
    ("scale_grid_stride", "off by one at the tail", "past the end"),
    ("row_sum_squares_budget", "rows past the end", "WRONG"),
    ("transpose_tile", "no edge check on the writes", "past the end"),
    ("register_tile_gemm", "no zeros outside the matrices", "WRONG"),
])
def test_wrong_solutions_are_rejected_live(name, label, says):
    verdict = ke.check(name, ke.exercise(name).wrong[label])
    assert not verdict.correct and (says in verdict or "launch failed" in verdict), verdict


def test_a_kernel_that_hangs_is_stopped_with_a_message():
    hang = 'extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {\n' \
           '    long long g = gridDim.x; while (g > 0) asm volatile("");\n}\n'
    verdict = ke.check("scale_grid_stride", hang, time_limit_s=15)
    assert not verdict.correct and "did not finish in 15 s" in verdict


def test_a_kernel_that_faults_is_reported_and_the_notebook_goes_on():
    fault = 'extern "C" __global__ void scale(float* y, const float* x, float a, long long n) {\n' \
            '    float* nowhere = (float*)0x10; nowhere[threadIdx.x + gridDim.x] = a;\n}\n'
    verdict = ke.check("scale_grid_stride", fault)
    assert not verdict.correct and "launch failed" in verdict and "illegal" in verdict.lower()
    assert ke.check("scale_grid_stride", catalog.SCALE.solution).correct   # this process's GPU still works


def test_the_mystery_is_wrong_live_and_each_single_defect_is_caught():
    as_given = ke.check("mystery_rms_norm", catalog.MYSTERY.starter)   # its 1,024-float array overflows at 1,025 columns
    assert not as_given.correct and ("WRONG" in as_given or "past the end" in as_given
                                     or "launch failed" in as_given), as_given
    no_guard = ke.check("mystery_rms_norm", catalog.MYSTERY.wrong["one warp per row, no row guard"])
    assert not no_guard.correct and "16384×1024: correct" in no_guard, no_guard
    assert "4097×1024: WRONG" in no_guard or "past the end" in no_guard, no_guard


def test_sanitize_runs_memcheck_and_racecheck_and_racecheck_finds_a_missing_barrier():
    clean = ke.check("transpose_tile", catalog.TRANSPOSE.solution, sanitize=True, time_limit_s=30)
    assert clean.correct and clean.count(": no errors.") == 3, clean   # memcheck, racecheck, synccheck
    racy = ke.check("transpose_tile", catalog.TRANSPOSE.wrong["no barrier"], sanitize=True, time_limit_s=30)
    assert not racy.correct and "✘ compute-sanitizer racecheck" in racy, racy


# Wrong kernels of the kinds a learner writes that the sizes, the second grid, the values or the counts now catch.
CAUGHT_LIVE = [
    ("scale_grid_stride", "an int index (it wraps past 2^31)", ("2,147,483,653", "launch failed")),
    ("scale_grid_stride", "a stride written for one grid", ("on a grid of 3 blocks: WRONG",)),
    ("row_sum_squares_budget", "an unrolled loop that drops the last 4 when cols is a multiple of 4", ("17×4: WRONG",)),
    ("warp_row_sums", "a warp per row, each lane a contiguous piece (uncoalesced)", ("✘ Counted by Nsight Compute",)),
    ("transpose_tile", "writes not transposed through the tile (uncoalesced)", ("✘ Counted by Nsight Compute",)),
    ("transpose_tile", "no padding (32-way conflicts)", ("passes on average",)),   # the wavefront count's ✘
    ("transpose_tile", "an XOR that moves nothing (dy >> 5 is 0 in a 32-row tile)", ("passes on average",)),
    ("fused_epilogue", "tanh through exp (NaN for large inputs)", ("64×257 (values ×30): WRONG",)),
    ("mystery_rms_norm", "ε outside the square root", ("9×256 (values ×0.0001): WRONG",)),
    ("mystery_rms_norm", "the row in a fixed 8,192-float shared buffer", ("5×9001: WRONG", "launch failed")),
    ("persistent_tiles", "a stride written for one grid", ("on a grid of 3 blocks: WRONG",)),
    ("register_tile_gemm", "A loaded down its columns (uncoalesced)", ("✘ Counted by Nsight Compute",)),
    ("register_tile_gemm", "B's tile stored transposed (8-way conflicts on every B read)", ("passes on average",)),
    ("online_softmax_tile", "the starter (no running maximum: exp2f of a large score overflows)",
     ("64 queries × 257 keys, scores ×100: WRONG",)),
    # one tile of keys hides both: the maximum can only move from the second tile on
    ("online_softmax_tile", "the maximum moves but l and acc keep their old scale", ("7 queries × 1,000 keys: WRONG",)),
    ("online_softmax_tile", "each lane's own score as the maximum", ("5 queries × 31 keys: WRONG",)),
    ("online_softmax_tile", "the tile's terms rescaled with the old ones", ("7 queries × 1,000 keys: WRONG",)),
]


@pytest.mark.parametrize("name,label,says", CAUGHT_LIVE, ids=[f"{n}: {lab}" for n, lab, _ in CAUGHT_LIVE])
def test_wrong_kernels_the_hostile_cases_and_the_counts_catch(name, label, says):
    verdict = ke.check(name, ke.exercise(name).wrong[label])
    assert not verdict.correct and any(s in verdict for s in says), verdict


def test_a_float4_path_chosen_by_cols_alone_faults_on_the_shape_that_starts_off_alignment():
    solution = ke.exercise("mystery_rms_norm").solution
    assert "aligned && cols % 4 == 0" in solution
    verdict = ke.check("mystery_rms_norm", solution.replace("aligned && cols % 4 == 0", "cols % 4 == 0"))
    assert not verdict.correct and "misaligned address" in verdict, verdict


STAGED_ROW_SUMS = """#define ROWS_PER_BLOCK 256   // one thread per row, its loads staged through shared memory

extern "C" __global__ void row_sums(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[256][33];
    const int r0 = blockIdx.x * 256, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float sum = 0.0f;
    for (int c0 = 0; c0 < cols; c0 += 32) {
        for (int k = warp; k < 256; k += 8) {      // warp w loads rows w, w + 8, ...: 32 neighbouring floats each
            const int r = r0 + k, c = c0 + lane;
            tile[k][lane] = (r < rows && c < cols) ? in[(long long)r * cols + c] : 0.0f;
        }
        __syncthreads();
        for (int j = 0; j < 32; ++j) sum += tile[threadIdx.x][j];
        __syncthreads();
    }
    if (r0 + threadIdx.x < rows) out[r0 + threadIdx.x] = sum;
}
"""


def test_coalescing_is_judged_by_the_count_not_by_the_launch_the_source_declares():
    """One thread per row, which the launch model calls uncoalesced, with its loads staged through shared memory:
    the count finds them coalesced (its 64 blocks at the timed shape leave SMs idle, which the speed bar judges)."""
    verdict = ke.check("warp_row_sums", STAGED_ROW_SUMS)
    assert "✘ uncoalesced loads" in verdict and ke.MODEL_NOTE in verdict, verdict
    assert "✔ Counted by Nsight Compute" in verdict and "100.0% of each sector" in verdict, verdict


def test_bank_conflicts_are_judged_by_the_wavefront_count_and_a_real_swizzle_passes():
    swizzled = (catalog.TRANSPOSE.solution
                .replace("tile[32][33];   // one float of padding per row: a column spans 32 banks", "tile[32][32];")
                .replace("tile[dy][threadIdx.x] =", "tile[dy][threadIdx.x ^ dy] =")
                .replace("= tile[threadIdx.x][dy];", "= tile[threadIdx.x][dy ^ threadIdx.x];"))
    assert swizzled.count("^") == 2, "the reference's tile lines moved: update this test"
    for source in (catalog.TRANSPOSE.solution, swizzled):
        verdict = ke.check("transpose_tile", source)
        assert verdict.correct and verdict.count("shared loads took") == 1 and "passes on average" not in verdict, verdict


def test_row_sums_without_the_shuffle_or_the_guard_are_wrong_live():
    for label in ("a warp per row, partial sums never combined", "a warp per row, no row guard"):
        verdict = ke.check("warp_row_sums", catalog.WARP_ROW_SUMS.wrong[label])
        assert not verdict.correct and ("WRONG" in verdict or "past the end" in verdict), (label, verdict)


@pytest.mark.parametrize("name,label", [
    ("persistent_tiles", "the starter (one tile per block)"),
    ("persistent_tiles", "no edge mask"),
    ("fused_epilogue", "bias indexed by row"),
    ("async_pipeline", "waits for nothing"),
    ("warp_specialized", "the starter (nothing loaded)"),
    ("warp_specialized", "the consumers never flip the phase"),
])
def test_the_later_notebooks_wrong_kernels_are_rejected_live(name, label):
    verdict = ke.check(name, ke.exercise(name).wrong[label])
    assert not verdict.correct, (label, verdict)


WGMMA_TRAPS = "a barrier wait that never completed"


@pytest.mark.parametrize("label,says", [
    ("the starter (nothing consumed)", (WGMMA_TRAPS,)),
    ("never flips the phase", (WGMMA_TRAPS,)),
    ("every consumer thread arrives on empty", (WGMMA_TRAPS,)),
    ("overwrites the accumulators every k-tile", ("130×257×200: WRONG",)),
    # a race: on the H200 it was wrong at 4096³ in every run, at 256×512×320 in one run of two (714 outputs)
    ("frees the slot before the wgmma wait", ("4096×4096×4096 (5 runs): WRONG",)),
])
def test_the_wgmma_consumers_wrong_kernels_are_rejected_live(label, says):
    verdict = ke.check("wgmma_consumer", catalog.WGMMA_CONSUMER.wrong[label], time_limit_s=60)
    assert not verdict.correct and all(s in verdict for s in says), verdict


def test_the_wgmma_consumer_solution_and_a_group_kept_in_flight_are_correct_at_rung_3s_speed():
    from test_kernel_exercises import wgmma_in_flight

    for source in (catalog.WGMMA_CONSUMER.solution, wgmma_in_flight()):
        verdict = ke.check("wgmma_consumer", source, time_limit_s=60)
        assert verdict.correct and "hopper_gemm.hgemm_3_specialized" in verdict, verdict
        assert "✔ compute-sanitizer racecheck at" in verdict and "✔ compute-sanitizer synccheck at" in verdict, verdict


def test_a_byte_count_that_never_completes_traps_instead_of_hanging():
    verdict = ke.check("warp_specialized", catalog.WARP_SPECIALIZED.wrong["a whole tile expected for the short last one"])
    assert not verdict.correct and "launch failed" in verdict and "did not finish" not in verdict, verdict
    assert "a barrier wait that never completed" in verdict, verdict


def test_a_correct_kernel_that_does_far_more_work_than_the_reference_is_not_passed():
    """A grid-stride loop stepping by gridDim.x alone: every element right, each written 256 times."""
    slow = catalog.SCALE.wrong["a stride of gridDim.x alone (each element written blockDim.x times)"]
    verdict = ke.check("scale_grid_stride", slow)
    assert not verdict.correct and ": correct" in verdict and "not yet what this exercise asks" in verdict, verdict
    assert "this exercise's reference solution" in verdict


def test_the_decode_starter_is_right_but_held_back_by_the_bar_for_reading_the_cache_four_times():
    verdict = ke.check("grouped_decode", catalog.GROUPED_DECODE.starter)
    assert not verdict.correct and verdict.count(": correct") == len(catalog.GROUPED_DECODE.sizes), verdict
    assert "not yet what this exercise asks" in verdict and "Count the bytes" in verdict, verdict
    assert "✘ Counted by Nsight Compute" in verdict and "4.00× the 268.4 MB" in verdict, verdict


def test_the_decode_solution_reads_the_cache_once_by_the_byte_count():
    verdict = ke.check("grouped_decode", catalog.GROUPED_DECODE.solution)
    assert verdict.correct and "✔ Counted by Nsight Compute" in verdict and "1.00× the 268.4 MB" in verdict, verdict


@pytest.mark.parametrize("label,fails_at", [
    ("no running maximum", "(scores ×576)"),
    ("steps by the warps, not the half-warps", "2×3×77: WRONG"),
])
def test_the_decode_wrong_kernels_are_wrong_where_they_should_be(label, fails_at):
    verdict = ke.check("grouped_decode", catalog.GROUPED_DECODE.wrong[label])
    assert not verdict.correct and fails_at in verdict, verdict
    if label == "no running maximum":   # right while the scores are small
        assert "3×2×1000: correct" in verdict and "1×1×2049 (scores ×576): WRONG" in verdict, verdict


def test_the_decode_solution_is_clean_under_memcheck_and_racecheck():
    verdict = ke.check("grouped_decode", catalog.GROUPED_DECODE.solution, sanitize=True, time_limit_s=60)
    assert verdict.correct and "✔ compute-sanitizer memcheck at" in verdict, verdict
    assert "✔ compute-sanitizer racecheck at" in verdict, verdict


# ---- issue 63, classes 6 and 7: correct kernels written otherwise than the reference, and the wrong kernels
# the static checks now see in the compiled kernel, run live

CORRECT_ALTERNATIVES = [(name, label) for name, ex in catalog.EXERCISES.items() for label in ex.correct_files]


@pytest.mark.parametrize("name,label", CORRECT_ALTERNATIVES, ids=[f"{n}: {lab}" for n, lab in CORRECT_ALTERNATIVES])
def test_correct_kernels_written_otherwise_than_the_reference_are_correct_live(name, label):
    """A rotated tile, a guard spelled another way, one barrier a step over two buffers, a fence far from its
    arrive, ...: right at every size, held to the reference's speed, clean under the default sanitizers."""
    verdict = ke.check(name, ke.exercise(name).correct[label], time_limit_s=60)
    assert verdict.correct and "✘" not in verdict, verdict
    assert "✔ compute-sanitizer memcheck at" in verdict, verdict


@pytest.mark.parametrize("name,label,says", [
    ("row_sum_squares_budget", "partial sums in an array indexed at run time (local memory, no spills)",
     "✘ local memory: a 64 B stack frame, 0 B of spills"),
    ("warp_specialized", "the proxy fence before the slot's reads", "with no fence.proxy.async between"),
    ("register_tile_gemm", "one barrier per step", "✘ a race on shared memory"),
    ("transpose_tile", "an XOR that moves nothing (dy >> 5 is 0 in a 32-row tile)", "32-way conflict"),
    ("persistent_tiles", "no edge mask", "✘ the edge tiles reach outside the matrix"),
    ("mystery_rms_norm", "one warp per row, no row guard", "✘ edges: the compiled kernel run on the CPU"),
])
def test_wrong_kernels_the_compiled_kernel_shows_are_rejected_live_with_the_static_finding(name, label, says):
    verdict = ke.check(name, ke.exercise(name).wrong[label], time_limit_s=60)
    assert not verdict.correct and says in verdict, verdict


def test_racecheck_agrees_with_the_emulated_race_of_one_barrier_a_step():
    """The static race (one barrier a step) is what racecheck reports live; the double-buffered tiles, one barrier
    a step over two buffers, are clean under it."""
    one = ke.check("register_tile_gemm", catalog.TILE_GEMM.wrong["one barrier per step"], sanitize=True, time_limit_s=60)
    assert not one.correct and "✘ compute-sanitizer racecheck" in one, one
    double = ke.check("register_tile_gemm", catalog.TILE_GEMM.correct["double-buffered stage tiles, one barrier a step"],
                      sanitize=True, time_limit_s=60)
    assert double.correct and "✔ compute-sanitizer racecheck at" in double, double
