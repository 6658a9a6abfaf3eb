"""Notebooks 04 and 05: coalescing, shared-memory banks, and the transpose ladder.

Experiments (each also profiled with Nsight Compute where the GPU allows it; the
metrics go into each case's ``extra["ncu"]``, with the command and ncu version):

* ``coalescing.strided_copy``: out[i] = in[(i * stride) mod n] over a sweep of strides.
* ``coalescing.patterns``: misaligned (offset) copies, array-of-structures against
  structure-of-arrays, and 4/8/16-byte loads per thread.
* ``transpose.ladder``: naive → shared tile → padded → swizzled transposes, with
  CuPy's copy and the course's ``copy_vec4`` measured in the same run.
* ``banks.probe``: one warp pattern of shared-memory loads per case, timed and
  counted, against the bank model.

The analysis helpers at the bottom turn a result into the notebooks' tables and
figures; they need no GPU.
"""
from __future__ import annotations

import functools
import json
import subprocess
from dataclasses import dataclass, field
from typing import Callable

from course_lib.core import cuda
from course_lib.core.hardware import detect
from course_lib.core.timing import benchmark
from course_lib.launch.elementwise import geometry as elementwise_launch
from course_lib.measure import profiler
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import (
    beside_reference,
    check_close,
    experiment,
    kernel_launch_record,
    require_passed,
)
from course_lib.measure.smoke import covers
from course_lib.models import memory

BLOCK = 256
ELEMS = 4            # elements per thread of the coalescing family's copy-like kernels (its ELEMS)

GLOBAL_METRICS = [
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
]
SHARED_METRICS = [
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
]
TRANSPOSE_METRICS = SHARED_METRICS + GLOBAL_METRICS[:4] + ["dram__bytes_read.sum", "dram__bytes_write.sum"]
PROBE_METRICS = SHARED_METRICS[0:1] + SHARED_METRICS[2:3] + SHARED_METRICS[4:5]


@dataclass
class _Launch:
    """One case of an experiment: how to launch it once, check it, and what the model says about it."""

    name: str
    params: dict
    kernel: str                      # "family.kernel", or a library name
    run: Callable[[], None]
    check: Callable[[], dict]
    bytes: float
    launch: dict | None = None
    extra: dict = field(default_factory=dict)
    profiled: bool = True            # launched under ncu (library calls are not kernels of ours)


