"""Notebook 03: occupancy measured, and the occupancy model checked against CUDA's own calculator.

Experiments (each profiled with Nsight Compute where the GPU allows it; the metrics go into
each case's ``extra["ncu"]`` with the command and the ncu version):

* ``occupancy.smem_sweep``: a one-float-per-thread copy whose blocks are each allocated more
  and more (unused) dynamic shared memory: residency falls in steps, and so does bandwidth.
  CuPy's device-to-device copy is measured in the same run as the ceiling.
* ``occupancy.ilp``: the same copy with 1, 2, 4 or 8 independent loads per thread, at several
  residencies: fewer warps with more loads each can move as many bytes as many warps with one.
* ``occupancy.register_spill``: an accumulation with 64 live accumulators per thread, compiled
  as is and with ``--maxrregcount`` caps: occupancy rises, spills appear, time is measured.
* ``occupancy.api_agreement``: ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` for every course
  kernel and for random (block size, registers, shared memory) configurations, recorded with the
  inputs so the model can be re-checked against it anywhere (tests/test_occupancy_lab.py).

The launches are ``course_lib.launch.occupancy``'s. Everything below "analysis" needs no GPU.
"""
from __future__ import annotations

import functools
import json
import math
import random
import re
import time
from collections import Counter, defaultdict

from course_lib.core import cuda, runtime
from course_lib.core.hardware import KIB
from course_lib.core.timing import benchmark
from course_lib.launch import occupancy as launcher
from course_lib.launch.occupancy import BLOCK, device_budget
from course_lib.measure.evidence import RECORDED_DIR, Case, Check
from course_lib.measure.experiments import (
    beside_reference,
    beside_reference_figure,
    check_close,
    experiment,
    launch_record,
    require_passed,
)
from course_lib.measure.launches import attach_profiles, measure
from course_lib.measure.target import Target
from course_lib.models import occupancy as occ

OCC_METRICS = [
    "sm__warps_active.avg.pct_of_peak_sustained_active",     # achieved occupancy
    "sm__maximum_warps_per_active_cycle_pct",                # theoretical occupancy
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks",
    "smsp__warps_active.avg.per_cycle_active",
    "smsp__warps_eligible.avg.per_cycle_active",
    "smsp__issue_active.avg.per_cycle_active",
]
LOCAL_METRICS = ["l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"]
SPILL_METRICS = OCC_METRICS + LOCAL_METRICS + ["smsp__inst_executed.sum"]


# --------------------------------------------------------------------------- the copies

@experiment("occupancy.smem_sweep",
            "A one-float-per-thread copy whose blocks are allocated more and more unused shared memory.",
            n=1 << 26, smem_kib=[0, 16, 24, 28, 32, 40, 48, 64, 80, 112, 128, 192, 226], samples=25)
def smem_sweep(n: int, smem_kib: list[int], samples: int) -> list[Case]:
    launches = launcher.sweep_launches(n, smem_kib)
    cases = measure(launches, samples, flush_l2=True)
    attach_profiles(cases, launches, Target(launcher.profile_sweep, (n, smem_kib)), OCC_METRICS)
    return cases


@experiment("occupancy.ilp",
            "The copy with 1, 2, 4 or 8 independent loads per thread, at residencies set by unused shared memory.",
            n=1 << 26, ilp=[1, 2, 4, 8], resident_blocks=[8, 4, 2, 1], samples=25)
def ilp(n: int, ilp: list[int], resident_blocks: list[int], samples: int) -> list[Case]:
    launches = launcher.ilp_launches(n, ilp, resident_blocks)
    cases = measure(launches, samples, flush_l2=True)
    attach_profiles(cases, launches, Target(launcher.profile_ilp, (n, ilp, resident_blocks)), OCC_METRICS)
    return cases


# --------------------------------------------------------------------------- register pressure

@experiment("occupancy.register_spill",
            "64 live accumulators per thread, compiled as is and with register caps: occupancy up, spills in.",
            n_threads=1 << 19, k=64, caps=[0, 64, 48, 32], samples=25)
