"""Notebook 08's pieces that need no GPU: the generated chain source, launch geometry, the attention
ledger, what the records show that no claim checks (notebooks/claims/08_fusion.py holds their figures),
and the exercise checks."""
import dataclasses

import numpy as np
import pytest

from course_lib.exercises.fusion import check_bytes_saved, check_faster
from course_lib.labs import fusion as lab_fusion
from course_lib.launch import fusion as fusion_launch
from course_lib.launch import gemm_bf16
from course_lib.measure import experiments
from course_lib.models import fusion


def test_chain_source_has_one_kernel_per_op_and_a_fused_one():
    ops = [fusion_launch.affine_op(i) for i in range(3)]
    src = fusion_launch.chain_source(ops)
    for name in ("op_1", "op_2", "op_3", *(shape.kernel for shape in fusion_launch.CHAIN_SHAPES)):
        assert f" {name}(float* __restrict__ out" in src
    assert len({shape.kernel for shape in fusion_launch.CHAIN_SHAPES}) == len(fusion_launch.CHAIN_SHAPES)
    assert src.count("x = fmaf(") == 12 and "op_4" not in src   # each op's steps once, in its device function
    with pytest.raises(ValueError, match="at least one op"):
        fusion_launch.chain_source([])


def test_affine_coefficients_are_exact_in_fp32_and_distinct():
    coeffs = [ab for i in range(32) for ab in fusion_launch.affine_op(i).coefficients]
    assert all(np.float32(a) == a and np.float32(b) == b for a, b in coeffs)
    assert all(abs(a) < 1 for a, _ in coeffs)
    # neighbouring steps differ, so no two consecutive FMAs could be folded into one
    assert all(coeffs[i] != coeffs[i + 1] for i in range(len(coeffs) - 1))


def test_apply_matches_the_generated_statements():
    op = fusion_launch.affine_op(5)
    x = np.linspace(-1, 1, 7)
    want = x.copy()
    for stmt in op.statements:
        a, b = (float(t.rstrip("f);")) for t in stmt.split("fmaf(x, ")[1].split(", "))
        want = a * want + b
    assert np.allclose(op.apply(x), want, rtol=0, atol=1e-15)


@pytest.mark.parametrize("shape", [*fusion_launch.CHAIN_SHAPES, fusion_launch.OP_SHAPE], ids=lambda s: s.kernel)
@pytest.mark.parametrize("n", [1, 3, 4, 5, 1023, 1024, 1025, 4096, 4099, 2**26 + 3, 2**33 + 5])
def test_every_chain_shape_covers_every_element_once(shape, n):
    (blocks,), (threads,) = shape.launch(n)
    assert blocks >= 1 and threads == shape.block
    float4s = n // 4
    assert blocks * threads * shape.vecs >= float4s          # every float4 has a thread
    assert (blocks - 1) * threads * shape.vecs < max(float4s, 1)   # and no block is wholly idle
    assert threads >= n % 4                                  # block 0 takes the tail


@pytest.mark.parametrize("vecs, block, loop", [(0, 128, False), (2, 100, False), (1, 2048, False), (2, 256, True)])
def test_impossible_chain_shapes_are_refused(vecs, block, loop):
    with pytest.raises(ValueError, match="chain shape|grid-stride"):
        fusion_launch.ChainShape(vecs, block, loop)


def test_every_fused_shape_compiles_without_local_memory_and_groups_its_loads():
    """Compiled here by NVRTC for the H200: no shape keeps its float4s in local memory; each no-loop
    shape has its ``vecs`` 16-byte loads twice (the whole tile, the guarded last tile) and issues at
    least two before its first FMA (ptxas may start the math while the rest are in flight)."""
    from course_lib.core import cuda
    from course_lib.measure import sass

    try:
        fam = cuda.compile_generated(fusion_launch.chain_source([fusion_launch.affine_op(i) for i in range(4)]),
                                     "chain_test", "sm_90")
    except cuda.NvrtcUnavailable:
        pytest.skip("no NVRTC here")
    try:
        mnemonics = sass.instructions(fam.cubin)
    except sass.DisassemblerUnavailable as exc:
        pytest.skip(str(exc))
    for shape in fusion_launch.CHAIN_SHAPES:
        assert fam.resources[shape.kernel].stack_frame_bytes == 0
        if shape.loop:
            continue
        ins = mnemonics[shape.kernel]
        wide = [m for m in ins if m.startswith("LDG.E.128")]
        first_fma = [m.split(".")[0] for m in ins].index("FFMA")
        assert len(wide) == 2 * shape.vecs, (shape.kernel, wide)
        assert sum(m.startswith("LDG.E.128") for m in ins[:first_fma]) >= min(shape.vecs, 2), shape.kernel


