"""Claims of 04_coalescing's prose (see course_lib.measure.claims): each is checked against the record
and against the live run committed with the notebook."""
from course_lib.core import hardware
from course_lib.labs import coalescing as lab
from course_lib.launch import coalescing as coalescing_launch
from course_lib.measure import claims
from course_lib.measure.claims import Analytic, Measured
from course_lib.models import memory

shared = claims.load_module("_shared")

COPY, STRIDED, PATTERNS = "machine.copy_bandwidth", "coalescing.strided_copy", "coalescing.patterns"
L2_FETCH = "coalescing.l2_fetch"

# The model's GB/s divide by the copy ceiling (machine.copy_bandwidth), and the stride-1 copy is set beside the
# float4 copy of coalescing.patterns: other experiments of the same run. Such a claim names them all, e.g.
# (STRIDED, COPY), and its quantity takes one result of each, in that order.


def efficiency(**kw) -> float:
    return memory.sector_count(memory.warp_addresses(**kw), kw.get("element_bytes", 4)).efficiency


def profile(result) -> dict:
    """The ncu table (lab.global_profile_rows) by case name."""
    return {r["case"]: r for r in lab.global_profile_rows(result)}


def stride_rows(result, strides) -> list[dict]:
    p = profile(result)
    return [p[f"stride {s}"] for s in strides]


def dram_over_requested(row) -> float:
    return row["ncu DRAM read MB"] / row["requested read MB"]


def worst_gap(rows, a: str, b: str) -> float:
    return max(abs(r[a] / r[b] - 1) for r in rows)


def over_64b_model(result, copy, strides) -> tuple:
    rows = {r["case"]: r for r in lab.dram_rows(result, shared.copy_bandwidth(copy))}
    return tuple(rows[f"stride {s}"]["measured / 64-B model"] for s in strides)


def bandwidth(result, name: str) -> float:
    return result.case(name).bandwidth_bytes_per_s


def over_model(result, copy) -> dict:
    """The copy table's "measured / model" (lab.copy_rows against this run's copy ceiling) by case name."""
    return {x["case"]: x["measured / model"] for x in lab.copy_rows(result, shared.copy_bandwidth(copy))}


OFFSETS = ["offset 1 (4 bytes)", "offset 2 (8 bytes)", "offset 4 (16 bytes)"]
ALL_STRIDES = [1, 2, 3, 4, 8, 9, 16, 33, 1025]


def offset_l1_to_l2_excess(result) -> float:
    """The misaligned copies' L1→L2 read bytes beyond the requested ones, as a fraction of the extra sector the
    request boundary asks for (model sectors − requested): near 0 when the L1 catches the fifth sector."""
    p = profile(result)
    return max((p[n]["ncu L1→L2 read MB"] - p[n]["requested read MB"])
               / (p[n]["model DRAM read MB, sectors"] - p[n]["requested read MB"]) for n in OFFSETS)


def block_span_bytes(stride: int) -> int:
    """Byte span of one block's reads in strided_copy: 256 threads × 4 elements, each `stride` elements apart."""
    return (256 * 4 - 1) * stride * 4