def register_spill(n_threads: int, k: int, caps: list[int], samples: int) -> list[Case]:
    launches = launcher.spill_launches(n_threads, k, caps)
    cases = measure(launches, samples, flush_l2=False)
    attach_profiles(cases, launches, Target(launcher.profile_spill, (n_threads, k, caps)), SPILL_METRICS)
    return cases


# --------------------------------------------------------------------------- the occupancy API, checked

_CONTRACT = re.compile(r"Launch:\s*block\s*\(([^)]*)\)")


def contract_block_threads(family: str, kernel: str) -> int | None:
    """Threads per block from a kernel's launch contract ("// Launch: block (16, 16), ..."), or
    ``None`` when the contract gives the block symbolically."""

    m = _CONTRACT.search(cuda.kernel_source(family, kernel))
    if not m:
        return None
    try:
        dims = [int(d) for d in m.group(1).split(",") if d.strip()]
    except ValueError:
        return None
    threads = 1
    for d in dims:
        threads *= d
    return threads if dims else None


def _occupancy_api():
    try:
        from cupy.cuda import driver
    except ImportError:  # older CuPy keeps it here
        from cupy_backends.cuda.api import driver
    return driver.occupancyMaxActiveBlocksPerMultiprocessor


def random_configs(seed: int, count: int, max_dynamic_smem: int) -> list[tuple[int, int]]:
    """(threads per block, dynamic shared memory bytes) pairs: mostly whole warps, some ragged
    blocks, shared memory anywhere from none to the most a block may have."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        threads = rng.randint(1, 1024) if i % 4 == 3 else 32 * rng.randint(1, 32)
        smem = 0 if i % 5 == 0 else rng.randint(0, max_dynamic_smem)
        out.append((threads, smem))
    return out


def _api_row(fn, threads: int, smem: int, query) -> dict:
    row = {"threads": threads, "dynamic_smem_bytes": smem, "registers": fn.num_regs,
           "static_smem_bytes": fn.shared_size_bytes, "max_threads_per_block": fn.max_threads_per_block}
    try:
        row["api_blocks"] = int(query(fn.kernel.ptr, threads, smem))
    except Exception as exc:  # noqa: BLE001  (an error is an answer too: keep it, the test will show it)
        row["api_blocks"], row["api_error"] = None, f"{type(exc).__name__}: {exc}"
    return row


def model_blocks(b: occ.SmBudget, row: dict) -> int:
    """The model's resident blocks for one recorded configuration; 0 where it says the launch fails."""
    try:
        return occ.residency(b, row["threads"], row["registers"], row["static_smem_bytes"] + row["dynamic_smem_bytes"],
                             row["max_threads_per_block"]).resident_blocks
    except ValueError:
        return 0


@experiment("occupancy.api_agreement",
            "CUDA's occupancy API against the course's model: every course kernel and random configurations.",
            seed=2026, register_caps=[24, 32, 40, 48, 56, 64, 72, 80, 96, 112, 128, 144, 168, 200, 232, 255],
            configs_per_cap=4, samples=20)
def api_agreement(seed: int, register_caps: list[int], configs_per_cap: int, samples: int) -> list[Case]:
    import cupy

    b = device_budget()
    query = _occupancy_api()
    arch = cuda.device_arch()
    functions, ptxas = launcher.pressure_functions(register_caps, arch)
    n, k = 1 << 16, 4
    x = cupy.random.default_rng(5).random((k, n), dtype=cupy.float32)
    out = cupy.empty(n, dtype=cupy.float32)
    sums = x.astype(cupy.float64).sum(axis=0)
    cases = []
    for cap in register_caps:
        name = f"pressure_r{cap}"
        fn = functions[cap]
        fn.max_dynamic_shared_size_bytes = b.max_smem_per_block_bytes - fn.shared_size_bytes
        rows = [_api_row(fn, t, s, query) for t, s in
                random_configs(seed + cap, configs_per_cap, b.max_smem_per_block_bytes - fn.shared_size_bytes)]
        for r in rows:
            r["model_blocks"] = model_blocks(b, r)
        accs = min(cap + 16, 256)
        ref = sums * float(sum((1.0 + r * 0.015625) / (r + 1) for r in range(accs)))
        grid, block, run = launcher.pressure_launch(fn, out, x, n, k)
        out.fill(float("nan"))
        run()
        check = check_close(out, ref, "float64 sum × constants (CuPy)", 1e-4)
        t = benchmark(run, samples)
        res = ptxas[name]
        cases.append(require_passed(Case(
            f"__maxnreg__({cap})", {"register_caps": cap}, f"occupancy.accumulate_body<{accs}> __maxnreg__({cap})",
            t, 2.0 * accs * k * n, 4.0 * (k + 1) * n, check, launch_record(grid, block, res),
            extra={"configs": rows, "ptxas_registers": res.registers, "spill_store_bytes": res.spill_store_bytes})))
    cases.append(_course_kernels_case(b, query, samples))
    return cases


