"""Host side of ``kernels/timing.cu``: the GPU hold the harness runs before each start event, smoke-launched."""
from course_lib.core import cuda
from course_lib.measure.smoke import covers


@covers("timing", "gpu_hold")
def hold_smoke() -> None:
    import cupy

    spun = cupy.zeros(1, dtype=cupy.int64)
    cuda.kernel("timing", "gpu_hold")((1,), (1,), (cupy.int64(20_000), spun))
    if not 20_000 <= int(spun[0]) < 20_000_000:
        raise AssertionError(f"timing.gpu_hold spun {int(spun[0])} ns for a 20,000 ns hold")