@pytest.mark.parametrize("n", [1, 5, 1000, 1024, 4097, 32768])
def test_one_pass_rows_fit_the_default_registers_up_to_32k(n):
    t = fusion_launch.row_threads(n)
    assert 32 <= t <= 1024 and t & (t - 1) == 0
    assert n <= t * 4 * fusion_launch.row_vecs_default()
    assert fusion_launch.one_pass_row_vecs(n) == fusion_launch.row_vecs_default()


def test_longer_rows_need_more_registers_than_a_1024_thread_block_has():
    assert fusion_launch.one_pass_row_vecs(65536) == 16 and fusion_launch.one_pass_row_vecs(131072) == 32


def test_attention_ledger():
    fused = fusion.attention_bytes(8192, 64, 1, 2, fused=True)
    naive = fusion.attention_bytes(8192, 64, 1, 2, fused=False)
    assert fused == 4 * 8192 * 64 * 2
    assert naive / fused == pytest.approx(1 + 8192 / 64)
    assert fusion.attention_bytes(1024, 64, 64, 2, True) == 64 * fusion.attention_bytes(1024, 64, 1, 2, True)
    with pytest.raises(ValueError, match="seq_len"):
        fusion.attention_bytes(0, 64, 1, 2, True)


def test_kernel_names_lose_templates_and_arguments():
    assert lab_fusion.short_kernel_name("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*)") \
        == "at::native::cunn_SoftMaxForward"
    assert lab_fusion.short_kernel_name("triton_poi_fused_add_mul_0") == "triton_poi_fused_add_mul_0"


# --------------------------------------------------------------------------- the recorded run

@pytest.fixture(scope="module")
def chains():
    return experiments.replay("fusion.chains", experiments.resolve_params("fusion.chains"))


@pytest.fixture(scope="module")
def reductions():
    return experiments.replay("fusion.reductions", experiments.resolve_params("fusion.reductions"))


def test_one_slow_point_below_the_ridge_is_not_the_turn(chains):
    noisy = [dataclasses.replace(c, samples_s=[3 * s for s in c.samples_s])
             if c.params == {"k": 2, "plan": "course, one fused kernel"} else c for c in chains.cases]
    assert lab_fusion.compute_bound_k(dataclasses.replace(chains, cases=noisy))["measured k"] == \
        lab_fusion.compute_bound_k(chains)["measured k"]


def test_the_dram_profile_caught_every_launch_of_both_plans(chains):
    """ncu's DRAM bytes stand for a plan only if it profiled all its launches: one fused, k unfused."""
    assert {r["launches (ncu)"] for r in lab_fusion.dram_rows(chains)} == {1, chains.params["profiled_k"]}


@pytest.fixture(scope="module")
def epilogue():
    return experiments.replay("fusion.epilogue", experiments.resolve_params("fusion.epilogue"), "h200")


def test_epilogue_plans_launch_the_kernels_their_labels_say(epilogue):
    """The record's kernel counts, the evidence that a fused plan is one kernel and the separate pass a second."""
    kernels = {r["plan"]: r["kernels"] for r in lab_fusion.epilogue_rows(epilogue)}
    assert kernels["course GEMM, fused bias + GELU + residual"] == 1
    assert kernels[lab_fusion.BIAS_ONLY.label] == 1
    assert kernels["course GEMM + separate epilogue pass"] == 2


def test_profile_rows_leave_out_plans_a_gpu_could_not_run(epilogue):
    """Below sm_90 there are no 16-byte-store plans: the ncu table lists the five others."""
    older = dataclasses.replace(epilogue, cases=[c for c in epilogue.cases
                                                 if not lab_fusion.EPILOGUE_PLANS[c.params["plan"]].staged_stores])
    assert [r["plan"] for r in lab_fusion.epilogue_profile_rows(older)] == [p.label for p in lab_fusion.EPILOGUE_PROFILED[:5]]


# Every course GEMM plan of fusion.epilogue, by its recorded label, and the -D options it compiles with.
EPILOGUE_OPTIONS = {
    "course GEMM (plain)": (),
    "course GEMM, fused bias only (no GELU)": ("-DTC_EPILOGUE=1", "-DTC_EPILOGUE_GELU=0"),
    "course GEMM, fused bias + GELU": ("-DTC_EPILOGUE=1",),
    "course GEMM, fused bias + GELU + residual": ("-DTC_EPILOGUE=2",),
    "course GEMM, fused bias + GELU + residual, libm tanhf": ("-DTC_EPILOGUE=2", "-DTC_GELU_TANHF=1"),
    "course GEMM + separate epilogue pass": (),
    "course GEMM (plain), 16-byte stores": ("-DTC_STAGE_C=1",),
    "course GEMM, fused bias + GELU, 16-byte stores": ("-DTC_EPILOGUE=1", "-DTC_STAGE_C=1"),
    "course GEMM, fused bias + GELU + residual, 16-byte stores": ("-DTC_EPILOGUE=2", "-DTC_STAGE_C=1"),
}


