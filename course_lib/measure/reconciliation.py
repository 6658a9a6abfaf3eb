"""Predicted against observed, across the course: for course kernels from notebooks 00-10, the
roofline lower bound at a named level, the recorded median, the residual r = t_observed - t_bound,
and what already-recorded evidence says about it.

Every number comes from a record in ``data/recorded/<gpu>/`` (replayed, so no GPU is needed) and
from the GPU's datasheet entry in ``hardware.py``. A negative residual is a finding: the bound was
taken at the wrong level, or the observation did not measure what it claims to.
"""
from __future__ import annotations

from dataclasses import dataclass

from course_lib.core import hardware
from course_lib.measure import experiments


@dataclass(frozen=True)
class Row:
    notebook: str
    kernel: str
    level: str
    bound_s: float
    observed_s: float
    evidence: str

    @property
    def residual_s(self) -> float:
        return self.observed_s - self.bound_s

    def as_dict(self) -> dict:
        return {"notebook": self.notebook, "kernel": self.kernel, "bound at": self.level,
                "lower bound µs": self.bound_s * 1e6, "observed median µs": self.observed_s * 1e6,
                "residual µs": self.residual_s * 1e6, "observed ÷ bound": self.observed_s / self.bound_s,
                "what the records say": self.evidence}


class _Records:
    def __init__(self, gpu: str):
        self.gpu, self._cache = gpu, {}

    def case(self, experiment: str, name: str):
        if experiment not in self._cache:
            self._cache[experiment] = experiments.replay(experiment, experiments.resolve_params(experiment), self.gpu)
        return self._cache[experiment].case(name)


SHARED_BYTES_PER_CLOCK = 128   # per SM: 32 banks of 4 bytes, one wavefront per clock


def _bound(flop: float, nbytes: float, peak: float, bandwidth: float) -> float:
    return max(flop / peak if flop else 0.0, nbytes / bandwidth)


