"""Notebook 10's pieces that need no GPU: the descriptor and swizzle models (held to the kernel's
own arithmetic), setmaxnreg's budget, the rungs' launch contracts, the records' coverage and what they show
that no claim checks (notebooks/claims/10_hopper_gemm.py holds their figures), and the exercise checks (right
answers pass, wrong ones are told why)."""
import re

import pytest

from course_lib.core import cuda
from course_lib.exercises.hopper_gemm import (
    best_consumer_registers,
    check_costliest,
    check_descriptor,
    check_register_plan,
    design_changes,
)
from course_lib.labs import hopper_gemm as lab_hopper
from course_lib.launch import hopper_gemm, operands
from course_lib.measure import experiments
from course_lib.models import hopper


def kernel_descriptor(address: int) -> int:
    """smem_desc of hopper_gemm.cu, evaluated the way the kernel writes it (default macros)."""
    return ((address & 0x3FFFF) >> 4) | ((16 >> 4) << 16) | ((1024 >> 4) << 32) | (1 << 62)


def test_the_kernels_descriptor_is_the_models():
    src = cuda.source("hopper_gemm")
    assert "(u64)((addr & 0x3FFFF) >> 4) | ((u64)(16 >> 4) << 16) | ((u64)(1024 >> 4) << 32)" in src
    for addr in (0, 1024, 4096 + 32, 0x3FFF0):
        assert hopper.smem_descriptor(addr) == kernel_descriptor(addr)


def test_descriptor_fields_round_trip_and_bad_ones_are_refused():
    d = hopper.smem_descriptor(0x8020)
    assert d == 0x4000004000010802
    assert hopper.decode_descriptor(d) == {"start address": 0x8020, "leading byte offset": 16,
                                           "stride byte offset": 1024, "base offset": 0, "swizzle": "128B"}
    assert hopper.decode_descriptor(hopper.smem_descriptor(0, swizzle="none"))["swizzle"] == "none"
    with pytest.raises(ValueError, match="16-byte aligned"):
        hopper.smem_descriptor(8)
    with pytest.raises(ValueError, match="below 256 KiB"):
        hopper.smem_descriptor(1 << 18)
    with pytest.raises(ValueError, match="swizzle"):
        hopper.smem_descriptor(0, swizzle="256B")


def test_swizzle_is_a_permutation_of_each_row_repeating_every_8_rows():
    for r in range(16):
        assert sorted(hopper.swizzled_chunk(r, c) for c in range(8)) == list(range(8))
        assert [hopper.swizzled_chunk(r, c) for c in range(8)] == [hopper.swizzled_chunk(r + 8, c) for c in range(8)]
    # the eight rows of one k16 step (chunk 0) land in eight different 16-byte bank groups
    assert len({hopper.swizzled_offset(r, 0) % 128 for r in range(8)}) == 8
    assert hopper.swizzled_offset(3, 9) == 3 * 128 + (1 ^ 3) * 16 + 2
    with pytest.raises(ValueError, match="128-byte row"):
        hopper.swizzled_offset(0, 64)


def test_register_plans_and_the_launch_share():
    plan = hopper.register_plan(40, 232)
    assert plan.total == 64512 and plan.fits and plan.launch_regs == 168 and plan.pool == 384 * 168
    assert not hopper.register_plan(24, 248).fits
    assert not hopper.register_plan(32, 240).fits   # 65,536 fit the SM, but not the 64,512 the block holds
    assert best_consumer_registers() == 240
    assert hopper.accumulator_registers(64, 256) == 128
    with pytest.raises(ValueError, match="multiple of 8"):
        hopper.register_plan(20, 232)
    with pytest.raises(ValueError, match="evenly"):
        hopper.accumulator_registers(3, 5)


def test_rung_5s_launch_share_is_what_ptxas_reports():
    res = cuda.compile_family("hopper_gemm", "sm_90a").resources
    assert res["hgemm_5_persistent"].registers == hopper.register_plan(40, 232).launch_regs
    assert all(not r.spills for r in res.values())


