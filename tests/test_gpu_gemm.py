"""On a CUDA machine only (COURSE_MODE=live): every GEMM kernel against float64 and cuBLAS."""
import os

import pytest

pytestmark = pytest.mark.gpu
if os.environ.get("COURSE_MODE") != "live":
    pytest.skip("GPU tests run with COURSE_MODE=live on a CUDA machine (make gpu-test)", allow_module_level=True)

SHAPES = [(1, 1, 1), (31, 33, 17), (128, 128, 128), (257, 130, 515), (1000, 333, 1025), (512, 768, 256)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kernel", ["sgemm_naive", "sgemm_coalesced", "sgemm_smem", "sgemm_reg1d", "sgemm_reg2d",
                                    "sgemm_vec4", "sgemm_warptile", "sgemm_warptile_db", "sgemm_warptile_db_16x8"])
def test_fp32_kernels_match_float64(kernel, shape):
    import cupy

    from course_lib.launch import gemm_fp32, operands

    m, n, k = shape
    a, b = operands.random_operand((m, k), 11), operands.random_operand((k, n), 12)
    c = cupy.full((m, n), float("nan"), dtype=cupy.float32)
    gemm_fp32.run_fp32(kernel, a, b, c)
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    err = float(cupy.abs(c - ref).max())
    assert err <= operands.fp32_tolerance(k) * float(cupy.abs(ref).max()), err


# Aligned shapes with edge blocks and a partial last K tile, and with many more K tiles than stages.
BF16_SHAPES = SHAPES + [(264, 200, 136), (384, 256, 1000), (2048, 2048, 2048)]


@pytest.mark.parametrize("copies", ["cp.async", "auto"])
@pytest.mark.parametrize("shape", BF16_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_bf16_mma_matches_float64_and_cublas(shape, copies):
    import cupy
    import torch

    from course_lib.launch import gemm_bf16, operands

    m, n, k = shape
    a = operands.to_bf16_bits(operands.random_operand((m, k), 13))
    b = operands.to_bf16_bits(operands.random_operand((k, n), 14))
    c = cupy.full((m, n), 0xFFFF, dtype=cupy.uint16)
    gemm_bf16.run_bf16(a, b, c, copies=copies)
    got = operands.bf16_bits_to_float32(c)
    exact = operands.bf16_bits_to_float32(a).astype(cupy.float64) @ operands.bf16_bits_to_float32(b).astype(cupy.float64)
    scale = float(cupy.abs(exact).max())
    assert float(cupy.abs(got - exact).max()) <= operands.bf16_tolerance_rel() * scale
    lib = cupy.asarray(torch.mm(operands.torch_view(a), operands.torch_view(b)).float())
    assert float(cupy.abs(got - lib).max()) <= operands.bf16_tolerance_rel() * scale


def test_gemm_experiments_record_valid_evidence():
    from course_lib.measure import evidence, experiments

    for name, params in (("gemm.fp32_ladder", {"sizes": [256, 512], "samples": 20}),
                         ("gemm.bf16_mma", {"sizes": [512], "samples": 20}),
                         ("gemm.edges", {"shapes": [[127, 129, 65]], "samples": 20})):
        r = experiments.run(name, **params)
        assert r.mode == "live" and evidence.validate(r.to_record("test")) == []


def test_smoke_launches_pass():
    from course_lib.launch import gemm_bf16, gemm_fp32

    gemm_fp32.fp32_smoke()
    gemm_bf16.bf16_smoke()