def test_each_epilogue_plan_compiles_the_gemm_its_label_names():
    gemm_plans = {label: p.gemm.options for label, p in lab_fusion.EPILOGUE_PLANS.items() if p.gemm is not None}
    assert gemm_plans == EPILOGUE_OPTIONS
    libraries = {label for label, p in lab_fusion.EPILOGUE_PLANS.items() if p.source is lab_fusion.Source.LIBRARY}
    assert libraries == {"cuBLAS GEMM (torch.mm)", "cuBLAS + PyTorch eager epilogue", "torch.compile (Inductor)"}
    fused = {label for label, p in lab_fusion.EPILOGUE_PLANS.items() if p.course and p.fused}
    assert fused == set(EPILOGUE_OPTIONS) - {"course GEMM (plain)", "course GEMM (plain), 16-byte stores",
                                             "course GEMM + separate epilogue pass"}


def test_every_recorded_case_has_a_plan():
    for name, table in (("fusion.epilogue", lambda c: lab_fusion.EPILOGUE_PLANS),
                        ("fusion.reductions", lambda c: lab_fusion.REDUCTION_PLANS),
                        ("fusion.chains", lambda c: lab_fusion.chain_plans(c.params["k"]))):
        result = experiments.replay(name, experiments.resolve_params(name), "h200")
        assert all(c.params["plan"] in table(c) for c in result.cases), name


def test_row_plans_are_labelled_as_recorded():
    labels = {p.rows: label for label, p in lab_fusion.REDUCTION_PLANS.items() if p.rows is not None}
    assert labels == {
        fusion_launch.RowPlan.ONE_PASS: "course one pass",
        fusion_launch.RowPlan.TWO_PASS: "course two pass",
        fusion_launch.RowPlan.SPLIT: "course one pass, split over a cluster of 2",
        fusion_launch.RowPlan.PREFETCH: "course one pass, persistent, next row prefetched",
        fusion_launch.RowPlan.HALF_SHARED: "course one pass, half the row in shared memory",
        fusion_launch.RowPlan.HALF_SHARED_ONE_PER_SM: "course one pass, half the row in shared memory, one block per SM",
        fusion_launch.RowPlan.REREAD: "course one kernel, row read twice (L2 hints)",
    }


def test_the_gemm_variants_carry_their_defines():
    assert gemm_bf16.PLAIN.defines == {} and gemm_bf16.PLAIN_STAGED.defines == {"TC_STAGE_C": 1}
    assert gemm_bf16.BIAS_ONLY.defines == {"TC_EPILOGUE": 1, "TC_EPILOGUE_GELU": 0}
    assert gemm_bf16.BIAS_GELU.defines == {"TC_EPILOGUE": 1}
    assert gemm_bf16.BIAS_GELU_STAGED.defines == {"TC_EPILOGUE": 1, "TC_STAGE_C": 1}
    assert gemm_bf16.BIAS_RESIDUAL.defines == {"TC_EPILOGUE": 2, "TC_EPILOGUE_GELU": 0}
    assert gemm_bf16.BIAS_GELU_RESIDUAL.defines == {"TC_EPILOGUE": 2}
    assert gemm_bf16.BIAS_GELU_RESIDUAL_STAGED.defines == {"TC_EPILOGUE": 2, "TC_STAGE_C": 1}
    assert gemm_bf16.BIAS_GELU_RESIDUAL_TANHF.defines == {"TC_EPILOGUE": 2, "TC_GELU_TANHF": 1}
    assert gemm_bf16.SCHEDULED.defines == {"TC_SCHEDULED": 1} and gemm_bf16.NARROW.defines == {"TC_BN": 64, "TC_WN": 32}
    assert gemm_bf16.with_stages(3).defines == {"TC_STAGES": 3}
    assert gemm_bf16.PROXY_FENCE.defines == {"TC_PROXY_FENCE": 1} and gemm_bf16.NO_PROXY_FENCE.defines == {"TC_PROXY_FENCE": 0}
    assert [v.residual for v in (gemm_bf16.BIAS_GELU, gemm_bf16.BIAS_RESIDUAL)] == [False, True]
    assert [v.gelu for v in (gemm_bf16.PLAIN, gemm_bf16.BIAS_ONLY, gemm_bf16.BIAS_GELU_STAGED)] == [False, False, True]