def test_tensor_memory_model():
    assert hopper.TMEM_BYTES == 256 * 1024
    assert hopper.tmem_accumulators(128, 256) == 2 and hopper.tmem_accumulators(64, 256) == 4
    assert hopper.accumulator_share_of_registers(128, 256) == 0.5
    with pytest.raises(ValueError, match="M = 64 or 128"):
        hopper.tmem_accumulators(256, 256)


def test_each_rungs_shared_memory_matches_its_launch_contract():
    numbers = {r.kernel: r for r in hopper_gemm.RUNGS}
    assert hopper_gemm.smem_bytes(numbers["hgemm_1_tma_wgmma"]) == 33800
    assert hopper_gemm.smem_bytes(numbers["hgemm_4_wide"]) == 197696
    src = cuda.kernel_source("hopper_gemm", "hgemm_1_tma_wgmma")
    assert "33,800 bytes" in src and "197,696" in cuda.kernel_source("hopper_gemm", "hgemm_4_wide")
    d = hopper_gemm.hg_macros()
    assert hopper_gemm.smem_bytes(numbers["hgemm_2_ring"]) == 1024 + d["HG_RING_STAGES"] * (32768 + 16)
    for r in hopper_gemm.RUNGS:   # the block size each launch uses is the one __launch_bounds__ allows
        bounds = re.search(r"__launch_bounds__\((\d+)", cuda.kernel_source("hopper_gemm", r.kernel)).group(1)
        assert int(bounds) == r.threads


def test_geometry_is_one_block_per_tile_or_one_per_sm():
    r1, r5, r6 = hopper_gemm.rung(1), hopper_gemm.rung(5), hopper_gemm.rung(6)
    assert hopper_gemm.geometry(r6, 4096, 4096, 132)[0] == (132,)            # 66 clusters of 2
    assert hopper_gemm.geometry(r6, 129, 300, 132)[0] == (4,)                # 2 tile pairs (one half empty)
    assert hopper_gemm.geometry(r6, 4096, 4096, 132, blocks=121)[0] == (120,)   # whole clusters only
    assert r6.b_box_rows == 128 and r5.b_box_rows == 256
    assert hopper_gemm.geometry(r1, 129, 257, 132)[0] == (2 * 3,)
    assert hopper_gemm.geometry(r5, 4096, 4096, 132)[0] == (132,)
    assert hopper_gemm.geometry(r5, 100, 100, 132)[0] == (1,)
    r7 = hopper_gemm.rung(7)
    assert hopper_gemm.geometry(r7, 4096, 4096, 132) == ((132,), (384,), 214_064)   # 3 slots + the 64 KiB stage
    with pytest.raises(KeyError, match="the ladder has"):
        hopper_gemm.rung(8)


def test_bad_k_and_wrong_gpu_are_refused_in_words():
    with pytest.raises(ValueError, match="multiple of 8. Pad K with zeros to 24"):
        hopper_gemm.require_k(20)
    with pytest.raises(ValueError, match="positive multiple of 8"):
        hopper_gemm.require_k(0)
    hopper_gemm.require_k(8)
    with pytest.raises(RuntimeError, match="compute capability 9.0.*this GPU is 8.0"):
        hopper_gemm.require_hopper("8.0")
    with pytest.raises(RuntimeError, match="this GPU is 10.0"):
        hopper_gemm.require_hopper("10.0")


def test_every_rung_is_shown_as_a_diff_of_the_last():
    assert lab_hopper.rung_diff(1).lstrip().startswith("// Rung 1.")
    for n in range(2, 8):
        diff = lab_hopper.rung_diff(n)
        assert diff.startswith(f"--- {hopper_gemm.rung(n - 1).kernel}\n+++ {hopper_gemm.rung(n).kernel}")
    assert "registers_up<HG_CONSUMER_REGS>" in lab_hopper.rung_diff(4)
    assert "tile_origin" in lab_hopper.rung_diff(5)
    assert "produce_pairs" in lab_hopper.rung_diff(6) and "cluster_sync" in lab_hopper.rung_diff(6)
    assert "+                store_tile_tma<BN, STAGED_RESIDUAL>(maps + 32" in lab_hopper.rung_diff(7)
    assert "tma_load_2d_multicast" in lab_hopper.helper_source("produce_pair_tile")
    helpers = lab_hopper.helper_source("produce_tile", "consume_tile", "release")
    assert "mbar_wait(sl.empty(ring.slot), ring.phase ^ 1)" in helpers and helpers.count("__device__") == 3


