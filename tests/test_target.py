"""A child-process launch as a value: its script imports the function it names and calls it with
its arguments, so a moved function takes its profiler and sanitizer targets with it."""
import subprocess
import sys

import pytest

from course_lib.core.runtime import REPO_ROOT
from course_lib.measure.target import Target
from course_lib.models import roofline


def test_the_script_calls_the_function_with_its_arguments_in_a_child_process():
    target = Target(roofline.ridge_point, (2e15, 8e12), print_prefix="ridge=")
    proc = subprocess.run([sys.executable, "-c", target.script()], capture_output=True, text=True,
                          cwd=REPO_ROOT, env={"PYTHONPATH": str(REPO_ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ridge={roofline.ridge_point(2e15, 8e12)}"


def test_the_script_names_the_functions_module_not_a_copy_of_its_text():
    assert Target(roofline.ridge_point, (1.0, 2.0)).script() == (
        "from course_lib.models.roofline import ridge_point; ridge_point(*(1.0, 2.0))")


def test_a_function_a_child_cannot_import_is_refused():
    with pytest.raises(ValueError, match="module-level"):
        Target(lambda: None)


def test_arguments_that_are_not_literals_are_refused():
    with pytest.raises(ValueError, match="plain literals"):
        Target(roofline.ridge_point, (object(), 1.0))