def _course_kernels_case(b: occ.SmBudget, query, samples: int) -> Case:
    """Every kernel of every family at its contract's block size (or 256) and at 1024 threads (or its cap)."""

    rows, mismatched, times = [], 0, []
    arch = cuda.device_arch()
    for family in cuda.families():
        for kernel in cuda.kernel_names(family):
            try:
                fn = cuda.kernel(family, kernel)
                res = cuda.resources(family, kernel, arch)
            except Exception as exc:  # noqa: BLE001  (another notebook's kernel that does not load: say so)
                rows.append({"family": family, "kernel": kernel, "error": f"{type(exc).__name__}: {exc}"[:300]})
                continue
            mismatched += int(fn.num_regs != res.registers) + int(fn.shared_size_bytes != res.static_smem_bytes)
            contract = contract_block_threads(family, kernel)
            for threads in sorted({min(contract or 256, fn.max_threads_per_block), fn.max_threads_per_block}):
                t0 = time.perf_counter()
                row = _api_row(fn, threads, 0, query)
                times.append(time.perf_counter() - t0)
                row.update(family=family, kernel=kernel, contract_threads=contract, model_blocks=model_blocks(b, row))
                rows.append(row)
    probe = cuda.kernel("occupancy", "copy_ilp1")
    while len(times) < samples:
        t0 = time.perf_counter()
        _api_row(probe, BLOCK, 0, query)
        times.append(time.perf_counter() - t0)
    check = Check("cuFuncGetAttribute registers and static shared memory = NVRTC's ptxas report",
                  float(mismatched), 0.0).to_json()
    return require_passed(Case(
        "every course kernel", {"course_kernels": True}, "cuOccupancyMaxActiveBlocksPerMultiprocessor (driver API)",
        times, 0, 0, check, timer="host perf_counter around one occupancy query",
        extra={"configs": rows}))


# --------------------------------------------------------------------------- analysis (no GPU)

def _ncu(c: Case, metric: str):
    return (c.extra.get("ncu") or {}).get(metric)


def _pct(v):
    return None if v is None else 100 * v


def copy_ceiling(result) -> float:
    return result.case("CuPy device-to-device copy").bandwidth_bytes_per_s


@beside_reference
def sweep_rows(result) -> list[dict]:
    ceiling = copy_ceiling(result)
    return [{"smem per block": f"{c.params['smem_kib']} KiB", "resident blocks": c.extra["resident_blocks"],
             "occupancy % (model)": _pct(c.extra["occupancy"]), "limiter": c.extra["limiter"],
             "achieved occupancy % (ncu)": _ncu(c, OCC_METRICS[0]),
             "GB/s": c.bandwidth_bytes_per_s / 1e9, "% of CuPy copy": 100 * c.bandwidth_bytes_per_s / ceiling}
            for c in result.cases if "smem_kib" in c.params]


@beside_reference
def ilp_rows(result) -> list[dict]:
    ceiling = copy_ceiling(result)
    return [{"ILP": c.extra["ilp"], "blocks/SM wanted": c.params["resident_blocks"],
             "resident blocks": c.extra["resident_blocks"], "occupancy % (model)": _pct(c.extra["occupancy"]),
             "bytes in flight/SM (analytic)": c.extra["bytes_in_flight_per_sm"],
             "achieved occupancy % (ncu)": _ncu(c, OCC_METRICS[0]),
             "GB/s": c.bandwidth_bytes_per_s / 1e9, "% of CuPy copy": 100 * c.bandwidth_bytes_per_s / ceiling}
            for c in result.cases if "ilp" in c.params]


