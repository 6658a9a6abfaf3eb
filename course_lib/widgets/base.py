"""Calculators: thin ipywidgets layers over the models. Bad input gets a message, not a traceback."""
from __future__ import annotations

import html

import ipywidgets as W


def _fmt_seconds(s: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-12:.3g} ps"


# Text that must read on JupyterLab's light and dark themes takes the theme's colours (with a
# fallback for other frontends); text on a fixed swatch takes whichever ink contrasts with it.
MUTED_TEXT = "var(--jp-ui-font-color2, #555)"
OK_TEXT = "var(--jp-success-color1, #1b5e20)"
ERROR_TEXT = "var(--jp-error-color1, #b00020)"
WRAP = {"flex_flow": "row wrap"}   # a row of controls that wraps in a narrow window instead of overflowing


def ink_on(background_hex: str) -> str:
    """Near-black or white, whichever contrasts more with a ``#rrggbb`` background (WCAG luminance)."""
    def channel(v: int) -> float:
        c = v / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (int(background_hex[i:i + 2], 16) for i in (1, 3, 5))
    lum = 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)
    return "#111" if (lum + 0.05) / (0.0056 + 0.05) > 1.05 / (lum + 0.05) else "#fff"


def span(cls: str, value) -> str:
    """A value in the answer HTML, tagged with the class the tests and the browser test read."""
    return f'<span class="{cls}">{html.escape(str(value))}</span>'


def int_box(label: str, value: int, width: str = "150px") -> W.IntText:
    return W.IntText(value=value, description=label, layout=W.Layout(width=width),
                     style={"description_width": "initial"})


def largest_memory_bytes(gpus) -> float:
    return max(g.memory_bytes for g in gpus if g.memory_bytes)


def check_fits(what: str, nbytes: float, gpu, gpus=()) -> None:
    """A ValueError when ``nbytes`` of operands cannot be on ``gpu`` (its datasheet memory), or, for a
    GPU with no memory figure (a typed-in one), on any GPU of ``gpus``."""
    limit, where = gpu.memory_bytes, gpu.name
    if not limit:
        limit, where = largest_memory_bytes(gpus), "any GPU in the course's table"
    if nbytes > limit:
        raise ValueError(f"{what} take {nbytes / 1e9:,.4g} GB, more than the {limit / 1e9:,.0f} GB of {where}: "
                         "no such problem fits on the GPU. Try a smaller size.")


# A calculator in a saved notebook is drawn from its saved widget state and does nothing until its cell
# runs (no kernel holds its models yet). Its saved copy says so at its top: this note is empty in a live
# kernel, and course_lib.render writes the text into the saved state of every note it finds by its class.
SAVED_VIEW_CLASS = "course-saved-view"
SAVED_VIEW_NOTE = (f'<div class="{SAVED_VIEW_CLASS}" style="color:{ERROR_TEXT};font-size:12px">This calculator is '
                   "a picture of the saved notebook: its controls answer once this cell has run (Shift+Enter, or "
                   "Run ▸ Run All Cells).</div>")


def saved_view_note() -> W.HTML:
    note = W.HTML("")
    note.add_class(SAVED_VIEW_CLASS)
    return note


def show(ui: W.Widget) -> None:
    """Display a calculator's controls under its saved-view note (empty while a kernel runs it)."""
    from IPython.display import display

    display(W.VBox([saved_view_note(), ui]))


def error_html(message: str) -> str:
    return f'<div class="course-calc-error" style="color:#b00020">⚠ {html.escape(message)}</div>'


def rows_with_gaps(indices: list[int], limit: int, gaps: bool = True) -> list[int | tuple[str, int]]:
    """Sorted row indices, with ("gap", k) markers where k rows are skipped, and a ("more", k) tail past ``limit``."""
    out, shown = [], 0
    for i, r in enumerate(indices):
        if shown == limit:
            out.append(("more", len(indices) - i))
            break
        if gaps and out and isinstance(out[-1], int) and r > out[-1] + 1:
            out.append(("gap", r - out[-1] - 1))
        out.append(r)
        shown += 1
    return out


def gap_row(marker: tuple[str, int], unit: str, span: int) -> str:
    kind, k = marker
    text = f"⋮ {k:,} {unit}{'s' if k != 1 else ''} not touched" if kind == "gap" else \
        f"… and {k:,} more {unit}{'s' if k != 1 else ''}"
    return (f'<tr><td></td><td colspan="{span}" style="color:{MUTED_TEXT};font-size:11px;padding:1px 4px">'
            f"{text}</td></tr>")
