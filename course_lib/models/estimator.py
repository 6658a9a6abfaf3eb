"""The executable estimator: one frozen manifest of an operation, an illustrative machine and a
schedule; every quantity of the execution model derived from it by the course's own models; and
the reconciliation of that prediction with an observation, which may honestly be "unmeasured".

Nothing here names a real GPU: the fixture's machine is the worked examples' illustrative one
(108 SMs of ``occupancy.ILLUSTRATIVE_SM``, 300 TFLOP/s, 1.5 TB/s). Pure: no GPU needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from course_lib.core.timing import MIN_SAMPLES
from course_lib.models import fusion, memory, occupancy, roofline, tiling, waves

KIB = 1024


@dataclass(frozen=True)
class Manifest:
    """The operation, the machine and the schedule, frozen before anything is derived."""

    m: int = 4096
    n: int = 4096
    k: int = 4096                             # the GEMM's depth, for its compulsory bytes
    block_m: int = 128
    block_n: int = 128
    block_k: int = 32
    input_bytes: int = 2                      # bf16 operands
    threads_per_block: int = 256
    registers_per_thread: int = 64
    smem_per_block_bytes: int = 48 * KIB
    sm: occupancy.SmBudget = occupancy.ILLUSTRATIVE_SM
    sm_count: int = 108
    warp_element_bytes: int = 4               # an aligned fp32 warp request
    warp_stride: int = 1
    warp_offset_bytes: int = 0
    fused_elements: int = 4096 * 4096         # the intermediate a fusion keeps out of HBM
    fused_element_bytes: int = 2
    work_flop: float = 120e9                  # the hierarchical-roofline case
    level_bytes: dict = field(default_factory=lambda: {"DRAM": 3e9})
    level_bandwidth: dict = field(default_factory=lambda: {"DRAM": 1.5e12})
    peak_flop_per_s: float = 300e12


@dataclass(frozen=True)
class Estimate:
    blocks: int
    resident_blocks: int
    limiter: str
    active_warps: int
    occupancy: float
    slots: int
    waves: int
    last_wave_blocks: int
    last_wave_fill: float
    useful_bytes: int
    sectors: int
    sector_efficiency: float
    stage_flop: int
    stage_bytes: float
    stage_intensity: float
    gemm_flop: float                 # 2·M·N·K
    gemm_compulsory_bytes: float     # A and B read once, C written once (roofline.gemm_compulsory_bytes)
    gemm_intensity: float            # their ratio, FLOP per byte of HBM traffic at the least
    fusion_bytes_removed: float
    level_seconds: dict
    lower_bound_s: float
    binding: str


def estimate(man: Manifest) -> Estimate:
    """Every derived quantity, each from the model that owns it."""
    grid = waves.tile_grid(man.m, man.n, man.block_m, man.block_n)
    res = occupancy.residency(man.sm, man.threads_per_block, man.registers_per_thread, man.smem_per_block_bytes)
    sched = waves.schedule(grid.blocks, man.sm_count, res.resident_blocks)
    warp = memory.sector_count(memory.warp_addresses("strided", man.warp_element_bytes, man.warp_stride,
                                                     man.warp_offset_bytes), man.warp_element_bytes)
    if set(man.level_bytes) != set(man.level_bandwidth):
        raise ValueError(f"every memory level needs bytes and a bandwidth: bytes for {sorted(man.level_bytes)}, "
                         f"bandwidth for {sorted(man.level_bandwidth)}")
    seconds = {"compute": man.work_flop / man.peak_flop_per_s,
               **{lvl: man.level_bytes[lvl] / man.level_bandwidth[lvl] for lvl in man.level_bytes}}
    binding = max(seconds, key=seconds.get)
    return Estimate(
        blocks=grid.blocks, resident_blocks=res.resident_blocks, limiter=res.limiter,
        active_warps=res.active_warps, occupancy=res.occupancy, slots=sched.slots, waves=sched.waves,
        last_wave_blocks=sched.last_wave_blocks, last_wave_fill=sched.last_wave_fill,
        useful_bytes=warp.requested_bytes, sectors=warp.n_sectors, sector_efficiency=warp.efficiency,
        stage_flop=tiling.stage_flop(man.block_m, man.block_n, man.block_k),
        stage_bytes=tiling.stage_bytes(man.block_m, man.block_n, man.block_k, man.input_bytes),
        stage_intensity=tiling.stage_intensity(man.block_m, man.block_n, man.input_bytes),
        gemm_flop=roofline.gemm_flop(man.m, man.n, man.k),
        gemm_compulsory_bytes=roofline.gemm_compulsory_bytes(man.m, man.n, man.k, man.input_bytes),
        gemm_intensity=roofline.gemm_intensity(man.m, man.n, man.k, man.input_bytes),
        fusion_bytes_removed=fusion.materialization_bytes(man.fused_elements, man.fused_element_bytes),
        level_seconds=seconds, lower_bound_s=seconds[binding], binding=binding)


@dataclass(frozen=True)
class Observation:
    """What was measured for the manifest's case: nothing yet ("unmeasured"), or raw samples that
    passed a numerical check against a reference."""

    status: str = "unmeasured"
    samples_s: tuple[float, ...] = ()
    check_passed: bool | None = None
    case_id: str | None = None


def reconcile(est: Estimate, obs: Observation, case_id: str | None = None) -> dict:
    """Predicted lower bound, observed median and residual r = t_observed - t_bound, kept apart.
    An unmeasured case keeps no residual; a measured one must be evidence or it is refused."""
    if obs.status == "unmeasured":
        if obs.samples_s:
            raise ValueError("an unmeasured observation carries no samples: call it measured, or drop them")
        return {"status": "unmeasured", "observed_median_s": None, "predicted_lower_bound_s": est.lower_bound_s,
                "residual_s": None}
    if obs.status != "measured":
        raise ValueError(f"status must be 'measured' or 'unmeasured', not {obs.status!r}")
    problems = []
    if len(obs.samples_s) < MIN_SAMPLES:
        problems.append(f"{len(obs.samples_s)} samples (at least {MIN_SAMPLES} raw samples are needed)")
    if obs.check_passed is not True:
        problems.append("no passed numerical check against a reference")
    if case_id is not None and obs.case_id != case_id:
        problems.append(f"it is of case {obs.case_id!r}, not {case_id!r}")
    if problems:
        raise ValueError("not a measurement of this case: " + "; ".join(problems))
    ordered = sorted(obs.samples_s)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return {"status": "measured", "observed_median_s": median, "predicted_lower_bound_s": est.lower_bound_s,
            "residual_s": median - est.lower_bound_s}


FIXTURE = Manifest()
