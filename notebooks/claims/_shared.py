"""Helpers several claims files share. Not a claims file itself (no notebook is named ``_shared``):
claims files load it by path, as course_lib.measure.claims loads them,

    shared = claims.load_module("_shared")
"""
from course_lib.core import hardware
from course_lib.measure.experiments import Result

# The copy ceiling's case: machine.copy_bandwidth's, and the sweeps' that time it beside their own kernels.
COPY_CASE = "CuPy device-to-device copy"


def copy_bandwidth(result: Result) -> float:
    """The bytes per second (read + write) of CuPy's device-to-device copy in ``result``."""
    return result.case(COPY_CASE).bandwidth_bytes_per_s


def copy_tb_per_s(result: Result) -> float:
    return copy_bandwidth(result) / 1e12


def copy_of_datasheet(result: Result) -> float:
    """The copy's bandwidth as a share of the GPU's datasheet HBM bandwidth: what makes it a fair roof on any GPU."""
    return copy_bandwidth(result) / hardware.spec(result.gpu).hbm_bandwidth_bytes_per_s
