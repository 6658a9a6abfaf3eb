"""Claims of 05_shared_memory's prose (see course_lib.measure.claims): each is checked against the record
and against the live run committed with the notebook."""
from course_lib.exercises.kernel import catalog
from course_lib.labs import shared_memory as lab
from course_lib.measure import claims
from course_lib.measure.claims import Analytic, Measured
from course_lib.models import memory, occupancy

shared = claims.load_module("_shared")

PROBE, LADDER = "banks.probe", "transpose.ladder"
PADDED, SWIZZLED = "padded tile 32×33", "swizzled tile 32×32"
PADDED_32X4, PADDED_64, SWIZZLED_64 = "padded tile 32×33, 32×4 threads", "padded tile 64×65", "swizzled tile 64×64"
WIDE = "banks.wide_probe"
WIDE_16B = {"16 B row": 4, "16 B stride 2": 8, "16 B column, pitch 32": 32, "16 B column, pitch 33": 4,
            "16 B lanes n, n ^ 1 share": 2, "16 B lanes n, n ^ 2 share": 2, "16 B groups of 4 lanes share": 2,
            "16 B broadcast": 2, "16 B lanes 8 apart share": 4, "16 B lanes 16 apart share": 4}
FOUR_ROWS = (PADDED, SWIZZLED)                     # conflict-free tiles, 4 rows per thread
EIGHT_ROWS = (PADDED_32X4, PADDED_64, SWIZZLED_64)  # 8 rows per thread


def column_over_row() -> float:
    """The bank model's wavefronts for a column of a 32 x 32 fp32 tile over those for a row."""
    col = memory.bank_conflicts(memory.shared_addresses(pattern="column", pitch=32, index=3)).wavefronts
    row = memory.bank_conflicts(memory.shared_addresses(pattern="row", index=3)).wavefronts
    return col / row


def of_copy(r, name: str) -> float:
    """A case's bandwidth as a fraction of CuPy's copy in the same run (the table's "% of CuPy copy")."""
    return r.case(name).bandwidth_bytes_per_s / shared.copy_bandwidth(r)


def points(r, a: str, b: str) -> float:
    """How many percentage points of the copy case ``a`` is ahead of case ``b``."""
    return 100 * (of_copy(r, a) - of_copy(r, b))


def loads_in_flight_per_sm(case: str) -> tuple:
    """(resident threads per SM, rows per thread) of a transpose on the H200, from NVRTC's registers and
    shared memory and the occupancy model of notebook 03."""
    row = next(r for r in lab.resources_rows() if r["case"] == case)
    cols, rows = (int(x) for x in row["block"].split("×"))
    res = occupancy.residency(occupancy.budget("NVIDIA H200"), cols * rows, row["registers"], row["static smem B"])
    return res.resident_blocks * cols * rows, row["elements per thread"]


def probe_worst_mismatch(r) -> float:
    """The largest |ncu - model| wavefronts per request over the probe's patterns (0 when they all agree)."""
    return max(abs(row["ncu wavefronts/request"] - row["model wavefronts/request"]) for row in lab.probe_rows(r))


def conflict_free_ncu_loads(r):
    """ncu's load wavefronts per request, smallest and largest, over the tiles the model calls conflict-free."""
    w = [row["ncu load wavefronts/request"] for row in lab.smem_profile_rows(r)
         if row["model load wavefronts/request"] == 1]
    return min(w), max(w)


def conflict_free_ncu_both(r):
    """ncu's wavefronts per shared instruction, loads and stores together, smallest and largest, over the tiles
    the model calls conflict-free: the range the exercise checker's bar of 1.5 sits above."""
    w = [row[f"ncu {op} wavefronts/request"] for row in lab.smem_profile_rows(r)
         if row["model load wavefronts/request"] == 1 for op in ("load", "store")]
    return min(w), max(w)


def unpadded_ncu_loads(r) -> float:
    return next(row["ncu load wavefronts/request"] for row in lab.smem_profile_rows(r) if row["case"] == "shared tile 32×32")


def naive_dram_over_matrix(r) -> float:
    """DRAM bytes (ncu, read + write) of the naive transpose over the matrix's read + write bytes."""
    c = r.case("naive (no shared memory)")
    return (c.extra["ncu"]["dram__bytes_read.sum"] + c.extra["ncu"]["dram__bytes_write.sum"]) / c.bytes


def ncu_conflicts(r, name: str) -> float:
    return next(row["ncu load conflicts"] for row in lab.smem_profile_rows(r) if row["case"] == name)


