"""Notebook 05: shared-memory banks and the transpose ladder.

Experiments (each also profiled with Nsight Compute where the GPU allows it; the
metrics go into each case's ``extra["ncu"]``, with the command and ncu version):

* ``transpose.ladder``: naive → shared tile → padded → swizzled transposes, with
  CuPy's copy and the course's ``copy_vec4`` measured in the same run.
* ``banks.probe``: one warp pattern of shared-memory loads per case, timed and
  counted, against the bank model.

The launches are ``course_lib.launch.transpose``'s. The analysis helpers at the bottom
turn a result into the notebook's tables and figures; they need no GPU.
"""
from __future__ import annotations

from course_lib.core import cuda
from course_lib.launch import transpose
from course_lib.launch.coalescing import GLOBAL_METRICS
from course_lib.launch.transpose import PROBE_PATTERNS, SHARED_METRICS, TRANSPOSES, WIDE_PROBE_PATTERNS
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import beside_reference, experiment
from course_lib.measure.launches import attach_known_profiles, measure, megabytes, ratio
from course_lib.measure.target import Target
from course_lib.models import memory

# The L2 side of the writes (requests and sectors the SMs send it, and how busy it is) tests what makes the
# naive transpose slow when its DRAM bytes do not.
L2_WRITE_METRICS = ["lts__t_requests_srcunit_tex_op_write.sum", "lts__t_sectors_srcunit_tex_op_write.sum",
                    "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum",
                    "lts__throughput.avg.pct_of_peak_sustained_elapsed"]
TRANSPOSE_METRICS = (SHARED_METRICS + GLOBAL_METRICS[:4] + ["dram__bytes_read.sum", "dram__bytes_write.sum"]
                     + L2_WRITE_METRICS)
PROBE_METRICS = SHARED_METRICS[0:1] + SHARED_METRICS[2:3] + SHARED_METRICS[4:5]


@experiment("transpose.ladder",
            "fp32 n x n transpose: naive, shared tile, padded, swizzled; CuPy copy and copy_vec4 in the same run.",
            n=8192, samples=30)
def transpose_ladder(n: int, samples: int) -> list[Case]:
    launches = transpose.transpose_launches(n)
    cases = measure(launches, samples, flush_l2=True)
    attach_known_profiles(cases, launches, Target(transpose.profile_transposes, (n,)), TRANSPOSE_METRICS,
                          "^transpose_")
    return cases


@experiment("banks.probe",
            "One shared-memory access pattern per case, 4- and 8-byte loads: time and wavefronts vs the bank model.",
            patterns=PROBE_PATTERNS, iters=1024, samples=25)
def bank_probe(patterns: list[str], iters: int, samples: int) -> list[Case]:
    launches = transpose.probe_launches(patterns, iters)
    cases = measure(launches, samples, flush_l2=False)
    attach_known_profiles(cases, launches, Target(transpose.profile_probes, (patterns, iters)), PROBE_METRICS,
                          "^bank_probe_")
    return cases


@experiment("banks.wide_probe",
            "16-byte loads, and 8- and 16-byte loads whose lanes share addresses: wavefronts vs the bank model.",
            patterns=WIDE_PROBE_PATTERNS, iters=1024, samples=25)
def wide_bank_probe(patterns: list[str], iters: int, samples: int) -> list[Case]:
    return bank_probe(patterns, iters, samples)


# --------------------------------------------------------------------------- analysis for the notebook (no GPU)

