"""On a CUDA machine only (COURSE_MODE=live): the course's kernels against references, and a live record."""
import os

import pytest

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)


@pytest.mark.parametrize("kernel", ["copy", "copy_vec4", "vector_add", "vector_add_vec4"])
@pytest.mark.parametrize("n", [1, 3, 1000, 4097, 1 << 20])
def test_elementwise_kernels_match_reference(kernel, n):
    import cupy

    from course_lib.core import cuda
    from course_lib.launch.elementwise import geometry as elementwise_launch

    a = cupy.random.random(n, dtype=cupy.float32)
    b = cupy.random.random(n, dtype=cupy.float32)
    out = cupy.full(n, -1, dtype=cupy.float32)
    grid, block = elementwise_launch(kernel, n)
    args = (out, a, b, cupy.int64(n)) if "add" in kernel else (out, a, cupy.int64(n))
    cuda.kernel("elementwise", kernel)(grid, block, args)
    ref = a + b if "add" in kernel else a
    assert bool((out == ref).all())


def test_live_experiment_validates():
    from course_lib.measure import evidence, experiments

    r = experiments.run("machine.copy_bandwidth", n_bytes=1 << 26)
    assert r.mode == "live" and evidence.validate(r.to_record("test")) == []