def test_ceiling_sums_and_flops():
    assert lab_hopper.ceiling_sum("wgmma", 256, 4096) == -2 ** 25
    assert lab_hopper.ceiling_sum("mma.sync", 0, 10) == -5120
    assert lab_hopper.ceiling_flop("wgmma", 256, 1, 128, 1) == 4 * 2 * 64 * 256 * 16
    assert lab_hopper.ceiling_flop("mma.sync", 0, 1, 32, 1) == 8 * 4096


@pytest.fixture(scope="module")
def recorded():
    names = ("ladder", "edges", "ceilings", "ablations", "pitfalls", "profile")
    return {n: experiments.replay(f"hopper.{n}", experiments.resolve_params(f"hopper.{n}"), "h200") for n in names}


def test_the_ladder_record_has_every_rung_at_every_shape_and_every_check_passed(recorded):
    rows = lab_hopper.ladder_rows(recorded["ladder"])
    assert [r["rung"].split()[0] for r in rows] == ["1", "2", "3", "4", "5", "6", "7", "cuBLAS"]
    assert len(rows[0]) == 1 + 2 * 4
    assert all(c.check["passed"] for res in recorded.values() for c in res.cases)


def test_the_edges_record_has_every_rung_at_every_edge_shape_and_each_passed(recorded):
    rows = lab_hopper.edges_rows(recorded["edges"])
    assert len(rows) == len(hopper_gemm.RUNGS) == 7 and all(len(r) == 1 + len(lab_hopper.EDGE_SHAPES) for r in rows)
    assert all(v.endswith("✔") for r in rows for k, v in r.items() if k != "rung")


def test_recorded_pitfalls_show_the_faults(recorded):
    x = recorded["pitfalls"].cases[0].extra
    assert x["release_before_wait"]["wrong_runs"] > 0 and x["descriptor_without_swizzle"]["wrong_runs"] > 0
    assert "not supported on .target 'sm_90'" in x["build_for_sm_90"]
    assert "C7602" in x["register_cap_below_accumulators"]
    assert "NO_BINARY_FOR_GPU" in x["driver_loading_sm_100a"]
    assert x["sass"]["local loads LDL"] == 0 and x["sass"]["HGMMA"] > 0
    assert any("RACECHECK SUMMARY" in ln for ln in x["racecheck_release_before_wait"]["lines"])
    assert "launch failure" in x["wrong_byte_count"]["error"] and x["wrong_byte_count"]["child_seconds"] < 60


def test_the_profile_record_has_every_rung_and_cublas_with_a_tensor_pipe_reading(recorded):
    rows = lab_hopper.profile_rows(recorded["profile"])
    assert [r["kernel"] for r in rows][1:] == hopper_gemm.RUNG_KERNELS and rows[0]["kernel"].startswith("cuBLAS")
    assert all(0 < r["tensor pipe active %"] <= 100 for r in rows)


def test_ablation_rows_compare_each_variant_with_its_own_build(recorded):
    rows = lab_hopper.ablation_rows(recorded["ablations"])
    as_built = [r for r in rows if r["time change %"] is None]
    assert {r["variant"] for r in as_built} == {v for v, spec in lab_hopper.ABLATIONS.items() if spec[1:] == ({}, 0, None)}
    held = next(r for r in rows if r["variant"] == "rung 1 held to one block per SM" and r["shape"].startswith("4096"))
    assert held["time change %"] > 50 and held["compared with"] == "rung 1 as built (three blocks per SM)"
    assert lab_hopper.ablation_base("clusters of 2 with multicast (rung 6)") == "rung 5 as built"