CLAIMS = [
    # no figure in the words: the ceiling must be a fair one on any GPU, near the datasheet's HBM bandwidth
    Measured("The prediction uses the copy ceiling from notebook 00's", COPY, shared.copy_of_datasheet, (0.8, 1.0),
             unit="%"),

    Analytic("32 consecutive fp32 values starting on a sector boundary fill exactly 4 sectors (100%)",
             lambda: efficiency(), (1.0, 1.0), unit="%"),
    Analytic("Start them 4 bytes later and the same 128 bytes straddle 5 sectors (80%)",
             lambda: efficiency(offset_bytes=4), (0.799, 0.801), unit="%"),
    Analytic("so 8 sectors (50%)", lambda: efficiency(pattern="strided", stride=2), (0.499, 0.501), unit="%"),
    Analytic("32 sectors for 128 useful bytes, 12.5%, the worst a 4-byte access can do",
             lambda: (memory.strided_sectors(8).n_sectors, memory.strided_sectors(8).efficiency,
                      min(memory.strided_sectors(s).efficiency for s in (8, 9, 16, 33, 1025, 4096))),
             [(32, 32), (0.1249, 0.1251), (0.1249, 0.1251)], unit="%"),

    Measured("the profiler's sectors per request are the model's", STRIDED,
             lambda r: max(worst_gap(stride_rows(r, ALL_STRIDES), "ncu sectors/read", "model sectors/read"),
                           worst_gap(stride_rows(r, ALL_STRIDES), "ncu sectors/write", "model sectors/write")),
             (0, 0.01), unit="%"),
    Measured("the L2 receives exactly those sectors", STRIDED,
             lambda r: worst_gap(stride_rows(r, ALL_STRIDES), "ncu L1→L2 read MB", "model DRAM read MB, sectors"),
             (0, 0.01), unit="%"),
    Measured("for small strides DRAM reads what the sector count says", STRIDED,
             lambda r: worst_gap(stride_rows(r, [1, 2, 3, 4, 8]), "ncu DRAM read MB", "model DRAM read MB, sectors"),
             (0, 0.01), unit="%"),
    Measured("so a stride of 16 or more costs 16 times the useful bytes, not 8", STRIDED,
             lambda r: tuple(dram_over_requested(x) for x in stride_rows(r, [16, 33, 1025]))
             + (1 / memory.strided_sectors(16).efficiency,),
             [(15.5, 16.5)] * 3 + [(8, 8)], unit="×"),
    Measured("counting 64-byte blocks instead of 32-byte sectors", STRIDED,
             lambda r: worst_gap(stride_rows(r, ALL_STRIDES), "ncu DRAM read MB", "model DRAM read MB, 64-B blocks"),
             (0, 0.01), unit="%"),

    Measured("With 64-byte blocks the model follows the measurement for small and medium strides",
             (STRIDED, COPY), lambda r, copy: over_64b_model(r, copy, [1, 2, 3, 4, 8, 9, 16]),
             [(0.93, 1.1)] * 7, unit="×"),
    Measured("The widest strides fall below even that", (STRIDED, COPY),
             lambda r, copy: over_64b_model(r, copy, [33, 1025]), [(0.5, 0.93)] * 2, unit="×"),
    Measured("the profiler shows DRAM moving the *same* bytes for all strides from 16 up", STRIDED,
             lambda r: max(x["ncu DRAM read MB"] for x in stride_rows(r, [16, 33, 1025]))
             / min(x["ncu DRAM read MB"] for x in stride_rows(r, [16, 33, 1025])) - 1, (0, 0.01), unit="%"),
    Analytic("A stride of 33 puts a warp's blocks 132 bytes apart", lambda: 33 * 4, (132, 132)),
    Analytic("the 1,024 loads of one 256-thread block span about 4.2 MB at stride 1025",
             lambda: block_span_bytes(1025) / 1e6, (4.15, 4.25)),
    Analytic("and 135 KB at stride 33", lambda: block_span_bytes(33) / 1e3, (134.5, 135.5)),

    Analytic("(16 sectors per warp, 25%)", lambda: (memory.strided_sectors(4).n_sectors, memory.strided_sectors(4).efficiency),
             [(16, 16), (0.2499, 0.2501)], unit="%"),
    Analytic("or a dense array of x (4 sectors, 100%)", lambda: efficiency(), (1.0, 1.0), unit="%"),
    Measured("All three are 100% efficient by the sector count", PATTERNS,
             lambda r: tuple(coalescing_launch.case_model(r.case(n))["read_efficiency"] for n in
                             ("4 bytes per thread (copy)", "8 bytes per thread (copy_vec2)", "16 bytes per thread (copy_vec4)")),
             [(1.0, 1.0)] * 3, unit="%"),

    Measured("the L1 → L2 column shows the extra sector almost never leaves the SM", PATTERNS, offset_l1_to_l2_excess,
             (0, 0.1), unit="%"),
    Measured("and DRAM reads the requested bytes", PATTERNS,
             lambda r: tuple(dram_over_requested(profile(r)[n]) for n in OFFSETS), [(0.99, 1.01)] * 3, unit="×"),
    Measured("So the misaligned copies run at about the aligned copy's speed, a little above the \"no reuse\" prediction",
             (PATTERNS, COPY),
             lambda r, copy: tuple(bandwidth(r, n) / bandwidth(r, "offset 0 (0 bytes)") for n in OFFSETS)
             + tuple(over_model(r, copy)[n] for n in OFFSETS),
             [(0.97, 1.03)] * 3 + [(1.04, 1.25)] * 3, unit="×"),
    Analytic("At the request boundary misalignment costs 20%", lambda: 1 - efficiency(offset_bytes=4), (0.199, 0.201),
             unit="%"),
    Measured("at DRAM, here, almost nothing", PATTERNS,
             lambda r: max(dram_over_requested(profile(r)[n]) for n in OFFSETS) - 1, (0, 0.01), unit="%"),
    Measured("DRAM reads the whole array, four times the useful bytes, and the time follows the model",
             (PATTERNS, COPY),
             lambda r, copy: (dram_over_requested(profile(r)["array of structures: x of 16-byte particles"]),
                              over_model(r, copy)["array of structures: x of 16-byte particles"]),
             [(3.95, 4.05), (0.93, 1.1)], unit="×"),
    Measured("all three are 100% efficient by the sector count and read the same DRAM bytes", PATTERNS,
             lambda r: tuple(dram_over_requested(profile(r)[n]) for n in
                             ("4 bytes per thread (copy)", "8 bytes per thread (copy_vec2)", "16 bytes per thread (copy_vec4)")),
             [(0.99, 1.01)] * 3, unit="×"),
    Measured("on the H200 it reaches about two thirds of the float4 copy's bandwidth", PATTERNS,
             lambda r: bandwidth(r, "4 bytes per thread (copy)") / bandwidth(r, "16 bytes per thread (copy_vec4)"),
             (0.6, 0.72), unit="×", belongs_to="NVIDIA H200"),
    Measured("and it runs within a few percent of the float4 copy", (STRIDED, PATTERNS),
             lambda strided, patterns: (bandwidth(strided, "stride 1")
                                        / bandwidth(patterns, "16 bytes per thread (copy_vec4)")),
             (0.95, 1.05), unit="×"),
    Measured("four times as many blocks as the float4 copy, 262,144", PATTERNS,
             lambda r: (r.case("4 bytes per thread (copy)").launch["grid"][0]
                        / r.case("16 bytes per thread (copy_vec4)").launch["grid"][0],
                        r.case("4 bytes per thread (copy)").launch["grid"][0]),
             [(4, 4), (262144, 262144)], unit="×"),
    # the L2 fetch granularity (coalescing.l2_fetch)
    Measured("DRAM reads what the sector count says at every wide stride: 0.5 of the 64-byte model", L2_FETCH,
             lambda r: tuple(fetch_row(r, s, 32)["ncu / 64-B model"] for s in (16, 33, 1025)), [(0.49, 0.51)] * 3),
    # MB/µs is TB/s; against the datasheet's HBM bandwidth of the GPU that ran it (H200 0.71-0.85, H100 0.76-0.86)
    Measured("at either setting its DRAM reads stream at 70–90% of the HBM bandwidth on the datasheet", L2_FETCH,
             lambda r: tuple(1e12 * fetch_row(r, 16, g)["ncu DRAM read MB"] / fetch_row(r, 16, g)["median µs"]
                             / hardware.spec(r.gpu).hbm_bandwidth_bytes_per_s for g in (32, 64)),
             [(0.7, 0.9)] * 2, unit="%"),
    Measured("at stride 1025 the time changes far less than DRAM's bytes, which change fourfold across the three "
             "settings", L2_FETCH, lambda r: (stride_1025_time_spread(r), fetch_row(r, 1025, 128)["ncu DRAM read MB"]
                                              / fetch_row(r, 1025, 32)["ncu DRAM read MB"]),
             [(1.0, 1.5), (3.8, 4.2)], unit="×"),
    Measured("(on the H200 by under 25%)", L2_FETCH, lambda r: stride_1025_time_spread(r), (1.0, 1.25), unit="×",
             belongs_to="NVIDIA H200"),
    Measured("at 32 B the reads stream about 10–20% slower than at 64 B", L2_FETCH,   # MB/µs at 32 B over at 64 B
             lambda r: 1 - (fetch_row(r, 16, 32)["ncu DRAM read MB"] / fetch_row(r, 16, 32)["median µs"])
             / (fetch_row(r, 16, 64)["ncu DRAM read MB"] / fetch_row(r, 16, 64)["median µs"]), (0.10, 0.20), unit="%"),
    Measured("The stride-16 copy then runs faster (on the H200, about 1.65 times as fast as at 64 B", L2_FETCH,
             lambda r: fetch_row(r, 16, 64)["median µs"] / fetch_row(r, 16, 32)["median µs"], (1.6, 1.7), unit="×",
             belongs_to="NVIDIA H200"),
    Measured("The stride-16 copy then runs faster", L2_FETCH,   # on any GPU: the bytes halve
             lambda r: fetch_row(r, 16, 64)["median µs"] / fetch_row(r, 16, 32)["median µs"], (1.2, 2.0), unit="×"),
    Measured("DRAM reads the 64-byte model, as in the table above. The runtime reported 64 B before the experiment "
             "changed it", L2_FETCH,
             lambda r: tuple(fetch_row(r, s, 64)["ncu / 64-B model"] for s in (16, 33, 1025))
             + tuple(c.extra["granularity_before_the_experiment"] for c in r.cases[:1]),
             [(0.99, 1.01)] * 3 + [(64, 64)]),
    Measured("On the H200, halving them made the stride-16 copy 1.65 times as fast, but the stride-33 copy only about "
             "5% faster, and the stride-1025 copy about 8% slower", L2_FETCH,
             lambda r: (fetch_row(r, 16, 64)["median µs"] / fetch_row(r, 16, 32)["median µs"],
                        fetch_row(r, 33, 64)["median µs"] / fetch_row(r, 33, 32)["median µs"] - 1,
                        fetch_row(r, 1025, 32)["median µs"] / fetch_row(r, 1025, 64)["median µs"] - 1),
             [(1.6, 1.7), (0.03, 0.07), (0.06, 0.1)], unit="%", belongs_to="NVIDIA H200"),
    Measured("A kernel that reads whole lines runs the same at all three settings", L2_FETCH,
             lambda r: max(fetch_row(r, 1, g)["median µs"] for g in (32, 64, 128))
             / min(fetch_row(r, 1, g)["median µs"] for g in (32, 64, 128)), (1.0, 1.01), unit="×"),
    Measured("Strides 33 and 1025 read twice the 64-byte model: each lane now costs a whole 128-byte line. At "
             "stride 16, two lanes share each 128-byte line, so it reads what it read at 64 B", L2_FETCH,
             lambda r: (fetch_row(r, 33, 128)["ncu / 64-B model"], fetch_row(r, 1025, 128)["ncu / 64-B model"],
                        fetch_row(r, 16, 128)["ncu DRAM read MB"] / fetch_row(r, 16, 64)["ncu DRAM read MB"]),
             [(1.95, 2.05), (1.95, 2.05), (0.99, 1.01)]),
]


def stride_1025_time_spread(result) -> float:
    """The slowest of the stride-1025 copy's three fetch settings over the fastest."""
    times = [fetch_row(result, 1025, g)["median µs"] for g in (32, 64, 128)]
    return max(times) / min(times)


def fetch_row(result, stride: int, granularity: int) -> dict:
    """``lab.l2_fetch_rows``'s row for one stride under one fetch granularity asked for."""
    return next(r for r in lab.l2_fetch_rows(result)
                if r["stride"] == stride and r["granularity asked B"] == granularity)
