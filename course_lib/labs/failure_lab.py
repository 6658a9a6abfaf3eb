"""Notebook 11: the capstone's mystery kernel measured, and the failures it demonstrates.

Experiment ``failures.mystery``: the mystery RMSNorm of ``kernels/exercises/mystery_rms_norm/`` and its
variants, each with one defect left, the plain fix and the reference solution (every one checked against a float64 reference at the timed
shape), beside the course's one-pass RMSNorm and the copy kernel that moves the same bytes;
Nsight Compute's counters for each; compute-sanitizer's memcheck on the unguarded variants and
racecheck on notebook 05's transpose with and without its barrier; the guard-less variant run at
a row count that is not a multiple of its block (wrong) beside one that is (right); and the
host-timer reading of the mystery that a colleague might have reported.
"""
from __future__ import annotations

from course_lib.core import cuda
from course_lib.core.hardware import gpu_spec
from course_lib.core.timing import benchmark, host_timed
from course_lib.launch.elementwise import geometry as elementwise_launch
from course_lib.launch.exercise_kernels import MYSTERY_RMS_NORM, MYSTERY_THREADS, TRANSPOSE_TILE, rows_per_block
from course_lib.launch.fusion import run_rmsnorm
from course_lib.measure import evidence as ev
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import beside_reference, check_close, experiment, launch_record, require_passed
from course_lib.measure.profiler import attach_profiles, kernels_launched
from course_lib.measure.sanitizer import sanitizer_summary
from course_lib.measure.target import Target
from course_lib.models.failures import Failure, demonstrated

AS_GIVEN = "the mystery as given"
NO_GUARD = "one warp per row, no row guard"
LOCAL_ROW = "one warp per row, the row kept in a local array"
SCALAR_FIX = "one warp per row, 4-byte loads"
SOLUTION = "reference solution (one warp per row, 16-byte loads)"
FILES = {AS_GIVEN: "starter", NO_GUARD: "wrong_no_row_guard", LOCAL_ROW: "wrong_row_in_local_array",
         SCALAR_FIX: "scalar_fix", SOLUTION: "solution"}   # each variant's file in kernels/exercises/mystery_rms_norm/
TRANSPOSE_FILES = {"solution": "solution", "no barrier": "wrong_no_barrier"}   # notebook 05's, racechecked
NCU_METRICS = ["launch__grid_size", "sm__cycles_active.avg", "sm__cycles_active.max",
               "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
               "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
               "dram__bytes_read.sum", "dram__bytes_write.sum", "sm__warps_active.avg.pct_of_peak_sustained_active"]


def source(label: str) -> str:
    """The CUDA C of one variant of the mystery kernel."""
    return MYSTERY_RMS_NORM.source(FILES[label])


def compiled(label: str):
    """``(function, resources, rows_per_block)`` of one variant, compiled for this GPU."""

    fn, res = MYSTERY_RMS_NORM.load(FILES[label], cuda.device_arch())
    return fn, res, rows_per_block(source(label))


def operands(rows: int, cols: int, spare_rows: int = 0, seed: int = 0):
    """x (rows × cols, plus ``spare_rows`` of data past its end), weights, and a NaN-filled out with a
    sentinel past its end; the spare rows let an unguarded kernel overrun without faulting."""
    import cupy

    rng = cupy.random.default_rng(seed)
    x = rng.random((rows + spare_rows) * cols, dtype=cupy.float32) - 0.5
    w = rng.random(cols, dtype=cupy.float32) + 0.5
    out = cupy.full((rows + spare_rows) * cols, cupy.nan, dtype=cupy.float32)
    out[rows * cols:] = 12345.0
    return x, w, out


