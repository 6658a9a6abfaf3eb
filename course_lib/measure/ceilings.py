"""The current GPU's measured ceilings: copy bandwidth and library matmul peak per dtype.

Live, they are measured now; in replay, they come from the recorded run. Either
way they carry the provenance of the experiments behind them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from course_lib.core.hardware import GpuSpec, detect, spec, spec_for_device, with_measured_ceilings
from course_lib.core.gpu_monitor import clock_label
from course_lib.core.session import clock_warning
from course_lib.measure import experiments
from course_lib.measure.conditions import is_reference, protocol_cells
from course_lib.measure.evidence import Case


@dataclass(frozen=True)
class MeasuredCeilings:
    gpu: str
    provenance: str
    copy_bandwidth_bytes_per_s: float
    matmul_flop_per_s: dict[str, float]
    spec: GpuSpec | None
    machine: dict
    matmul_machine: dict
    cases: dict[str, Case] = field(default_factory=dict)   # the case behind each ceiling: "copy", then each dtype

    def device_vs_datasheet(self) -> list[dict]:
        """What the device reported about itself (in the record's manifest) beside its datasheet entry."""
        m, sheet = self.machine, self.spec
        return [{"property": label, "datasheet": getattr(sheet, attr) if sheet else None, "device reports": m.get(key)}
                for label, attr, key in (("SM count", "sm_count", "sm_count"),
                                         ("L2 bytes", "l2_bytes", "l2_bytes"),
                                         ("shared memory per SM, bytes", "smem_per_sm_bytes", "smem_per_sm_bytes"))]

    def run_conditions(self) -> list[dict]:
        """The SM clock, power draw and temperature at the start and end of each ceiling's run,
        beside the power cap: a throttled or low-clocked run shows here."""

        rows = []
        for label, machine in (("copy bandwidth", self.machine), ("matmul peak", self.matmul_machine)):
            for when in ("before", "after"):
                st = (machine.get("gpu_state") or {}).get(when, {})
                rows.append({"run": label, "when": when, "SM MHz": st.get("sm_mhz"),
                             "max SM MHz": st.get("max_sm_mhz"), "power W": st.get("power_w"),
                             "power cap W": st.get("power_limit_w"), "°C": st.get("temperature_c"),
                             # Only the reading at the end is under load: before, an idle GPU may sit low.
                             "note": "not recorded" if not st else (clock_warning(st) or "") if when == "after" else ""})
        return rows

    def as_gpu(self) -> GpuSpec:
        """A GpuSpec whose roofs are the measured ceilings, for the roofline models."""
        if self.spec is not None:
            return with_measured_ceilings(self.spec, self.copy_bandwidth_bytes_per_s, self.matmul_flop_per_s)

        return spec_for_device(detect(), self.copy_bandwidth_bytes_per_s, self.matmul_flop_per_s)

    def percent_of_spec(self) -> list[dict]:
        """Measured beside datasheet, per ceiling: the machine card."""
        rows = []
        sheet = self.spec
        rows.append({"ceiling": "copy bandwidth (read + write)", "unit": "TB/s",
                     "datasheet": sheet.hbm_bandwidth_bytes_per_s / 1e12 if sheet else None,
                     "measured": self.copy_bandwidth_bytes_per_s / 1e12})
        for dtype, v in self.matmul_flop_per_s.items():
            peak = sheet.peak_flop_per_s.get(dtype) if sheet else None
            rows.append({"ceiling": f"matmul {dtype} (cuBLAS)", "unit": "TFLOP/s",
                         "datasheet": peak / 1e12 if peak else None, "measured": v / 1e12})
        for r, key in zip(rows, ["copy", *self.matmul_flop_per_s]):
            r["% of datasheet"] = 100 * r["measured"] / r["datasheet"] if r["datasheet"] else None
            # Each ceiling's own evidence: the clock while it was timed, and for a library call whether the
            # second protocol (blocks of back-to-back calls) agreed with the held one; a disagreement is flagged.
            case = self.cases.get(key)
            r["lowest SM clock while timed"] = clock_label(case.extra.get("gpu_during")) if case else "not recorded"
            r["second protocol"] = (protocol_cells(case)["protocols"] if case and is_reference(case)
                                    else "not a library call" if case else "not recorded")
        return rows


def measured_ceilings() -> MeasuredCeilings:
    copy = experiments.run("machine.copy_bandwidth")
    mm = experiments.run("machine.matmul_peak")
    bw = copy.case("CuPy device-to-device copy").bandwidth_bytes_per_s
    peaks = {c.params["dtype"]: c.flop_per_s for c in mm.cases}
    try:
        sheet = spec(copy.gpu)
    except KeyError:
        sheet = None
    cases = {"copy": copy.case("CuPy device-to-device copy"), **{c.params["dtype"]: c for c in mm.cases}}
    return MeasuredCeilings(copy.gpu, copy.provenance, bw, peaks, sheet, copy.machine, mm.machine, cases)


def roofline_points(result: experiments.Result, ceilings: MeasuredCeilings) -> list[dict]:
    """Each case as a roofline point: intensity, achieved FLOP/s, the roof above it and the % reached."""
    rows = []
    for c in result.cases:
        dtype = c.params.get("matmul_dtypes", "fp32")
        peak = ceilings.matmul_flop_per_s[dtype]
        intensity = c.flop / c.bytes
        roof = min(peak, ceilings.copy_bandwidth_bytes_per_s * intensity)
        achieved = c.flop / c.median_s
        op = c.params.get("op", "")
        series = f"matmul {dtype}" if op == "matmul" else None
        tag = (str(c.params["matmul_sizes"]) if series else
               {"matmul, unqueued": f"{dtype} 64 (1 call)", "batched matmul": f"1,024 x {dtype} 64³",
                "matvec": f"matvec {c.params.get('matvec_sizes')}", "vector add": "vector add"}.get(op, c.name))
        if op == "matmul, unqueued":   # one call at a time on purpose: back-to-back calls cannot agree with it
            protocols = "one call at a time: not comparable back to back"
        else:
            protocols = protocol_cells(c)["protocols"] if is_reference(c) else "course kernel"
        rows.append({"label": c.name, "tag": tag, "series": series, "dtype": dtype, "intensity": intensity, "flop_per_s": achieved,
                     "second protocol": protocols,
                     "median µs": c.median_s * 1e6, "TFLOP/s": achieved / 1e12, "GB/s": c.bytes / c.median_s / 1e9,
                     "roof TFLOP/s": roof / 1e12, "% of roof": 100 * achieved / roof,
                     "binding roof": "compute" if peak <= ceilings.copy_bandwidth_bytes_per_s * intensity else "memory"})
    return rows