# --------------------------------------------------------------------------- exercises

def test_bytes_saved_exercise_accepts_the_ledger_and_rejects_a_wrong_count():
    chain = fusion.scale_bias_gelu_residual(8192 * 4096, "bf16")
    plans = fusion.ledger(chain, "NVIDIA H100 SXM")
    right = (plans.bytes_saved, plans.fused.seconds * 1e6)
    assert check_bytes_saved(chain, "NVIDIA H100 SXM", right).correct
    one_way = (plans.bytes_saved / 2, right[1])        # counted each intermediate once, not written and read
    assert not check_bytes_saved(chain, "NVIDIA H100 SXM", one_way).correct
    assert "2·|Z|·b" in check_bytes_saved(chain, "NVIDIA H100 SXM", one_way)
    assert not check_bytes_saved(chain, "NVIDIA H100 SXM", None).correct
    assert not check_bytes_saved(chain, "NVIDIA H100 SXM", "lots").correct


def test_prediction_exercise_follows_the_measurement(reductions):
    assert check_faster(reductions, "softmax", 131072, "two pass").correct
    assert not check_faster(reductions, "softmax", 131072, "one pass").correct
    assert check_faster(reductions, "softmax", 4096, "one pass").correct
    assert not check_faster(reductions, "softmax", 4096, "fused").correct
    assert not check_faster(reductions, "softmax", 12345, "one pass").correct


def test_the_prefetching_rmsnorm_refuses_rows_longer_than_its_registers_hold():
    with pytest.raises(ValueError, match="two-pass"):
        fusion_launch.prefetch_launch(4, 4 * 8 * 1024 + 4)


def test_half_shared_rows_take_512_threads_and_shared_slots_only_when_needed():
    assert fusion_launch.half_shared_launch(32768) == ((512,), 8 * 512 * 16)    # 16k in registers, 16k shared
    assert fusion_launch.half_shared_launch(16384) == ((256,), 8 * 256 * 16)
    assert fusion_launch.half_shared_launch(1000) == ((32,), 0)                 # fits the registers alone
    with pytest.raises(ValueError, match="two-pass"):
        fusion_launch.half_shared_launch(32769)


def test_reduction_rows_show_a_dash_where_a_plan_did_not_run(reductions):
    """The one-block-per-SM control runs at the longest row only: its column is a number there and a dash below."""
    column = f"course {fusion_launch.RowPlan.HALF_SHARED_ONE_PER_SM.value}, % of copy"
    rows = {r["row length"]: r for r in lab_fusion.reduction_rows(reductions, "softmax")}
    assert isinstance(rows[32768][column], float) and rows[16384][column] == "-"


def test_the_one_block_per_sm_control_pads_shared_memory_until_one_block_fits():
    """The half-shared plan's 32k launch (512 threads, 64 registers, 64 KiB) fits two blocks on an
    H200 SM; the control's padding leaves one, and a block that cannot fit at all is refused."""
    from course_lib.core.hardware import SPECS
    from course_lib.models import occupancy

    h200 = occupancy.budget(SPECS["h200"])
    assert occupancy.residency(h200, 512, 64, 64 * 1024).resident_blocks == 2
    padded = fusion_launch.one_block_per_sm_smem(h200, 512, 64, 64 * 1024)
    assert occupancy.residency(h200, 512, 64, padded).resident_blocks == 1
    assert padded <= h200.max_smem_per_block_bytes
    with pytest.raises(ValueError, match="cannot run"):
        fusion_launch.one_block_per_sm_smem(h200, 512, 64, 300 * 1024)


def test_half_shared_plans_run_where_their_blocks_fit():
    """On an H200 both plans run at 32k and the plain one at 16k; a T4's 64 KiB a block cannot take a
    32k row's 64 KiB of slots and the kernel's own 256 B, so there neither runs (the table shows dashes)."""
    from course_lib.core.hardware import SPECS
    from course_lib.models import occupancy

    lengths = [16384, 32768]
    h200, t4 = occupancy.budget(SPECS["h200"]), occupancy.budget(SPECS["t4"])
    both = (fusion_launch.RowPlan.HALF_SHARED, fusion_launch.RowPlan.HALF_SHARED_ONE_PER_SM)
    assert fusion_launch.half_shared_plans(h200, 64, 256, 32768, lengths) == both
    assert fusion_launch.half_shared_plans(h200, 64, 256, 16384, lengths) == (fusion_launch.RowPlan.HALF_SHARED,)
    assert fusion_launch.half_shared_plans(h200, 64, 256, 8192, lengths) == ()
    assert fusion_launch.half_shared_plans(t4, 64, 256, 32768, lengths) == ()
    assert fusion_launch.half_shared_plans(t4, 64, 256, 16384, lengths) == (fusion_launch.RowPlan.HALF_SHARED,)


