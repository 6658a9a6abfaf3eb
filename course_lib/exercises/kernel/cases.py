"""The live cases of the kernel exercises, run in the checker's child process (``runner``): each
``*_cases(fn, sizes, time_it, **launch)`` builds the exercise's inputs at each size, launches the
learner's kernel ``fn``, compares it with a reference (CuPy, float64 where it matters), and, when
every case passed and ``time_it``, times it beside the course kernel that moves the same bytes.
A ``KernelExercise`` carries its own cases function; the sizes and shapes here are theirs. A cases
function may carry a ``warm_up``: what only it compiles (CuPy kernels), run by the child before its
time limit starts, so that the other exercises' children do not pay for it."""
from __future__ import annotations

from course_lib.core import cuda
from course_lib.core.timing import benchmark
from course_lib.launch.elementwise import geometry as elementwise_launch
from course_lib.launch.exercise_kernels import MYSTERY_THREADS
from course_lib.launch.fusion import FAMILY, row_threads, run_rmsnorm
from course_lib.launch.operands import gelu_tanh_reference
from course_lib.launch.pipeline import run_specialized, run_stream
from course_lib.measure.experiments import check_close

# One element; odd M, N, K; one K step that is a whole tile (64×128×8); a single row against a prime N; a
# multiple of every tile; shapes that leave partial tiles on every side.
GEMM_SHAPES = ((1, 1, 1), (65, 63, 9), (64, 128, 8), (2, 257, 1), (127, 129, 33), (512, 512, 512), (1000, 333, 77))
MYSTERY_TIMED_SHAPE = (16384, 4096)   # rows × cols of the timed run (256 MiB in, 256 MiB out)
# One element, a width one past 1,024, odd and prime widths, multiples of 4 and of 32, a row wider than
# 8,192 floats (a fixed shared or local buffer overflows), rows of values near 10⁻⁴ (ROW_VALUE_SCALE), and arrays
# that start off 16-byte alignment (MISALIGNED_SHAPES).
MYSTERY_SHAPES = ((1, 1), (3, 1025), (257, 1000), (1000, 33), (9, 256), (4097, 1024), (16384, 1024), (77, 4099),
                  (5, 9001), (33, 1024))
# Shapes run with in, weight and out starting one float past a 16-byte boundary (a view such as
# x.view(-1)[1:] does that), where a float4 access faults with a "misaligned address": a vector path has to
# look at the pointers, not only at cols % 4.
MISALIGNED_SHAPES = {(33, 1024)}
MISALIGNED = "in, weight and out 4 bytes past 16-byte alignment"
# Values scaled so that mean(x²) is about 10⁻⁹, far under RMSNorm's ε = 10⁻⁶: an ε outside the square root
# (or none) gives outputs wrong by 30×.
ROW_VALUE_SCALE = {(9, 256): 1e-4}
TILE_SHAPES = ((1, 1), (65, 63), (1000, 333), (130, 4099), (4097, 4097))
TILE_TIMED_SHAPE = (8192, 8192)
# (rows, cols, value scale): one element, odd shapes, and inputs up to about ±100, where a GELU whose tanh is
# written through exp(2u) overflows to inf / inf.
FUSED_SHAPES = ((1, 1, 1.0), (3, 5, 1.0), (257, 1000, 1.0), (1000, 33, 1.0), (64, 257, 30.0), (4097, 1024, 1.0))
FUSED_TIMED_SHAPE = (16384, 4096)
SECOND_GRID = 3   # blocks of the one extra launch that checks a kernel's loop for a grid of any size
PIPELINE_THREADS = 256
SPECIALIZED_THREADS = 160   # warp 0: the producer (lane 0); warps 1-4: the consumers