def best_case(result, **where) -> Case:
    """The fastest copy among the cases whose params match ``where``."""
    hits = [c for c in result.cases if all(c.params.get(k) == v for k, v in where.items())]
    return max(hits, key=lambda c: c.bandwidth_bytes_per_s)


def _launch_residency(result, c: Case) -> occ.Residency:
    """The model's residency for a recorded launch, on the recording GPU's SM."""
    la = c.launch
    return occ.residency(occ.budget(result.gpu), la["block"][0], la["registers"],
                         la["static_smem_bytes"] + la["dynamic_smem_bytes"])


@beside_reference
def warp_state_rows(result) -> list[dict]:
    """Nsight Compute's scheduler view per profiled case: theoretical and achieved occupancy, the
    launch's limiters beside the model's, and warps active / eligible / issuing per scheduler per cycle."""
    rows = []
    for c in result.cases:
        ncu = c.extra.get("ncu")
        if not ncu:
            continue
        m = _launch_residency(result, c)
        rows.append({"case": c.name, "occupancy % (model)": 100 * m.occupancy,
                     "theoretical % (ncu)": ncu["sm__maximum_warps_per_active_cycle_pct"],
                     "achieved % (ncu)": ncu["sm__warps_active.avg.pct_of_peak_sustained_active"],
                     "registers limit (model / ncu)": f"{m.limit_registers} / {ncu['launch__occupancy_limit_registers']:g}",
                     "smem limit (model / ncu)": f"{m.limit_smem} / {ncu['launch__occupancy_limit_shared_mem']:g}",
                     "warps limit (ncu)": ncu["launch__occupancy_limit_warps"],
                     "warps active": ncu["smsp__warps_active.avg.per_cycle_active"],
                     "eligible": ncu["smsp__warps_eligible.avg.per_cycle_active"],
                     "issued": ncu["smsp__issue_active.avg.per_cycle_active"]})
    return rows


@beside_reference
def spill_rows(result) -> list[dict]:
    base = result.cases[0].median_s
    rows = []
    for c in result.cases:
        rows.append({"build": c.name, "registers": c.extra["registers"],
                     "spill stores B": c.extra["spill_store_bytes"], "spill loads B": c.extra["spill_load_bytes"],
                     "occupancy % (model)": _pct(c.extra["occupancy"]), "median µs": c.median_s * 1e6,
                     "× as compiled": c.median_s / base,
                     "local loads MB (ncu)": (_ncu(c, LOCAL_METRICS[0]) or 0) / 1e6 if c.extra.get("ncu") else None,
                     "local stores MB (ncu)": (_ncu(c, LOCAL_METRICS[1]) or 0) / 1e6 if c.extra.get("ncu") else None,
                     "achieved occupancy % (ncu)": _ncu(c, OCC_METRICS[0])})
    return rows


def agreement(result, b: occ.SmBudget | None = None) -> tuple[list[dict], int, int]:
    """Every recorded (kernel, block, registers, shared memory) against the model recomputed now:
    (rows, configurations, agreeing)."""
    b = b or occ.budget(result.gpu)
    rows = []
    for c in result.cases:
        for r in c.extra["configs"]:
            if "error" in r:
                continue
            model = model_blocks(b, r)
            rows.append({"kernel": f"{r['family']}.{r['kernel']}" if "kernel" in r else c.name,
                         "threads": r["threads"], "registers": r["registers"],
                         "smem B": r["static_smem_bytes"] + r["dynamic_smem_bytes"],
                         "API blocks": r["api_blocks"], "model blocks": model, "agree": model == r["api_blocks"]})
    return rows, len(rows), sum(r["agree"] for r in rows)


def kernel_residency(family: str, kernel: str, b: occ.SmBudget, threads: int | None = None,
                     dynamic_smem_bytes: int = 0) -> tuple[occ.Residency, object]:
    """A course kernel's residency from what NVRTC reports for the budget's architecture (no GPU)."""

    arch = cuda.arch_for(family, b.arch or cuda.target_arch())
    res = cuda.resources(family, kernel, arch)
    threads = threads or contract_block_threads(family, kernel) or BLOCK
    return occ.residency(b, threads, res.registers, res.static_smem_bytes + dynamic_smem_bytes), res


