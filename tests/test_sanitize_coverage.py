"""Every kernel in course_lib/kernels/ has a smoke launch, so `make sanitize` cannot skip it."""
from course_lib import sanitize
from course_lib.core import cuda


def test_every_kernel_is_covered_by_the_sanitizer_run():
    kernels = {(f, k) for f in cuda.families() for k in cuda.kernel_names(f)}
    covered = set(sanitize.registry())
    assert kernels - covered == set(), f"kernels without a smoke launch: {sorted(kernels - covered)}"
    assert covered - kernels == set(), f"smoke launches for kernels that do not exist: {sorted(covered - kernels)}"
