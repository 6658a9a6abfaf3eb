"""SASS without a GPU: nvdisasm over NVRTC's cubin, the instruction groups, and a clear message where
the disassembler or NVRTC is missing."""
import pytest

from course_lib.figures import plots
from course_lib.labs import gemm_ladder as lab_gemm
from course_lib.launch import gemm_bf16, gemm_fp32
from course_lib.measure import sass


def test_groups_match_mnemonics_with_and_without_modifiers():
    m = sass.mix(["LDS.U.128", "LDS", "LDS.64", "FFMA", "FFMA.FTZ", "LDL.64", "STL", "HMMA.16816.F32.BF16"])
    assert m["instructions"] == 8 and m["FFMA"] == 2 and m["LDS (shared loads)"] == 3
    assert m["of which LDS.128"] == 1 and m["LDL/STL (local)"] == 2 and m["HMMA (mma.sync)"] == 1
    assert m["LDG (global loads)"] == 0


@pytest.mark.skipif(sass.nvdisasm_path() is None, reason="nvdisasm is not installed")
def test_the_fp32_ladder_moves_from_global_loads_to_shared_loads_to_ffmas():
    rows = {r["kernel"]: r for r in sass.mix_rows(gemm_fp32.FP32, gemm_fp32.LADDER_KERNELS, "sm_90")}
    naive, smem, reg2d = rows["sgemm_naive"], rows["sgemm_smem"], rows["sgemm_reg2d"]
    assert naive["LDG (global loads)"] == 2 * naive["FFMA"] and naive.get("LDS (shared loads)", 0) == 0
    assert smem["LDS (shared loads)"] >= smem["FFMA"] and smem["BAR (barriers)"] >= 2
    assert reg2d["FFMA"] >= 16 * reg2d["LDS (shared loads)"]
    bf16 = sass.mix_rows(gemm_bf16.BF16, ["bf16_gemm_mma"], "sm_90")[0]
    assert bf16["HMMA (mma.sync)"] > 0 and bf16["LDSM (ldmatrix)"] > 0 and bf16["LDGSTS (cp.async)"] > 0
    assert bf16["UTMALDG (TMA)"] > 0


def test_a_missing_disassembler_or_cubin_says_what_to_do(monkeypatch):
    monkeypatch.setattr(sass, "nvdisasm_path", lambda: None)
    with pytest.raises(sass.DisassemblerUnavailable, match="pip install nvidia-cuda-nvdisasm"):
        sass.instructions(b"\x7fELF")
    shown = repr(plots.mix_table(gemm_fp32.FP32, gemm_fp32.LADDER_KERNELS, "sm_90", "x"))
    assert shown.startswith("No SASS table here") and "nvdisasm" in shown
    monkeypatch.setattr(sass, "nvdisasm_path", lambda: "/bin/true")
    with pytest.raises(sass.DisassemblerUnavailable, match="NVRTC is not installed"):
        sass.instructions(b"")


def test_rung_diffs_show_what_each_rung_changes():
    d = lab_gemm.rung_diff("sgemm_smem")
    assert d.startswith("--- sgemm_coalesced\n+++ sgemm_smem") and "+    __shared__ float As" in d
    with pytest.raises(ValueError, match="first rung"):
        lab_gemm.rung_diff("sgemm_naive")


@pytest.mark.skipif(sass.nvdisasm_path() is None, reason="nvdisasm is not installed")
def test_rung_6s_cluster_scope_release_is_a_gpu_membar_and_the_default_release_is_not():
    from course_lib.core import cuda

    def membars(options):
        lines = sass.listing(cuda.compile_family("hopper_gemm", "sm_90a", options).cubin)["hgemm_6_cluster"]
        return sum("MEMBAR.ALL.GPU" in line for line in lines)

    # the cluster barriers at the start and end fence too; the slot release adds its own, in the K loop
    assert membars(("-DHG_REMOTE_RELEASE_CLUSTER=1",)) == membars(("-DHG_REMOTE_RELEASE_CLUSTER=0",)) + 1


@pytest.mark.skipif(sass.nvdisasm_path() is None, reason="nvdisasm is not installed")
def test_one_wgmma_group_in_flight_waits_for_one_group_then_none():
    from course_lib.core import cuda

    def depbars(options):
        lines = sass.listing(cuda.compile_family("hopper_gemm", "sm_90a", options).cubin)["hgemm_5_persistent"]
        return sorted(line.split("WARPGROUP.DEPBAR")[1].split(";")[0].strip() for line in lines if "WARPGROUP.DEPBAR" in line)

    assert depbars(()) == [".LE gsb0, 0x0"]
    assert depbars(("-DHG_INFLIGHT=1",)) == [".LE gsb0, 0x0", ".LE gsb0, 0x1"]


@pytest.mark.skipif(sass.nvdisasm_path() is None, reason="nvdisasm is not installed")
def test_rung_7_stores_through_stmatrix_and_the_tma_and_keeps_rung_6s_stores_for_odd_n():
    from course_lib.core import cuda

    listing = sass.listing(cuda.compile_family("hopper_gemm", "sm_90a").cubin)
    rung6, rung7 = listing["hgemm_6_cluster"], listing["hgemm_7_tma_store"]
    # 16 stmatrix.x4 per consumer thread (a 64 x 256 tile is 32 column groups of 8, two per x4), four
    # 64 x 64 TMA stores per consumer, and no stmatrix or TMA store in rung 6
    assert sum("STSM" in line for line in rung7) == 16 and sum("UTMASTG" in line for line in rung7) == 4
    assert not any("STSM" in line or "UTMASTG" in line for line in rung6)
    # the direct stores (N % 8 != 0) are still there: rung 6's global stores, all of them
    assert sum(" STG" in line for line in rung7) >= sum(" STG" in line for line in rung6)


@pytest.mark.skipif(sass.nvdisasm_path() is None, reason="nvdisasm is not installed")
def test_rung_7s_fused_epilogues_fit_the_registers_and_read_the_residual_as_built():
    """The fused epilogue runs on 8 accumulators at a time just before stmatrix writes them: applied to
    all 128 first, the consumer's 168 registers spilled (1.2-2.5 KiB a thread, measured while building it)."""
    from course_lib.core import cuda
    from course_lib.launch import hopper_gemm

    for name, defines in hopper_gemm.FUSED_EPILOGUES.items():
        fam = cuda.compile_family("hopper_gemm", "sm_90a", cuda.defines_to_options(defines))
        res, lines = fam.resources["hgemm_7_tma_store"], sass.listing(fam.cubin)["hgemm_7_tma_store"]
        count = lambda op: sum(op in line for line in lines)   # noqa: E731
        staged = hopper_gemm.staged_residual(defines)
        assert res.spill_store_bytes <= (0 if defines.get("HG_RESIDUAL_TMA", 1) else 64), name
        assert count("MUFU.TANH") == 128 and count("STSM") == 16, name   # one tanh per accumulator
        assert count("LDSM") == (16 if staged else 0), name              # the residual read back from the stage
        assert count("UTMALDG") == 2 + (4 if staged else 0), name        # A, B, and the residual's four boxes
    plain = sass.listing(cuda.compile_family("hopper_gemm", "sm_90a").cubin)["hgemm_7_tma_store"]
    assert not any("MUFU.TANH" in line or "LDSM" in line for line in plain)
