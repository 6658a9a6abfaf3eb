"""Tables and figures. Every one carries the provenance of the numbers in it."""
from __future__ import annotations

import html
import math

import matplotlib.pyplot as plt

from course_lib.measure.experiments import Result
from course_lib.measure.sass import DisassemblerUnavailable, mix_rows


def _cell(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if math.isnan(v):
            return "—"
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.3g}" if abs(v) < 10 else f"{v:,.1f}"
    return html.escape(str(v))


class Table:
    """A small HTML table with a caption; prints as plain text too (for nbval and terminals)."""

    def __init__(self, rows: list[dict], caption: str, columns: list[str] | None = None):
        self.rows, self.caption = rows, caption
        self.columns = columns or (list(rows[0]) if rows else [])
        if rows and "GPU" in rows[0] and "GPU" not in self.columns:   # rows beside a reference GPU's record
            self.columns = ["GPU", *self.columns]

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in self.columns) + "</tr>"
                       for r in self.rows)
        return (f'<table><caption style="caption-side:top;text-align:left"><i>{html.escape(self.caption)}</i>'
                f"</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")

    def __repr__(self) -> str:
        widths = [max(len(c), *(len(_cell(r.get(c))) for r in self.rows)) for c in self.columns]

        def line(vals) -> str:
            return "  ".join(v.rjust(w) for v, w in zip(vals, widths))

        out = [self.caption, line(self.columns)]
        out += [line([html.unescape(_cell(r.get(c))) for c in self.columns]) for r in self.rows]
        return "\n".join(out)


def timing_columns(timing) -> dict:
    """The summary of a case's raw samples every timing table shows: median, interquartile range, p95."""
    return {"median µs": timing.median_s * 1e6, "IQR µs": timing.iqr_s * 1e6, "p95 µs": timing.p95_s * 1e6}


def result_table(result: Result, columns: tuple[str, ...] = ("case", "kernel", "median µs", "IQR µs", "p95 µs",
                                                             "GB/s", "TFLOP/s")) -> Table:
    rows = []
    for c in result.cases:
        t = c.timing
        rows.append({"case": c.name, "kernel": c.kernel, "timer": c.timer, **timing_columns(t),
                     "spread": f"±{100 * t.spread / 2:.1f}%", "samples": len(c.samples_s),
                     "GB/s": c.bytes / t.median_s / 1e9 if c.bytes else None,
                     "TFLOP/s": c.flop / t.median_s / 1e12 if c.flop else None,
                     "intensity": c.flop / c.bytes if c.bytes else None})
    return Table(rows, f"{result.experiment}: {result.provenance}", list(columns))


