import pytest

from course_lib.core import hardware
from course_lib.core.hardware import SPECS


def test_table_covers_the_course_gpus():
    assert set(SPECS) == {"t4", "l4", "a10", "a100-sxm", "h100-sxm", "h200", "b200"}


@pytest.mark.parametrize("gpu", SPECS.values(), ids=list(SPECS))
def test_every_entry_cites_a_datasheet_and_is_physical(gpu):
    assert "datasheet" in gpu.source.lower()
    assert gpu.sm_count > 0 and gpu.hbm_bandwidth_bytes_per_s > 1e11
    assert gpu.registers_per_sm == 65536 and gpu.smem_per_sm_bytes >= 64 * 1024
    assert gpu.peak_flop_per_s["fp32"] > 1e12
    # tensor-core dtypes are never slower than fp32 on CUDA cores
    assert all(v >= gpu.peak_flop_per_s["fp32"] for v in gpu.peak_flop_per_s.values())


def test_fp4_only_on_blackwell_and_fp8_from_ada_on():
    assert [k for k, g in SPECS.items() if "fp4" in g.peak_flop_per_s] == ["b200"]
    assert {k for k, g in SPECS.items() if "fp8" in g.peak_flop_per_s} == {"l4", "h100-sxm", "h200", "b200"}


@pytest.mark.parametrize("name, key", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("Tesla T4", "t4"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm"), ("NVIDIA GeForce RTX 4090", "geforce-rtx-4090"),
])
def test_slug(name, key):
    assert hardware.slug(name) == key


def test_lookup_by_name_and_clear_errors():
    assert hardware.spec("NVIDIA H200").key == "h200"
    with pytest.raises(KeyError, match="not in the spec table"):
        hardware.spec("NVIDIA GeForce RTX 4090")
    with pytest.raises(ValueError, match="no fp8 peak"):
        SPECS["a100-sxm"].peak("fp8")


def test_unknown_card_works_from_measured_ceilings():
    info = hardware.DeviceInfo("NVIDIA RTX 6000 Ada Generation", "8.9", 142, 96 * 2**20, 100 * 1024,
                               99 * 1024, 65536, 1536, 48 * 2**30)
    assert info.spec is None and info.arch == "sm_89"
    with pytest.raises(ValueError, match="measure its ceilings"):
        hardware.spec_for_device(info)
    g = hardware.spec_for_device(info, 900e9, {"fp32": 80e12})
    assert g.hbm_bandwidth_bytes_per_s == 900e9 and "measured" in g.source


def test_measured_ceilings_replace_the_roofs_only():
    m = hardware.with_measured_ceilings(SPECS["h200"], 4.2e12, {"bf16": 780e12})
    assert m.sm_count == 132 and m.peak("bf16") == 780e12 and "measured" in m.name


def test_the_machine_card_carries_each_ceilings_clock_and_flags_a_reference_whose_protocols_disagree(monkeypatch):
    """The card shows each ceiling's lowest clock while timed and its second protocol's verdict: the record's tf32
    and bf16 cuBLAS timings disagreed with their back-to-back timings, and the card must say so where it shows them."""
    from course_lib.measure.ceilings import measured_ceilings

    monkeypatch.setenv("COURSE_MODE", "replay")
    rows = {r["ceiling"]: r for r in measured_ceilings().percent_of_spec()}
    assert rows["matmul tf32 (cuBLAS)"]["second protocol"].endswith("(flagged)")
    assert rows["matmul bf16 (cuBLAS)"]["second protocol"].endswith("(flagged)")
    assert rows["matmul fp8 (cuBLAS)"]["second protocol"] == "agree"
    assert rows["matmul fp32 (cuBLAS)"]["lowest SM clock while timed"].startswith("1980 MHz (100%)")
    assert rows["matmul bf16 (cuBLAS)"]["lowest SM clock while timed"].endswith("power-limited")
    # a card built without the cases (an older caller) says so rather than inventing a verdict
    bare = measured_ceilings()
    bare = type(bare)(bare.gpu, bare.provenance, bare.copy_bandwidth_bytes_per_s, bare.matmul_flop_per_s,
                      bare.spec, bare.machine, bare.matmul_machine)
    assert {r["second protocol"] for r in bare.percent_of_spec()} == {"not recorded"}


def test_the_roofline_points_say_which_cublas_timings_their_second_protocol_flagged(monkeypatch):
    from course_lib.measure import experiments
    from course_lib.measure.ceilings import measured_ceilings, roofline_points

    monkeypatch.setenv("COURSE_MODE", "replay")
    rows = {r["label"]: r["second protocol"] for r in roofline_points(experiments.run("roofline.measured"),
                                                                        measured_ceilings())}
    assert rows["matmul bf16, n=2048"].endswith("(flagged)")    # the record's, 5.8% apart
    assert rows["matmul fp32, n=4096"] == "agree" and rows["vector add, n=67108864"] == "course kernel"
    # one call at a time is the point of that case: back-to-back blocks are no check on it, and it is not flagged
    assert rows["matmul bf16, n=64, one call at a time"].startswith("one call at a time")