def launch(fn, rows_per_block: int, out, x, w, rows: int, cols: int) -> None:
    import numpy as np

    fn((-(-rows // rows_per_block),), (MYSTERY_THREADS,), (out, x, w, np.int32(rows), np.int32(cols)))


def reference(x, w, rows: int, cols: int):
    import cupy

    x64 = x[:rows * cols].reshape(rows, cols).astype(cupy.float64)
    return x64 / cupy.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + 1e-6) * w.astype(cupy.float64)


def run_exact(label: str, rows: int, cols: int) -> None:
    """One launch on arrays of exactly their size, one cudaMalloc each: what memcheck runs."""
    import cupy

    cupy.cuda.set_allocator(None)
    fn, _, per_block = compiled(label)
    x, w, _ = operands(rows, cols)
    out = cupy.empty(rows * cols, dtype=cupy.float32)
    launch(fn, per_block, out, x, w, rows, cols)
    cupy.cuda.Device().synchronize()
    err = float(cupy.abs(out.reshape(rows, cols) - reference(x, w, rows, cols)).max())
    print(f"n={rows}x{cols} {label}: max error {err:.3g}")


def overrun(label: str, rows: int, cols: int) -> dict:
    """Run with a block's worth of spare rows past both arrays: wrong outputs and writes past the end."""
    import cupy

    fn, _, per_block = compiled(label)
    x, w, out = operands(rows, cols, spare_rows=MYSTERY_THREADS)
    launch(fn, per_block, out, x, w, rows, cols)
    cupy.cuda.Device().synchronize()
    got = out[:rows * cols].reshape(rows, cols).astype(cupy.float64)
    want = reference(x, w, rows, cols)
    wrong = ~(cupy.abs(got - want) <= 1e-4 * cupy.abs(want) + 1e-5)
    return {"rows": rows, "cols": cols, "rows_per_block": per_block,
            "wrong_outputs": int(wrong.sum()), "outputs": rows * cols,
            "written_past_the_end": int((out[rows * cols:] != 12345.0).sum())}


def run_transpose(label: str, rows: int, cols: int) -> None:
    """Notebook 05's transpose exercise (solution or a wrong variant) once: what racecheck runs."""
    import cupy
    import numpy as np

    fn, _ = TRANSPOSE_TILE.load(TRANSPOSE_FILES[label], cuda.device_arch())
    a = cupy.random.default_rng(0).random((rows, cols), dtype=cupy.float32)
    out = cupy.empty(rows * cols, dtype=cupy.float32)
    fn(((cols + 31) // 32, (rows + 31) // 32), (32, 8), (out, a, np.int32(rows), np.int32(cols)))
    cupy.cuda.Device().synchronize()
    print(f"n={rows}x{cols} transpose {label}: max error {float(cupy.abs(out - a.T.ravel()).max()):.3g}")


def launch_each(rows: int, cols: int, labels: list[str]) -> None:
    """Each variant once, then the course's RMSNorm and copy: the launches ncu profiles, in case order."""
    import cupy

    x, w, out = operands(rows, cols)
    for label in labels:
        fn, _, per_block = compiled(label)
        launch(fn, per_block, out, x, w, rows, cols)
    run_rmsnorm(out.reshape(rows, cols), x.reshape(rows, cols), w)
    n = rows * cols
    grid, block = elementwise_launch("copy_vec4", n)
    cuda.kernel("elementwise", "copy_vec4")(grid, block, (out, x, cupy.int64(n)))
    cupy.cuda.Device().synchronize()


BROADCAST_VIEW = "x + bias.expand(rows, cols): read through stride 0"
BROADCAST_COPIED = "x + bias.expand(rows, cols).contiguous(): the view made real"


@experiment("failures.broadcast",
            "A bias row added to every row of a matrix through a broadcast view (expand, stride 0), beside the same "
            "add after the view was made contiguous: the kernels and the bytes a broadcast costs once something "
            "materializes it.",
            rows=8192, cols=8192, samples=20)
def broadcast(rows: int, cols: int, samples: int) -> list[Case]:
    import cupy
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand((rows, cols), device="cuda", generator=gen)
    bias = torch.rand(cols, device="cuda", generator=gen)
    view = bias.expand(rows, cols)   # stride (0, 1): cols floats of storage for rows x cols elements
    want = cupy.asarray(x) + cupy.asarray(bias)[None, :]
    n = rows * cols
    # compulsory bytes: x read, out written, the bias row read once; the copy adds a full matrix written,
    # then read again by the add
    plans = {BROADCAST_VIEW: (lambda: x + view, 4 * (2 * n + cols)),
             BROADCAST_COPIED: (lambda: x + view.contiguous(), 4 * (4 * n + cols))}
    cases = []
    for name, (fn, nbytes) in plans.items():
        check = check_close(fn(), want, "float32 x + bias broadcast by CuPy", 0.0)
        timing = benchmark(fn, samples, reference=True)
        cases.append(require_passed(Case(
            name, {"plan": name}, "torch", timing, n, nbytes, check,
            extra={"kernels": kernels_launched(fn), "view_stride": list(view.stride()),
                   "view_storage_bytes": view.untyped_storage().nbytes()})))
    return cases


@experiment("failures.mystery",
            "The capstone's mystery RMSNorm and its one-defect variants, beside the course's RMSNorm and copy.",
            shape=[16384, 1024], edge_rows=4097, sanitize_shape=[257, 1000], samples=30)
def mystery(shape: list[int], edge_rows: int, sanitize_shape: list[int], samples: int) -> list[Case]:
    import cupy

    rows, cols = shape
    n = rows * cols
    x, w, out = operands(rows, cols)
    want = reference(x, w, rows, cols)
    params = {"rows": rows, "cols": cols}
    cases: list[Case] = []
    labels = [AS_GIVEN, LOCAL_ROW, NO_GUARD, SCALAR_FIX, SOLUTION]
    for label in labels:
        fn, res, per_block = compiled(label)
        out.fill(cupy.nan)
        launch(fn, per_block, out, x, w, rows, cols)
        check = check_close(out.reshape(rows, cols), want, "float64 RMSNorm", 1e-5, 1e-6)
        t = benchmark(lambda: launch(fn, per_block, out, x, w, rows, cols), samples, flush_l2=True)
        grid = (-(-rows // per_block),)
        cases.append(require_passed(Case(f"{label}, {rows}×{cols}", params, f"capstone.{label}", t,
                                         3 * n, 2 * n * 4 + cols * 4, check,
                                         launch_record(grid, (MYSTERY_THREADS,), res),
                                         extra={"stack_frame_bytes": res.stack_frame_bytes,
                                                "rows_per_block": per_block})))
    fn, res, per_block = compiled(AS_GIVEN)
    host = host_timed(lambda: launch(fn, per_block, out, x, w, rows, cols), samples)
    cases.append(Case(f"{AS_GIVEN}, host timer without synchronize, {rows}×{cols}", params, f"capstone.{AS_GIVEN}",
                      host, 3 * n, 2 * n * 4 + cols * 4, cases[0].check, cases[0].launch,
                      timer="host perf_counter, no synchronize"))
    y = out.reshape(rows, cols)
    run_rmsnorm(y, x.reshape(rows, cols), w)
    t = benchmark(lambda: run_rmsnorm(y, x.reshape(rows, cols), w), samples, flush_l2=True)
    cases.append(require_passed(Case(f"course rmsnorm_one_pass, {rows}×{cols}", params, "fusion.rmsnorm_one_pass",
                                     t, 3 * n, 2 * n * 4 + cols * 4,
                                     check_close(y, want, "float64 RMSNorm", 1e-5, 1e-6))))
    grid, block = elementwise_launch("copy_vec4", n)
    copy = cuda.kernel("elementwise", "copy_vec4")
    copy(grid, block, (out, x, cupy.int64(n)))
    check = check_close(out, x[:n], "source array", 0.0)
    t = benchmark(lambda: copy(grid, block, (out, x, cupy.int64(n))), samples, flush_l2=True)
    cases.append(require_passed(Case(f"copy (course copy_vec4), {rows}×{cols}", params, "elementwise.copy_vec4",
                                     t, 0, 2 * n * 4, check)))

    by_label = {c.kernel.removeprefix("capstone."): c for c in cases[:len(labels)]}
    by_label[NO_GUARD].extra["rows a multiple of the block"] = overrun(NO_GUARD, rows, cols)
    by_label[NO_GUARD].extra["rows not a multiple of the block"] = overrun(NO_GUARD, edge_rows, cols)
    sr, sc = sanitize_shape
    for label in (AS_GIVEN, NO_GUARD, SOLUTION):
        by_label[label].extra["memcheck"] = sanitizer_summary(
            Target(run_exact, (label, sr, sc)), "memcheck")
    by_label[SOLUTION].extra["racecheck of notebook 05's transpose"] = {
        label: sanitizer_summary(Target(run_transpose, (label, 256, 256)), "racecheck") for label in ("solution", "no barrier")}

    profiled = cases[:len(labels)] + cases[len(labels) + 1:]
    attach_profiles(profiled, Target(launch_each, (rows, cols, labels)), NCU_METRICS, "rms_norm|rmsnorm_one_pass|copy_vec4",
                    ["rms_norm"] * len(labels) + ["rmsnorm_one_pass", "copy_vec4"])
    return cases


# --------------------------------------------------------------------------- analysis (no GPU)

COLLEAGUE = "host timer"     # the case a colleague reported, timed the wrong way
BEFORE_THE_FIX = (AS_GIVEN, "course rmsnorm_one_pass", "copy")


@beside_reference
def diagnosis_rows(result, only: tuple[str, ...] | None = None, with_host_timer: bool = False) -> list[dict]:
    """One row per timed kernel (those whose name starts with one of ``only``, or all): time, share
    of the copy's bandwidth in the same run, and the ncu counters that tell why. The host-timer
    case is left out unless asked for."""
    copy = next(c for c in result.cases if c.kernel == "elementwise.copy_vec4")
    rows = []
    for c in result.cases:
        if (only and not c.name.startswith(only)) or (COLLEAGUE in c.name and not with_host_timer):
            continue
        row = {"kernel": c.name.rsplit(",", 1)[0], "timer": c.timer, "median (µs)": round(c.median_s * 1e6, 1),
               "GB/s": round(c.bytes / c.median_s / 1e9), "% of copy": round(100 * copy.median_s / c.median_s * c.bytes / copy.bytes, 1)}
        m = c.extra.get("ncu")
        if m:
            requests = m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] or 0
            row |= {"blocks": int(m["launch__grid_size"]),
                    "SM busy (avg/max cycles)": round(m["sm__cycles_active.avg"] / m["sm__cycles_active.max"], 2),
                    "warps active (% of peak)": round(m["sm__warps_active.avg.pct_of_peak_sustained_active"], 1),
                    "sectors per load request": round(m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] / requests, 1)
                    if requests else None,
                    "local sectors (ld+st)": int(m["l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"]
                                                 + m["l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"]),
                    "DRAM MB read": round(m["dram__bytes_read.sum"] / 1e6),
                    "DRAM MB written": round(m["dram__bytes_write.sum"] / 1e6)}
        rows.append(row)
    return rows


def compile_report(result) -> str:
    """The mystery's registers, shared memory, stack frame and spills: compiled here by NVRTC where it
    is installed, else the report recorded with the measurement (and said so)."""

    try:
        r = MYSTERY_RMS_NORM.resources(MYSTERY_RMS_NORM.source("starter"), cuda.target_arch())
        source = f"NVRTC {cuda.nvrtc_version()}, {cuda.target_arch()}"
        regs, smem, stack, spill = r.registers, r.static_smem_bytes, r.stack_frame_bytes, r.spill_store_bytes
    except ValueError:
        case = next(c for c in result.cases if c.kernel == f"capstone.{AS_GIVEN}")
        source = f"recorded with the measurement, {result.provenance}: NVRTC is not installed here"
        regs, smem, spill = case.launch["registers"], case.launch["static_smem_bytes"], case.launch["spill_store_bytes"]
        stack = case.extra["stack_frame_bytes"]
    return f"{regs} registers/thread, {smem} B shared memory, {stack:,} B stack frame, {spill} B spilled ({source})"


@beside_reference
def edge_rows(result) -> list[dict]:
    """The guard-less kernel at a row count that is a multiple of its block and at one that is not."""
    case = next(c for c in result.cases if c.kernel == f"capstone.{NO_GUARD}")
    rows = []
    for what in ("rows a multiple of the block", "rows not a multiple of the block"):
        e = case.extra[what]
        rows.append({"rows × cols": f"{e['rows']:,} × {e['cols']:,}", "blocks of 8 rows": -(-e["rows"] // e["rows_per_block"]),
                     "wrong outputs": e["wrong_outputs"], "floats written past the end": e["written_past_the_end"]})
    return rows


def sanitizer_lines(result) -> dict[str, list[str]]:
    """compute-sanitizer's recorded verdicts, by what ran."""
    out = {}
    for c in result.cases:
        for key, value in c.extra.items():
            if key == "memcheck":
                out[f"{key}: {c.name.rsplit(',', 1)[0]}"] = value.get("lines") or [value.get("unavailable", "")]
            elif key.startswith("racecheck of"):
                for label, v in value.items():
                    out[f"{key}, {label}"] = v.get("lines") or [v.get("unavailable", "")]
    return out


def _duration(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:,.1f} µs"


def _measured(case, in_flops: bool) -> str:
    """Median time and the rate it implies, in TFLOP/s or in GB/s."""
    t = case.median_s
    rate = (f"{case.flop / t / 1e12:,.1f} TFLOP/s" if in_flops
            else f"{case.bytes / t / 1e9:,.0f} GB/s" if case.bytes and "hops" not in case.extra   # a chase: latency
            else None)
    return f"{_duration(t)}" + (f", {rate}" if rate else "") + f" ({case.timer})"


def _kernel_name(name: str) -> str:
    """A kernel's name without its template arguments and parameters."""
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    return name.split("(")[0].split("<")[0].strip()


def _block_order(record: dict) -> tuple[dict, dict]:
    runs = record["cases"][0]["extra"]["runs"]
    return runs[0], runs[1] if len(runs) > 1 else None


def _blocks_per_sm(record: dict, shown, other) -> str:
    first, _ = _block_order(record)
    per_sm: dict[int, int] = {}
    for sm in first["smid"]:
        per_sm[sm] = per_sm.get(sm, 0) + 1
    return (f"{len(first['smid']):,} blocks passed through {len(per_sm)} SMs in one launch, "
            f"{min(per_sm.values())}–{max(per_sm.values())} blocks through each")


def _start_order(record: dict, shown, other) -> str:
    first, second = _block_order(record)
    t = first["ticket"]
    early = sum(1 for pid in range(1, len(t)) if t[pid] < t[pid - 1])
    text = f"{early:,} of {len(t) - 1:,} blocks started before the block one below them"
    if second is not None:
        differ = sum(1 for a, b in zip(t, second["ticket"]) if a != b)
        text += f"; the next launch's start order differed at {differ:,} of {len(t):,} blocks"
    return text


def _tiles_per_block(record: dict, shown, other) -> str:
    e = shown.extra
    return (f"{e['tiles']} tiles on {e['grid_blocks']} blocks, {-(-e['tiles'] // e['grid_blocks'])} tiles per block, "
            f"against {other.extra['grid_blocks']} blocks of one tile each")


def _latency_grew(record: dict, shown, other) -> str:
    """Failure 13: the same pointer chase at two working sets, both under the L2's size."""
    ns = lambda c: c.median_s / c.extra["hops"] * 1e9   # noqa: E731
    mib = lambda c: c.params["footprint_bytes"] / 2 ** 20   # noqa: E731
    l2 = record["machine"].get("l2_bytes")
    return (f"{ns(other):.0f} ns per dependent load with {mib(other):.0f} MiB of data against {ns(shown):.0f} ns "
            f"with {mib(shown):.0f} MiB" + (f", both under the {l2 / 2 ** 20:.0f} MiB of L2 the device reports" if l2
                                          else "")
            + f": the same access pattern at twice the working set, {ns(shown) / ns(other):.1f}× the latency")


def _race_unseen(record: dict, shown, other) -> str:
    e = shown.extra["release_before_wait"]
    race = shown.extra.get("racecheck_release_before_wait", {})
    summary = next((ln.strip("= ").strip() for ln in race.get("lines", []) if "SUMMARY" in ln), None)
    return (f"slot released before its wgmma reads finished: wrong in {e['wrong_runs']} of {e['trials']} runs (at "
            f"worst {e['most_wrong_outputs']:,} of {e['outputs']:,} outputs)"
            + (f"; compute-sanitizer racecheck: «{summary}»" if summary else ""))


def _datasheet_share(record: dict, shown, other) -> str:
    peak = gpu_spec(record["machine"]["gpu"]).hbm_bandwidth_bytes_per_s
    got = shown.bytes / shown.median_s
    return (f"{got / 1e12:.2f} TB/s against the datasheet's {peak / 1e12:.1f} TB/s: "
            f"{100 * got / peak:.0f}% of it")


def _kernel_names(key: str):
    def names(c) -> list[str]:
        k = c.extra[key]
        return [_kernel_name(n) for n in (k["names"] if isinstance(k, dict) else k) if not n.startswith("Memset")]

    def text(record: dict, shown, other) -> str:
        out = f"the kernels that ran: {' + '.join(names(shown))}"
        return out + (f"; against {' + '.join(names(other))}" if other is not None else "")
    return text


def _kernel_count(record: dict, shown, other) -> str:
    return (f"{shown.extra['kernels']['count']} kernels launched against {other.extra['kernels']['count']}, "
            "from the profiler's trace")


def _materialized(record: dict, shown, other) -> str:
    return (f"the view's strides {tuple(other.extra['view_stride'])} over {other.extra['view_storage_bytes']:,} B of "
            f"storage; made contiguous it launched {' + '.join(_kernel_name(k) for k in shown.extra['kernels'])}, "
            f"against {' + '.join(_kernel_name(k) for k in other.extra['kernels'])}")


def _one_number(record: dict, shown, other) -> str:
    m = shown.extra["ncu"]
    return (f"ncu: warps active {m['sm__warps_active.avg.pct_of_peak_sustained_active']:.1f}% of the peak while the "
            f"tensor pipe was busy {m['sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active']:.1f}%; "
            f"launch: {shown.launch['grid'][0]} blocks of {shown.launch['block'][0]} threads")


def _clock(record: dict, shown, other) -> str:
    g = shown.extra["gpu_during"]
    return (f"NVML during the timing: SM clock {g['sm_mhz']['min']:,.0f}–{g['sm_mhz']['max']:,.0f} MHz (median "
            f"{g['sm_mhz']['median']:,.0f}) against a {g['max_sm_mhz']:,.0f} MHz maximum, power up to "
            f"{g['power_w']['max']:,.0f} W of a {g['power_limit_w']:,.0f} W limit"
            + (", marked power-limited" if g.get("power_limited") else ""))


def _wrong_level(record: dict, shown, other) -> str:
    peak = gpu_spec(record["machine"]["gpu"]).hbm_bandwidth_bytes_per_s
    got = shown.bytes / shown.median_s
    return (f"its {shown.bytes / 1e6:,.0f} MB over its median is {got / 1e12:.1f} TB/s, {got / peak:.1f}× the HBM "
            f"datasheet's {peak / 1e12:.1f} TB/s: those bytes never crossed HBM, so an HBM intensity or bound does "
            "not describe them")


# The number in each record that decides a mistake, where a time and a rate alone do not show it:
# failure number -> (record as loaded, the shown case, the contrast case or None) -> a phrase.
DECIDING = {1: _kernel_count, 2: _blocks_per_sm, 3: _start_order, 4: _tiles_per_block, 13: _latency_grew,
            15: _materialized,
            19: _race_unseen, 23: _datasheet_share, 24: _wrong_level, 27: _kernel_names("cublas_kernels"),
            28: _one_number, 29: _clock, 30: _kernel_names("kernels"), 33: _wrong_level}


def evidence(f: Failure, gpu: str = "h200") -> str | None:
    """The recorded measurement behind ``f``, as a sentence: its case's median time and rate and,
    where the record has one, the case that does it right (with the time ratio when both did the
    same work), then the number from the same record that decides the mistake (``DECIDING``) where
    time alone does not. None for a failure no record demonstrates."""

    if f.record is None or f.case is None:
        return None
    record = ev.load(gpu, f.record)
    cases = {c["name"]: ev.case_from_json(c) for c in record["cases"]}
    shown = cases[f.case]
    in_flops = shown.flop > shown.bytes   # a compute-bound case reads in FLOP/s, a memory-bound one in GB/s
    text = (f"recorded on {record['machine']['gpu']}, {record['recorded_at'][:10]} ({f.record}): "
            f"«{f.case}» {_measured(shown, in_flops)}")
    if f.contrast is not None:
        other = cases[f.contrast]
        text += f" against «{f.contrast}» {_measured(other, in_flops)}"
        if shown.flop == other.flop and (shown.flop or shown.bytes == other.bytes):
            text += f": {shown.median_s / other.median_s:.2f}× the time for the same work"
    if f.number in DECIDING:
        text += f". Deciding number: {DECIDING[f.number](record, shown, cases.get(f.contrast))}"
    return text + "."


def evidence_rows(gpu: str = "h200") -> list[dict]:
    """One row per failure a record demonstrates: its number, family, mistake, the measurement, where."""
    return [{"#": f.number, "family": f.family, "mistake": f.mistake, "measured": evidence(f, gpu),
             "shown in": f"{f.notebook} · {f.section}"} for f in demonstrated()]