def roofline_figure(points: list[dict], bandwidth: float, peaks: dict[str, float], title: str):
    """Log-log roofline: a memory roof, one compute roof per dtype, and the measured points.

    ``points``: dicts with ``intensity`` (FLOP/byte), ``flop_per_s``, ``dtype``, ``tag`` (a short
    label) and optionally ``series`` (points of one series are joined by a line, e.g. matmul sizes).
    """
    fig, ax = plt.subplots(figsize=(9, 6.6))
    xs = [p["intensity"] for p in points]
    lo, hi = min(xs + [0.05]) / 2, max(xs + [2e4]) * 2
    styles = {"fp32": ("#4c72b0", "o"), "bf16": ("#c44e52", "s"), "fp16": ("#8172b2", "^"), "fp8": ("#55a868", "D")}
    for dtype, peak in peaks.items():
        colour = styles.get(dtype, ("grey", "o"))[0]
        ridge = peak / bandwidth
        ax.plot([lo, ridge, hi], [bandwidth * lo, peak, peak], color=colour, lw=1.5, alpha=0.6,
                label=f"roof {dtype}: {peak / 1e12:,.0f} TFLOP/s measured, ridge {ridge:,.0f} FLOP/byte "
                      "at the measured copy bandwidth")
    series: dict[str, list[dict]] = {}
    for p in points:
        series.setdefault(p.get("series") or p["tag"], []).append(p)
    singles = 0
    for name, pts in series.items():
        colour, marker = styles.get(pts[0]["dtype"], ("black", "o"))
        ax.plot([p["intensity"] for p in pts], [p["flop_per_s"] for p in pts], marker=marker, color=colour,
                lw=1 if len(pts) > 1 else 0, ms=5, zorder=3, label=name if len(pts) > 1 else None)
        below = pts[0]["dtype"] == "fp32"
        for i, p in enumerate(pts):
            dy = (-11 if below else 5) - (10 * (singles % 2) if len(pts) == 1 else 0)
            ax.annotate(p["tag"], (p["intensity"], p["flop_per_s"]), fontsize=7, color=colour,
                        xytext=(4, dy), textcoords="offset points")
        singles += len(pts) == 1
    for dtype in dict.fromkeys(p["dtype"] for pts in series.values() if len(pts) == 1 for p in pts):
        colour, marker = styles.get(dtype, ("black", "o"))
        ax.plot([], [], marker=marker, color=colour, lw=0, ms=5, label=f"single operations, {dtype}")
    ys = [p["flop_per_s"] for p in points]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(ys) / 2.5, max([*ys, *peaks.values()]) * 2)   # room for the labels under the lowest point
    ax.set_xlabel("arithmetic intensity (FLOP/byte, compulsory bytes)")
    ax.set_ylabel("achieved throughput (FLOP/s)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=2, frameon=False)   # off the points
    fig.tight_layout()
    return fig


def samples_figure(result: Result, case_names: list[str], title: str):
    """Every raw sample of the chosen cases, one row each: what a median hides."""
    fig, ax = plt.subplots(figsize=(8.5, 0.6 + 0.55 * len(case_names)))
    for row, name in enumerate(case_names):
        s = [x * 1e6 for x in result.case(name).samples_s]
        jitter = [row + 0.25 * ((i * 0.618) % 1 - 0.5) for i in range(len(s))]
        ax.scatter(s, jitter, s=6, alpha=0.5)
        med = result.case(name).median_s * 1e6
        ax.plot([med, med], [row - 0.3, row + 0.3], color="black", lw=2)
    ax.set_yticks(range(len(case_names)))
    ax.set_yticklabels(case_names, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("time per call (µs, log scale); black bar = median")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", which="both", alpha=0.2)
    fig.tight_layout()
    return fig


class _Unavailable:
    """What a notebook shows instead of the table where there is no disassembler or no NVRTC."""

    def __init__(self, why: str):
        self.why = why

    def __repr__(self) -> str:
        return f"No SASS table here: {self.why}."


def mix_table(family: str, kernels: list[str], arch: str, caption: str):
    """``mix_rows`` as a captioned table, or a one-line reason when it cannot be made here."""

    try:
        return Table(mix_rows(family, kernels, arch), caption)
    except DisassemblerUnavailable as why:
        return _Unavailable(str(why))


# One colour per wave or iteration in the calculators' drawings (repeating after ten).
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3",
           "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd")


def bars_figure(rows: list[dict], title: str, ceiling_gbps: float | None = None,
                measured_key: str = "measured GB/s", model_key: str | None = "model GB/s"):
    """Horizontal bars: measured per case, with the model's value as a marker."""
    fig, ax = plt.subplots(figsize=(8.5, 0.8 + 0.42 * len(rows)))
    ys = range(len(rows))
    ax.barh(list(ys), [r[measured_key] for r in rows], color="#4c72b0", label="measured")
    if model_key:
        ax.scatter([r[model_key] for r in rows], list(ys), color="#dd8452", marker="D", zorder=3,
                   label="sector model × copy ceiling")
    if ceiling_gbps:
        ax.axvline(ceiling_gbps, color="grey", lw=1, label="copy ceiling")
    ax.set_yticks(list(ys))
    ax.set_yticklabels([r["case"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("GB/s (useful bytes / time)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.5 / len(rows) - 0.08), ncol=3, frameon=False)
    fig.tight_layout()
    return fig
