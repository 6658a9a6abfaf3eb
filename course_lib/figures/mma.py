"""Who holds what in a warp-wide bf16 MMA (analytic, nothing measured): the register fragments of
``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`` as the PTX ISA lays them out, and how one
``ldmatrix.sync.aligned.m8n8.x4.shared.b16`` hands every lane exactly its A fragment. A hand-written
tensor-core kernel is only correct if its loads agree with these maps, so the tests pin them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:   # type names only: matplotlib loads when a figure is drawn, not on import
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SHAPES = {"A": (16, 16), "B": (16, 8), "C": (16, 8)}  # (rows, cols); B is k x n
FRAGMENT_LEN = {"A": 8, "B": 4, "C": 4}               # elements per lane (bf16 pairs share a register)
REGISTERS = {"A": 4, "B": 2, "C": 4}                  # 32-bit registers per lane
TITLE = "mma.sync m16n8k16 (bf16 in, fp32 out): which lane holds which element"


def _element(operand: str, lane: int, i: int) -> tuple[int, int]:
    """PTX ISA 'Matrix Fragments for mma.m16n8k16 with floating point type': the element that
    fragment slot i of `lane` holds. Written in this direction because that is how the ISA states it."""
    group, tig = lane >> 2, lane % 4
    if operand == "A":   # a0a1: row g, a2a3: row g+8, a4..a7: the same two rows, 8 columns on
        return group + 8 * ((i >> 1) & 1), tig * 2 + (i & 1) + 8 * (i >> 2)
    if operand == "B":   # b0b1: k rows 2t, 2t+1; b2b3: the same 8 further down K; n = groupID
        return tig * 2 + (i & 1) + 8 * (i >> 1), group
    return group + 8 * (i >> 1), tig * 2 + (i & 1)   # C: c0c1 row g, c2c3 row g+8


def fragment_layout(operand: str) -> dict[tuple[int, int], tuple[int, int]]:
    """(row, col) of operand "A", "B" (row = k, col = n) or "C" -> (lane, fragment index). Keyed by
    element so a picture or a test can ask 'who owns this cell' directly."""
    if operand not in SHAPES:
        raise ValueError(f"unknown mma operand {operand!r}: expected one of 'A', 'B', 'C'")
    return {_element(operand, lane, i): (lane, i) for lane in range(32) for i in range(FRAGMENT_LEN[operand])}


def ldmatrix_address_lanes(x4: bool = True) -> dict[tuple[int, int], int]:
    """(matrix j, row r) -> the lane whose address operand points at that 16-byte row: the row
    addresses are per lane, which is what lets the 8x8 matrices sit anywhere (padded, swizzled)."""
    return {(j, r): 8 * j + r for j in range(4 if x4 else 1) for r in range(8)}


def _matrix_origin(j: int) -> tuple[int, int]:
    """Matrix j's top-left in the 16x16 A tile: 0 top-left, 1 bottom-left, 2 top-right, 3 bottom-right,
    the order that makes destination register j the mma A register j (a0a1, a2a3, a4a5, a6a7)."""
    return 8 * (j & 1), 8 * (j >> 1)


def ldmatrix_layout(x4: bool = True) -> dict[tuple[int, int], tuple[int, int]]:
    """(row, col) of the 16x16 tile -> (receiving lane, destination register j). x4=False is the .x1
    form: only matrix 0 (rows 0-7, cols 0-7) is loaded, into register 0."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for j in range(4 if x4 else 1):
        r0, c0 = _matrix_origin(j)
        for lane in range(32):
            for e in range(2):
                out[(r0 + lane // 4, c0 + 2 * (lane % 4) + e)] = (lane, j)
    return out


def _lane_colour(lane: int) -> tuple[float, float, float]:
    """Hue by groupID (the row a lane owns), lighter by thread-in-group: 32 lanes stay tellable
    apart and the 'a quad of lanes shares a row' structure shows at a glance."""
    import matplotlib

    base = matplotlib.colormaps["tab10"](lane >> 2)[:3]
    mix = 0.25 + 0.18 * (lane % 4)
    return tuple(c + (1.0 - c) * mix for c in base)


def _grid(ax: Axes, rows: int, cols: int, colour: Callable[[int, int], tuple[float, ...]],
          label: Callable[[int, int], str], fontsize: float = 5.5, span: int = 1) -> None:
    """Paint a rows x cols tile, row 0 on top, with a label per `span` cells (a 32-bit register holds
    2 bf16, so span=2 labels pairs) and heavy lines every 8 cells, where the 8x8 pieces meet."""
    import numpy as np

    ax.imshow(np.array([[colour(r, c) for c in range(cols)] for r in range(rows)]), aspect="equal")
    for r in range(rows):
        for c in range(0, cols, span):
            ax.text(c + (span - 1) / 2, r, label(r, c), ha="center", va="center", fontsize=fontsize,
                    linespacing=0.9)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(labelsize=6, length=0)
    ax.set_xticks([x - 0.5 for x in range(span, cols, span)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, rows)], minor=True)
    ax.grid(which="minor", color="white", linewidth=0.6)
    for b in range(8, rows, 8):
        ax.axhline(b - 0.5, color="black", linewidth=1.4)
    for b in range(8, cols, 8):
        ax.axvline(b - 0.5, color="black", linewidth=1.4)


def fragment_figure() -> Figure:
    """The three mma operands side by side, each cell labelled with its owning lane and slot."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 6.2), gridspec_kw={"width_ratios": [16, 8, 8]})
    names = {"A": ("a", "A (row-major, m x k)", "bf16"), "B": ("b", "B (col, k x n)", "bf16"),
             "C": ("c", "C/D (m x n)", "fp32")}
    for ax, op in zip(axes, "ABC"):
        layout, (rows, cols), (letter, what, dtype) = fragment_layout(op), SHAPES[op], names[op]
        _grid(ax, rows, cols, lambda r, c, lay=layout: _lane_colour(lay[(r, c)][0]),
              lambda r, c, lay=layout, x=letter: f"T{lay[(r, c)][0]}\n{x}{lay[(r, c)][1]}", fontsize=6.5)
        ax.set_title(f"{what}: {rows}x{cols} {dtype}\n{FRAGMENT_LEN[op]} values in {REGISTERS[op]} "
                     f"x 32-bit registers per lane", fontsize=9)
        ax.set_xlabel("n" if op != "A" else "k", fontsize=8)
        ax.set_ylabel("k" if op == "B" else "m", fontsize=8)
    fig.suptitle(TITLE, fontsize=11)
    fig.tight_layout()
    return fig


def ldmatrix_figure() -> Figure:
    """Left: the A tile as ldmatrix sees it (four 8x8 matrices, one row address per lane). Right:
    where every element pair lands; it is the mma A fragment, so no shuffles are needed."""
    import matplotlib
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 6.2))
    addr, recv = ldmatrix_address_lanes(), ldmatrix_layout()
    matrix = {(r0 + r, c0 + c): j for j in range(4) for r in range(8) for c in range(8)
              for r0, c0 in [_matrix_origin(j)]}
    tint = [matplotlib.colormaps["Pastel2"](j)[:3] for j in range(4)]   # matrices, not lanes
    _grid(left, 16, 16, lambda r, c: tint[matrix[(r, c)]],
          lambda r, c: f"T{addr[(matrix[(r, c)], r % 8)]}" if c % 8 == 0 else "", fontsize=6.5)
    for j in range(4):
        r0, c0 = _matrix_origin(j)
        left.text(c0 + 4.5, r0 + 3.5, f"matrix {j}\n-> reg {j}", ha="center", va="center", fontsize=12,
                  alpha=0.55, fontweight="bold")
    left.set_title("shared memory: 16x16 bf16 A tile = four 8x8 matrices\n"
                   "Tn in a row's first cell: lane n supplies that 16-byte row's address", fontsize=9)
    _grid(right, 16, 16, lambda r, c: _lane_colour(recv[(r, c)][0]),
          lambda r, c: f"T{recv[(r, c)][0]}.r{recv[(r, c)][1]}", fontsize=6, span=2)
    right.set_title("registers after the load: lane T receives pair (row T//4, cols 2(T%4), +1)\n"
                    "of matrix j in register j  ==  mma A registers a0a1, a2a3, a4a5, a6a7", fontsize=9)
    fig.suptitle("ldmatrix.sync.aligned.m8n8.x4.shared.b16: one instruction, 32 row addresses, "
                 "and every lane ends up holding exactly its mma A fragment", fontsize=11)
    fig.tight_layout()
    return fig
