"""Notebook 06's evidence: what Nsight Compute measures in each rung of the GEMM ladder.

Every rung of the fp32 ladder and the bf16 ``mma.sync`` kernel (both copy engines, and with the
grouped tile order turned off) is checked, timed and then profiled once under ncu: its stall reasons,
pipe utilisation, shared-memory wavefronts and bank conflicts, L2 and DRAM bytes and achieved
occupancy. The row builders turn those counters into the sentences' numbers: which stall dominates,
how far L2 and DRAM traffic sit from the tile model and from the compulsory bytes.
"""
from __future__ import annotations

from . import cuda
from .evidence import Case
from .experiments import beside_reference, check_close, experiment, kernel_launch_record, require_passed
from .lab_gemm import BF16, BF16_MIN_CC, FP32, LADDER, bf16_geometry, fp32_geometry, macro_defaults

STALLS = ("long_scoreboard", "barrier", "mio_throttle", "short_scoreboard", "math_pipe_throttle", "wait",
          "not_selected", "lg_throttle")
STALL_WORDS = {"long_scoreboard": "waiting for a global load", "barrier": "waiting at a barrier",
               "mio_throttle": "shared-memory queue full", "short_scoreboard": "waiting for a shared load",
               "math_pipe_throttle": "math pipe busy", "wait": "fixed instruction latency",
               "not_selected": "ready, another warp issued", "lg_throttle": "global-memory queue full"}