def rows(gpu: str = "h200") -> list[Row]:
    """The reconciliation table for the recorded GPU ``gpu``."""
    spec, rec = hardware.spec(gpu), _Records(gpu)
    bw, fp32, bf16 = spec.hbm_bandwidth_bytes_per_s, spec.peak("fp32"), spec.peak("bf16")
    hbm = f"HBM, datasheet {bw / 1e12:.2f} TB/s"
    out = []

    c = rec.case("timing.measuring_correctly", "host timer, no synchronize, n=16777216")
    held = rec.case("timing.measuring_correctly", "CUDA events, GPU held, n=16777216")
    out.append(Row("00", "vector_add (host timer, no synchronize)", hbm, _bound(0, c.bytes, fp32, bw), c.median_s,
                   f"negative: the host timer stopped when the launch was queued, not when the kernel ended; "
                   f"CUDA events with the GPU held measured {held.median_s * 1e6:.1f} µs for the same kernel"))

    c = rec.case("roofline.measured", "vector add, n=67108864")
    copy = rec.case("machine.copy_bandwidth", "course copy_vec4")
    copy_bw = copy.bytes / copy.median_s
    out.append(Row("01", "vector_add_vec4, n = 2^26", hbm, _bound(c.flop, c.bytes, fp32, bw), c.median_s,
                   f"the best copy measured {copy_bw / 1e12:.2f} TB/s, {100 * copy_bw / bw:.0f}% of the datasheet; "
                   f"this kernel ran at {c.bytes / c.median_s / 1e12:.2f} TB/s, {100 * c.bytes / c.median_s / copy_bw:.0f}% "
                   "of that copy: the copy is an empirical reference, not a roof (its 1:1 mix of reads and writes is "
                   "not this kernel's 2:1, and both move a little from run to run)"))

    c = rec.case("occupancy.register_spill", "--maxrregcount=32")
    free = rec.case("occupancy.register_spill", "as compiled (no cap)")
    out.append(Row("03", "register-capped kernel, --maxrregcount=32", f"fp32 peak {fp32 / 1e12:.0f} TFLOP/s / {hbm}",
                   _bound(c.flop, c.bytes, fp32, bw), c.median_s,
                   f"{c.extra['spill_store_bytes']} B of spill stores per thread (ptxas) where the uncapped build has "
                   f"{free.extra['spill_store_bytes']}; the uncapped build takes {free.median_s * 1e6:.0f} µs"))

    c = rec.case("coalescing.strided_copy", "stride 16")
    read, written = c.extra["ncu"]["dram__bytes_read.sum"], c.extra["ncu"]["dram__bytes_write.sum"]
    out.append(Row("04", "strided copy, stride 16", hbm + " (useful bytes)", _bound(0, c.bytes, fp32, bw), c.median_s,
                   f"sector model: {100 * c.extra['model']['read_efficiency']:.1f}% of each read sector is used, "
                   f"{1 / c.extra['model']['read_efficiency']:.0f}× the read bytes; ncu: DRAM read "
                   f"{read / (c.bytes / 2):.1f}× the useful reads (each 32-byte sector read brought 64 bytes from DRAM, "
                   f"notebook 04) and wrote {written / (c.bytes / 2):.1f}× the useful writes, {(read + written) / c.bytes:.1f}× "
                   "in all"))

    c = rec.case("transpose.ladder", "naive (no shared memory)")
    best = rec.case("transpose.ladder", "padded tile 64×65")
    out.append(Row("05", "transpose, naive", hbm, _bound(0, c.bytes, fp32, bw), c.median_s,
                   f"writes {100 * c.extra['model']['write_efficiency']:.1f}% sector-efficient (model; ncu "
                   f"{c.extra['ncu']['l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum'] / c.extra['ncu']['l1tex__t_requests_pipe_lsu_mem_global_op_st.sum']:.0f} "
                   f"sectors per store request); the padded 64×65 tile takes {best.median_s * 1e6:.0f} µs"))
    at_copy = best.bytes / copy_bw
    residual, gap = best.median_s - _bound(0, best.bytes, fp32, bw), at_copy - _bound(0, best.bytes, fp32, bw)
    out.append(Row("05", "transpose, padded 64×65 tile", hbm, _bound(0, best.bytes, fp32, bw), best.median_s,
                   f"{best.bytes / best.median_s / copy_bw * 100:.0f}% of the measured copy bandwidth: of its "
                   f"{residual * 1e6:.1f} µs residual, {gap * 1e6:.1f} µs is the datasheet-to-achievable gap of notebook "
                   f"01's row (these bytes at the copy's rate take {at_copy * 1e6:.1f} µs) and "
                   f"{(residual - gap) * 1e6:.1f} µs is the kernel's own"))

    c = rec.case("banks.probe", "4 B row")
    smem_bw = spec.sm_count * SHARED_BYTES_PER_CLOCK * spec.boost_clock_mhz * 1e6
    out.append(Row("05", "shared-memory probe, 4 B rows", hbm + " (the wrong level)", _bound(0, c.bytes, fp32, bw),
                   c.median_s, "negative: these bytes move between shared memory and registers, never through HBM; "
                   f"a bound at HBM does not apply. At the right level, shared memory ({spec.sm_count} SMs × "
                   f"{SHARED_BYTES_PER_CLOCK} B per clock × {spec.boost_clock_mhz / 1e3:.2f} GHz = "
                   f"{smem_bw / 1e12:.1f} TB/s), the bound is {c.bytes / smem_bw * 1e6:.1f} µs against "
                   f"{c.median_s * 1e6:.1f} µs observed"))

    c = rec.case("gemm.fp32_ladder", "sgemm_warptile_db_16x8, n=4096")
    lib = rec.case("gemm.fp32_ladder", "cuBLAS fp32, n=4096")
    out.append(Row("06", "sgemm_warptile_db_16x8, n = 4096", f"fp32 peak {fp32 / 1e12:.0f} TFLOP/s",
                   _bound(c.flop, c.bytes, fp32, bw), c.median_s,
                   f"cuBLAS fp32 in the same run reached {lib.flop_per_s / fp32 * 100:.0f}% of that peak "
                   f"({lib.median_s * 1e6:.0f} µs); this rung {c.flop_per_s / fp32 * 100:.0f}%"))

    c = rec.case("gemm.bf16_mma", "bf16_gemm_mma (tma), n=4096")
    mma = rec.case("hopper.ceilings", "mma.sync m16n8k16, registers")
    out.append(Row("06", "bf16_gemm_mma (TMA), n = 4096", f"bf16 peak {bf16 / 1e12:.0f} TFLOP/s",
                   _bound(c.flop, c.bytes, bf16, bw), c.median_s,
                   f"mma.sync alone peaks at {mma.flop_per_s / 1e12:.0f} TFLOP/s (notebook 10): at that rate "
                   f"{c.flop / mma.flop_per_s * 1e6:.0f} µs; the kernel reaches {c.flop_per_s / mma.flop_per_s * 100:.0f}% of it"))

    c = rec.case("waves.n_sweep", "course 4096x4288x4096")
    even = rec.case("waves.n_sweep", "course 4096x4224x4096")
    out.append(Row("07", "bf16_gemm_mma, 4096×4288×4096", f"bf16 peak {bf16 / 1e12:.0f} TFLOP/s",
                   _bound(c.flop, c.bytes, bf16, bw), c.median_s,
                   f"{c.extra['waves']} waves of {c.extra['slots']} slots, the last {100 * c.extra['last_wave_fill']:.0f}% "
                   f"full: {100 * (c.flop / even.flop - 1):.1f}% more FLOPs than 4096×4224×4096 ({even.extra['waves']} "
                   f"full waves) took {100 * (c.median_s / even.median_s - 1):.0f}% longer"))

    c = rec.case("fusion.chains", "k=8: course, 8 kernels")
    fused = rec.case("fusion.chains", "k=8: course, one fused kernel")
    out.append(Row("08", "8 elementwise ops, 8 kernels", hbm + " (the fused plan's bytes)",
                   _bound(c.flop, fused.bytes, fp32, bw), c.median_s,
                   f"the unfused plan moves {c.bytes / fused.bytes:.0f}× the bytes (the ledger: 7 intermediates written "
                   f"and read back); one fused kernel takes {fused.median_s * 1e6:.0f} µs"))

    c = rec.case("pipeline.streaming", "stream_sync, 1 block/SM")
    bulk = rec.case("pipeline.streaming", "stream_bulk, 1 block/SM, 4 stages")
    # The TMA ring keeps all S tiles on their way (notebook 09's max_bytes_in_flight); records made before that count
    # was corrected store S - 1 tiles, so the tile is read from the one-stage case, where both counts agree.
    tile = rec.case("pipeline.streaming", "stream_bulk, 1 block/SM, 1 stage").extra["max_bytes_in_flight_per_sm"]
    out.append(Row("09", "stream_sync, 1 block per SM", hbm, _bound(c.flop, c.bytes, fp32, bw), c.median_s,
                   f"{c.extra['max_bytes_in_flight_per_sm']:,} B in flight per SM; the TMA stream with 4 stages keeps "
                   f"{bulk.params['stages'] * tile:,} B and takes {bulk.median_s * 1e6:.0f} µs (Little's law)"))

    c = rec.case("hopper.profile", "hgemm_5_persistent, 4096×4096×4096")
    out.append(Row("10", "hgemm_5_persistent, n = 4096", f"bf16 peak {bf16 / 1e12:.0f} TFLOP/s",
                   _bound(c.flop, c.bytes, bf16, bw), c.median_s,
                   f"ncu: tensor pipe active {c.extra['ncu']['sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active']:.0f}% "
                   f"of the time, while the kernel delivers {100 * c.flop_per_s / bf16:.0f}% of the peak: the pipe is "
                   "idle the rest of the time (the stalls of notebook 10's profile table), and the points between "
                   "the two figures are the clock under load and the rate per active cycle, not stalls"))
    return out


def table(gpu: str = "h200") -> list[dict]:
    return [r.as_dict() for r in rows(gpu)]