def swizzled_fewer_conflicts(r):
    """Residual ncu load conflicts of each swizzled tile over those of the padded tile of its size (< 1)."""
    return ncu_conflicts(r, SWIZZLED) / ncu_conflicts(r, PADDED), ncu_conflicts(r, SWIZZLED_64) / ncu_conflicts(r, PADDED_64)


def shared_pipe_busy(r, name: str) -> float:
    """A case's shared wavefronts (ncu, loads and stores) over the SM cycles of its median time at the
    boost clock: a lower bound on how busy the shared-memory pipe was (one wavefront per SM cycle)."""
    from course_lib.core import hardware

    c, spec = r.case(name), hardware.spec(r.gpu)
    m = c.extra["ncu"]
    wf = m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] + m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"]
    return wf / (c.median_s * spec.sm_count * spec.boost_clock_mhz * 1e6)


CLAIMS = [
    Analytic("why reading a tile by column takes 32 times the wavefronts of reading it by row", column_over_row,
             (32, 32), unit="×"),
    Measured("make a matrix transpose run close to copy speed", LADDER, lambda r: of_copy(r, lab.best_transpose(r).name),
             (0.85, 1.0), unit="%"),
    Measured("where the probe above matched the model exactly", PROBE, probe_worst_mismatch, (0, 1e-6)),
    Measured("the profiler counts somewhat *more* wavefronts than the layout explains", LADDER, conflict_free_ncu_loads,
             [(1.005, 1.2), (1.005, 1.2)], unit=" wavefronts/request"),
    Measured("keep the shared-memory pipe about 87% busy at the boost clock", LADDER,
             lambda r: shared_pipe_busy(r, "shared tile 32×32"), (0.83, 0.91), unit="%"),
    Measured("on the H200 it takes about twice the padded tile's time", LADDER,
             lambda r: r.case("shared tile 32×32").median_s / r.case(PADDED).median_s, (1.8, 2.2), unit="×",
             belongs_to="NVIDIA H200"),
    Measured("Yet DRAM moves only a little more than the matrix", LADDER, naive_dram_over_matrix, (1.0, 1.3), unit="×"),
    Measured("come closer on the H200, 87–92.5% of CuPy's copy against 82–85.5% for the 4-row tiles", LADDER,
             lambda r: (min(of_copy(r, n) for n in EIGHT_ROWS), max(of_copy(r, n) for n in EIGHT_ROWS),
                        min(of_copy(r, n) for n in FOUR_ROWS), max(of_copy(r, n) for n in FOUR_ROWS)),
             [(0.87, 0.925)] * 2 + [(0.82, 0.856)] * 2, unit="%", belongs_to="NVIDIA H200"),
    Analytic("both hold 2,048 threads of 8 loads each on an SM",
             lambda: loads_in_flight_per_sm(PADDED_32X4) + loads_in_flight_per_sm(PADDED_64), [(2048, 2048), (8, 8)] * 2),
    Measured("yet differ by about 3 points", LADDER, lambda r: points(r, PADDED_64, PADDED_32X4), (2.4, 3.6),
             unit=" points"),
    Measured("on the H200 the swizzled tiles trail the padded ones by 2–4 points", LADDER,
             lambda r: (points(r, PADDED, SWIZZLED), points(r, PADDED_64, SWIZZLED_64)), [(1.8, 4.2)] * 2,
             unit=" points", belongs_to="NVIDIA H200"),
    Measured("although the profiler counts fewer residual conflicts for them", LADDER, swizzled_fewer_conflicts,
             [(0, 0.95)] * 2, unit="×"),
    Measured("the conflict-free tiles above count 1.01–1.12", LADDER, conflict_free_ncu_both,
             [(1.0, 1.125)] * 2, unit=" wavefronts/instruction"),   # every tile between 1.01 and 1.12, rounded
    Measured("the 32 × 32 tile's column reads 32.5", LADDER, unpadded_ncu_loads, (32.4, 32.6),
             unit=" wavefronts/instruction"),
    Measured("on the H200 the best tile here reaches about 91% of the copy", LADDER,
             lambda r: of_copy(r, lab.best_transpose(r).name), (0.89, 0.93), unit="%", belongs_to="NVIDIA H200"),
    Measured("a transpose moves its bytes at close to copy speed", LADDER,
             lambda r: of_copy(r, lab.best_transpose(r).name), (0.85, 1.0), unit="%"),
    Analytic("holding it to 1.25× the reference solution's time", lambda: catalog.TRANSPOSE.max_slowdown,
             (1.25, 1.25), unit="×"),
    # the wide probe (banks.wide_probe)
    Measured("Every 16-byte pattern takes the wavefronts the model predicts: 4 for a row, 8 at stride 2, 32 down a "
             "column at pitch 32 and 4 at pitch 33, and 2 wherever lanes n and n ^ 1 or n and n ^ 2 share an address "
             "(a broadcast included), but 4 when the lanes that share are 8 or 16 apart", WIDE,
             lambda r: tuple(wide_counted(r, name) for name in WIDE_16B),
             [(w - 0.02, w + 0.02) for w in WIDE_16B.values()]),
    Measured("each paired 16-byte pattern ran in about half the row's time", WIDE,
             lambda r: tuple(r.case(name).median_s / r.case("16 B row").median_s
                             for name, w in WIDE_16B.items() if w == 2), [(0.48, 0.56)] * 4, unit="×"),
    Measured("ncu counted 1 when lanes n and n ^ 1 share, a broadcast included, and 2 when lanes 16 apart share", WIDE,
             lambda r: tuple(wide_counted(r, f"8 B {p}") for p in ("lanes n, n ^ 1 share", "broadcast", "lanes 16 apart share")),
             [(0.98, 1.02), (0.98, 1.02), (1.98, 2.02)]),
    Measured("The naive kernel sends the L2 eight times the matrix in write sectors, one sector per L2 request", LADDER,
             lambda r: (global_row(r, "naive (no shared memory)")["ncu L2 write MB (sectors × 32 B)"]
                        / global_row(r, "naive (no shared memory)")["matrix MB"],
                        global_row(r, "naive (no shared memory)")["ncu L2 write sectors/request"]),
             [(7.95, 8.05), (1, 1.01)]),
    Measured("On the H200 that keeps the L2 about 87% busy for the whole run; the conflict-free tiles keep it about as "
             "busy, but finish in about a sixth of the time", LADDER,
             lambda r: (global_row(r, "naive (no shared memory)")["ncu L2 busy %"],
                        min(global_row(r, n)["ncu L2 busy %"] for n in FOUR_ROWS + EIGHT_ROWS),
                        max(global_row(r, n)["ncu L2 busy %"] for n in FOUR_ROWS + EIGHT_ROWS),
                        r.case("naive (no shared memory)").median_s / r.case(PADDED).median_s),
             [(86, 88), (78, 90), (78, 90), (5.8, 7.0)], unit="%", belongs_to="NVIDIA H200"),
    Measured("the naive kernel makes about 67 M write requests of one sector each, the tiles about 2.1 M of four "
             "sectors each", LADDER,
             lambda r: (l2_write_requests(r, "naive (no shared memory)") / 1e6,
                        global_row(r, "naive (no shared memory)")["ncu L2 write sectors/request"],
                        *(l2_write_requests(r, n) / 1e6 for n in FOUR_ROWS + EIGHT_ROWS),
                        *(global_row(r, n)["ncu L2 write sectors/request"] for n in FOUR_ROWS + EIGHT_ROWS)),
             [(66.5, 67.5), (1, 1.01)] + [(2.05, 2.15)] * len(FOUR_ROWS + EIGHT_ROWS)
             + [(3.99, 4.01)] * len(FOUR_ROWS + EIGHT_ROWS), unit=" M"),
    Measured("on the H200 the naive kernel's come at about 69 G requests per second", LADDER,
             lambda r: l2_write_requests(r, "naive (no shared memory)") / r.case("naive (no shared memory)").median_s
             / 1e9, (66, 72), unit=" G/s", belongs_to="NVIDIA H200"),
    Measured("the naive kernel reads about a fifth more from DRAM than the matrix holds, where the tiles read about "
             "the matrix", LADDER,
             lambda r: (global_row(r, "naive (no shared memory)")["ncu DRAM read MB"]
                        / global_row(r, "naive (no shared memory)")["matrix MB"],
                        *(global_row(r, n)["ncu DRAM read MB"] / global_row(r, n)["matrix MB"]
                          for n in FOUR_ROWS + EIGHT_ROWS)),
             [(1.12, 1.3)] + [(0.95, 1.05)] * len(FOUR_ROWS + EIGHT_ROWS), unit="×"),
]


def l2_write_requests(r, name: str) -> float:
    """L2 write requests of one transpose: its write sectors over its sectors per request."""
    row = global_row(r, name)
    return row["ncu L2 write MB (sectors × 32 B)"] * 1e6 / 32 / row["ncu L2 write sectors/request"]


def global_row(r, name: str) -> dict:
    """``lab.transpose_global_rows``'s row for one transpose (its ncu L2 columns where the run has them)."""
    return next(row for row in lab.transpose_global_rows(r) if row["case"] == name)



def wide_counted(r, name: str) -> float:
    """ncu's shared-memory wavefronts per load instruction for one pattern of banks.wide_probe."""
    m = r.case(name).extra["ncu"]
    return m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / m["smsp__sass_inst_executed_op_shared_ld.sum"]
