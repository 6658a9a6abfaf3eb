"""Smoke launches of the foundation kernels (elementwise, the timing hold), at sizes that hit every tail and mask."""
from .smoke import covers


@covers("elementwise", "copy", "copy_vec4", "vector_add", "vector_add_vec4")
def elementwise_smoke() -> None:
    import cupy

    from . import cuda
    from .experiments import elementwise_launch

    for n in (1, 5, 1027):
        a = cupy.arange(n, dtype=cupy.float32)
        b = cupy.full(n, 0.5, dtype=cupy.float32)
        for kernel in ("copy", "copy_vec4", "vector_add", "vector_add_vec4"):
            out = cupy.full(n, -1, dtype=cupy.float32)
            args = (out, a, b, cupy.int64(n)) if "add" in kernel else (out, a, cupy.int64(n))
            cuda.kernel("elementwise", kernel)(*elementwise_launch(kernel, n), args)
            want = a + b if "add" in kernel else a
            if not bool((out == want).all()):
                raise AssertionError(f"elementwise.{kernel} wrong at n={n}")


@covers("timing", "gpu_hold")
def hold_smoke() -> None:
    import cupy

    from . import cuda

    spun = cupy.zeros(1, dtype=cupy.int64)
    cuda.kernel("timing", "gpu_hold")((1,), (1,), (cupy.int64(20_000), spun))
    if not 20_000 <= int(spun[0]) < 20_000_000:
        raise AssertionError(f"timing.gpu_hold spun {int(spun[0])} ns for a 20,000 ns hold")
