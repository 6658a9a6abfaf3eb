"""The reconciliation table across the course, from the records alone: enough kernels, bounds that
are the roofline's formula at the named level, residuals kept as observed minus bound, and every
negative residual explained as a finding."""
import pytest

from course_lib.core import hardware
from course_lib.measure import reconciliation


@pytest.fixture(scope="module")
def rows():
    return reconciliation.rows("h200")


def test_at_least_ten_course_kernels_from_notebooks_01_to_10(rows):
    kernels = [r for r in rows if r.notebook in {f"{i:02d}" for i in range(1, 11)}]
    assert len(kernels) >= 10 and len({r.notebook for r in kernels}) >= 8


def test_bounds_are_the_roofline_at_the_named_level(rows):
    h200 = hardware.spec("h200")
    vec = next(r for r in rows if r.notebook == "01")
    assert vec.bound_s == pytest.approx(3 * 4 * 2 ** 26 / h200.hbm_bandwidth_bytes_per_s)
    gemm = next(r for r in rows if r.notebook == "10")
    assert gemm.bound_s == pytest.approx(2 * 4096 ** 3 / h200.peak("bf16"))
    assert all(r.level for r in rows)


def test_residuals_are_observed_minus_bound_and_negative_ones_are_findings(rows):
    for r in rows:
        assert r.residual_s == pytest.approx(r.observed_s - r.bound_s)
        assert r.evidence
    negative = [r for r in rows if r.residual_s < 0]
    assert len(negative) >= 1 and all(r.evidence.startswith("negative:") for r in negative)
    assert all(not r.evidence.startswith("negative:") for r in rows if r.residual_s >= 0)


def test_the_table_reads_every_number_from_a_record(rows):
    table = reconciliation.table("h200")
    assert [t["kernel"] for t in table] == [r.kernel for r in rows]
    assert all(t["observed median µs"] > 0 for t in table)