def test_exercise_checks(recorded):
    assert check_descriptor(kernel_descriptor).correct
    assert not check_descriptor(hopper.smem_descriptor).correct
    swizzle_left_out = check_descriptor(lambda a: kernel_descriptor(a) & ~(3 << 62))
    assert not swizzle_left_out.correct and "swizzle mode (bits 62-63) wrong" in swizzle_left_out
    assert "stride byte offset (bits 32-45) right" in swizzle_left_out
    assert "0x4" not in swizzle_left_out and "1024" not in swizzle_left_out   # never the value it wanted
    assert "outside these fields" in check_descriptor(lambda a: kernel_descriptor(a) | 1 << 50)
    assert "not a 64-bit integer" in check_descriptor(lambda a: float(kernel_descriptor(a)))
    assert "raised" in check_descriptor(lambda a: 1 / 0)
    assert not check_descriptor(None).correct
    assert check_register_plan(24, 240).correct
    assert not check_register_plan(24, 248).correct          # does not fit
    assert "wait for them forever" in check_register_plan(32, 240)
    assert "could have more" in check_register_plan(24, 232) and "240" not in check_register_plan(24, 232)
    assert "few registers" in check_register_plan(40, 232)
    assert "multiple of 8" in check_register_plan(20, 240)
    shape = "4096×4096×4096"
    release = "rung 6 freeing the other block's slot with .release.cluster"
    assert check_costliest(recorded["ablations"], shape, release).correct
    wrong = check_costliest(recorded["ablations"], shape, "no setmaxnreg")
    assert not wrong.correct and ".release.cluster" not in wrong and "%" not in wrong   # never the answer
    assert not check_costliest(recorded["ablations"], shape, "rung 2 with 4 slots (one block per SM)").correct
    # the clamp is a control, not a design change: not an answer, though it slows rung 1 the most
    assert "rung 1 held" not in " ".join(design_changes(recorded["ablations"], shape))
    assert "Answer with one of" in check_costliest(recorded["ablations"], shape, "rung 1 held to one block per SM")
    assert not check_costliest(recorded["ablations"], shape, None).correct
    assert "Answer with one of" in check_costliest(recorded["ablations"], shape, "something else")


def test_variants_are_checked_then_timed_in_turn_with_cublas(monkeypatch):
    """The orchestration behind the ladder, ablation and profile experiments, without a GPU: every
    variant runs once and is checked, then cuBLAS and the variants are timed call by call, in order."""
    import torch


    launched, checked = [], []
    monkeypatch.setattr(lab_hopper, "nan_output", lambda m, n: {"shape": (m, n)})
    monkeypatch.setattr(lab_hopper, "run", lambda kernel, a, b, c, defines=None, smem_bytes_at_least=0:
                        launched.append((kernel, tuple(sorted((defines or {}).items())), smem_bytes_at_least)))
    monkeypatch.setattr(lab_hopper, "bf16_bits_to_float32", lambda c: c)
    monkeypatch.setattr(lab_hopper, "check_close", lambda got, ref, what, tol: checked.append(got) or {"passed": True})

    def interleaved(calls, samples, references=()):
        assert list(references) == [0], "cuBLAS, the first call, is the reference checked by a second protocol"
        for fn in calls:
            fn()
        return [f"timing {i}" for i in range(len(calls))]

    monkeypatch.setattr(lab_hopper, "benchmark_interleaved", interleaved)
    a, b = torch.zeros(3, 8), torch.zeros(5, 8)
    variants = {"first": ("hgemm_5_persistent", {}, 0), "second": ("hgemm_1_tma_wgmma", {"HG_STAGES": 3}, 4096)}
    t_lib, timed = lab_hopper._timed_beside_cublas(variants, a, b, a, b, None, 20)
    assert t_lib == "timing 0" and timed == {"first": ("timing 1", {"passed": True}), "second": ("timing 2", {"passed": True})}
    once = [("hgemm_5_persistent", (), 0), ("hgemm_1_tma_wgmma", (("HG_STAGES", 3),), 4096)]
    assert launched == once + once          # checked once each, then once each inside the timing
    assert [c["shape"] for c in checked] == [(3, 5), (3, 5)]