@functools.lru_cache(maxsize=None)
def _recorded_launches(gpu_slug: str) -> dict[str, Counter]:
    """kernel name -> how often each (threads per block, dynamic shared memory) was launched in the records."""

    out: dict[str, Counter] = defaultdict(Counter)
    for path in sorted((RECORDED_DIR / gpu_slug).glob("*.json")):
        for case in json.loads(path.read_text())["cases"]:
            launch, name = case.get("launch"), _launched_kernel(case)
            if launch and name:
                out[name][(math.prod(launch["block"]), launch.get("dynamic_smem_bytes", 0))] += 1
    return dict(out)


@functools.lru_cache(maxsize=1)
def _families_of_kernels() -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for family in cuda.families():
        for kernel in cuda.kernel_names(family):
            out[kernel].append(family)
    return dict(out)


def _launched_kernel(case: dict) -> str | None:
    """``family.kernel`` of the one course kernel a recorded case launched: its ``kernel`` where that names one,
    else the one kernel the profiler's trace saw run (``extra.kernels.distinct``) where exactly one course family
    defines it. Cases whose ``kernel`` is a label ("course one pass") and that ran several kernels name none."""
    families, kernel = _families_of_kernels(), case.get("kernel") or ""
    family, _, name = kernel.partition(".")
    if name and family in families.get(name, ()):
        return kernel
    extra = case.get("extra")
    trace = extra.get("kernels") if isinstance(extra, dict) else None
    distinct = trace.get("distinct") if isinstance(trace, dict) else None
    if isinstance(distinct, list) and len(distinct) == 1 and len(families.get(distinct[0], ())) == 1:
        return f"{families[distinct[0]][0]}.{distinct[0]}"
    return None


def recorded_launch(family: str, kernel: str, gpu_slug: str | None = None) -> tuple[int, int] | None:
    """(threads per block, dynamic shared memory) that the course's recorded experiments launched this
    kernel with most often (the replay GPU's records by default), or None if no record launches it."""

    seen = _recorded_launches(gpu_slug or runtime.replay_gpu()).get(f"{family}.{kernel}")
    return seen.most_common(1)[0][0] if seen else None


def course_kernel_rows(b: occ.SmBudget) -> list[dict]:
    """Every course kernel at its launch: the block size of its contract, or else the block and
    dynamic shared memory its recorded experiments launched it with most often; NVRTC's registers,
    shared memory and spills fed straight into the residency model."""

    rows = []
    for family in cuda.families():
        for kernel in cuda.kernel_names(family):
            contract, recorded = contract_block_threads(family, kernel), recorded_launch(family, kernel)
            threads = contract or (recorded[0] if recorded else None)
            dynamic = recorded[1] if recorded and (contract is None or contract == recorded[0]) else 0
            source = ("contract" if contract else "recorded launch" if recorded else "256 (no launch recorded)")
            try:
                r, res = kernel_residency(family, kernel, b, threads, dynamic)
            except (ValueError, cuda.CompileError) as exc:
                rows.append({"kernel": f"{family}.{kernel}", "limiter": f"— ({exc})"})
                continue
            rows.append({"kernel": f"{family}.{kernel}", "threads": r.threads_per_block, "block from": source,
                         "registers": res.registers, "static smem B": res.static_smem_bytes,
                         "dynamic smem B": dynamic, "spills B": res.spill_store_bytes + res.spill_load_bytes,
                         "resident blocks": r.resident_blocks, "occupancy %": 100 * r.occupancy,
                         "limiter": r.limiter})
    return rows


