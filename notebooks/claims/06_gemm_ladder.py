"""Claims of 06_gemm_ladder's prose (see course_lib.measure.claims): each is checked against the record
and against the live run committed with the notebook."""
from course_lib.core import hardware
from course_lib.exercises import gemm_ladder as exercises
from course_lib.exercises.kernel import catalog
from course_lib.labs import gemm_ladder as lab
from course_lib.launch import gemm_fp32
from course_lib.measure import sass
from course_lib.measure.claims import Analytic, Given, Measured
from course_lib.models import memory, tiling

LADDER, PROFILE, BF16, CEILINGS = "gemm.fp32_ladder", "gemm.profile", "gemm.bf16_mma", "hopper.ceilings"
CUBLAS_PROFILE = "gemm.cublas_profile"
H200 = "NVIDIA H200"
N = 4096                                     # the profile's size
STEPS = [st.kernel for st in lab.LADDER]     # step k is STEPS[k - 1]
MMA_CASE = "mma.sync m16n8k16, registers"


# --------------------------------------------------------------------------- the profile (gemm.profile)

def ncu(r, step: int | None = None, **bf16) -> dict:
    """ncu's metrics of fp32 step ``step``, or of the bf16 launch with these params (copies, grouped, n)."""
    if step is not None:
        return next(c for c in r.cases if c.params["kernel"] == STEPS[step - 1]).extra["ncu"]
    return next(c for c in r.cases if c.params["kernel"] == "bf16_gemm_mma"
                and all(c.params.get(k) == v for k, v in bf16.items())).extra["ncu"]


BF16_LAUNCHES = [dict(copies="cp.async", grouped=True, n=4096), dict(copies="tma", grouped=True, n=4096),
                 dict(copies="tma", grouped=False, n=4096), dict(copies="tma", grouped=True, n=8192),
                 dict(copies="tma", grouped=False, n=8192)]
CP_ASYNC, TMA = BF16_LAUNCHES[0], BF16_LAUNCHES[1]


def stall(m: dict, reason: str) -> float:
    """The share of warp cycles (%) stalled for ``reason`` (the stall table's numbers)."""
    return m[f"smsp__warp_issue_stalled_{reason}_per_warp_active.pct"] or 0.0


def top_two(m: dict) -> list[str]:
    return sorted(lab.STALLS, key=lambda s: -stall(m, s))[:2]


def issue(m: dict) -> float:
    return m["smsp__issue_active.avg.pct_of_peak_sustained_active"]


def fma(m: dict) -> float:
    return m["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"]


def tensor(m: dict) -> float:
    return m["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]


def conflicts(m: dict) -> float:
    """Bank-conflict wavefronts over all shared wavefronts (the memory table's "of them bank conflicts")."""
    return m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] / m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]


def wavefronts_m(m: dict) -> float:
    return m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] / 1e6


def l2_gb(m: dict) -> float:
    return m["lts__t_bytes.sum"] / 1e9


def dram(m: dict) -> float:
    return m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]


def over_compulsory(m: dict, n: int = N, b: int = 4) -> float:
    """DRAM bytes over the compulsory 3·n²·b (the memory table's last column)."""
    return dram(m) / (3.0 * b * n * n)


def ncu_s(m: dict) -> float:
    return m["gpu__time_duration.sum"] * 1e-9


def shorter_than_the_table_at_8192(profile, bf16) -> tuple[float, float]:
    """How much less time than the bf16 table's median (TMA, 8192) the profiled launch and the profile run's own
    timing of the same kernel take."""
    table_s = bf16.case("bf16_gemm_mma (tma), n=8192").median_s
    return (1 - ncu_s(ncu(profile, copies="tma", grouped=True, n=8192)) / table_s,
            1 - profile.case("bf16_gemm_mma (tma), n=8192").median_s / table_s)


