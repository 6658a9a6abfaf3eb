"""On a CUDA machine only (COURSE_MODE=live): notebook 09's kernels against references at edge sizes."""
import os

import pytest

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)


def test_pipeline_kernels_are_correct_at_edge_sizes():
    from course_lib.launch import pipeline

    pipeline.pipeline_smoke()