@beside_reference_figure
def sweep_figure(result):
    """Left: occupancy (model) and bandwidth against shared memory per block. Right: bandwidth against occupancy."""
    import matplotlib.pyplot as plt

    rows = [c for c in result.cases if "smem_kib" in c.params]
    ceiling = copy_ceiling(result) / 1e9
    kib = [c.params["smem_kib"] for c in rows]
    occ_pct = [100 * c.extra["occupancy"] for c in rows]
    gbps = [c.bandwidth_bytes_per_s / 1e9 for c in rows]
    # Two panels on one x axis rather than two y axes on one panel: the curves' crossings meant nothing.
    fig = plt.figure(figsize=(11, 5))
    grid = fig.add_gridspec(2, 2, height_ratios=[1, 2])
    occ_ax = fig.add_subplot(grid[0, 0])
    a = fig.add_subplot(grid[1, 0], sharex=occ_ax)
    b = fig.add_subplot(grid[:, 1])
    occ_ax.step(kib, occ_pct, where="post", color="#999999")
    occ_ax.set_ylabel("occupancy (%, model)")
    occ_ax.set_ylim(0, 105)
    occ_ax.grid(alpha=0.2)
    occ_ax.tick_params(labelbottom=False)
    a.plot(kib, gbps, "o-", color="#4c72b0", label="measured")
    a.axhline(ceiling, color="#dd8452", ls="--", lw=1, label="CuPy copy (same run)")
    a.set_xlabel("shared memory per block (KiB, allocated, unused)")
    a.set_ylabel("copy bandwidth (GB/s)")
    a.set_ylim(0, ceiling * 1.1)
    a.grid(alpha=0.2)
    a.legend(loc="upper right", fontsize=8)
    b.plot(occ_pct, gbps, "o", color="#4c72b0")
    b.axhline(ceiling, color="#dd8452", ls="--", lw=1)
    b.set_xlabel("occupancy (%, model)")
    b.set_ylabel("copy bandwidth (GB/s)")
    b.set_ylim(0, ceiling * 1.1)
    b.grid(alpha=0.2)
    fig.suptitle(f"one float per thread, residency set by shared memory: {result.provenance}", fontsize=10)
    fig.tight_layout()
    return fig


def bytes_in_flight_figure(sweep, ilp_result):
    """Both copies' bandwidth against the bytes each SM can have in flight (resident threads × ILP × 4 B)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    markers = {1: "o", 2: "s", 4: "^", 8: "D"}
    for k in sorted({c.extra["ilp"] for c in ilp_result.cases if "ilp" in c.params}):
        pts = sorted((c.extra["bytes_in_flight_per_sm"] / KIB, c.bandwidth_bytes_per_s / 1e9)
                     for c in ilp_result.cases if c.params.get("ilp") == k)
        ax.plot(*zip(*pts), marker=markers.get(k, "o"), lw=1, label=f"ILP {k} (occupancy.ilp)")
    pts = sorted((c.extra["bytes_in_flight_per_sm"] / KIB, c.bandwidth_bytes_per_s / 1e9)
                 for c in sweep.cases if "smem_kib" in c.params)
    ax.plot(*zip(*pts), "x", color="black", label="ILP 1, shared-memory sweep")
    ax.axhline(copy_ceiling(ilp_result) / 1e9, color="#dd8452", ls="--", lw=1, label="CuPy copy")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes of loads in flight per SM (KiB) = resident threads × ILP × 4 B")
    ax.set_ylabel("copy bandwidth, reads + writes (GB/s)")
    ax.set_title(f"bandwidth follows bytes in flight, not occupancy: {ilp_result.provenance}", fontsize=10)
    ax.grid(alpha=0.2, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


@beside_reference_figure
def ilp_figure(result):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 4.4))
    for k in sorted({c.extra["ilp"] for c in result.cases if "ilp" in c.params}):
        pts = sorted((100 * c.extra["occupancy"], c.bandwidth_bytes_per_s / 1e9)
                     for c in result.cases if c.params.get("ilp") == k)
        ax.plot(*zip(*pts), marker="o", label=f"ILP {k}")
    ax.axhline(copy_ceiling(result) / 1e9, color="#dd8452", ls="--", lw=1, label="CuPy copy (same run)")
    ax.set_xlabel("occupancy (%, model)")
    ax.set_ylabel("copy bandwidth (GB/s)")
    ax.set_title(f"more loads per thread at lower occupancy: {result.provenance}", fontsize=10)
    ax.grid(alpha=0.2)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
