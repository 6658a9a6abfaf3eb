"""Notebook 04: coalescing, the sector model against the GPU.

Experiments (each also profiled with Nsight Compute where the GPU allows it; the
metrics go into each case's ``extra["ncu"]``, with the command and ncu version):

* ``coalescing.strided_copy``: out[i] = in[(i * stride) mod n] over a sweep of strides.
* ``coalescing.patterns``: misaligned (offset) copies, array-of-structures against
  structure-of-arrays, and 4/8/16-byte loads per thread.
* ``coalescing.l2_fetch``: the strided copy under each L2 fetch granularity the runtime lets one ask for.

The launches are ``course_lib.launch.coalescing``'s. The analysis helpers at the bottom
turn a result into the notebook's tables and figures; they need no GPU.
"""
from __future__ import annotations

from course_lib.launch import coalescing
from course_lib.launch.coalescing import GLOBAL_METRICS
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import beside_reference, experiment
from course_lib.measure.launches import attach_known_profiles, measure, megabytes, ratio
from course_lib.measure.target import Target
from course_lib.models import memory


@experiment("coalescing.strided_copy",
            "out[i] = in[(i * stride) mod n], fp32: the same bytes read with neighbouring lanes `stride` apart.",
            n=1 << 26, strides=[1, 2, 3, 4, 8, 9, 16, 33, 1025], samples=30)
def strided_copy(n: int, strides: list[int], samples: int) -> list[Case]:
    launches = coalescing.strided_launches(n, strides)
    cases = measure(launches, samples, flush_l2=True)
    attach_known_profiles(cases, launches, Target(coalescing.profile_strided, (n, strides)),
                          GLOBAL_METRICS, "^strided_copy$")
    return cases


@experiment("coalescing.patterns",
            "Misaligned copies, array-of-structures vs structure-of-arrays, and 4/8/16-byte accesses, fp32.",
            n=1 << 26, offsets=[0, 1, 2, 4, 8, 32], samples=30)
def patterns(n: int, offsets: list[int], samples: int) -> list[Case]:
    launches = coalescing.pattern_launches(n, offsets)
    cases = measure(launches, samples, flush_l2=True)
    attach_known_profiles(cases, launches, Target(coalescing.profile_patterns, (n, offsets)),
                          GLOBAL_METRICS, "^(offset_copy|aos_field|soa_field|copy|copy_vec2|copy_vec4)$")
    return cases


@experiment("coalescing.l2_fetch",
            "The strided copy with the L2 fetch granularity (cudaLimitMaxL2FetchGranularity) set to 32, 64 and "
            "128 bytes: does the 64-byte DRAM unit follow the setting?",
            n=1 << 26, strides=[1, 16, 33, 1025], granularities=[32, 64, 128], samples=20)
def l2_fetch(n: int, strides: list[int], granularities: list[int], samples: int) -> list[Case]:
    before = coalescing.l2_fetch_granularity()
    try:
        launches = coalescing.l2_fetch_launches(n, strides, granularities)
        cases = measure(launches, samples, flush_l2=True)
    finally:
        coalescing.set_l2_fetch_granularity(before)
    for c in cases:
        c.extra["granularity_before_the_experiment"] = before
    attach_known_profiles(cases, launches, Target(coalescing.profile_l2_fetch, (n, strides, granularities)),
                          GLOBAL_METRICS, "^strided_copy$")
    return cases


# --------------------------------------------------------------------------- analysis for the notebook (no GPU)

def _gbps(c: Case) -> float:
    return c.bandwidth_bytes_per_s / 1e9


def predicted(c: Case, ceiling_bytes_per_s: float, reuse: bool = False) -> memory.CopyPrediction:
    """The sector model's bandwidth for a copy-like case: no reuse of over-fetched sectors, or perfect reuse."""
    m = coalescing.case_model(c)
    half = c.bytes / 2
    if reuse:
        return memory.predicted_copy(half, half, 1.0, 1.0, ceiling_bytes_per_s)
    return memory.predicted_copy(half, half, m["read_efficiency"], m["write_efficiency"], ceiling_bytes_per_s)


def copy_rows(result, ceiling_bytes_per_s: float, key: str | None = None) -> list[dict]:
    """Measured against the sector model for every copy-like case of a coalescing result."""
    rows = []
    for c in result.cases:
        m = coalescing.case_model(c)
        p = predicted(c, ceiling_bytes_per_s)
        rows.append({"case": c.name, **({key: c.params.get(key)} if key else {}),
                     "sectors per read": m["read_sectors_per_request"],
                     "read efficiency %": 100 * m["read_efficiency"],
                     "model GB/s": p.bandwidth_bytes_per_s / 1e9, "measured GB/s": _gbps(c),
                     "measured / model": c.bandwidth_bytes_per_s / p.bandwidth_bytes_per_s,
                     "% of copy ceiling": 100 * c.bandwidth_bytes_per_s / ceiling_bytes_per_s})
    return rows


def dram_block_model(c: Case) -> memory.SectorCount:
    addrs, width = coalescing.read_addresses(c.params)
    return memory.dram_blocks(addrs, width)


@beside_reference
def global_profile_rows(result) -> list[dict]:
    """ncu's sectors per request and DRAM bytes beside the sector model (and its 64-byte DRAM-block variant)."""
    rows = []
    for c in result.cases:
        ncu, m = c.extra.get("ncu"), coalescing.case_model(c)
        if not ncu:
            continue
        half = c.bytes / 2
        rows.append({
            "case": c.name,
            "model sectors/read": m["read_sectors_per_request"],
            "ncu sectors/read": ratio(ncu.get("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"),
                                       ncu.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")),
            "model sectors/write": m["write_sectors_per_request"],
            "ncu sectors/write": ratio(ncu.get("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
                                        ncu.get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")),
            "requested read MB": half / 1e6,
            "model DRAM read MB, sectors": half / m["read_efficiency"] / 1e6,
            "model DRAM read MB, 64-B blocks": half / dram_block_model(c).efficiency / 1e6,
            "ncu DRAM read MB": megabytes(ncu.get("dram__bytes_read.sum")),
            "ncu L1→L2 read MB": megabytes(32 * v if (v := ncu.get("lts__t_sectors_srcunit_tex_op_read.sum")) else None),
            "ncu DRAM write MB": megabytes(ncu.get("dram__bytes_write.sum")),
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
def l2_fetch_rows(result) -> list[dict]:
    """Per stride and L2 fetch granularity asked for: what the runtime reported back, the time, and ncu's DRAM
    read bytes against the two no-reuse counts (32-byte sectors, 64-byte blocks)."""
    rows = []
    for c in result.cases:
        m, ncu = coalescing.case_model(c), c.extra.get("ncu") or {}
        half = c.bytes / 2
        by_blocks = half / dram_block_model(c).efficiency
        dram = ncu.get("dram__bytes_read.sum")
        rows.append({"stride": c.params["strides"], "granularity asked B": c.params["granularity"],
                     "read back B": c.extra.get("granularity_read_back"), "median µs": c.median_s * 1e6,
                     "model DRAM read MB, sectors": half / m["read_efficiency"] / 1e6,
                     "model DRAM read MB, 64-B blocks": by_blocks / 1e6,
                     "ncu DRAM read MB": megabytes(dram),
                     "ncu / 64-B model": dram / by_blocks if dram else None})
    return rows


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