def test_the_half_shared_plans_launch_their_own_kernel(monkeypatch):
    """Without a GPU: each op's half-shared plan reaches its kernel with the row's block and slots,
    and the control the padded launch."""
    import types

    launched = []
    monkeypatch.setattr(fusion_launch, "_launch_with_slots",
                        lambda name, grid, block, smem, args: launched.append((name, grid, block, smem)))
    monkeypatch.setattr(fusion_launch, "half_shared_one_per_sm_launch", lambda op, n: ((512,), 117504))
    x = types.SimpleNamespace(shape=(4, 32768))
    fusion_launch.run_softmax(None, x, fusion_launch.RowPlan.HALF_SHARED)
    fusion_launch.run_rmsnorm(None, x, None, fusion_launch.RowPlan.HALF_SHARED_ONE_PER_SM)
    assert launched == [("softmax_half_shared", (4,), (512,), 8 * 512 * 16),
                        ("rmsnorm_half_shared", (4,), (512,), 117504)]


def test_hopper_epilogue_rows_hold_every_plan_at_every_shape_of_each_recorded_run():
    """The record's coverage, read through the table's builder (which looks every label up in the plans)."""
    result = experiments.replay("fusion.hopper_epilogue", experiments.resolve_params("fusion.hopper_epilogue"), "h200")
    for run in result.runs():
        rows = lab_fusion.hopper_epilogue_rows(run)
        assert sorted((r["M x N x K"], r["plan"]) for r in rows) == sorted(
            ("x".join(map(str, shape)), plan) for shape in run.params["shapes"] for plan in lab_fusion.HOPPER_EPILOGUE_PLANS)


def test_the_hopper_epilogue_against_compile_shows_each_run_both_protocols_and_the_flags():
    """08's headline table: one row per shape and recorded run, the fused rung 7 over cuBLAS + torch.compile by
    held calls and against the library's back-to-back median, with the protocols' verdict beside them."""
    result = experiments.replay("fusion.hopper_epilogue", experiments.resolve_params("fusion.hopper_epilogue"), "h200")
    rows = lab_fusion.hopper_epilogue_compile_rows(result)
    runs = result.runs()
    assert len(rows) == len(runs) * len(result.params["shapes"])
    assert [r["run"] for r in rows] == [f"{i} of {len(runs)}" for i in range(1, len(runs) + 1)
                                        for _ in result.params["shapes"]]
    for run, row in zip((run for run in runs for _ in result.params["shapes"]), rows):
        shape = [int(x) for x in row["M x N x K"].split("x")]
        fused = next(c for c in run.cases if c.params == {"shape": shape, "plan": lab_fusion.HOPPER_WHOLE_EPILOGUE.label})
        compiled = next(c for c in run.cases if c.params == {"shape": shape, "plan": lab_fusion.HOPPER_COMPILE.label})
        assert row["ratio"] == pytest.approx(fused.median_s / compiled.median_s)
        assert row["ratio"] < 1 and row["ratio to back-to-back"] < 1
        assert ("flagged" in row["protocols"]) == (not compiled.extra["second_protocol"]["agree"]
                                                    or "moves_between_runs" in compiled.extra)
    assert {r["power-limited"] for r in rows if r["M x N x K"] == "8192x8192x8192"} == {"yes"}


def test_the_reread_launch_covers_every_row_with_two_to_eight_slots_a_thread():
    for n in (1, 5, 1000, 1024, 4097, 8192, 12288, 16385, 32767, 32768):
        vecs, threads = fusion_launch.reread_launch(n)
        assert vecs in (2, 4, 8) and threads % 32 == 0 and 32 <= threads <= 1024, n
        assert 4 * vecs * threads >= n and (vecs == 2 or 4 * (vecs // 2) * 1024 < n), n
    assert fusion_launch.reread_launch(4096) == (2, 512)      # 8 floats a thread while 1,024 threads cover the row
    with pytest.raises(ValueError, match="two-pass"):
        fusion_launch.reread_launch(32769)
    with pytest.raises(ValueError, match="RMSNorm's only"):
        fusion_launch.run_softmax(None, np.zeros((1, 4), np.float32), fusion_launch.RowPlan.REREAD)

