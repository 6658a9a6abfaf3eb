"""The mma.sync m16n8k16 fragment maps and the ldmatrix.x4 map, held to the PTX ISA's layout: a
wrong map here would teach a kernel that silently multiplies the wrong elements, so the spot checks
come straight from the ISA's formulas and the ldmatrix map is held to the mma A fragment."""
import sys

import matplotlib
import pytest

matplotlib.use("Agg")

from course_lib.figures import mma as mma_pictures  # noqa: E402
from course_lib.figures.mma import (  # noqa: E402
    fragment_figure,
    fragment_layout,
    ldmatrix_address_lanes,
    ldmatrix_figure,
    ldmatrix_layout,
)

SHAPES = {"A": (16, 16, 8), "B": (16, 8, 4), "C": (16, 8, 4)}  # rows, cols, values per lane


@pytest.mark.parametrize("operand", "ABC")
def test_each_layout_is_a_bijection_onto_lanes_times_slots(operand):
    rows, cols, per_lane = SHAPES[operand]
    layout = fragment_layout(operand)
    assert set(layout) == {(r, c) for r in range(rows) for c in range(cols)}
    assert len(set(layout.values())) == len(layout)
    assert set(layout.values()) == {(lane, i) for lane in range(32) for i in range(per_lane)}


@pytest.mark.parametrize("operand, element, owner", [
    ("A", (0, 0), (0, 0)), ("A", (8, 0), (0, 2)), ("A", (0, 8), (0, 4)), ("A", (9, 11), (5, 7)),
    ("A", (0, 1), (0, 1)), ("A", (15, 15), (31, 7)),
    ("B", (1, 3), (12, 1)), ("B", (8, 0), (0, 2)), ("B", (15, 7), (31, 3)),
    ("C", (15, 7), (31, 3)), ("C", (8, 1), (0, 3)), ("C", (2, 5), (10, 1)),
])
def test_spot_checks_from_the_ptx_isa(operand, element, owner):
    assert fragment_layout(operand)[element] == owner


def test_a_quad_of_lanes_shares_a_row_of_a():
    """groupID picks the row: lanes 4g..4g+3 hold rows g and g+8 of A, nothing else."""
    for (row, _), (lane, _) in fragment_layout("A").items():
        assert row % 8 == lane >> 2


def test_unknown_operand_is_refused():
    with pytest.raises(ValueError, match="unknown mma operand 'D'"):
        fragment_layout("D")


def test_ldmatrix_x4_delivers_exactly_the_mma_a_fragment():
    a, ld = fragment_layout("A"), ldmatrix_layout(x4=True)
    assert set(ld) == set(a)
    for element, (lane, index) in a.items():
        assert ld[element] == (lane, index // 2), element


def test_ldmatrix_every_lane_gets_one_pair_per_register():
    pairs = {}
    for (row, col), owner in ldmatrix_layout().items():
        pairs.setdefault(owner, []).append((row, col))
    assert set(pairs) == {(lane, j) for lane in range(32) for j in range(4)}
    for cells in pairs.values():  # two adjacent bf16 of one row: one 32-bit register
        (r0, c0), (r1, c1) = sorted(cells)
        assert r0 == r1 and c1 == c0 + 1 and c0 % 2 == 0


def test_ldmatrix_x1_loads_only_matrix_0():
    x1 = ldmatrix_layout(x4=False)
    assert set(x1) == {(r, c) for r in range(8) for c in range(8)}
    assert {j for _, j in x1.values()} == {0}
    assert ldmatrix_address_lanes(x4=False) == {(0, r): r for r in range(8)}


def test_ldmatrix_row_addresses_come_from_all_32_lanes():
    lanes = ldmatrix_address_lanes()
    assert sorted(lanes.values()) == list(range(32))
    assert lanes[(0, 0)] == 0 and lanes[(1, 0)] == 8 and lanes[(2, 7)] == 23 and lanes[(3, 7)] == 31


@pytest.mark.parametrize("build, n_axes", [(fragment_figure, 3), (ldmatrix_figure, 2)])
def test_figures_build_and_close(build, n_axes):
    import matplotlib.pyplot as plt

    fig = build()
    assert isinstance(fig, matplotlib.figure.Figure)
    assert len(fig.axes) == n_axes
    assert fig.get_suptitle()
    fig.canvas.draw()
    plt.close(fig)
    assert not plt.fignum_exists(fig.number)


def test_fragment_figure_title_and_panel_titles():
    import matplotlib.pyplot as plt

    fig = fragment_figure()
    assert fig.get_suptitle() == "mma.sync m16n8k16 (bf16 in, fp32 out): which lane holds which element"
    titles = [ax.get_title() for ax in fig.axes]
    assert "16x16" in titles[0] and "4 x 32-bit" in titles[0]
    assert "16x8" in titles[1] and "2 x 32-bit" in titles[1]
    assert "16x8" in titles[2] and "4 x 32-bit" in titles[2]
    plt.close(fig)


def test_module_does_not_import_matplotlib_at_load():
    import subprocess

    code = ("import sys; import course_lib.figures.mma as m; m.fragment_layout('A'); "
            "m.ldmatrix_layout(); assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=mma_pictures.__file__.rsplit("/course_lib", 1)[0])