@beside_reference
def transpose_rows(result) -> list[dict]:
    """The ladder: GB/s and % of both copies measured in the same run."""
    cupy_copy = result.case("CuPy device-to-device copy").bandwidth_bytes_per_s
    vec4 = result.case("course copy_vec4").bandwidth_bytes_per_s
    rows = []
    for c in result.cases:
        rows.append({"case": c.name, "kernel": c.kernel, "median µs": c.median_s * 1e6, "GB/s": c.bandwidth_bytes_per_s / 1e9,
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
        ncu, m = c.extra.get("ncu"), ladder_model(result, c)
        if not ncu or not m or "smem_load_requests" not in m:
            continue
        rows.append({
            "case": c.name,
            "model load wavefronts/request": m["smem_load_wavefronts"] / m["smem_load_requests"],
            "ncu load wavefronts/request": ratio(ncu.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
                                                  ncu.get("smsp__sass_inst_executed_op_shared_ld.sum")),
            "model load conflicts": m["smem_load_wavefronts"] - m["smem_load_requests"],
            "ncu load conflicts": ncu.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
            "model store wavefronts/request": m["smem_store_wavefronts"] / m["smem_store_requests"],
            "ncu store wavefronts/request": ratio(ncu.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
                                                   ncu.get("smsp__sass_inst_executed_op_shared_st.sum")),
            "ncu store conflicts": ncu.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
        })
    return rows


@beside_reference
def transpose_global_rows(result) -> list[dict]:
    """Global-side evidence of the transposes: sectors per write request and DRAM bytes, ncu vs model."""
    rows = []
    for c in result.cases:
        ncu, m = c.extra.get("ncu"), ladder_model(result, c)
        if not ncu or not m:
            continue
        rows.append({"case": c.name,
                     "model sectors/write": m["write_sectors_per_request"],
                     "ncu sectors/write": ratio(ncu.get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
                                                 ncu.get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")),
                     "matrix MB": c.bytes / 2e6,
                     "ncu DRAM read MB": megabytes(ncu.get("dram__bytes_read.sum")),
                     "ncu DRAM write MB": megabytes(ncu.get("dram__bytes_write.sum")),
                     **({"ncu L2 write sectors/request": ratio(w, ncu.get("lts__t_requests_srcunit_tex_op_write.sum")),
                         "ncu L2 write MB (sectors × 32 B)": megabytes(32 * w),
                         "ncu L2 busy %": ncu.get("lts__throughput.avg.pct_of_peak_sustained_elapsed")}
                        if (w := ncu.get("lts__t_sectors_srcunit_tex_op_write.sum")) is not None else {})})
    return rows


def ladder_model(result, case: Case) -> dict | None:
    """The sector and bank model of a transpose of the ladder, computed now from its variant and size (a stored
    run's tables show today's model); None for the copies beside them."""
    variant = case.params.get("variant")
    return transpose.transpose_model(variant, result.params["n"]) if variant in {t[0] for t in TRANSPOSES} else None


def probe_model(case: Case) -> dict:
    """The bank model's wavefronts for a probe case, computed now from the lane addresses the run stored: a
    table drawn from a stored run shows today's model, never the one the run was measured beside."""
    bank = memory.bank_conflicts(case.extra["addresses_bytes"], case.params["access_bytes"])
    return {"wavefronts_per_request": bank.wavefronts, "ideal_wavefronts": bank.ideal_wavefronts,
            "requests": case.extra["model"]["requests"]}   # requests: the launch's geometry, not a model


@beside_reference
def probe_rows(result) -> list[dict]:
    """Each probed pattern: the model's wavefronts, ncu's, and the time relative to a conflict-free row of the
    probe's narrowest words (the 4-byte row, or the 16-byte row of ``banks.wide_probe``)."""
    names = {c.name for c in result.cases}
    base_name = next((n for n in ("4 B row", "16 B row") if n in names), None)
    base = result.case(base_name).median_s if base_name else None
    rows = []
    for c in result.cases:
        m, ncu = probe_model(c), c.extra.get("ncu")
        rows.append({"pattern": c.name, "model wavefronts/request": m["wavefronts_per_request"],
                     "ncu wavefronts/request": ratio(
                         ncu.get("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum") if ncu else None,
                         ncu.get("smsp__sass_inst_executed_op_shared_ld.sum") if ncu else None),
                     "model conflict degree": m["wavefronts_per_request"] / m["ideal_wavefronts"],
                     f"time / {base_name or 'row'}": c.median_s / base if base else None})
    return rows


def probe_fit(result) -> dict:
    """Least-squares fit of the probe's times: t = overhead + cycles x (wavefronts per SM) / SM clock.

    The slope is the shared-memory pipe's cost per wavefront in SM clock cycles (the model assumes 1).
    """
    m = result.machine
    sms, clock_hz = m["sm_count"], 1e6 * (m.get("clocks_mhz") or {}).get("sm_now", 0)
    if not clock_hz:
        raise ValueError("the record has no SM clock, so the fit cannot be put in cycles")
    models = [probe_model(c) for c in result.cases]
    xs = [m["wavefronts_per_request"] * m["requests"] / sms / clock_hz for m in models]
    ys = [c.median_s for c in result.cases]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"cycles_per_wavefront": slope, "overhead_s": my - slope * mx, "sm_clock_mhz": clock_hz / 1e6,
            "worst_residual": max(abs(y - (my - slope * mx) - slope * x) / y for x, y in zip(xs, ys))}


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
