"""On a CUDA machine only (COURSE_MODE=live): notebook 08's kernels against float64 at edge sizes."""
import os

import pytest

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)


def test_fusion_kernels_are_correct_at_edge_sizes():
    from course_lib.launch import fusion

    fusion.fusion_smoke()


def test_softmax_of_a_row_with_minus_infinity_and_a_spilled_variant():
    import cupy
    import numpy as np

    from course_lib.launch import fusion

    x = cupy.random.default_rng(0).standard_normal((3, 65536), dtype=cupy.float32)
    x[1, ::7] = -np.inf   # masked positions, as attention masks write them
    ref = cupy.exp(x.astype(cupy.float64) - x.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    out, stats = cupy.empty_like(x), cupy.empty(6, dtype=cupy.float32)
    for plan in (fusion.RowPlan.ONE_PASS, fusion.RowPlan.TWO_PASS):
        out.fill(np.nan)
        fusion.run_softmax(out, x, plan, stats)
        assert float(cupy.abs(out - ref).max()) <= 1e-4 * float(ref.max()), plan