def shared_pipe_busy(r, step: int) -> float:
    """Shared wavefronts over the SM cycles of the ncu launch at the boost clock (one wavefront per SM
    cycle, notebook 05's fit): a lower bound on how busy the shared-memory pipe was."""
    spec = hardware.spec(r.gpu)
    m = ncu(r, step)
    return m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] / (ncu_s(m) * spec.sm_count * spec.boost_clock_mhz * 1e6)


def bank_model_over_ncu(r, pairing: bool = True) -> list[float]:
    """ncu's shared wavefronts over the bank model's, steps 3-9 (the model without 16-byte pairing when
    ``pairing`` is False: every access treated as a store, whose phases do not pair)."""
    out = []
    for k in range(3, 10):
        kernel = STEPS[k - 1]
        if pairing:
            model = memory.gemm_fp32_wavefronts(kernel, N).wavefronts
        else:
            warps, _, bm, bn, bk = memory._ladder_accesses(kernel)
            plain = [[memory.SharedAccess(a.addresses_bytes, a.access_bytes, True, a.per_stage) for a in w] for w in warps]
            model = memory._launch_wavefronts(plain, N // bk, (N // bm) * (N // bn)).wavefronts
        out.append(wavefronts_m(ncu(r, k)) * 1e6 / model)
    return out


def load_store_count(kernel: str) -> int:
    c = sass_counts(kernel)
    return c["LDS (shared loads)"] + c["LDG (global loads)"] + c["STS (shared stores)"]


def tile_model_gb(r, step: int) -> float:
    c = next(c for c in r.cases if c.params["kernel"] == STEPS[step - 1])
    return lab.model_l2_bytes(c) / 1e9


def later_rungs_dram(r):
    """Steps 5-9: DRAM GB (smallest, largest), ncu time in ms (shortest, longest), DRAM GB/s (lowest,
    highest), and the highest as a fraction of the datasheet HBM bandwidth."""
    ms = [ncu(r, k) for k in range(5, 10)]
    gb = [dram(m) / 1e9 for m in ms]
    t = [ncu_s(m) * 1e3 for m in ms]
    bw = [dram(m) / ncu_s(m) / 1e9 for m in ms]
    return min(gb), max(gb), min(t), max(t), min(bw), max(bw), max(bw) * 1e9 / hardware.spec(r.gpu).hbm_bandwidth_bytes_per_s


# --------------------------------------------------------------------------- the timed ladder (gemm.fp32_ladder)

def gflops(r, step: int, n: int) -> float:
    return r.case(f"{STEPS[step - 1]}, n={n}").flop_per_s / 1e9


def worst_step_gain(r) -> float:
    """The smallest speed-up of a rung over the rung before it, over every pair measured at 4096 and 8192."""
    gains = []
    for n in (4096, 8192):
        measured = [k for k in range(1, 10) if any(c.name == f"{STEPS[k - 1]}, n={n}" for c in r.cases)]
        gains += [gflops(r, b, n) / gflops(r, a, n) for a, b in zip(measured, measured[1:])]
    return min(gains)


# --------------------------------------------------------------------------- bf16 (gemm.bf16_mma)

def tma_over_cp_async(r) -> tuple:
    """Per size, the TMA kernel's speed over the cp.async kernel's, minus 1."""
    sizes = sorted({c.params["sizes"] for c in r.cases})
    return tuple(r.case(f"bf16_gemm_mma (tma), n={n}").flop_per_s / r.case(f"bf16_gemm_mma (cp.async), n={n}").flop_per_s - 1
                 for n in sizes)


# The notebook measures the mma.sync ceiling (hopper.ceilings) in the same run as gemm.bf16_mma and sets the
# kernel against it: such a claim names both, and its quantity takes one result of each.
AGAINST_MMA = (BF16, CEILINGS)


def mma_ceiling(ceilings) -> float:
    return ceilings.case(MMA_CASE).flop_per_s


def instruction_share(r, ceilings) -> tuple:
    """(share of the TMA kernel's gap to cuBLAS at 4096 that the mma.sync ceiling explains, the rest)."""
    lib, mine = r.case("cuBLAS bf16, n=4096"), r.case("bf16_gemm_mma (tma), n=4096")
    at_ceiling = mine.flop / mma_ceiling(ceilings)
    share = (at_ceiling - lib.median_s) / (mine.median_s - lib.median_s)
    return share, 1 - share


# --------------------------------------------------------------------------- the compiler (no GPU)

def sass_counts(kernel: str) -> dict:
    return next(row for row in sass.mix_rows(gemm_fp32.FP32, [kernel], "sm_90"))


def resources(step: int) -> dict:
    return lab.resources_rows(H200, "sm_90")[step - 1]     # step 10 is the bf16 kernel


def warps_per_sm(step: int) -> int:
    row = resources(step)
    return row["blocks/SM"] * row["threads"] // 32


CLAIMS = [
    # The tile calculator and the model table.
    Given("the 255-register limit", "CUDA's per-thread register limit (CUDA C++ Programming Guide, compute capabilities table)"),

    # The compiler's report and the SASS (static, for sm_90).
    Analytic("64 or 128 accumulators per thread leave room for only 8 or 16 warps per SM",
             lambda: (min(warps_per_sm(k) for k in (5, 6, 7, 8)), max(warps_per_sm(k) for k in (5, 6, 7, 8)),
                      warps_per_sm(9)), [(16, 16), (16, 16), (8, 8)]),
    Analytic("steps 1–2 issue two global loads (LDG) per FFMA",
             lambda: tuple(sass_counts(k)["LDG (global loads)"] / sass_counts(k)["FFMA"] for k in STEPS[:2]),
             [(2, 2)] * 2),
    Analytic("step 3 moves them to shared memory (LDS) at one or more per FFMA",
             lambda: sass_counts(STEPS[2])["LDS (shared loads)"] / sass_counts(STEPS[2])["FFMA"], (1, 2)),
    Analytic("from step 5 on, 16 FFMAs or more per shared load, most of them 16-byte",
             lambda: (min(sass_counts(k)["FFMA"] / sass_counts(k)["LDS (shared loads)"] for k in STEPS[4:]),
                      min(sass_counts(k)["of which LDS.128"] / sass_counts(k)["LDS (shared loads)"] for k in STEPS[4:])),
             [(16, 1e9), (0.5, 1)]),

    Analytic("its static load and store instructions go from 60 to 47",
             lambda: (load_store_count(STEPS[4]), load_store_count(STEPS[5])), [(60, 60), (47, 47)]),
    Analytic("Step 5 already reads shared memory with 16-byte loads only, 32 LDS.128, the same as step 6",
             lambda: (sass_counts(STEPS[4])["LDS (shared loads)"], sass_counts(STEPS[4])["of which LDS.128"],
                      sass_counts(STEPS[5])["of which LDS.128"]), [(32, 32)] * 3),

    # The timed ladder.
    Measured("Each rung pays off at the large sizes", LADDER, worst_step_gain, (1.0, 1e9), unit="×"),
    Measured("At n = 1024 the big tiles backfire", LADDER,
             lambda r: (gflops(r, 5, 1024) / gflops(r, 4, 1024), gflops(r, 9, 1024) / gflops(r, 8, 1024)),
             [(0, 0.95)] * 2, unit="×"),
    Analytic("(1024/128)² = 64 blocks and step 9's 256×128 tile into 32, for an H200's 132 SMs",
             lambda: ((1024 // 128) ** 2, (1024 // 256) * (1024 // 128), hardware.spec(H200).sm_count),
             [(64, 64), (32, 32), (132, 132)]),
    Measured("step 4's 64×64 tile makes 256 blocks and beats step 5 there", LADDER,
             lambda r: ((1024 // 64) ** 2, gflops(r, 4, 1024) / gflops(r, 5, 1024)), [(256, 256), (1.1, 1e9)]),

    # The profile: steps 1-2.
    Analytic("the tile model says the blocks would load over 500 GB from L2",
             lambda: 2.0 * N ** 3 * 4 / 1e9, (500, 1e9), unit=" GB"),
    Measured("ncu counts about 20 GB", PROFILE, lambda r: (l2_gb(ncu(r, 1)), l2_gb(ncu(r, 2))), [(17, 24)] * 2,
             unit=" GB"),
    Measured("DRAM still moves 20–45 times the compulsory bytes", PROFILE,
             lambda r: (over_compulsory(ncu(r, 1)), over_compulsory(ncu(r, 2))), [(20, 45)] * 2, unit="×"),
    Measured("ncu also counts about 1.05 M shared wavefronts for these two kernels", PROFILE,
             lambda r: (wavefronts_m(ncu(r, 1)), wavefronts_m(ncu(r, 2))), [(1.0, 1.1)] * 2, unit=" M"),
    Measured("2 for each of the 524,288 warps launched", PROFILE,
             lambda r: (N * N // 32, wavefronts_m(ncu(r, 1)) * 1e6 / (N * N // 32),
                        wavefronts_m(ncu(r, 2)) * 1e6 / (N * N // 32)), [(524288, 524288), (2, 2), (2, 2)]),
    Measured("The naive rung's warps spend almost all their cycles on a full global-memory queue", PROFILE,
             lambda r: (stall(ncu(r, 1), "lg_throttle"), float(top_two(ncu(r, 1))[0] == "lg_throttle")),
             [(85, 100), (1, 1)], unit="%"),
    Measured("Coalescing turns that into waiting for loads", PROFILE,
             lambda r: float(top_two(ncu(r, 2))[0] == "long_scoreboard"), (1, 1)),

    # Steps 3-4.
    Measured("21 GB against 17 at step 3, 10 against 9 at step 4", PROFILE,
             lambda r: (l2_gb(ncu(r, 3)), tile_model_gb(r, 3), l2_gb(ncu(r, 4)), tile_model_gb(r, 4)),
             [(20.5, 21.5), (16.5, 17.5), (9.5, 10.5), (8.5, 9.5)], unit=" GB"),
    Measured("The top stall is now a full shared-memory queue", PROFILE,
             lambda r: tuple(float(top_two(ncu(r, k))[0] == "mio_throttle") for k in (3, 4)), [(1, 1)] * 2),
    Analytic("40 shared loads per 32 FFMAs at step 3 and 24 per 64 at step 4",
             lambda: (sass_counts(STEPS[2])["LDS (shared loads)"], sass_counts(STEPS[2])["FFMA"],
                      sass_counts(STEPS[3])["LDS (shared loads)"], sass_counts(STEPS[3])["FFMA"]),
             [(40, 40), (32, 32), (24, 24), (64, 64)]),
    Analytic("because the compiler reads A's broadcast values 16 bytes at a time (LDS.128)",
             lambda: tuple(sass_counts(k)["of which LDS.128"] for k in STEPS[2:4]), [(1, 1e9)] * 2),
    Measured("Step 3's small 32×32 tiles also move about as many DRAM bytes as the naive rung", PROFILE,
             lambda r: dram(ncu(r, 3)) / dram(ncu(r, 1)), (0.9, 1.1), unit="×"),
    Measured("twice what step 2 moves with as many blocks in the same order", PROFILE,
             lambda r: dram(ncu(r, 3)) / dram(ncu(r, 2)), (1.8, 2.2), unit="×"),
    Analytic("with as many blocks in the same order",   # steps 2 and 3 share one launch contract
             lambda: float(gemm_fp32.fp32_geometry("sgemm_coalesced", N, N) == gemm_fp32.fp32_geometry("sgemm_smem", N, N)), (1, 1)),

    Measured("keep it about 82% busy at the boost clock", PROFILE, lambda r: shared_pipe_busy(r, 3), (0.78, 0.86),
             unit="%"),
    Measured("The model lands within about 1% of ncu at every rung that uses shared memory", PROFILE,
             lambda r: max(abs(x - 1) for x in bank_model_over_ncu(r)), (0, 0.015), unit="%"),
    Measured("it would overcount every rung from step 3 on, by 15% to 64%", PROFILE,
             lambda r: (min(1 / x - 1 for x in bank_model_over_ncu(r, False)),
                        max(1 / x - 1 for x in bank_model_over_ncu(r, False))), [(0.13, 0.17), (0.62, 0.66)],
             unit="%"),
    Analytic("Exercise 1's layout takes 12 wavefronts per warp and k, against step 5's 20",
             lambda: (exercises.layout_wavefronts(), exercises.layout_wavefronts(exercises.reg2d_owner)),
             [(12, 12), (20, 20)]),

    # Steps 5-7.
    Measured("nearly half of them (step 5), then over a third (step 6), are bank-conflict replays", PROFILE,
             lambda r: (conflicts(ncu(r, 5)), conflicts(ncu(r, 6))), [(0.42, 0.5), (0.334, 0.42)], unit="%"),
    Measured("From step 5 on, DRAM moves about twice the compulsory bytes", PROFILE,
             lambda r: (min(over_compulsory(ncu(r, k)) for k in range(5, 10)),
                        max(over_compulsory(ncu(r, k)) for k in range(5, 10))), [(1.8, 2.2)] * 2, unit="×"),
    Measured("The warp layout drops the conflicts to about 1%", PROFILE, lambda r: conflicts(ncu(r, 7)),
             (0.004, 0.015), unit="%"),
    Measured("the largest stall left is waiting for each stage's global loads: about a fifth of the warp cycles",
             PROFILE, lambda r: (stall(ncu(r, 7), "long_scoreboard"),
                                 float(top_two(ncu(r, 7)) == ["not_selected", "long_scoreboard"])),
             [(17, 25), (1, 1)], unit="%"),

    # Steps 8-9.
    Measured("waiting for global loads drops out of the top two", PROFILE,
             lambda r: tuple(float("long_scoreboard" not in top_two(ncu(r, k))) for k in (8, 9)), [(1, 1)] * 2),
    Measured('The top reason becomes "ready, another warp issued"', PROFILE,
             lambda r: tuple(float(top_two(ncu(r, k))[0] == "not_selected") for k in (8, 9)), [(1, 1)] * 2),
    Measured("the schedulers issue on about three quarters of their cycles, with the FMA pipe busy 60–70% of the "
             "time. About a quarter of the cycles issue nothing.", PROFILE,
             lambda r: (issue(ncu(r, 8)), issue(ncu(r, 9)), fma(ncu(r, 8)), fma(ncu(r, 9)),
                        100 - issue(ncu(r, 8)), 100 - issue(ncu(r, 9))),
             [(70, 80)] * 2 + [(60, 70)] * 2 + [(20, 30)] * 2, unit="%"),
    Analytic("Its warps execute about 100 M LDS.128 (6 per k)",
             # 16 A + 8 B floats per k per thread = 6 float4; 4096 k; 8 warps in each 256x128 block.
             lambda: (6 * N * (N // 256) * (N // 128) * 8 / 1e6, sass_counts(STEPS[8])["of which LDS.128"] / 8),
             [(95, 105), (6, 6)], unit=" M"),
    Analytic("each would need at least 4 wavefronts, over 400 M in all",
             lambda: 4 * 6 * N * (N // 256) * (N // 128) * 8 / 1e6, (400, 1e9), unit=" M"),
    Measured("but ncu counts about 294 M, loads and stores together", PROFILE, lambda r: wavefronts_m(ncu(r, 9)),
             (290, 298), unit=" M"),
    Measured("its wavefronts keep the pipe only about 35% busy at the boost clock, and its warps almost never stall on "
             "a full shared-memory queue", PROFILE,
             lambda r: (shared_pipe_busy(r, 9), stall(ncu(r, 9), "mio_throttle")), [(0.32, 0.38), (0, 0.5)],
             unit="%"),

    # The bf16 kernel in the profile.
    Measured("keeps the tensor pipe busy about 65–85% of the time", PROFILE,
             lambda r: (min(tensor(ncu(r, **p)) for p in BF16_LAUNCHES), max(tensor(ncu(r, **p)) for p in BF16_LAUNCHES)),
             [(64, 86)] * 2, unit="%"),
    Measured("about 40%), the second a busy math pipe", PROFILE,
             lambda r: (min(stall(ncu(r, **p), "wait") for p in BF16_LAUNCHES),
                        max(stall(ncu(r, **p), "wait") for p in BF16_LAUNCHES),
                        min(float(top_two(ncu(r, **p)) == ["wait", "math_pipe_throttle"]) for p in BF16_LAUNCHES)),
             [(36, 44), (36, 44), (1, 1)], unit="%"),
    Analytic("each warp issues 32 independent ones per 16-deep step, one per 16×8 tile of its 64×64 accumulator tile",
             lambda: (64 // 16) * (64 // 8), (32, 32)),
    Measured("the tensor pipe is busier (78% against 67–68%) at the same share of busy issue slots", PROFILE,
             lambda r: (tensor(ncu(r, **TMA)), tensor(ncu(r, **CP_ASYNC)), issue(ncu(r, **TMA)) / issue(ncu(r, **CP_ASYNC))),
             [(77, 79), (66.5, 68.5), (0.95, 1.05)], unit="%"),
    Measured("The grouped tile order makes no measurable difference at 4096: the same time, and DRAM moves about "
             "twice the compulsory bytes in either order", PROFILE,
             lambda r: (ncu_s(ncu(r, copies="tma", grouped=False, n=4096)) / ncu_s(ncu(r, **TMA)),
                        over_compulsory(ncu(r, **TMA), b=2), over_compulsory(ncu(r, copies="tma", grouped=False, n=4096), b=2)),
             [(0.98, 1.02), (1.9, 2.3), (1.9, 2.3)], unit="×"),
    Given("At 8192, B alone is 128 MiB", "a dimension: 8192 × 8192 bf16 elements of 2 bytes"),
    # 7.1-7.6% in a live H200 run of 2026-12-07 on another host, 8.2-8.9% on an H100 that day (neither kept)
    Measured("at 8192 the profiled launch, and the same kernel timed alone, take 7–14% less time than the bf16 "
             "table's median", (PROFILE, BF16), shorter_than_the_table_at_8192, [(0.07, 0.14)] * 2, unit="%"),
    Measured("without it DRAM moves about 16 times the compulsory bytes, with it about 4 times, and the grouped kernel "
             "takes 7–8% less time", PROFILE,
             lambda r: (over_compulsory(ncu(r, copies="tma", grouped=False, n=8192), 8192, 2),
                        over_compulsory(ncu(r, copies="tma", grouped=True, n=8192), 8192, 2),
                        1 - ncu_s(ncu(r, copies="tma", grouped=True, n=8192))
                        / ncu_s(ncu(r, copies="tma", grouped=False, n=8192))),
             [(14.5, 16.5), (3.6, 4.6), (0.065, 0.085)], unit="×"),

    # Reconcile.
    Given("the other is the FP32 datasheet peak, 2 FLOPs × 128 FP32 lanes × SMs × boost clock",
          "the datasheet's FP32 peak as NVIDIA computes it (course_lib.core.hardware, H200 spec table)"),
    Measured("DRAM moves about 0.4 GB in 3.1–5.2 ms (the profile above): 75–130 GB/s, under 5% of HBM's bandwidth",
             PROFILE, later_rungs_dram,
             [(0.37, 0.43), (0.37, 0.43), (3.05, 5.25), (3.05, 5.25), (75, 130), (75, 130), (0, 0.05)]),
    Measured("a top-two stall at steps 2–4, 6 and 7", PROFILE,
             lambda r: tuple(float("long_scoreboard" in top_two(ncu(r, k))) for k in (2, 3, 4, 6, 7)), [(1, 1)] * 5),
    Measured("how many shared wavefronts are conflict replays (steps 4–6)", PROFILE,
             lambda r: tuple(conflicts(ncu(r, k)) for k in (4, 5, 6)), [(0.1, 1)] * 3, unit="%"),
    Analytic("per k, 6 float4 shared-memory loads feeding 128 FFMAs, plus a barrier every 8 k",
             lambda: (sass_counts(STEPS[8])["of which LDS.128"] / 8, sass_counts(STEPS[8])["FFMA"] / 8),
             [(6, 6), (128, 128)]),
    Analytic("With over 200 registers per thread only one block of 8 warps fits on an SM",
             lambda: (resources(9)["registers"], resources(9)["blocks/SM"], warps_per_sm(9)),
             [(201, 255), (1, 1), (8, 8)]),

    # The bf16 kernel.
    Analytic("4,096 FLOPs in one instruction", lambda: 2 * 16 * 8 * 16, (4096, 4096)),
    Analytic("32 FLOP per byte a warp reads from shared memory, 64 per byte a block loads from L2",
             lambda: (tiling.stage_intensity(64, 64, 2), tiling.stage_intensity(128, 128, 2)), [(32, 32), (64, 64)]),
    Analytic("per thread per tile (64 warp instructions per block)",
             # a 128x64 tile of A and a 64x128 tile of B, bf16, in 16-byte chunks, over 128 threads (4 warps)
             lambda: ((128 * 64 + 64 * 128) * 2 / 16 / 128, (128 * 64 + 64 * 128) * 2 / 16 / 128 * 4), [(16, 16), (64, 64)]),
    Measured("run 10–20% faster", BF16, tma_over_cp_async, [(0.10, 0.20)] * 3, unit="%"),
    Measured("ncu finds them 22% busy with either engine", PROFILE,
             lambda r: (issue(ncu(r, **CP_ASYNC)), issue(ncu(r, **TMA))), [(21.5, 22.5)] * 2, unit="%"),
    Measured("printed below), fewer with the TMA", PROFILE,
             lambda r: (stall(ncu(r, **TMA), "mio_throttle") / stall(ncu(r, **CP_ASYNC), "mio_throttle"),
                        stall(ncu(r, **TMA), "short_scoreboard") / stall(ncu(r, **CP_ASYNC), "short_scoreboard")),
             [(0, 0.8)] * 2, unit="×"),
    Measured("peaks at about 640 TFLOP/s and", CEILINGS, lambda r: mma_ceiling(r) / 1e12, (610, 650),
             unit=" TFLOP/s"),
    Measured("at about 980. At 4096³", CEILINGS,
             lambda r: max(c.flop_per_s for c in r.cases if c.name.startswith("wgmma")) / 1e12, (955, 985),
             unit=" TFLOP/s"),
    Measured("this kernel (TMA) reaches about three quarters of the", AGAINST_MMA,
             lambda r, ceilings: r.case("bf16_gemm_mma (tma), n=4096").flop_per_s / mma_ceiling(ceilings), (0.7, 0.8),
             unit="%"),
    Measured("About 30% of the gap is the instruction's, 70% this kernel's", AGAINST_MMA, instruction_share,
             [(0.25, 0.35), (0.65, 0.75)], unit="%"),
    Analytic("over 250 registers in all, so only two blocks of 4 warps fit on an SM",
             lambda: (resources(10)["registers"], resources(10)["blocks/SM"], resources(10)["threads"] // 32),
             [(251, 255), (2, 2), (4, 4)]),

    # Exercises.
    Given("about 100 KiB of shared memory per SM", "the L4's (compute capability 8.9) shared memory per SM, 100 KB, "
          "CUDA C++ Programming Guide's table of compute capabilities"),
    Analytic("At B_K = 32 four stages take 64 KiB, so only one block fits in the L4's 100 KiB. At B_K = 16 they take "
             "32 KiB, and two blocks fit",
             lambda: (tiling.staging_bytes(128, 128, 32, 2, stages=4) / 1024, tiling.staging_bytes(128, 128, 16, 2, stages=4) / 1024,
                      tiling.tile_estimate(128, 128, 32, 4, "bf16", 256, 64, hardware.spec("l4")).residency.resident_blocks,
                      tiling.tile_estimate(128, 128, 16, 4, "bf16", 256, 64, hardware.spec("l4")).residency.resident_blocks),
             [(64, 64), (32, 32), (1, 1), (2, 2)], unit=" KiB"),
    Analytic("both must be coalesced, at least 80%) and the wavefronts per shared load (at most 2",
             lambda: tuple(c.min_used * 100 if isinstance(c, catalog.SectorUse) else c.max_per_instruction
                           for c in catalog.TILE_GEMM.counts),
             [(80, 80), (80, 80), (2, 2)], unit="%"),
    # cuBLAS under the ladder's metrics (gemm.cublas_profile) beside step 9 (gemm.profile)
    Measured("one block of 8 warps per SM (12% achieved occupancy, as step 9), and the same two top stalls, another "
             "warp issued and a shared-memory load", (CUBLAS_PROFILE, PROFILE),
             lambda c, p: (occupancy_pct(cublas(c, "fp32")), occupancy_pct(ncu(p, 9)),
                           float(top_two(cublas(c, "fp32")) == ["not_selected", "short_scoreboard"] == top_two(ncu(p, 9)))),
             [(11.5, 13), (11.5, 13), (1, 1)], unit="%"),
    Measured("on the H200, on 90% of the schedulers' cycles against step 9's 76%, and the FMA pipe is busy 79% of the "
             "time against 68%. Both ratios, 1.16–1.18, match the ratio of their times, 1.19", (CUBLAS_PROFILE, PROFILE),
             lambda c, p: (issue(cublas(c, "fp32")), issue(ncu(p, 9)), fma(cublas(c, "fp32")), fma(ncu(p, 9)),
                           fma(cublas(c, "fp32")) / fma(ncu(p, 9)), issue(cublas(c, "fp32")) / issue(ncu(p, 9)),
                           ncu_s(ncu(p, 9)) / ncu_s(cublas(c, "fp32"))),
             [(89, 91), (75, 77), (78.5, 80), (67.5, 69), (1.15, 1.19), (1.15, 1.19), (1.17, 1.21)], unit="%",
             belongs_to="NVIDIA H200"),
    Measured("the FMA pipe's share over the issue share is 0.88 and 0.89", (CUBLAS_PROFILE, PROFILE),
             lambda c, p: (fma(cublas(c, "fp32")) / issue(cublas(c, "fp32")), fma(ncu(p, 9)) / issue(ncu(p, 9))),
             [(0.87, 0.9), (0.87, 0.9)]),
    Measured("its tensor pipe is busy 95% of the time against 78% for the course's TMA kernel above, and its largest "
             "stall is at barriers (31%)", (CUBLAS_PROFILE, PROFILE),
             lambda c, p: (tensor(cublas(c, "bf16")), tensor(ncu(p, **TMA)), float(top_two(cublas(c, "bf16"))[0] == "barrier"),
                           stall(cublas(c, "bf16"), "barrier")),
             [(94, 96), (77, 79), (1, 1), (29, 33)], unit="%"),
]


def cublas(r, dtype: str) -> dict:
    """ncu's metrics of cuBLAS's GEMM kernel for one dtype (gemm.cublas_profile)."""
    return next(c for c in r.cases if c.params["dtype"] == dtype).extra["ncu"]


def occupancy_pct(m: dict) -> float:
    return m["sm__warps_active.avg.pct_of_peak_sustained_active"]