def _grid_1d(n: int, per_thread: int = ELEMS) -> tuple[tuple[int], tuple[int]]:
    return ((n + BLOCK * per_thread - 1) // (BLOCK * per_thread),), (BLOCK,)


def _global_model(read_addrs, read_bytes: int, write_addrs, write_bytes: int) -> dict:
    """The sector model for one warp's read and write instruction."""
    r = memory.sector_count(read_addrs, read_bytes)
    w = memory.sector_count(write_addrs, write_bytes)
    return {"read_sectors_per_request": r.n_sectors, "read_efficiency": r.efficiency,
            "write_sectors_per_request": w.n_sectors, "write_efficiency": w.efficiency}


# --------------------------------------------------------------------------- coalescing.strided_copy

def _strided_launches(n: int, strides: list[int]) -> list[_Launch]:
    import cupy

    if n < 1 or n & (n - 1):
        raise ValueError(f"n must be a power of two (mod n is a mask in the kernel), got {n}")
    a = cupy.random.random(n, dtype=cupy.float32)
    out = cupy.empty_like(a)
    fn = cuda.kernel("coalescing", "strided_copy")
    grid, block = _grid_1d(n)
    launches = []
    for s in strides:
        memory._check_stride(s)
        args = (out, a, cupy.int64(n), cupy.int64(n - 1), cupy.int64(s))

        def check(s=s, args=args):
            out.fill(-1)
            fn(grid, block, args)
            idx = (cupy.arange(n, dtype=cupy.int64) * s) & (n - 1)
            return check_close(out, a[idx], "CuPy gather a[(i * stride) mod n]", 0.0)

        model = _global_model(memory.warp_addresses("strided", 4, stride=s), 4, memory.warp_addresses("unit", 4), 4)
        launches.append(_Launch(f"stride {s}", {"strides": s}, "coalescing.strided_copy",
                                lambda args=args: fn(grid, block, args), check, 8.0 * n,
                                kernel_launch_record(grid, block, "coalescing", "strided_copy"), {"model": model}))
    return launches


@experiment("coalescing.strided_copy",
            "out[i] = in[(i * stride) mod n], fp32: the same bytes read with neighbouring lanes `stride` apart.",
            n=1 << 26, strides=[1, 2, 3, 4, 8, 9, 16, 33, 1025], samples=30)
def strided_copy(n: int, strides: list[int], samples: int) -> list[Case]:
    launches = _strided_launches(n, strides)
    cases = _measure(launches, samples, flush_l2=True)
    _attach_profile(cases, launches, "coalescing.strided_copy", {"n": n, "strides": strides},
                    GLOBAL_METRICS, "^strided_copy$")
    return cases


# --------------------------------------------------------------------------- coalescing.patterns

def _pattern_launches(n: int, offsets: list[int]) -> list[_Launch]:
    import cupy

    src = cupy.random.random(n + max(offsets + [0]), dtype=cupy.float32)
    out = cupy.empty(n, dtype=cupy.float32)
    grid, block = _grid_1d(n)
    launches = []
    unit = memory.warp_addresses("unit", 4)

    off_fn = cuda.kernel("coalescing", "offset_copy")
    for k in offsets:
        args = (out, src, cupy.int64(n), cupy.int32(k))

        def check(k=k, args=args):
            out.fill(-1)
            off_fn(grid, block, args)
            return check_close(out, src[k:k + n], "CuPy slice in[offset:offset + n]", 0.0)

        model = _global_model(memory.warp_addresses("unit", 4, offset_bytes=4 * k), 4, unit, 4)
        launches.append(_Launch(f"offset {k} ({4 * k} bytes)", {"group": "offset", "offsets": k},
                                "coalescing.offset_copy", lambda args=args: off_fn(grid, block, args), check,
                                8.0 * n, kernel_launch_record(grid, block, "coalescing", "offset_copy"), {"model": model}))

    particles = cupy.random.random((n, 4), dtype=cupy.float32)     # x, y, z, mass: 16 bytes each
    xs = cupy.ascontiguousarray(particles[:, 0])
    for kernel, data, label, read in (
        ("aos_field", particles, "array of structures: x of 16-byte particles",
         memory.warp_addresses("strided", 4, stride=4)),
        ("soa_field", xs, "structure of arrays: the x array", unit),
    ):
        fn = cuda.kernel("coalescing", kernel)
        args = (out, data, cupy.int64(n))

        def check(fn=fn, args=args):
            out.fill(-1)
            fn(grid, block, args)
            return check_close(out, xs, "the particles' x (CuPy)", 0.0)

        launches.append(_Launch(label, {"group": "layout", "layout": kernel[:3]}, f"coalescing.{kernel}",
                                lambda fn=fn, args=args: fn(grid, block, args), check, 8.0 * n,
                                kernel_launch_record(grid, block, "coalescing", kernel),
                                {"model": _global_model(read, 4, unit, 4)}))

    a = src[:n]
    for family, kernel, width in (("elementwise", "copy", 4), ("coalescing", "copy_vec2", 8),
                                  ("elementwise", "copy_vec4", 16)):
        fn = cuda.kernel(family, kernel)
        g, b = ((n + BLOCK - 1) // BLOCK,), (BLOCK,)
        if width == 8:
            g = ((n // 2 + BLOCK - 1) // BLOCK,)
        elif width == 16:
            g, b = elementwise_launch(kernel, n)
        args = (out, a, cupy.int64(n))

        def check(fn=fn, args=args, g=g, b=b):
            out.fill(-1)
            fn(g, b, args)
            return check_close(out, a, "source array", 0.0)

        w = memory.warp_addresses("unit", width)
        launches.append(_Launch(f"{width} bytes per thread ({kernel})", {"group": "vector", "access_bytes": width},
                                f"{family}.{kernel}", lambda fn=fn, args=args, g=g, b=b: fn(g, b, args), check,
                                8.0 * n, kernel_launch_record(g, b, family, kernel),
                                {"model": _global_model(w, width, w, width)}))
    return launches


@experiment("coalescing.patterns",
            "Misaligned copies, array-of-structures vs structure-of-arrays, and 4/8/16-byte accesses, fp32.",
            n=1 << 26, offsets=[0, 1, 2, 4, 8, 32], samples=30)
def patterns(n: int, offsets: list[int], samples: int) -> list[Case]:
    launches = _pattern_launches(n, offsets)
    cases = _measure(launches, samples, flush_l2=True)
    _attach_profile(cases, launches, "coalescing.patterns", {"n": n, "offsets": offsets},
                    GLOBAL_METRICS, "^(offset_copy|aos_field|soa_field|copy|copy_vec2|copy_vec4)$")
    return cases


# --------------------------------------------------------------------------- transpose.ladder

# kernel, label, tile, block rows, shared row pitch (words), swizzled
TRANSPOSES = [
    ("transpose_naive", "naive (no shared memory)", 32, 8, None, False),
    ("transpose_tiled", "shared tile 32×32", 32, 8, 32, False),
    ("transpose_padded", "padded tile 32×33", 32, 8, 33, False),
    ("transpose_swizzled", "swizzled tile 32×32", 32, 8, 32, True),
    ("transpose_padded_32x4", "padded tile 32×33, 32×4 threads", 32, 4, 33, False),
    ("transpose_padded_64", "padded tile 64×65", 64, 8, 65, False),
    ("transpose_swizzled_64", "swizzled tile 64×64", 64, 8, 64, True),
]


def transpose_model(kernel: str, n: int) -> dict:
    """Sector and bank model of one transpose variant on an n x n fp32 matrix (n a multiple of its tile)."""
    _, _, tile, rows, pitch, swz = next(t for t in TRANSPOSES if t[0] == kernel)
    unit = memory.warp_addresses("unit", 4)
    column = memory.warp_addresses("strided", 4, stride=n)      # the naive kernel's write: one column
    model = _global_model(unit, 4, column if pitch is None else unit, 4)
    if pitch is not None:
        p = memory.transpose_smem_full_tiles(n, tile, rows, pitch, swz)
        model.update(smem_store_requests=p.store_requests, smem_load_requests=p.load_requests,
                     smem_store_wavefronts=p.store_wavefronts, smem_load_wavefronts=p.load_wavefronts)
    return model


def _transpose_launches(n: int) -> list[_Launch]:
    import cupy

    a = cupy.random.random((n, n), dtype=cupy.float32)
    out = cupy.empty_like(a)
    copy_out = cupy.empty_like(a)
    nbytes = 2.0 * a.nbytes
    launches = []

    def memcpy():
        copy_out.data.copy_from_device_async(a.data, a.nbytes)

    def check_copy(run):
        copy_out.fill(-1)
        run()
        return check_close(copy_out, a, "source array", 0.0)

    launches.append(_Launch("CuPy device-to-device copy", {"variant": "copy"}, "cudaMemcpyAsync (CuPy)", memcpy,
                            lambda: check_copy(memcpy), nbytes, profiled=False))
    vec4 = cuda.kernel("elementwise", "copy_vec4")
    g4, b4 = elementwise_launch("copy_vec4", n * n)
    vec4_run = lambda: vec4(g4, b4, (copy_out, a, cupy.int64(n * n)))
    launches.append(_Launch("course copy_vec4", {"variant": "copy"}, "elementwise.copy_vec4", vec4_run,
                            lambda: check_copy(vec4_run), nbytes, kernel_launch_record(g4, b4, "elementwise", "copy_vec4"),
                            profiled=False))
    for kernel, label, tile, rows, pitch, swz in TRANSPOSES:
        fn = cuda.kernel("transpose", kernel)
        grid, block = ((n + tile - 1) // tile, (n + tile - 1) // tile), (tile, rows)
        args = (out, a, cupy.int32(n), cupy.int32(n))

        def check(fn=fn, grid=grid, block=block, args=args):
            out.fill(-1)
            fn(grid, block, args)
            return check_close(out, a.T, "CuPy a.T", 0.0)

        launches.append(_Launch(label, {"variant": kernel}, f"transpose.{kernel}",
                                lambda fn=fn, grid=grid, block=block, args=args: fn(grid, block, args), check,
                                nbytes, kernel_launch_record(grid, block, "transpose", kernel),
                                {"model": transpose_model(kernel, n)}))
    return launches


@experiment("transpose.ladder",
            "fp32 n x n transpose: naive, shared tile, padded, swizzled; CuPy copy and copy_vec4 in the same run.",
            n=8192, samples=30)
def transpose_ladder(n: int, samples: int) -> list[Case]:
    launches = _transpose_launches(n)
    cases = _measure(launches, samples, flush_l2=True)
    _attach_profile(cases, launches, "transpose.ladder", {"n": n}, TRANSPOSE_METRICS, "^transpose_")
    return cases


# --------------------------------------------------------------------------- banks.probe

def _probe_patterns() -> list[tuple[str, int, tuple]]:
    """(label, access bytes, the warp's byte addresses) of every probed pattern."""
    sa = memory.shared_addresses
    halves = tuple(8 * (16 * (i % 16) + i // 16) for i in range(32))   # 16 lanes per bank pair, two pairs
    return [
        ("4 B row", 4, sa("row", 4)),
        ("4 B stride 2", 4, sa("strided", 4, stride=2)),
        ("4 B column, pitch 32", 4, sa("column", 4, pitch=32)),
        ("4 B column, pitch 34", 4, sa("column", 4, pitch=34)),
        ("4 B column, pitch 33", 4, sa("column", 4, pitch=33)),
        ("4 B column, XOR swizzle", 4, sa("swizzled column", 4, pitch=32, index=5)),
        ("4 B broadcast", 4, sa("broadcast", 4)),
        ("8 B row", 8, sa("row", 8)),
        ("8 B stride 2", 8, sa("strided", 8, stride=2)),
        ("8 B column, pitch 32", 8, sa("column", 8, pitch=32)),
        ("8 B column, pitch 33", 8, sa("column", 8, pitch=33)),
        ("8 B column, XOR swizzle", 8, sa("swizzled column", 8, pitch=32, index=5)),
        ("8 B two bank pairs, split by half-warp", 8, halves),
    ]


PROBE_PATTERNS = [p[0] for p in _probe_patterns()]


def _probe_launches(patterns: list[str], iters: int) -> list[_Launch]:
    import cupy
    import numpy as np

    known = {p[0]: p for p in _probe_patterns()}
    bad = [p for p in patterns if p not in known]
    if bad:
        raise ValueError(f"unknown probe patterns {bad}; known: {PROBE_PATTERNS}")
    blocks = detect().sm_count * 8
    out = cupy.empty(blocks * BLOCK, dtype=cupy.uint32)
    launches = []
    for label in patterns:
        _, width, addrs = known[label]
        offsets = np.array([a // width for a in addrs], dtype=np.int32)
        kernel = f"bank_probe_{width}b"
        fn = cuda.kernel("transpose", kernel)
        dev_offsets = cupy.asarray(offsets)
        args = (out, dev_offsets, cupy.int32(iters))
        per_lane = offsets.astype(np.uint64) if width == 4 else 4 * offsets.astype(np.uint64) + 1
        want = cupy.asarray(np.tile((per_lane * iters) % (1 << 32), blocks * BLOCK // 32).astype(np.float64))

        def check(fn=fn, args=args, want=want):
            out.fill(0)
            fn((blocks,), (BLOCK,), args)
            return check_close(out, want, "iters x the words each lane reads (NumPy)", 0.0)

        bank = memory.bank_conflicts(addrs, width)
        model = {"wavefronts_per_request": bank.wavefronts, "ideal_wavefronts": bank.ideal_wavefronts,
                 "ways": bank.ways, "requests": blocks * BLOCK // 32 * iters}
        launches.append(_Launch(label, {"patterns": label, "access_bytes": width}, f"transpose.{kernel}",
                                lambda fn=fn, args=args: fn((blocks,), (BLOCK,), args), check,
                                float(blocks * BLOCK * iters * width),
                                kernel_launch_record((blocks,), (BLOCK,), "transpose", kernel),
                                {"model": model, "addresses_bytes": list(addrs)}))
    return launches


@experiment("banks.probe",
            "One shared-memory access pattern per case, 4- and 8-byte loads: time and wavefronts vs the bank model.",
            patterns=PROBE_PATTERNS, iters=1024, samples=25)
def bank_probe(patterns: list[str], iters: int, samples: int) -> list[Case]:
    launches = _probe_launches(patterns, iters)
    cases = _measure(launches, samples, flush_l2=False)
    _attach_profile(cases, launches, "banks.probe", {"patterns": patterns, "iters": iters},
                    PROBE_METRICS, "^bank_probe_")
    return cases


# --------------------------------------------------------------------------- measuring and profiling

_SETUPS = {"coalescing.strided_copy": _strided_launches, "coalescing.patterns": _pattern_launches,
           "transpose.ladder": _transpose_launches, "banks.probe": _probe_launches}


def _measure(launches: list[_Launch], samples: int, flush_l2: bool) -> list[Case]:
    cases = []
    for la in launches:
        check = la.check()
        t = benchmark(la.run, samples, flush_l2=flush_l2)
        cases.append(require_passed(Case(la.name, la.params, la.kernel, list(t.samples_s), 0, la.bytes, check,
                                          la.launch, extra=dict(la.extra))))
    return cases


def profile_launch(name: str, params: dict) -> None:
    """What runs under ncu: every profiled case of experiment ``name`` launched once, in case order."""
    import cupy

    for la in _SETUPS[name](**params):
        if la.profiled:
            la.run()
    cupy.cuda.Device().synchronize()


def _attach_profile(cases: list[Case], launches: list[_Launch], name: str, params: dict,
                    metrics: list[str], kernel_regex: str) -> None:
    """Profile the experiment's kernels in a child process under ncu; metrics into each case's extra."""

    script = f"from course_lib.labs import memory as lab_memory; lab_memory.profile_launch({name!r}, {json.dumps(params)})"
    wanted = [(c, la) for c, la in zip(cases, launches) if la.profiled]
    usable = list(metrics)
    try:
        try:
            profiles = profiler.ncu_metrics(script, usable, kernel_regex, timeout_s=180)
        except profiler.ProfilerUnavailable as exc:
            known = _known_metrics()
            if "metric" not in str(exc).lower() or known is None:
                raise
            # an older or newer ncu may lack a metric: keep the ones this one knows, say which were dropped
            usable = [m for m in metrics if m.rsplit(".", 1)[0] in known]
            profiles = profiler.ncu_metrics(script, usable, kernel_regex, timeout_s=180)
        names = [p.kernel.split("(")[0].strip() for p in profiles]
        expected = [la.kernel.split(".")[-1] for _, la in wanted]
        if names != expected:
            raise profiler.ProfilerUnavailable(f"ncu profiled {names}, expected {expected}")
    except (profiler.ProfilerUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        for c, _ in wanted:
            c.extra["ncu_unavailable"] = str(exc)
        return
    command = profiler.command_line(usable, kernel_regex)
    version = profiler.ncu_version()
    for (c, _), p in zip(wanted, profiles):
        c.extra["ncu"] = {m: (v if isinstance(v := p.metrics.get(m), float) else None) for m in usable}
        c.extra["ncu_command"] = command
        c.extra["ncu_version"] = version
        if len(usable) < len(metrics):
            c.extra["ncu_metrics_not_on_this_gpu"] = sorted(set(metrics) - set(usable))


@functools.lru_cache(maxsize=1)
def _known_metrics() -> frozenset | None:
    """Base names of the metrics ncu offers on this GPU, or None if it cannot say (then try them all)."""

    exe = profiler.ncu_path()
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = {line.split()[0] for line in out.splitlines() if line.strip() and "__" in line.split()[0]}
    return frozenset(names) or None


# --------------------------------------------------------------------------- analysis for the notebooks (no GPU)

def _gbps(c: Case) -> float:
    return c.bandwidth_bytes_per_s / 1e9


def predicted(c: Case, ceiling_bytes_per_s: float, reuse: bool = False) -> memory.CopyPrediction:
    """The sector model's bandwidth for a copy-like case: no reuse of over-fetched sectors, or perfect reuse."""
    m = c.extra["model"]
    half = c.bytes / 2
    if reuse:
        return memory.predicted_copy(half, half, 1.0, 1.0, ceiling_bytes_per_s)
    return memory.predicted_copy(half, half, m["read_efficiency"], m["write_efficiency"], ceiling_bytes_per_s)


def copy_rows(result, ceiling_bytes_per_s: float, key: str | None = None) -> list[dict]:
    """Measured against the sector model for every copy-like case of a coalescing result."""
    rows = []
    for c in result.cases:
        m = c.extra["model"]
        p = predicted(c, ceiling_bytes_per_s)
        rows.append({"case": c.name, **({key: c.params.get(key)} if key else {}),
                     "sectors per read": m["read_sectors_per_request"],
                     "read efficiency %": 100 * m["read_efficiency"],
                     "model GB/s": p.bandwidth_bytes_per_s / 1e9, "measured GB/s": _gbps(c),
                     "measured / model": c.bandwidth_bytes_per_s / p.bandwidth_bytes_per_s,
                     "% of copy ceiling": 100 * c.bandwidth_bytes_per_s / ceiling_bytes_per_s})
    return rows


def _ratio(a, b):
    return a / b if a is not None and b else None


def _mb(v):
    return v / 1e6 if v is not None else None


def _read_addresses(c: Case):
    """Warp 0's read addresses of a coalescing case, rebuilt from its parameters (for the 64-byte block count)."""
    if "strides" in c.params:
        return memory.warp_addresses("strided", 4, stride=c.params["strides"]), 4
    if "offsets" in c.params:
        return memory.warp_addresses("unit", 4, offset_bytes=4 * c.params["offsets"]), 4
    if c.params.get("layout") == "aos":
        return memory.warp_addresses("strided", 4, stride=4), 4
    width = c.params.get("access_bytes", 4)
    return memory.warp_addresses("unit", width), width


def dram_block_model(c: Case) -> memory.SectorCount:
    addrs, width = _read_addresses(c)
    return memory.dram_blocks(addrs, width)


@beside_reference
def global_profile_rows(result) -> list[dict]:
    """ncu's sectors per request and DRAM bytes beside the sector model (and its 64-byte DRAM-block variant)."""
    rows = []
    for c in result.cases:
        ncu, m = c.extra.get("ncu"), c.extra.get("model")
        if not ncu or not m:
            continue
        half = c.bytes / 2
        rows.append({
            "case": c.name,
            "model sectors/read": m["read_sectors_per_request"],
            "ncu sectors/read": _ratio(ncu.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
                                       ncu.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")),
            "model sectors/write": m["write_sectors_per_request"],
            "ncu sectors/write": _ratio(ncu.get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
                                        ncu.get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")),
            "requested read MB": half / 1e6,
            "model DRAM read MB, sectors": half / m["read_efficiency"] / 1e6,
            "model DRAM read MB, 64-B blocks": half / dram_block_model(c).efficiency / 1e6,
            "ncu DRAM read MB": _mb(ncu.get("dram__bytes_read.sum")),
            "ncu L1→L2 read MB": _mb(32 * v if (v := ncu.get("lts__t_sectors_srcunit_tex_op_read.sum")) else None),
            "ncu DRAM write MB": _mb(ncu.get("dram__bytes_write.sum")),
        })
    return rows


def dram_rows(result, ceiling_bytes_per_s: float) -> list[dict]:
    """Measured GB/s against two no-reuse predictions: whole sectors, and 64-byte DRAM blocks."""
    rows = []
    for c in result.cases:
        half = c.bytes / 2
        blocks = dram_block_model(c)
        by_blocks = memory.predicted_copy(half, half, blocks.efficiency, 1.0, ceiling_bytes_per_s)
        rows.append({"case": c.name, "64-B blocks per read": blocks.n_sectors,
                     "model GB/s, sectors": predicted(c, ceiling_bytes_per_s).bandwidth_bytes_per_s / 1e9,
                     "model GB/s, 64-B blocks": by_blocks.bandwidth_bytes_per_s / 1e9,
                     "measured GB/s": _gbps(c),
                     "measured / 64-B model": c.bandwidth_bytes_per_s / by_blocks.bandwidth_bytes_per_s})
    return rows


@beside_reference
def transpose_rows(result) -> list[dict]:
    """The ladder: GB/s and % of both copies measured in the same run."""
    cupy_copy = result.case("CuPy device-to-device copy").bandwidth_bytes_per_s
    vec4 = result.case("course copy_vec4").bandwidth_bytes_per_s
    rows = []
    for c in result.cases:
        rows.append({"case": c.name, "kernel": c.kernel, "median µs": c.median_s * 1e6, "GB/s": _gbps(c),
                     "% of CuPy copy": 100 * c.bandwidth_bytes_per_s / cupy_copy,
                     "% of copy_vec4": 100 * c.bandwidth_bytes_per_s / vec4,
                     "registers": (c.launch or {}).get("registers"),
                     "static smem B": (c.launch or {}).get("static_smem_bytes")})
    return rows


def best_transpose(result) -> Case:
    return max((c for c in result.cases if c.kernel.startswith("transpose.") and "naive" not in c.kernel
                and c.kernel != "transpose.transpose_tiled"), key=lambda c: c.bandwidth_bytes_per_s)


@beside_reference
def smem_profile_rows(result) -> list[dict]:
    """ncu's shared-memory wavefronts and bank conflicts per transpose, beside the bank model."""
    rows = []
    for c in result.cases:
        ncu, m = c.extra.get("ncu"), c.extra.get("model")
        if not ncu or not m or "smem_load_requests" not in m:
            continue
        rows.append({
            "case": c.name,
            "model load wavefronts/request": m["smem_load_wavefronts"] / m["smem_load_requests"],
            "ncu load wavefronts/request": _ratio(ncu.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
                                                  ncu.get("smsp__sass_inst_executed_op_shared_ld.sum")),
            "model load conflicts": m["smem_load_wavefronts"] - m["smem_load_requests"],
            "ncu load conflicts": ncu.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
            "model store wavefronts/request": m["smem_store_wavefronts"] / m["smem_store_requests"],
            "ncu store wavefronts/request": _ratio(ncu.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
                                                   ncu.get("smsp__sass_inst_executed_op_shared_st.sum")),
            "ncu store conflicts": ncu.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
        })
    return rows


@beside_reference
def transpose_global_rows(result) -> list[dict]:
    """Global-side evidence of the transposes: sectors per write request and DRAM bytes, ncu vs model."""
    rows = []
    for c in result.cases:
        ncu, m = c.extra.get("ncu"), c.extra.get("model")
        if not ncu or not m:
            continue
        rows.append({"case": c.name,
                     "model sectors/write": m["write_sectors_per_request"],
                     "ncu sectors/write": _ratio(ncu.get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
                                                 ncu.get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")),
                     "matrix MB": c.bytes / 2e6,
                     "ncu DRAM read MB": _mb(ncu.get("dram__bytes_read.sum")),
                     "ncu DRAM write MB": _mb(ncu.get("dram__bytes_write.sum"))})
    return rows


@beside_reference
def probe_rows(result) -> list[dict]:
    """Each probed pattern: the model's wavefronts, ncu's, and the time relative to a conflict-free 4-byte row."""
    base = result.case("4 B row").median_s if any(c.name == "4 B row" for c in result.cases) else None
    rows = []
    for c in result.cases:
        m, ncu = c.extra["model"], c.extra.get("ncu")
        rows.append({"pattern": c.name, "model wavefronts/request": m["wavefronts_per_request"],
                     "ncu wavefronts/request": _ratio(
                         ncu.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum") if ncu else None,
                         ncu.get("smsp__sass_inst_executed_op_shared_ld.sum") if ncu else None),
                     "model conflict degree": m["wavefronts_per_request"] / m["ideal_wavefronts"],
                     "time / 4 B row": c.median_s / base if base else None})
    return rows


def probe_fit(result) -> dict:
    """Least-squares fit of the probe's times: t = overhead + cycles x (wavefronts per SM) / SM clock.

    The slope is the shared-memory pipe's cost per wavefront in SM clock cycles (the model assumes 1).
    """
    m = result.machine
    sms, clock_hz = m["sm_count"], 1e6 * (m.get("clocks_mhz") or {}).get("sm_now", 0)
    if not clock_hz:
        raise ValueError("the record has no SM clock, so the fit cannot be put in cycles")
    xs = [c.extra["model"]["wavefronts_per_request"] * c.extra["model"]["requests"] / sms / clock_hz
          for c in result.cases]
    ys = [c.median_s for c in result.cases]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"cycles_per_wavefront": slope, "overhead_s": my - slope * mx, "sm_clock_mhz": clock_hz / 1e6,
            "worst_residual": max(abs(y - (my - slope * mx) - slope * x) / y for x, y in zip(xs, ys))}


def strided_figure(result, ceiling_bytes_per_s: float, ceiling_label: str):
    """Measured GB/s per stride against the sector model (no reuse) and the copy ceiling."""
    import matplotlib.pyplot as plt

    strides = [c.params["strides"] for c in result.cases]
    measured = [_gbps(c) for c in result.cases]
    model = [predicted(c, ceiling_bytes_per_s).bandwidth_bytes_per_s / 1e9 for c in result.cases]
    blocks = [r["model GB/s, 64-B blocks"] for r in dram_rows(result, ceiling_bytes_per_s)]
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    ax.plot(strides, measured, "o-", label=f"measured ({result.provenance})")
    ax.plot(strides, model, "s--", label="sector model × copy ceiling (no reuse)")
    ax.plot(strides, blocks, "^:", label="same, counting 64-byte DRAM blocks")
    ax.axhline(ceiling_bytes_per_s / 1e9, color="grey", lw=1, label=f"copy ceiling ({ceiling_label})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("stride (elements, log scale)")
    ax.set_ylabel("useful bandwidth (GB/s: 8 bytes per element / time)")
    ax.set_ylim(0, ceiling_bytes_per_s / 1e9 * 1.1)
    ax.set_title(f"{result.gpu}: strided copy, fp32, n = {result.params['n']:,} ({result.provenance})", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def bars_figure(rows: list[dict], title: str, ceiling_gbps: float | None = None,
                measured_key: str = "measured GB/s", model_key: str | None = "model GB/s"):
    """Horizontal bars: measured per case, with the model's value as a marker."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 0.8 + 0.42 * len(rows)))
    ys = range(len(rows))
    ax.barh(list(ys), [r[measured_key] for r in rows], color="#4c72b0", label="measured")
    if model_key:
        ax.scatter([r[model_key] for r in rows], list(ys), color="#dd8452", marker="D", zorder=3,
                   label="sector model × copy ceiling")
    if ceiling_gbps:
        ax.axvline(ceiling_gbps, color="grey", lw=1, label="copy ceiling")
    ax.set_yticks(list(ys))
    ax.set_yticklabels([r["case"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("GB/s (useful bytes / time)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.5 / len(rows) - 0.08), ncol=3, frameon=False)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- smoke launches (compute-sanitizer)

@covers("coalescing", "strided_copy", "offset_copy", "aos_field", "soa_field", "copy_vec2", "scale_rows")
def coalescing_smoke() -> None:
    import cupy

    k = lambda name: cuda.kernel("coalescing", name)
    for n in (16, 2048):
        a = cupy.arange(n + 3, dtype=cupy.float32)
        out = cupy.full(n, -1, dtype=cupy.float32)
        k("strided_copy")(*_grid_1d(n), (out, a, cupy.int64(n), cupy.int64(n - 1), cupy.int64(3)))
        assert bool((out == a[(cupy.arange(n) * 3) & (n - 1)]).all()), f"strided_copy n={n}"
    for n in (1, 1027):
        a = cupy.arange(n + 3, dtype=cupy.float32)
        out = cupy.full(n, -1, dtype=cupy.float32)
        k("offset_copy")(*_grid_1d(n), (out, a, cupy.int64(n), cupy.int32(3)))
        assert bool((out == a[3:3 + n]).all()), f"offset_copy n={n}"
        p = cupy.arange(4 * n, dtype=cupy.float32).reshape(n, 4)
        k("aos_field")(*_grid_1d(n), (out, p, cupy.int64(n)))
        assert bool((out == p[:, 0]).all()), f"aos_field n={n}"
        x = cupy.ascontiguousarray(p[:, 1])
        k("soa_field")(*_grid_1d(n), (out, x, cupy.int64(n)))
        assert bool((out == x).all()), f"soa_field n={n}"
        out.fill(-1)
        k("copy_vec2")(((n // 2 + BLOCK - 1) // BLOCK or 1,), (BLOCK,), (out, a, cupy.int64(n)))
        assert bool((out == a[:n]).all()), f"copy_vec2 n={n}"
    rows, cols = 37, 70
    a = cupy.arange(rows * cols, dtype=cupy.float32).reshape(rows, cols)
    out = cupy.full_like(a, -1)
    k("scale_rows")(((cols + 31) // 32, (rows + 7) // 8), (32, 8), (out, a, cupy.int32(rows), cupy.int32(cols)))
    assert bool((out == 2 * a).all()), "scale_rows"


@covers("transpose", *[t[0] for t in TRANSPOSES], "bank_probe_4b", "bank_probe_8b")
def transpose_smoke() -> None:
    import cupy

    for rows, cols in ((37, 70), (64, 64), (1, 5)):
        a = cupy.arange(rows * cols, dtype=cupy.float32).reshape(rows, cols)
        for kernel, _, tile, brows, _, _ in TRANSPOSES:
            out = cupy.full((cols, rows), -1, dtype=cupy.float32)
            grid = ((cols + tile - 1) // tile, (rows + tile - 1) // tile)
            cuda.kernel("transpose", kernel)(grid, (tile, brows), (out, a, cupy.int32(rows), cupy.int32(cols)))
            assert bool((out == a.T).all()), f"{kernel} {rows}x{cols}"
    offsets = cupy.asarray([33 * i for i in range(32)], dtype=cupy.int32)
    for width in (4, 8):
        out = cupy.zeros(2 * BLOCK, dtype=cupy.uint32)
        cuda.kernel("transpose", f"bank_probe_{width}b")((2,), (BLOCK,), (out, offsets, cupy.int32(3)))
        per_lane = offsets if width == 4 else 4 * offsets + 1
        assert bool((out == cupy.tile(3 * per_lane, 2 * BLOCK // 32).astype(cupy.uint32)).all()), f"probe {width}"


def tiled_transpose_source() -> str:
    """The template every tiled transpose instantiates, from transpose.cu: for showing in notebook 05."""

    text = cuda.source("transpose")
    start = text.index("// PITCH: words per tile row")
    end = text.index("// Launch: block (32, 8)", start)
    return text[start:end].rstrip()


def resources_rows() -> list[dict]:
    """Registers and shared memory of each transpose, from NVRTC for the architecture being shown."""

    rows = []
    for kernel, label, tile, brows, pitch, swz in TRANSPOSES:
        r = cuda.resources("transpose", kernel, cuda.target_arch())
        rows.append({"case": label, "block": f"{tile}×{brows}", "elements per thread": tile // brows,
                     "registers": r.registers, "static smem B": r.static_smem_bytes, "spills": r.spills})
    return rows


def ncu_provenance(result) -> str:
    """Which Nsight Compute, and the command line, behind a result's profile."""
    for c in result.cases:
        if "ncu" in c.extra:
            return f"{c.extra.get('ncu_version') or 'ncu (version not recorded)'} | {c.extra.get('ncu_command', '')}"
    return "no profile"