def test_sm_rounds_count_the_busiest_sms_tiles_for_each_kind_of_grid():
    r2, r5, r7 = (hopper_gemm.rung(n) for n in (2, 5, 7))
    assert hopper_gemm.sm_rounds(r2, 4096, 4096, 132) == 8        # 1,024 tiles, one block each, over 132 SMs
    assert hopper_gemm.sm_rounds(r5, 4096, 4096, 132) == 4        # 512 tiles on 132 persistent blocks
    assert hopper_gemm.sm_rounds(r7, 4096, 4096, 132) == 4        # 256 tile pairs on 66 clusters
    assert hopper_gemm.sm_rounds(r7, 128, 4096, 132) == 1         # 16 pairs: 16 clusters, one round
    assert hopper_gemm.sm_rounds(r5, 2304, 2304, 132) == 2        # 162 tiles: 30 SMs run two


def test_split_k_refuses_more_splits_than_k_slices_and_labels_its_plans():
    assert hopper_gemm.split_k_grid(128, 4096, 4096, 4) == (32, 4)
    with pytest.raises(ValueError, match="at most 4 splits"):
        hopper_gemm.split_k_grid(128, 4096, 256, 8)
    assert hopper_gemm.Plan("hgemm_split_k", 4).label == "split-K ×4"
    assert hopper_gemm.Plan("hgemm_7_tma_store").label == "rung 7"
    assert [p.label for p in lab_hopper.sweep_plans(256)] == ["rung 2", "rung 3", "rung 5", "rung 7", "split-K ×2",
                                                            "split-K ×4"]


def test_the_dispatch_splits_k_where_the_tiles_cannot_fill_the_sms_and_keeps_rung_7_where_they_can():
    # seconds per tile-slice: a 128x256 one takes 1.5 times a 128x128 one, and rung 7's epilogue saves a little
    per = {r.kernel: 1e-6 if r.tile == (128, 128) else 1.5e-6 for r in hopper_gemm.RUNGS}
    per["hgemm_7_tma_store"] = 1.4e-6
    assert lab_hopper.dispatch(4096, 4096, 4096, per).label == "rung 7"
    assert lab_hopper.dispatch(128, 4096, 4096, per).label.startswith("split-K")
    # the model's time is the busiest SM's tile-slices times the seconds of one
    assert lab_hopper.predicted_seconds(hopper_gemm.Plan("hgemm_2_ring"), 4096, 4096, 4096, per) == 8 * 64 * 1e-6


def test_the_shape_sweep_record_times_every_plan_at_every_shape_and_every_check_passed():
    # which plan wins where is claimed in 10's prose (split-K at the two shapes of 32 tiles, and at no other)
    shapes = experiments.replay("hopper.shapes", experiments.resolve_params("hopper.shapes"), "h200")
    ladder = experiments.replay("hopper.ladder", experiments.resolve_params("hopper.ladder"), "h200")
    assert all(c.check["passed"] for c in shapes.cases)
    rows = lab_hopper.shape_rows(shapes, ladder)
    assert [r["shape"] for r in rows] == [lab_hopper.shape_label(*s) for s in lab_hopper.SHAPE_SWEEP]
    for r, (_, _, k) in zip(rows, lab_hopper.SHAPE_SWEEP):
        assert {key[:-2] for key in r if key.endswith(" %") and key != "pick %"} == {
            p.label for p in lab_hopper.sweep_plans(k)}


def test_rung_7_refuses_a_c_the_tma_cannot_address_before_anything_launches(monkeypatch):
    class Fake:
        def __init__(self, shape, ptr):
            self.shape, self.data = shape, type("D", (), {"ptr": ptr})()

    monkeypatch.setattr(hopper_gemm, "sm_count", lambda: 132)
    monkeypatch.setattr(hopper_gemm, "kernel_function", lambda *a, **k: pytest.fail("compiled a kernel"))
    a, b, c = Fake((256, 64), 0), Fake((512, 64), 0), Fake((256, 512), 4096 + 2)
    with pytest.raises(ValueError, match="16-byte aligned"):
        hopper_gemm.run(7, a, b, c)


class _FakeArray:
    def __init__(self, shape, ptr=0, dtype="uint16", contiguous=True):
        self.shape, self.data, self.dtype = shape, type("D", (), {"ptr": ptr})(), dtype
        self.flags = type("F", (), {"c_contiguous": contiguous})()


