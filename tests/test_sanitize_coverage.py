"""Every kernel in course_lib/kernels/ has a smoke launch, so `make sanitize` cannot skip it."""
import importlib
import pkgutil

from course_lib import labs, launch, sanitize
from course_lib.core import cuda


def test_every_kernel_is_covered_by_the_sanitizer_run():
    kernels = {(f, k) for f in cuda.families() for k in cuda.kernel_names(f)}
    covered = set(sanitize.registry())
    assert kernels - covered == set(), f"kernels without a smoke launch: {sorted(kernels - covered)}"
    assert covered - kernels == set(), f"smoke launches for kernels that do not exist: {sorted(covered - kernels)}"


def test_the_sanitizer_run_finds_every_smoke_launch_of_the_launchers_and_labs():
    """A smoke launch registered by any module of launch/ or labs/ is one the sanitizer run reaches."""
    from course_lib.measure.smoke import SMOKE

    for package in (launch, labs):
        for mod in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{mod.name}")
    every = dict(SMOKE)
    assert set(sanitize.registry()) == set(every)
    owners = {fn.__module__.rsplit(".", 1)[0] for fn in every.values()}
    assert owners <= {"course_lib.launch", "course_lib.labs"}, owners