METRICS = ["gpu__time_duration.sum",
           "sm__warps_active.avg.pct_of_peak_sustained_active",
           "smsp__issue_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
           "lts__t_bytes.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           *(f"smsp__warp_issue_stalled_{s}_per_warp_active.pct" for s in STALLS)]
NO_GROUPING = {"TC_GROUP_M": 1}   # block rows taken one after another: each row of blocks streams all of B


def _variants(n: int, kernels: list[str], bf16: list[list]) -> list[dict]:
    return [{"kernel": k, "n": n} for k in kernels] + [
        {"kernel": "bf16_gemm_mma", "copies": c, "grouped": bool(g), "n": size} for c, g, size in bf16]


def _function(v: dict):
    from .lab_gemm import defines_to_options

    if v["kernel"] != "bf16_gemm_mma":
        return cuda.kernel(FP32, v["kernel"])
    return cuda.compile_family(BF16, None, defines_to_options(None if v["grouped"] else NO_GROUPING)).function(
        "bf16_gemm_mma")


class _Operands(dict):
    """A, B (fp32 and bf16 bits) and the outputs for each size, made once."""

    def __missing__(self, n: int):
        import cupy

        from .lab_gemm import _random, to_bf16_bits

        a, b = _random((n, n), 31), _random((n, n), 32)
        self[n] = (a, b, to_bf16_bits(a), to_bf16_bits(b), cupy.empty((n, n), dtype=cupy.float32),
                   cupy.empty((n, n), dtype=cupy.uint16))
        return self[n]


def _launch(v: dict, fn, operands: _Operands) -> None:
    from .lab_gemm import run_bf16, run_fp32

    a, b, a16, b16, c32, c16 = operands[v["n"]]
    if v["kernel"] == "bf16_gemm_mma":
        run_bf16(a16, b16, c16, fn, None if v["grouped"] else NO_GROUPING, v["copies"])
    else:
        run_fp32(v["kernel"], a, b, c32, fn)


def profile_launches(variants: list[dict]) -> None:
    """Each variant launched once, in order: what ncu profiles for ``gemm.profile``."""
    import cupy

    operands = _Operands()
    for v in variants:
        _launch(v, _function(v), operands)
    cupy.cuda.Device().synchronize()


@experiment("gemm.profile",
            "Every rung of the fp32 ladder and the bf16 mma.sync kernel (cp.async, TMA, and the TMA without the "
            "grouped tile order, at two sizes; compute capability 8.0+): checked, timed, then profiled once each "
            "by Nsight Compute.",
            n=4096, kernels=[s.kernel for s in LADDER],
            bf16=[["cp.async", 1, 4096], ["tma", 1, 4096], ["tma", 0, 4096], ["tma", 1, 8192], ["tma", 0, 8192]],
            samples=20)
def profile(n: int, kernels: list[str], bf16: list[list], samples: int) -> list[Case]:
    import cupy
    import torch

    from . import profiler
    from .hardware import detect
    from .lab_gemm import _torch_view, bf16_bits_to_float32, bf16_tolerance_rel, fp32_tolerance, runnable_engines
    from .timing import benchmark

    info = detect()
    bf16_runs = float(info.compute_capability) >= BF16_MIN_CC   # below it the fp32 rungs are profiled alone
    variants = [v for v in _variants(n, kernels, bf16) if v["kernel"] != "bf16_gemm_mma"
                or (bf16_runs and v["copies"] in runnable_engines(info.compute_capability, v["n"], v["n"]))]
    operands = _Operands()
    torch.backends.cuda.matmul.allow_tf32 = False
    cases, refs = [], {}
    for v in variants:
        fn, size = _function(v), v["n"]
        bf = v["kernel"] == "bf16_gemm_mma"
        a, b, a16, b16, c32, c16 = operands[size]
        if (size, bf) not in refs:
            refs[size, bf] = cupy.asarray(torch.mm(_torch_view(a16), _torch_view(b16)).float() if bf
                                          else torch.mm(_torch_view(a).double(), _torch_view(b).double()))
        (c16 if bf else c32).fill(0xFFFF if bf else float("nan"))
        _launch(v, fn, operands)
        check = (check_close(bf16_bits_to_float32(c16), refs[size, bf], "cuBLAS bf16 (torch.mm)", bf16_tolerance_rel())
                 if bf else check_close(c32, refs[size, bf], "float64 matmul (cuBLAS dgemm)", fp32_tolerance(size)))
        t = benchmark(lambda: _launch(v, fn, operands), samples, warmup=1)
        if bf:
            grid, block, smem = bf16_geometry(size, size, None if v["grouped"] else NO_GROUPING)
            launch = kernel_launch_record(grid, block, BF16, "bf16_gemm_mma", smem)
            label = f"bf16_gemm_mma ({v['copies']}{', tiles in row order' if not v['grouped'] else ''})"
            bytes_per = 2
        else:
            grid, block = fp32_geometry(v["kernel"], size, size)
            launch, label, bytes_per = kernel_launch_record(grid, block, FP32, v["kernel"]), v["kernel"], 4
        cases.append(require_passed(Case(
            f"{label}, n={size}", v, f"{BF16 if bf else FP32}.{v['kernel']}", list(t.samples_s), 2.0 * size ** 3,
            3.0 * bytes_per * size * size, check, launch, extra={"element_bytes": bytes_per, "n": size})))
    script = f"from course_lib import lab_gemm_profile; lab_gemm_profile.profile_launches({variants!r})"
    profiler.attach_profiles(cases, script, METRICS, "^(sgemm_.*|bf16_gemm_mma)$",
                             [v["kernel"] for v in variants], timeout_s=480)
    return cases


def _tile(case: Case) -> tuple[int, int]:
    """The block tile (B_M, B_N) a case's kernel loads from L2 (B_K 0 rungs: one output per thread)."""
    if case.params["kernel"] == "bf16_gemm_mma":
        d = macro_defaults(BF16)
        return d["TC_BM"], d["TC_BN"]
    step = next(s for s in LADDER if s.kernel == case.params["kernel"])
    return step.block[:2] if step.block[2] else (1, 1)


def model_l2_bytes(case: Case) -> float:
    """Analytic: the bytes a grid's blocks load from L2 when each reads its own tiles of A and B once
    per K step and nothing is reused across blocks: M·N·K·b·(1/B_N + 1/B_M) (rungs without staging:
    every multiply-add loads both operands, 2·M·N·K·b), plus C written once."""
    n, b = case.extra["n"], case.extra["element_bytes"]
    bm, bn = _tile(case)
    return n ** 3 * b * (1 / bn + 1 / bm) + n * n * b


def _label(case: Case) -> str:
    if case.params["kernel"] != "bf16_gemm_mma":
        step = next(s for s in LADDER if s.kernel == case.params["kernel"])
        return f"{step.number} {step.label}"
    return case.name.replace("bf16_gemm_mma", "bf16 mma.sync")


def _stall_share(m: dict, stall: str) -> float:
    """The share of warp cycles (%) a launch's warps spent stalled for ``stall`` (0 if ncu gave none)."""
    return m[f"smsp__warp_issue_stalled_{stall}_per_warp_active.pct"] or 0.0


def _ranked_stalls(m: dict) -> list[str]:
    return sorted(STALLS, key=lambda s: -_stall_share(m, s))


def _conflict_share(m: dict) -> float | None:
    """Bank-conflict wavefronts over all shared wavefronts, or None for a launch with none."""
    wavefronts = m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"]
    return m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] / wavefronts if wavefronts else None


