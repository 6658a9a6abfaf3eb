"""What the GPU and the references did while a result was measured: the table under a headline one.

- ``reference_rows``: each library reference (cuBLAS, torch.compile, PyTorch's kernels) with its two
  protocols' medians (the harness's held calls and blocks of back-to-back calls), whether they agreed,
  and the SM clock during its samples; plus every course case that ran power-limited.
- ``run_rows``: for an experiment recorded several times, each case's median and range over the runs.
"""
from __future__ import annotations

from course_lib.core.gpu_monitor import clock_label
from course_lib.core.timing import PROTOCOL_TOLERANCE
from course_lib.measure.evidence import Case


def is_reference(case: Case) -> bool:
    return "second_protocol" in case.extra


def protocol_cells(case: Case) -> dict:
    second = case.extra["second_protocol"]
    # The attempt whose harness timing the case kept (the first, when a re-measurement still disagreed):
    # its blocks median is the one the ratio compares with.
    kept = min(second["attempts"], key=lambda a: abs(a["harness_median_s"] - case.median_s))
    blocks = kept["blocks_median_s"]
    verdict = "agree" if second["agree"] else f"differ by {abs(case.median_s / blocks - 1):.1%} (flagged)"
    if len(second.get("attempts", [])) > 1 and second["agree"]:
        verdict += (", after every call was timed again in turn" if "in turn with" in second["attempts"][-1]
                    else ", after a second measurement")
    if "moves_between_runs" in case.extra:
        verdict += f"; moved {case.extra['moves_between_runs']:.1%} between recorded runs (flagged)"
    return {"held calls µs": case.median_s * 1e6, "back-to-back µs": blocks * 1e6, "protocols": verdict}


def flagged(case: Case) -> bool:
    return case.power_limited or case.protocols_disagree or "moves_between_runs" in case.extra


def runs_spread(result, name: str) -> float:
    """(highest - lowest) / lowest of case ``name``'s median over the recorded runs."""
    lo, _, hi = result.case_range_s(name)
    return hi / lo - 1


def mark_moving_references(result) -> list[str]:
    """Flag each library reference whose median moved between the recorded runs by more than the
    protocols' tolerance (``extra["moves_between_runs"]``: the spread); returns their names. The
    recorder calls it, so a reference that does not reproduce is marked where it is shown."""
    if len(result.runs()) < 2:
        return []
    moving = []
    for c in filter(is_reference, result.cases):
        spread = runs_spread(result, c.name)
        if spread > PROTOCOL_TOLERANCE:
            c.extra["moves_between_runs"] = spread
            moving.append(c.name)
    return moving


def reference_rows(result, only_flagged: bool = False) -> list[dict]:
    """The references' two protocols and the clock; course cases only where the clock fell.
    ``only_flagged``: just the cases whose protocols disagreed or whose clock fell."""
    rows = []
    for c in result.cases:
        if not (is_reference(c) or c.power_limited) or (only_flagged and not flagged(c)):
            continue
        row = {"case": c.name, **(protocol_cells(c) if is_reference(c) else
                                  {"held calls µs": c.median_s * 1e6, "back-to-back µs": None, "protocols": "course kernel"})}
        row["lowest SM clock"] = clock_label(c.extra.get("gpu_during"))
        if c.extra.get("late_samples"):
            row["late samples"] = c.extra["late_samples"]
        kernels = [k for k in c.extra.get("kernels", []) if not str(k).startswith("Memset")] \
            if isinstance(c.extra.get("kernels"), list) else []
        if kernels:
            row["library kernel"] = ", ".join(kernels)[:60]
        rows.append(row)
    return rows


def run_rows(result, names: list[str] | None = None) -> list[dict]:
    """Each case's median time over the recorded runs and their range; one run: just the median."""
    runs = result.runs()
    rows = []
    for c in result.cases:
        if names is not None and c.name not in names:
            continue
        lo, mid, hi = result.case_range_s(c.name)
        rows.append({"case": c.name, "runs": len(runs), "median µs": mid * 1e6,
                     "range µs": f"{lo * 1e6:.1f}–{hi * 1e6:.1f}", "spread": (hi - lo) / mid})
    return rows