def test_rung_7s_fused_epilogue_refuses_what_it_cannot_read_before_anything_launches(monkeypatch):
    monkeypatch.setattr(hopper_gemm, "sm_count", lambda: 132)
    monkeypatch.setattr(hopper_gemm, "kernel_function", lambda *a, **k: pytest.fail("compiled a kernel"))
    full = hopper_gemm.FUSED_EPILOGUES["bias + GELU + residual"]
    gelu = hopper_gemm.FUSED_EPILOGUES["bias + GELU"]
    a, b, c = _FakeArray((256, 64)), _FakeArray((512, 64)), _FakeArray((256, 512))
    bias = _FakeArray((512,))
    with pytest.raises(ValueError, match="multiple of 8"):
        hopper_gemm.run(7, a, _FakeArray((12, 64)), _FakeArray((256, 12)), gelu, bias_bits=_FakeArray((12,)))
    with pytest.raises(ValueError, match="bias of N = 512"):
        hopper_gemm.run(7, a, b, c, gelu)
    with pytest.raises(ValueError, match="M×N = 256×512 residual"):
        hopper_gemm.run(7, a, b, c, full, bias_bits=bias)
    with pytest.raises(ValueError, match="16-byte aligned"):   # the TMA loads the residual's tiles
        hopper_gemm.run(7, a, b, c, full, bias_bits=bias, residual_bits=_FakeArray((256, 512), 4096 + 4))
    with pytest.raises(ValueError, match="4-byte aligned"):
        hopper_gemm.run(7, a, b, c, gelu, bias_bits=_FakeArray((512,), 4096 + 2))
    with pytest.raises(ValueError, match="only rung 7"):
        hopper_gemm.run(5, a, b, c, gelu, bias_bits=bias)
    with pytest.raises(ValueError, match="raw bf16 bits"):   # a float32 bias would be read as pairs of bf16
        hopper_gemm.run(7, a, b, c, gelu, bias_bits=_FakeArray((512,), dtype="float32"))
    with pytest.raises(ValueError, match="not contiguous"):   # a transposed view would be read row by row
        hopper_gemm.run(7, a, b, c, full, bias_bits=bias, residual_bits=_FakeArray((256, 512), contiguous=False))


def test_the_fused_epilogues_are_the_kernels_macros_and_the_staged_residual_adds_its_barriers():
    r7 = hopper_gemm.rung(7)
    assert hopper_gemm.c_box() == 64 and hopper_gemm.epilogue_of(None) == 0
    assert [hopper_gemm.epilogue_of(d) for d in hopper_gemm.FUSED_EPILOGUES.values()] == [1, 2, 2]
    assert [hopper_gemm.staged_residual(d) for d in hopper_gemm.FUSED_EPILOGUES.values()] == [False, True, False]
    plain = hopper_gemm.smem_bytes(r7)
    assert hopper_gemm.smem_bytes(r7, hopper_gemm.FUSED_EPILOGUES["bias + GELU + residual"]) == plain + 16
    assert hopper_gemm.smem_bytes(r7, hopper_gemm.FUSED_EPILOGUES["bias + GELU"]) == plain
    assert hopper_gemm.smem_bytes(r7, hopper_gemm.FUSED_EPILOGUES["bias + GELU + residual"]) <= 227 * 1024


def test_the_gelu_reference_is_torchs_tanh_form():
    import numpy as np

    x = np.array([-3.0, -0.5, 0.0, 0.5, 3.0])
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    assert np.allclose(operands.gelu_tanh_reference(x), want, rtol=1e-12)
    assert operands.gelu_tanh_reference(np.array([-10.0]))[0] > -1e-12   # the tail goes to 0, not below


def test_the_ladder_figure_shows_every_rung(recorded):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = lab_hopper.ladder_figure(recorded["ladder"], recorded["ceilings"])
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    rungs = [r.number for r in lab_hopper.RUNGS]
    assert low < min(rungs) and high > max(rungs) == 7       # rung 7, the headline rung, is on the plot
    assert all(low < line.get_xdata()[-1] < high for line in ax.get_lines() if len(line.get_xdata()) == len(rungs))
    plt.close(fig)
