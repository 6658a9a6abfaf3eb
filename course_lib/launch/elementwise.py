"""Host launcher of ``kernels/elementwise.cu`` (copy, vector add, their float4 forms) and its smoke launch."""
from course_lib.core import cuda
from course_lib.measure.smoke import covers


def geometry(kernel: str, n: int) -> tuple[tuple[int], tuple[int]]:
    """The grid each elementwise kernel's header asks for."""
    block = 256
    per_thread = 4 if kernel.endswith("_vec4") else 1
    return ((n // per_thread + block - 1) // block,), (block,)


@covers("elementwise", "copy", "copy_vec4", "vector_add", "vector_add_vec4")
def elementwise_smoke() -> None:
    import cupy

    for n in (1, 5, 1027):
        a = cupy.arange(n, dtype=cupy.float32)
        b = cupy.full(n, 0.5, dtype=cupy.float32)
        for kernel in ("copy", "copy_vec4", "vector_add", "vector_add_vec4"):
            out = cupy.full(n, -1, dtype=cupy.float32)
            args = (out, a, b, cupy.int64(n)) if "add" in kernel else (out, a, cupy.int64(n))
            cuda.kernel("elementwise", kernel)(*geometry(kernel, n), args)
            want = a + b if "add" in kernel else a
            if not bool((out == want).all()):
                raise AssertionError(f"elementwise.{kernel} wrong at n={n}")