def persistent_blocks(sm_count: int, max_threads_per_sm: int) -> int:
    """The checker's persistent grid: as many 256-thread blocks as every SM holds at once."""
    return sm_count * max(1, max_threads_per_sm // 256)


CHUNK = 1 << 27   # elements compared at once: a check past 2³¹ elements needs no more than a few GB beside its arrays


def _first_wrong(got, want, shape=None, rtol: float = 1e-5, atol: float = 1e-6) -> str | None:
    """The first element that differs (beyond float32 rounding), with its index and both values. ``want`` is an
    array, or a function of a slice that gives that slice of it (so a huge reference is never whole in memory)."""
    import cupy

    for start in range(0, got.size, CHUNK):
        part = slice(start, min(start + CHUNK, got.size))
        expected = want(part) if callable(want) else want[part]
        bad = ~cupy.isclose(got[part], expected, rtol=rtol, atol=atol)
        if bool(bad.any()):
            j = int(cupy.argmax(bad))
            i = start + j
            where = f"index {i:,}" if shape is None else f"row {i // shape[1]}, column {i % shape[1]}"
            return f"first wrong element at {where}: expected {float(expected[j]):.7g}, got {float(got[i]):.7g}"
    return None


EXACT_INPUTS = False   # set by the runner under compute-sanitizer: no room past the inputs, so memcheck sees a read past them


def _room(spare: int) -> int:
    """Elements allocated past an input: ``spare`` normally (a read past the end finds data and the results
    judge the kernel), none under the sanitizer (where memcheck reports the read)."""
    return 0 if EXACT_INPUTS else spare


def _fits(n_bytes: int, what: str) -> str | None:
    """None where this GPU has ``n_bytes`` free, else why the case is skipped."""
    import cupy

    free = cupy.cuda.Device().mem_info[0]
    return None if n_bytes <= 0.9 * free else (f"skipped: {what} needs {n_bytes / 1e9:.1f} GB of GPU memory and "
                                               f"{free / 1e9:.1f} GB is free")


SENTINEL = 12345.0   # written past the end of each output: a kernel that overwrites it wrote out of bounds


def _output(n: int, spare: int):
    """An output of n NaNs (an element never written fails the check) and ``spare`` sentinels after it."""
    import cupy

    out = cupy.full(n + spare, cupy.nan, dtype=cupy.float32)
    out[n:] = SENTINEL
    return out


def _overrun(out, n: int, sentinel=SENTINEL) -> int | None:
    """How far past element n the first overwritten sentinel lies, or None when none was touched."""
    import cupy

    hit = out[n:] != sentinel
    return int(cupy.argmax(hit)) if bool(hit.any()) else None


TIMING_SAMPLES = 20


def _timed(size, yours, course, course_kernel: str, **options) -> dict:
    """The learner's kernel and the course's, each timed with CUDA events (GPU held), medians in µs;
    ``options`` go to ``benchmark`` (flush_l2)."""

    mine, ref = benchmark(yours, TIMING_SAMPLES, **options), benchmark(course, TIMING_SAMPLES, **options)
    return {"size": size, "yours_us": mine.median_s * 1e6, "course_us": ref.median_s * 1e6,
            "course_kernel": course_kernel, "samples": TIMING_SAMPLES}


SCALE_TIMED_SIZE = 1 << 24 | 5
SCALE_HUGE_SIZE = (1 << 31) + 5   # past 2³¹ elements: an int index overflows here


def scale_cases(fn, sizes, time_it: bool) -> dict:
    """y = 1.5 · x at each n on 4 blocks of 256 per SM, then once more at the middle size on a grid of
    ``SECOND_GRID`` blocks (a loop written for one grid fails the other); timed at ``SCALE_TIMED_SIZE``."""
    import cupy
    import numpy as np

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    grid, block, guard = (4 * sms,), (256,), 64
    out = {"cases": []}
    launches = [(n, grid) for n in sizes] + [(sizes[len(sizes) // 2], (SECOND_GRID,))] * (len(sizes) > 2)
    for n, g in launches:
        label = n if g == grid else f"n = {n:,} on a grid of {g[0]} blocks"
        if n > CHUNK and (skipped := _fits(8 * n + 16 * CHUNK, f"n = {n:,}")):
            out["cases"].append({"size": n, "passed": True, "first_wrong": None, "skipped": skipped})
            continue
        x = cupy.random.default_rng(n).random(n, dtype=cupy.float32)
        x -= 0.5
        y = _output(n, guard)
        fn(g, block, (y, x, np.float32(1.5), np.int64(n)))
        cupy.cuda.Device().synchronize()
        wrong = _first_wrong(y[:n], lambda part: x[part] * np.float32(1.5))
        if wrong is None and (past := _overrun(y, n)) is not None:
            wrong = f"it wrote past the end: element {n + past:,} of an array of {n:,}"
        out["cases"].append({"size": label, "passed": wrong is None, "first_wrong": wrong})
        del x, y
    if time_it and all(c["passed"] for c in out["cases"]):
        n = SCALE_TIMED_SIZE
        x = cupy.ones(n, dtype=cupy.float32)
        y = cupy.empty(n, dtype=cupy.float32)
        copy = cuda.kernel("elementwise", "copy")
        out["timing"] = _timed(n,
                               lambda: fn(grid, block, (y, x, np.float32(1.5), np.int64(n))),
                               lambda: copy(((n + 255) // 256,), (256,), (y, x, np.int64(n))),
                               "elementwise.copy")
    return out


# Columns per row count: one column, odd widths, multiples of 4 (an unrolled loop's remainder is empty), a
# width past 1024.
ROW_SUM_COLS = {1: 1, 3: 67, 17: 4, 255: 130, 1001: 63, 1024: 1024, 4099: 1025}


def row_sum_cases(fn, sizes, time_it: bool) -> dict:
    import cupy
    import numpy as np

    out, guard = {"cases": []}, 128
    for rows in sizes:
        cols = ROW_SUM_COLS[rows]
        a = cupy.random.default_rng(rows).random((rows, cols), dtype=cupy.float32) - 0.5
        got = _output(rows, guard)
        fn(((rows + 127) // 128,), (128,), (got, a, np.int32(rows), np.int32(cols)))
        cupy.cuda.Device().synchronize()
        want = (a.astype(cupy.float64) ** 2).sum(axis=1).astype(cupy.float32)
        wrong = _first_wrong(got[:rows], want)
        if wrong is None and (past := _overrun(got, rows)) is not None:
            wrong = f"it wrote past the end: out[{rows + past}] of {rows} rows"
        out["cases"].append({"size": f"{rows:,}×{cols:,}", "passed": wrong is None, "first_wrong": wrong})
    return out


def warm_up() -> None:
    """CuPy's own kernels that the cases use, compiled before the time limit starts."""
    import cupy

    x = cupy.random.default_rng(0).random(8, dtype=cupy.float32)
    bad = ~cupy.isclose(x, x, rtol=1e-5, atol=1e-6)
    int(cupy.argmax(bad))
    bool((x != 1.0).any())
    (x.astype(cupy.float64) ** 2).reshape(2, 4).sum(axis=1).astype(cupy.float32)
    cupy.full(8, cupy.nan, dtype=cupy.float32)
    x.reshape(2, 4).T.ravel()
    y = x.reshape(2, 4).astype(cupy.float64)
    bool((~(cupy.abs((y @ y.T).ravel() - 1.0) <= 1.0)).any())
    v = cupy.random.default_rng(0).standard_normal(8, dtype=cupy.float32).reshape(2, 4) + x[:4]
    (v.astype(cupy.float64) / cupy.sqrt((y ** 2).mean(axis=1, keepdims=True)) * cupy.tanh(y)).ravel()
    cupy.cuda.Device().synchronize()


def _warm_up_decode() -> None:
    """The decode exercise's float64 attention and its error search, on one token (its cases' ``warm_up``)."""
    from course_lib.launch import decode_attention as attention

    q, k, v, out = attention.operands(1, 1, DECODE_GROUP, 1, 0)
    want = attention.reference(q, k, v)
    _decode_first_wrong(out, want, attention.tolerance(want))


# Columns per row count of the transpose: a single element, square, tall, wide, whole tiles (32×64), primes.
TRANSPOSE_COLS = {1: 1, 31: 33, 32: 64, 257: 100, 1024: 1024, 3001: 999}
TRANSPOSE_SIZES = tuple(TRANSPOSE_COLS)
TRANSPOSE_TIMED = 8192   # n × n


def transpose_cases(fn, sizes, time_it: bool) -> dict:
    import cupy
    import numpy as np

    out, guard = {"cases": []}, 64
    for rows in sizes:
        cols = TRANSPOSE_COLS[rows]
        a = cupy.random.default_rng(rows).random((rows, cols), dtype=cupy.float32)
        got = _output(rows * cols, guard)
        grid, block = ((cols + 31) // 32, (rows + 31) // 32), (32, 8)
        fn(grid, block, (got, a, np.int32(rows), np.int32(cols)))
        cupy.cuda.Device().synchronize()
        wrong = _first_wrong(got[:rows * cols], a.T.ravel(), shape=(cols, rows))
        if wrong is None and _overrun(got, rows * cols) is not None:
            wrong = "it wrote past the end of out"
        out["cases"].append({"size": f"{rows:,}×{cols:,}", "passed": wrong is None, "first_wrong": wrong})
    if time_it and all(c["passed"] for c in out["cases"]):
        n = TRANSPOSE_TIMED
        a = cupy.ones((n, n), dtype=cupy.float32)
        b = cupy.empty((n, n), dtype=cupy.float32)
        grid, block = (n // 32, n // 32), (32, 8)
        course = cuda.kernel("transpose", "transpose_padded")
        out["timing"] = _timed(f"{n:,}×{n:,}",
                               lambda: fn(grid, block, (b, a, np.int32(n), np.int32(n))),
                               lambda: course(grid, block, (b, a, np.int32(n), np.int32(n))),
                               "transpose.transpose_padded")
    return out


def _profile_transpose(fn) -> None:
    """One launch at the timed size, for the checker's sector count."""
    import cupy
    import numpy as np

    n = TRANSPOSE_TIMED
    a = cupy.random.default_rng(0).random((n, n), dtype=cupy.float32)
    fn((n // 32, n // 32), (32, 8), (cupy.empty_like(a), a, np.int32(n), np.int32(n)))


transpose_cases.profile = _profile_transpose


TILE_GEMM_TIMED = 2048   # n of the timed and profiled n × n × n product


def tile_gemm_cases(fn, sizes, time_it: bool) -> dict:
    import cupy
    import numpy as np

    out, guard = {"cases": []}, 64
    for index in sizes:
        m, n, k = GEMM_SHAPES[index]
        rng = cupy.random.default_rng(index)
        a = rng.random((m, k), dtype=cupy.float32) - 0.5
        b = rng.random((k, n), dtype=cupy.float32) - 0.5
        c = _output(m * n, guard)
        fn(((n + 63) // 64, (m + 63) // 64), (512,), (a, b, c, np.int32(m), np.int32(n), np.int32(k)))
        cupy.cuda.Device().synchronize()
        want = (a.astype(cupy.float64) @ b.astype(cupy.float64)).ravel()
        got = c[:m * n].astype(cupy.float64)
        tol = 1e-5 * max(1.0, k / 1024) * float(cupy.abs(want).max())
        bad = ~(cupy.abs(got - want) <= tol)
        wrong = None
        if bool(bad.any()):
            i = int(cupy.argmax(bad))
            wrong = f"first wrong element at row {i // n}, column {i % n}: expected {float(want[i]):.7g}, got {float(got[i]):.7g}"
        elif _overrun(c, m * n) is not None:
            wrong = "it wrote past the end of C"
        out["cases"].append({"size": f"{m}×{n}×{k}", "passed": wrong is None, "first_wrong": wrong})
    if time_it and all(x["passed"] for x in out["cases"]):
        n = TILE_GEMM_TIMED
        a = cupy.ones((n, n), dtype=cupy.float32)
        c = cupy.empty((n, n), dtype=cupy.float32)
        course = cuda.kernel("gemm_fp32", "sgemm_reg1d")
        args = (a, a, c, np.int32(n), np.int32(n), np.int32(n))
        out["timing"] = _timed(f"{n}×{n}×{n}",
                               lambda: fn((n // 64, n // 64), (512,), args),
                               lambda: course((n // 64, n // 64), (512,), args),
                               "gemm_fp32.sgemm_reg1d")
    return out


def _profile_tile_gemm(fn) -> None:
    """One launch at the timed size, for the checker's sector and wavefront counts."""
    import cupy
    import numpy as np

    n = TILE_GEMM_TIMED
    a = cupy.random.default_rng(0).random((n, n), dtype=cupy.float32)
    fn((n // 64, n // 64), (512,), (a, a, cupy.empty_like(a), np.int32(n), np.int32(n), np.int32(n)))


tile_gemm_cases.profile = _profile_tile_gemm


def _row_reference(op: str, x, w):
    import cupy

    x64 = x.astype(cupy.float64)
    if op == "row_sums":
        return x64.sum(axis=1).astype(cupy.float32)
    return (x64 / cupy.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + 1e-6) * w.astype(cupy.float64)).astype(cupy.float32)


def _row_cases(fn, sizes, time_it: bool, rows_per_block: int, op: str) -> dict:
    """A kernel over the rows of a matrix (``op``: "rms_norm" writes rows × cols, "row_sums" one float
    per row), at each shape with room past both arrays (one block's worth of rows): reads there find
    data, not a fault, and writes there hit a sentinel that says the kernel wrote past the end."""
    import cupy
    import numpy as np

    def launch(out, x, w, rows, cols):
        args = (out, x, w) if op == "rms_norm" else (out, x)
        fn((-(-rows // rows_per_block),), (MYSTERY_THREADS,), (*args, np.int32(rows), np.int32(cols)))

    out = {"cases": []}
    for index in sizes:
        rows, cols = MYSTERY_SHAPES[index]
        skew = 1 if (rows, cols) in MISALIGNED_SHAPES else 0   # floats before each array's first element
        spare_rows = MYSTERY_THREADS + rows_per_block
        rng = cupy.random.default_rng(index)
        scale = ROW_VALUE_SCALE.get((rows, cols), 1.0)
        x_all = (rng.random(skew + rows * cols + _room(spare_rows * cols), dtype=cupy.float32) - 0.5) * np.float32(scale)
        x_all = x_all[skew:]
        w = (rng.random(skew + cols, dtype=cupy.float32) + 0.5)[skew:]
        n_out = rows * cols if op == "rms_norm" else rows
        got = _output(skew + n_out, spare_rows * (cols if op == "rms_norm" else 1) + 64)[skew:]
        launch(got, x_all, w, rows, cols)
        cupy.cuda.Device().synchronize()
        want = _row_reference(op, x_all[:rows * cols].reshape(rows, cols), w).ravel()
        shape = (rows, cols) if op == "rms_norm" else None
        atol = 1e-5 if op == "rms_norm" else 1e-5 * scale * cols ** 0.5   # a sum's rounding grows with its length
        wrong = _first_wrong(got[:n_out], want, shape=shape, rtol=1e-4, atol=atol)
        if wrong is None and (past := _overrun(got, n_out)) is not None:
            wrong = f"it wrote past the end of out: {past:,} elements after its last"
        out["cases"].append({"size": f"{rows}×{cols}" + (f" ({MISALIGNED})" if skew else "")
                                     + (f" (values ×{scale:g})" if scale != 1 else ""),
                             "passed": wrong is None, "first_wrong": wrong})
    if time_it and all(c["passed"] for c in out["cases"]):
        rows, cols = MYSTERY_TIMED_SHAPE
        x = cupy.random.default_rng(1).random((rows, cols), dtype=cupy.float32)
        w = cupy.ones(cols, dtype=cupy.float32)
        y = cupy.empty_like(x) if op == "rms_norm" else cupy.empty(rows, dtype=cupy.float32)
        course, name = _course_row_kernel(op, x, w)
        out["timing"] = _timed(f"{rows}×{cols}", lambda: launch(y, x, w, rows, cols), course, name)
    return out


def _course_row_kernel(op: str, x, w):
    """The course kernel that moves the same bytes: the one-pass RMSNorm, or RMSNorm's row statistics
    (which read each row once and write one float, as row sums do)."""
    import cupy
    import numpy as np

    rows, cols = x.shape
    if op == "rms_norm":
        y = cupy.empty_like(x)
        return (lambda: run_rmsnorm(y, x, w)), "fusion.rmsnorm_one_pass"
    stats = cupy.empty(rows, dtype=cupy.float32)
    kernel = cuda.kernel(FAMILY, "rmsnorm_row_stats")
    return (lambda: kernel((rows,), (row_threads(cols),), (stats, x, np.int32(cols), np.float32(1e-6)))), \
        "fusion.rmsnorm_row_stats"


def _profile_rows(fn, rows_per_block: int, op: str) -> None:
    """One launch at the timed shape, for the checker's sector count."""
    import cupy
    import numpy as np

    rows, cols = MYSTERY_TIMED_SHAPE
    x = cupy.random.default_rng(1).random((rows, cols), dtype=cupy.float32)
    args = (cupy.empty_like(x), x, cupy.ones(cols, dtype=cupy.float32)) if op == "rms_norm" else \
        (cupy.empty(rows, dtype=cupy.float32), x)
    fn((-(-rows // rows_per_block),), (MYSTERY_THREADS,), (*args, np.int32(rows), np.int32(cols)))


def rms_norm_cases(fn, sizes, time_it: bool, rows_per_block: int) -> dict:
    return _row_cases(fn, sizes, time_it, rows_per_block, "rms_norm")


def warp_row_sums_cases(fn, sizes, time_it: bool, rows_per_block: int) -> dict:
    return _row_cases(fn, sizes, time_it, rows_per_block, "row_sums")


rms_norm_cases.profile = lambda fn, rows_per_block: _profile_rows(fn, rows_per_block, "rms_norm")
warp_row_sums_cases.profile = lambda fn, rows_per_block: _profile_rows(fn, rows_per_block, "row_sums")


def scale_tiles_cases(fn, sizes, time_it: bool) -> dict:
    import cupy
    import numpy as np

    attrs = cupy.cuda.Device().attributes
    sms = persistent_blocks(attrs["MultiProcessorCount"], attrs["MaxThreadsPerMultiProcessor"])
    out, guard = {"cases": []}, 64 * 4097 + 64          # a tile row's worth past the end
    # every shape on the persistent grid, then the middle one on a grid of SECOND_GRID blocks
    launches = [(index, sms) for index in sizes] + [(sizes[len(sizes) // 2], SECOND_GRID)] * (len(sizes) > 2)
    for index, blocks in launches:
        rows, cols = TILE_SHAPES[index]
        x = cupy.random.default_rng(index).random(rows * cols + _room(guard), dtype=cupy.float32)
        y = _output(rows * cols, guard)
        fn((blocks,), (256,), (y, x, np.float32(1.5), np.int32(rows), np.int32(cols)))
        cupy.cuda.Device().synchronize()
        wrong = _first_wrong(y[:rows * cols], x[:rows * cols] * np.float32(1.5), shape=(rows, cols))
        if wrong is None and _overrun(y, rows * cols) is not None:
            wrong = "it wrote past the end of out"
        out["cases"].append({"size": f"{rows}×{cols}" + ("" if blocks == sms else f" on a grid of {blocks} blocks"),
                             "passed": wrong is None, "first_wrong": wrong})
    if time_it and all(c["passed"] for c in out["cases"]):
        rows, cols = TILE_TIMED_SHAPE
        n = rows * cols
        x, y = cupy.ones(n, dtype=cupy.float32), cupy.empty(n, dtype=cupy.float32)
        grid, block = elementwise_launch("copy_vec4", n)
        copy = cuda.kernel("elementwise", "copy_vec4")
        out["timing"] = _timed(f"{rows}×{cols}",
                               lambda: fn((sms,), (256,), (y, x, np.float32(1.5), np.int32(rows), np.int32(cols))),
                               lambda: copy(grid, block, (y, x, np.int64(n))),
                               "elementwise.copy_vec4")
    return out


def fused_epilogue_cases(fn, sizes, time_it: bool) -> dict:
    import cupy
    import numpy as np

    def launch(y, x, bias, res, rows, cols):
        total = rows * cols
        fn((-(-total // 256),), (256,), (y, x, bias, res, np.int32(cols), np.int64(total)))

    out, guard = {"cases": []}, 256
    for index in sizes:
        rows, cols, scale = FUSED_SHAPES[index]
        rng = cupy.random.default_rng(index)
        x, res = (rng.standard_normal(rows * cols, dtype=cupy.float32) * np.float32(scale) for _ in range(2))
        bias = rng.standard_normal(cols, dtype=cupy.float32) * np.float32(scale)
        y = _output(rows * cols, guard)
        launch(y, x, bias, res, rows, cols)
        cupy.cuda.Device().synchronize()
        v = (x.reshape(rows, cols) + bias).astype(cupy.float64)
        want = gelu_tanh_reference(v).ravel() + res
        wrong = _first_wrong(y[:rows * cols], want.astype(cupy.float32), shape=(rows, cols), rtol=2e-3, atol=2e-3)
        if wrong is None and _overrun(y, rows * cols) is not None:
            wrong = "it wrote past the end of out"
        out["cases"].append({"size": f"{rows}×{cols}" + (f" (values ×{scale:g})" if scale != 1 else ""),
                             "passed": wrong is None, "first_wrong": wrong})
    if time_it and all(c["passed"] for c in out["cases"]):
        rows, cols = FUSED_TIMED_SHAPE
        n = rows * cols
        x, res, y = cupy.ones(n, dtype=cupy.float32), cupy.ones(n, dtype=cupy.float32), cupy.empty(n, dtype=cupy.float32)
        bias = cupy.zeros(cols, dtype=cupy.float32)
        grid, block = elementwise_launch("vector_add_vec4", n)
        add = cuda.kernel("elementwise", "vector_add_vec4")
        out["timing"] = _timed(f"{rows}×{cols}",
                               lambda: launch(y, x, bias, res, rows, cols),
                               lambda: add(grid, block, (y, x, res, np.int64(n))),
                               "elementwise.vector_add_vec4")
    return out


def _sum_squares_cases(fn, sizes, time_it: bool, threads: int, course, course_kernel: str) -> dict:
    """A sum-of-squares kernel on one block of ``threads`` per SM: out[0] against a float64 sum at each
    size, then timed beside ``course(x, partial, sms)``, the course's kernel for the same bytes."""
    import cupy
    import numpy as np

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    out = {"cases": []}
    # every size on one block per SM, then the middle size on a grid of SECOND_GRID blocks
    launches = [(n, sms) for n in sizes] + [(sizes[len(sizes) // 2], SECOND_GRID)] * (len(sizes) > 2)
    for n, blocks in launches:
        x = cupy.random.default_rng(n).random(n, dtype=cupy.float32) - 0.5
        total = cupy.zeros(1, dtype=cupy.float32)
        fn((blocks,), (threads,), (total, x, np.int64(n)))
        cupy.cuda.Device().synchronize()
        want = float((x.astype(cupy.float64) ** 2).sum())
        got = float(total[0])
        ok = abs(got - want) <= 1e-4 * abs(want) + 1e-6
        out["cases"].append({"size": n if blocks == sms else f"n = {n:,} on a grid of {blocks} blocks", "passed": ok,
                             "first_wrong": None if ok else f"the sum is {got:.7g}, the float64 reference {want:.7g}"})
    if time_it and all(c["passed"] for c in out["cases"]):
        n = sizes[-1]
        x = cupy.ones(n, dtype=cupy.float32)
        total, partial = cupy.zeros(1, dtype=cupy.float32), cupy.zeros(sms, dtype=cupy.float32)
        out["timing"] = _timed(n, lambda: fn((sms,), (threads,), (total, x, np.int64(n))),
                               lambda: course(x, partial, sms), course_kernel)
    return out


def async_pipeline_cases(fn, sizes, time_it: bool) -> dict:
    # Beside the course kernel with three stages: it waits for tile j with tile j + 1 still in flight, as a
    # two-slot loop that issues the next tile before it waits does. The course's two-stage build waits for
    # every copy before it issues the next (cp.async.wait_group 0), one tile in flight at a time.
    return _sum_squares_cases(fn, sizes, time_it, PIPELINE_THREADS,
                              lambda x, partial, sms: run_stream("stream_cp_async", x, partial, sms, stages=3),
                              "pipeline.stream_cp_async (3 stages, one block per SM)")


def warp_specialized_cases(fn, sizes, time_it: bool) -> dict:
    return _sum_squares_cases(fn, sizes, time_it, SPECIALIZED_THREADS,
                              lambda x, partial, sms: run_specialized(x, partial, stages=4, work=0),
                              "pipeline.stream_specialized (4 stages of 16 KiB, one block per SM)")


def _matrix_fix_cases(fn, n: int, time_it: bool, grid, args, want, reference: str, course_kernel: str, course_args) -> dict:
    """Notebooks 04 and 05's fix-the-kernel checks: one n × n launch of block (32, 8) compared exactly
    with ``want``, then (when it is right) timed beside the course's version with the L2 flushed
    before each sample. The case's first_wrong is the max error against ``reference``."""
    import cupy

    fn(grid, (32, 8), args)
    cupy.cuda.Device().synchronize()
    check = check_close(args[0], want, reference, 0.0)
    out = {"cases": [{"size": f"{n}×{n}", "passed": check["passed"],
                      "first_wrong": None if check["passed"] else f"max error {check['max_abs_err']:.3g} against {reference}"}]}
    if check["passed"] and time_it:
        course = cuda.kernel(*course_kernel.split("."))
        out["timing"] = _timed(f"{n}×{n}", lambda: fn(grid, (32, 8), args), lambda: course(grid, (32, 8), course_args),
                               course_kernel, flush_l2=True)
    return out


def coalescing_fix_cases(fn, sizes, time_it: bool) -> dict:
    """Notebook 04's ``my_scale(out, in, rows, cols)``: out = 2 · in, beside coalescing.scale_rows."""
    import cupy
    import numpy as np

    n = sizes[-1]
    a = cupy.random.random((n, n), dtype=cupy.float32)
    args = (cupy.full_like(a, -1), a, np.int32(n), np.int32(n))
    return _matrix_fix_cases(fn, n, time_it, ((n + 31) // 32, (n + 7) // 8), args, 2 * a, "2 * in", "coalescing.scale_rows", args)


def transpose_fix_cases(fn, sizes, time_it: bool) -> dict:
    """Notebook 05's ``my_transpose(out, in, n)``: out = inᵀ, beside transpose.transpose_padded."""
    import cupy
    import numpy as np

    n = sizes[-1]
    a = cupy.random.random((n, n), dtype=cupy.float32)
    out = cupy.full_like(a, -1)
    return _matrix_fix_cases(fn, n, time_it, ((n + 31) // 32, (n + 31) // 32), (out, a, np.int32(n)), a.T, "a.T",
                             "transpose.transpose_padded", (out, a, np.int32(n), np.int32(n)))


# ---- notebook 12: decode attention for a group of query heads

DECODE_GROUP = 4        # query heads per KV head, as Llama 3 8B's 32 on 8
DECODE_THREADS = 128    # 8 half-warps, each taking one token at a time
# (batch, KV heads, cached tokens, score scale): one token; fewer tokens than a block's 8 half-warps;
# lengths that leave a partial round of 8 tokens (77, 2049) and longer ones; and q and k scaled so that the base-2 scores spread by hundreds,
# where 2 to the power of a raw score overflows float32 (a softmax without its running maximum fails).
DECODE_SHAPES = ((1, 1, 1, 1.0), (1, 2, 5, 1.0), (2, 3, 77, 1.0), (3, 2, 1000, 1.0), (1, 1, 2049, 24.0),
                 (2, 2, 300, 48.0))
DECODE_TIMED_SHAPE = (32, 8, 2048)   # batch, KV heads, tokens: 256 MiB of K and V, 256 blocks
DECODE_SENTINEL = 0x1234             # bf16 bits written past the end of the output


def _decode_first_wrong(got, want, tol: float) -> str | None:
    """Where the bf16 output is furthest from the float64 attention: sequence, query head, dimension."""
    import cupy
    import numpy as np

    from course_lib.launch.operands import bf16_bits_to_float32

    values = bf16_bits_to_float32(got).astype(cupy.float64)
    err = cupy.abs(values - want)
    err[cupy.isnan(err)] = cupy.inf   # a NaN (a row never written, or an overflow) is the worst error
    if not float(err.max()) > tol:
        return None
    b, h, d = (int(i) for i in np.unravel_index(int(cupy.argmax(err)), want.shape))
    return (f"sequence {b}, query head {h}, dimension {d}: expected {float(want[b, h, d]):.5g}, "
            f"got {float(values[b, h, d]):.5g} (tolerance {tol:.2g})")


def decode_cache_bytes(batch: int, kv_heads: int, tokens: int) -> int:
    """The bytes of K and V in a bf16 cache: what one decode step's grouped attention must read."""
    from course_lib.launch import decode_attention as attention

    return 2 * batch * kv_heads * tokens * attention.HEAD_DIM * 2


def _decode_launch(fn, q, k, v, out, batch: int, kv_heads: int, tokens: int) -> None:
    import math

    import numpy as np

    from course_lib.launch import decode_attention as attention

    scale_log2 = np.float32(math.log2(math.e) / math.sqrt(attention.HEAD_DIM))
    fn((kv_heads, batch), (DECODE_THREADS,), (q, k, v, out, np.int32(tokens), scale_log2))


def _profile_decode(fn) -> None:
    """One launch at the timed shape, for the checker's byte count."""
    from course_lib.launch import decode_attention as attention

    batch, kv_heads, tokens = DECODE_TIMED_SHAPE
    q, k, v, out = attention.operands(batch, kv_heads, DECODE_GROUP, tokens, 7)
    _decode_launch(fn, q, k, v, out, batch, kv_heads, tokens)


def grouped_decode_cases(fn, sizes, time_it: bool) -> dict:
    """``decode_gqa(q, k, v, out, T, scale_log2)`` on grid (KV heads, batch) against float64 attention of the
    same bf16 inputs, then timed beside the course's grouped decode kernel (split over the cache)."""
    import cupy

    from course_lib.launch import decode_attention as attention

    def launch(q, k, v, out, batch, kv_heads, tokens):
        _decode_launch(fn, q, k, v, out, batch, kv_heads, tokens)

    out, guard = {"cases": []}, 256
    for index in sizes:
        batch, kv_heads, tokens, scale = DECODE_SHAPES[index]
        q, k, v, _ = attention.operands(batch, kv_heads, DECODE_GROUP, tokens, 40 + index, scale=scale)
        got = cupy.full(q.size + guard, 0xFFFF, dtype=cupy.uint16)   # bf16 NaN: a row never written fails
        got[q.size:] = DECODE_SENTINEL
        launch(q, k, v, got, batch, kv_heads, tokens)
        cupy.cuda.Device().synchronize()
        want = attention.reference(q, k, v)
        wrong = _decode_first_wrong(got[:q.size].reshape(q.shape), want, attention.tolerance(want))
        if wrong is None and _overrun(got, q.size, DECODE_SENTINEL) is not None:
            wrong = "it wrote past the end of out"
        out["cases"].append({"size": f"{batch}×{kv_heads}×{tokens}" + (f" (scores ×{scale ** 2:g})" if scale != 1 else ""),
                             "passed": wrong is None, "first_wrong": wrong})
    if time_it and all(c["passed"] for c in out["cases"]):
        batch, kv_heads, tokens = DECODE_TIMED_SHAPE
        q, k, v, yours = attention.operands(batch, kv_heads, DECODE_GROUP, tokens, 7)
        course = cupy.empty_like(yours)
        out["timing"] = _timed(f"batch {batch} × {kv_heads} KV heads × {tokens:,} tokens",
                               lambda: launch(q, k, v, yours, batch, kv_heads, tokens),
                               lambda: attention.run_decode(q, k, v, course, DECODE_GROUP),
                               "decode_attention.decode_grouped_g4 + decode_combine (the cache split across blocks)")
    return out


grouped_decode_cases.warm_up = _warm_up_decode
grouped_decode_cases.profile = _profile_decode


# ---- notebook 10: the consumer warpgroups of a warp-specialized wgmma GEMM

# (M, N, K), K a multiple of 8 (the TMA's 16-byte row strides), in order: one output row and one short
# k-tile; partial tiles in M and N with one short k-tile; partial tiles on every side over 4 k-tiles (the
# ring once round, no phase flip); K past the ring (5, 17 and 9 k-tiles: each slot's phase flips; the last
# k-tile short at K = 1032 and 520, whole at 320), with partial tiles; then the timed shape, run
# WGMMA_RACE_RUNS times: a slot freed too early is overwritten while the tensor cores read it, a race
# that on the H200 showed at 4096³ in every run and at the small shapes only now and then.
WGMMA_SHAPES = ((1, 8, 8), (65, 63, 16), (130, 257, 200), (256, 512, 320), (129, 130, 1032), (1000, 333, 520),
                (4096, 4096, 4096))
WGMMA_RACE_RUNS = 5
WGMMA_TILE, WGMMA_THREADS, WGMMA_STAGES = 128, 384, 4


def wgmma_smem_bytes() -> int:
    """The exercise's dynamic shared memory: 1,024 bytes of alignment room, then 4 slots of a 128 × 64 A tile,
    a 128 × 64 B tile (bf16) and their two 8-byte barriers."""
    return 1024 + WGMMA_STAGES * (2 * WGMMA_TILE * 64 * 2 + 16)


def _wgmma_first_wrong(c_bits, want) -> str | None:
    """How many outputs lie outside the bf16 tolerance of the float64 product (an unwritten NaN counts), and the
    first of them (``_first_wrong``), or None."""
    import cupy

    from course_lib.launch.operands import bf16_bits_to_float32, bf16_tolerance

    got, tol = bf16_bits_to_float32(c_bits).astype(cupy.float64), bf16_tolerance(want)
    first = _first_wrong(got.ravel(), want.ravel(), shape=want.shape, rtol=0.0, atol=tol)
    if first is None:
        return None
    return f"{int((~(cupy.abs(got - want) <= tol)).sum()):,} of {want.size:,} outputs wrong; {first}"


def wgmma_gemm_cases(fn, sizes, time_it: bool) -> dict:
    """Notebook 10's ``gemm_ring(C, M, N, K, maps)``: C = A·Bᵀ in bf16 against the float64 product of the same
    bf16 inputs, at each shape, the largest WGMMA_RACE_RUNS times; then timed beside the course's rung 3."""
    import cupy
    import numpy as np

    from course_lib.launch import hopper_gemm as hg
    from course_lib.launch.operands import bf16_bits_to_float32, random_operand, to_bf16_bits

    smem = wgmma_smem_bytes()
    fn.max_dynamic_shared_size_bytes = smem

    def launch(a, b, c):
        (m, k), n = a.shape, b.shape[0]
        grid = -(-m // WGMMA_TILE) * -(-n // WGMMA_TILE)
        fn((grid,), (WGMMA_THREADS,), (c, np.int32(m), np.int32(n), np.int32(k),
                                       hg.tensor_maps(a, b, WGMMA_TILE, WGMMA_TILE)), shared_mem=smem)

    out = {"cases": []}
    for index in sizes:
        m, n, k = WGMMA_SHAPES[index]
        a, b = (to_bf16_bits(random_operand(shape, 7 * index + j)) for j, shape in enumerate(((m, k), (n, k))))
        want = bf16_bits_to_float32(a).astype(cupy.float64) @ bf16_bits_to_float32(b).astype(cupy.float64).T
        runs = WGMMA_RACE_RUNS if index == len(WGMMA_SHAPES) - 1 else 1
        wrong = None
        for run in range(runs):
            c = hg.nan_output(m, n)
            launch(a, b, c)
            cupy.cuda.Device().synchronize()
            wrong = _wgmma_first_wrong(c, want)
            if wrong is not None:
                wrong = wrong if runs == 1 else f"in run {run + 1} of {runs}: {wrong}"
                break
        out["cases"].append({"size": f"{m}×{n}×{k}" + (f" ({runs} runs)" if runs > 1 else ""),
                             "passed": wrong is None, "first_wrong": wrong})
    if time_it and all(x["passed"] for x in out["cases"]):
        m, n, k = WGMMA_SHAPES[-1]
        a, b = to_bf16_bits(random_operand((m, k), 1)), to_bf16_bits(random_operand((n, k), 2))
        c = hg.nan_output(m, n)
        out["timing"] = _timed(f"{m}×{n}×{k}", lambda: launch(a, b, c), lambda: hg.run(3, a, b, c),
                               "hopper_gemm.hgemm_3_specialized")
    return out


def _warm_up_wgmma() -> None:
    """The course's rung 3, compiled (the whole hopper_gemm family: seconds) before the time limit starts, and
    cuBLAS's float64 GEMM of the reference loaded."""
    import cupy

    from course_lib.launch import hopper_gemm as hg

    hg.kernel_function("hgemm_3_specialized")
    x = cupy.ones((8, 8), dtype=cupy.float64)
    x @ x.T


wgmma_gemm_cases.warm_up = _warm_up_wgmma


# ---- notebook 13: the online softmax of one tile of keys

# (query rows, keys, causal, how far the scores are scaled up): one query and one key; a row of keys that is not
# a whole tile; the causal diagonal over two tiles and a tail; more tiles than rows; more queries than keys under
# the causal mask (the first rows see no key: their output is 0); scores grown about 100 times (base-2 scores
# past 128 overflow exp2f), without and with the mask; the timed shape last.
SOFTMAX_TILE_SHAPES = ((1, 1, False, 1.0), (5, 31, False, 1.0), (33, 33, True, 1.0), (7, 1000, False, 1.0),
                       (130, 1000, True, 1.0), (40, 5, True, 1.0), (64, 257, False, 100.0), (64, 257, True, 100.0),
                       (2048, 2048, True, 1.0))
SOFTMAX_TILE_ROWS_PER_BLOCK = 4   # the kernel's ROWS_PER_BLOCK: one warp per query row, 4 warps a block
SOFTMAX_TILE_DIM = 64


def _softmax_tile_operands(n_q: int, n_k: int, scale: float, seed: int):
    """q, k and v of uniform values in [-1, 1); q and k grown by √scale each, so the scores grow by ``scale``."""
    import cupy

    rng = cupy.random.default_rng(seed)
    q, k, v = ((rng.random((n, SOFTMAX_TILE_DIM), dtype=cupy.float32) * 2 - 1) for n in (n_q, n_k, n_k))
    return q * scale ** 0.5, k * scale ** 0.5, v


def softmax_tile_reference(q, k, v, causal: bool):
    """float64 attention with scores q·k / 8, keys past i + n_k - n_q masked when causal; a row that sees no key
    is 0."""
    import cupy

    n_q, n_k = q.shape[0], k.shape[0]
    s = (q.astype(cupy.float64) @ k.astype(cupy.float64).T) / 8.0
    if causal:
        visible = cupy.arange(n_k)[None, :] <= cupy.arange(n_q)[:, None] + (n_k - n_q)
        s = cupy.where(visible, s, -cupy.inf)
    m = s.max(axis=1, keepdims=True)
    seen = cupy.isfinite(m)
    p = cupy.where(seen, cupy.exp(s - cupy.where(seen, m, 0.0)), 0.0)
    total = p.sum(axis=1, keepdims=True)
    return cupy.where(total > 0, (p @ v.astype(cupy.float64)) / cupy.where(total > 0, total, 1.0), 0.0)


def _causal_mask(n_q: int, n_k: int):
    """-inf above the bottom-right aligned diagonal (key j hidden from query i when j > i + n_k - n_q), 0 below."""
    import cupy

    return cupy.triu(cupy.full((n_q, n_k), -cupy.inf, cupy.float32), 1 + n_k - n_q)


def _materialized(q, k, v, mask):
    """The materialized plan in CuPy: S = q·kᵀ / 8 (+ mask) and P·V by cuBLAS, the softmax written between them."""
    import cupy
    import numpy as np

    s = (q @ k.T) * np.float32(0.125) + mask
    p = cupy.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def softmax_tile_cases(fn, sizes, time_it: bool) -> dict:
    """``attention_rows(out, q, k, v, n_q, n_k, causal)`` on grid ⌈n_q / 4⌉ × 128 threads against float64
    attention of the same inputs, at each shape; then timed at the last shape beside the materialized plan in
    CuPy (S = q·kᵀ and P·V by cuBLAS, the softmax between them: what the tile keeps on chip, written to memory)."""
    import cupy
    import numpy as np

    def launch(q, k, v, out, causal):
        n_q, n_k = q.shape[0], k.shape[0]
        fn((-(-n_q // SOFTMAX_TILE_ROWS_PER_BLOCK),), (32 * SOFTMAX_TILE_ROWS_PER_BLOCK,),
           (out, q, k, v, np.int32(n_q), np.int32(n_k), np.int32(causal)))

    out, guard = {"cases": []}, 256
    for index in sizes:
        n_q, n_k, causal, scale = SOFTMAX_TILE_SHAPES[index]
        q, k, v = _softmax_tile_operands(n_q, n_k, scale, 60 + index)
        got = _output(n_q * SOFTMAX_TILE_DIM, guard)
        launch(q, k, v, got, causal)
        cupy.cuda.Device().synchronize()
        want = softmax_tile_reference(q, k, v, causal).ravel()
        # float32 scores carry a relative error near 1e-7 of their size: grown 100 times, a weight moves by 1e-3
        wrong = _first_wrong(got[:want.size], want, shape=(n_q, SOFTMAX_TILE_DIM), rtol=1e-4, atol=2e-5 * scale)
        if wrong is None and (past := _overrun(got, want.size)) is not None:
            wrong = f"it wrote past the end of out, {past} elements past its {want.size:,}"
        label = f"{n_q:,} queries × {n_k:,} keys" + (", causal" if causal else "") + (
            f", scores ×{scale:g}" if scale != 1 else "")
        out["cases"].append({"size": label, "passed": wrong is None, "first_wrong": wrong})
    if time_it and all(c["passed"] for c in out["cases"]):
        n_q, n_k, causal, scale = SOFTMAX_TILE_SHAPES[-1]
        q, k, v = _softmax_tile_operands(n_q, n_k, scale, 7)
        yours = cupy.empty((n_q, SOFTMAX_TILE_DIM), cupy.float32)
        mask = _causal_mask(n_q, n_k) if causal else 0.0
        out["timing"] = _timed(f"{n_q:,} queries × {n_k:,} keys, causal", lambda: launch(q, k, v, yours, causal),
                               lambda: _materialized(q, k, v, mask),
                               "the materialized plan in CuPy: q·kᵀ and P·V by cuBLAS, fp32")
    return out


def _warm_up_softmax_tile() -> None:
    """The reference's and the materialized plan's CuPy kernels, compiled before the time limit starts."""

    q, k, v = _softmax_tile_operands(4, 5, 1.0, 0)
    softmax_tile_reference(q, k, v, True)
    _materialized(q, k, v, _causal_mask(4, 5))


softmax_tile_cases.warm_up = _warm_up_softmax_tile