@beside_reference
def stall_rows(result) -> list[dict]:
    """Per kernel: time, achieved occupancy, issue and pipe activity, and the two largest stall reasons."""
    rows = []
    for c in result.cases:
        m = c.extra.get("ncu")
        if not m:
            continue
        pct = lambda key: f"{m[key]:.0f}%"  # noqa: E731
        row = {"kernel": _label(c), "µs (ncu)": m["gpu__time_duration.sum"] / 1e3,
               "achieved occupancy": pct("sm__warps_active.avg.pct_of_peak_sustained_active"),
               "issue slots busy": pct("smsp__issue_active.avg.pct_of_peak_sustained_active"),
               "FMA pipe": pct("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
               "tensor pipe": pct("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")}
        for rank, s in zip(("top stall", "second stall"), _ranked_stalls(m)[:2]):
            row[rank] = f"{STALL_WORDS[s]} ({s}, {_stall_share(m, s):.0f}%)"
        rows.append(row)
    return rows


@beside_reference
def memory_rows(result) -> list[dict]:
    """Per kernel: shared-memory wavefronts and conflicts, L2 bytes against the tile model, DRAM bytes
    against the compulsory 3·n²·b (each input read once, C written once)."""
    rows = []
    for c in result.cases:
        m = c.extra.get("ncu")
        if not m:
            continue
        n, b = c.extra["n"], c.extra["element_bytes"]
        conflicts = _conflict_share(m)
        dram = m["dram__bytes_read.sum"] + m["dram__bytes_write.sum"]
        rows.append({"kernel": _label(c),
                     "shared wavefronts (M)": m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] / 1e6,
                     "of them bank conflicts": "—" if conflicts is None else f"{100 * conflicts:.0f}%",
                     "L2 GB (ncu)": m["lts__t_bytes.sum"] / 1e9,
                     "L2 GB, tile model (analytic)": model_l2_bytes(c) / 1e9,
                     "DRAM GB (ncu)": dram / 1e9,
                     "DRAM ÷ compulsory 3n²b": dram / (3.0 * b * n * n)})
    return rows


def _evidence(m: dict) -> str:
    top = _ranked_stalls(m)[0]
    conflicts = _conflict_share(m) or 0.0
    return (f"top stall: {STALL_WORDS[top]} ({_stall_share(m, top):.0f}%); "
            f"FMA pipe {m['sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active']:.0f}%; "
            f"issue slots {m['smsp__issue_active.avg.pct_of_peak_sustained_active']:.0f}%; "
            f"bank conflicts {100 * conflicts:.0f}% of shared wavefronts")


@beside_reference
def limit_rows(result) -> list[dict]:
    """The ladder's sentence per rung (what limits it, what the next rung changes) beside the
    profiler's numbers for that rung; a rung the run did not profile says so."""
    rows = []
    for st in LADDER:
        c = next((c for c in result.cases if c.params["kernel"] == st.kernel and c.extra.get("ncu")), None)
        rows.append({"step": f"{st.number} {st.label}", "what limits it": st.limit,
                     "what ncu measured": _evidence(c.extra["ncu"]) if c else "not profiled in this run",
                     "what the next step changes": st.next_change})
    return rows
