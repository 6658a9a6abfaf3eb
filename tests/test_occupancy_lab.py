"""Notebook 02/03 experiments: the occupancy model against the recorded CUDA occupancy API (recomputed
here, in replay), the records' own consistency, launch contracts and the generated register variants."""
import pytest

from course_lib.core import cuda
from course_lib.labs import occupancy as lab_occupancy
from course_lib.labs import threads_warps as lab_warps
from course_lib.launch import occupancy as launch_occupancy
from course_lib.measure import experiments
from course_lib.models import launch_geometry as lg
from course_lib.models import occupancy as occ


@pytest.fixture(scope="module")
def api():
    return experiments.run("occupancy.api_agreement")


def test_model_equals_the_occupancy_api_for_every_recorded_configuration(api):
    b = occ.budget(api.gpu)
    assert b.smem_per_sm_bytes == api.machine["smem_per_sm_bytes"]
    checked = 0
    for case in api.cases:
        for row in case.extra["configs"]:
            assert "error" not in row, row
            assert lab_occupancy.model_blocks(b, row) == row["api_blocks"], (case.name, row)
            checked += 1
    assert checked >= 100


def test_at_least_fifty_random_configurations_over_every_register_count(api):
    random_rows = [r for c in api.cases if c.name.startswith("__maxnreg__") for r in c.extra["configs"]]
    assert len(random_rows) >= 50
    regs = {r["registers"] for r in random_rows}
    assert {24, 32, 64, 128, 255} <= regs and len(regs) >= 12
    assert {r["api_blocks"] for r in random_rows} >= {0, 1, 2}         # launches that fail are in there too
    assert any(r["threads"] % 32 for r in random_rows)                # and ragged blocks
    assert any(r["dynamic_smem_bytes"] > 48 * 1024 for r in random_rows)


def test_every_course_kernel_of_these_notebooks_was_asked(api):
    rows = api.case("every course kernel").extra["configs"]
    asked = {(r["family"], r["kernel"]) for r in rows}
    for family in ("elementwise", "warps", "occupancy"):
        for kernel in cuda.kernel_names(family):
            assert (family, kernel) in asked
    assert not [r for r in rows if "error" in r]


def test_agreement_rows_count(api):
    rows, n, ok = lab_occupancy.agreement(api)
    assert n == ok == len(rows) >= 100


def test_model_disagreement_would_be_caught(api):
    """The check has teeth: a model that forgot the 1 KiB reservation disagrees with the recorded API."""
    b = occ.budget(api.gpu)
    wrong = occ.custom_budget("no reservation", like=b, reserved_smem_per_block_bytes=0)
    rows = [r for c in api.cases for r in c.extra["configs"]]
    assert any(lab_occupancy.model_blocks(wrong, r) != r["api_blocks"] for r in rows)


@pytest.mark.parametrize("name", ["occupancy.smem_sweep", "occupancy.ilp", "occupancy.register_spill"])
def test_the_occupancy_model_gives_each_recorded_launchs_residency_and_ncus_limits(name):
    """The model, as the code computes it now, against what each recorded launch got and what ncu read of it (the
    claims compare ncu with the occupancy the record stored, not with the model)."""
    r = experiments.run(name)
    b = occ.budget(r.gpu)
    for c in r.cases:
        if "resident_blocks" not in c.extra:
            continue
        launch = c.launch
        res = occ.residency(b, launch["block"][0], launch["registers"],
                            launch["static_smem_bytes"] + launch["dynamic_smem_bytes"])
        assert res.resident_blocks == c.extra["resident_blocks"], c.name
        ncu = c.extra.get("ncu")
        if ncu:
            # ncu's shared-memory limit counts the carveout the driver chose for this launch, not the
            # whole SM, so compare what they must share: the resident count and the register limit.
            limits = [ncu[f"launch__occupancy_limit_{k}"] for k in ("registers", "shared_mem", "warps", "blocks")]
            assert min(limits) == res.resident_blocks, c.name
            # ncu reports the register ceiling of 8-register kernels as if they used 16; where the warp
            # limit binds first that cannot change residency, so compare below the warp limit.
            assert min(ncu["launch__occupancy_limit_registers"], res.limit_warps) == \
                min(res.limit_registers, res.limit_warps), c.name
            assert ncu["sm__maximum_warps_per_active_cycle_pct"] == pytest.approx(100 * res.occupancy)


def test_shared_memory_sweep_steps_down():
    r = experiments.run("occupancy.smem_sweep")
    blocks = [c.extra["resident_blocks"] for c in r.cases if "smem_kib" in c.params]
    assert blocks == sorted(blocks, reverse=True) and blocks[0] == 8 and blocks[-1] == 1
    assert len(set(blocks)) == 8


def test_spills_appear_when_registers_are_capped():
    r = experiments.run("occupancy.register_spill")
    uncapped, *capped = r.cases
    assert uncapped.extra["spill_store_bytes"] == 0
    assert all(c.extra["spill_store_bytes"] > 0 and c.extra["registers"] <= c.extra["cap"] for c in capped)
    assert capped[-1].extra["occupancy"] > uncapped.extra["occupancy"]


def test_divergence_record_predictions_are_the_models():
    r = experiments.run("warps.divergence")
    for c in r.cases:
        assert c.extra["predicted_factor"] == pytest.approx(lg.divergence_factor(c.name))
    assert {c.name for c in r.cases} == set(lg.DIVERGENCE_MODES)
    rows = lab_warps.divergence_rows(r)
    assert rows[0]["measured × (vs one path)"] == 1.0


def test_block_order_record():
    r = experiments.run("warps.block_order")
    c = r.cases[0]
    gm, gn = c.extra["grid"]
    g = lg.tile_grid(c.params["m"], c.params["n"], c.params["block_m"], c.params["block_n"])
    assert (gm, gn) == (g.tiles_m, g.tiles_n)
    for run in c.extra["runs"]:
        assert sorted(run["ticket"]) == list(range(g.blocks))
        assert max(run["smid"]) < c.extra["sm_count"]
    summary = lab_warps.block_order_summary(r)
    assert summary["blocks"] == g.blocks


# --------------------------------------------------------------------------- no records needed

@pytest.mark.parametrize("family, kernel, threads", [
    ("occupancy", "copy_ilp4", 256), ("warps", "divergence", 256), ("warps", "tile_owner_order", None),
    ("elementwise", "vector_add", 256),
])
def test_launch_contract_block_size(family, kernel, threads):
    assert lab_occupancy.contract_block_threads(family, kernel) == threads


def test_generated_register_variants_use_exactly_their_cap():
    caps = [24, 40, 96, 255]
    cubin, log = cuda.compile_source(launch_occupancy.pressure_source(caps), "sm_90", "occupancy_pressure.cu")
    res = cuda.parse_ptxas_report(log, "sm_90")
    assert [res[f"pressure_r{c}"].registers for c in caps] == caps


def test_random_configs_are_reproducible_and_in_range():
    a = lab_occupancy.random_configs(7, 40, 232448)
    assert a == lab_occupancy.random_configs(7, 40, 232448)
    assert all(1 <= t <= 1024 and 0 <= s <= 232448 for t, s in a)


def test_kernel_residency_uses_nvrtc():
    b = occ.budget("h200")
    r, res = lab_occupancy.kernel_residency("occupancy", "register_pressure", b)
    assert r.registers_per_thread == res.registers > 64 and r.limiter == "registers"
    rows = lab_occupancy.course_kernel_rows(b)
    assert {row["kernel"] for row in rows} >= {"occupancy.copy_ilp1", "warps.divergence"}


def test_reference_factor():
    f = launch_occupancy.accumulate_reference_factor()
    assert f == pytest.approx(sum((1 + r / 64) / (r + 1) for r in range(64)), rel=1e-6)


# --------------------------------------------------------------------------- profiler evidence plumbing

def _cases(n):
    from course_lib.measure.evidence import Case

    return [Case(f"c{i}", {}, "k", [1e-3] * 20, 0, 1, {}) for i in range(n)]


def test_attach_profiles_puts_each_launchs_metrics_in_its_case(monkeypatch):
    from course_lib.measure import profiler

    profiles = [profiler.KernelProfile(i, name, "(256, 1, 1)", "(8, 1, 1)", {"m": float(i)})
                for i, name in enumerate(["copy_ilp1", "copy_ilp1(float *, const float *, long long)"])]
    monkeypatch.setattr(profiler, "ncu_metrics", lambda *a, **k: profiles)
    monkeypatch.setattr(profiler, "ncu_version", lambda: "2025.3")
    cases = _cases(2)
    assert profiler.attach_profiles(cases, "pass", ["m"], "^copy_ilp1$", ["copy_ilp1", "copy_ilp1"])
    assert [c.extra["ncu"]["m"] for c in cases] == [0.0, 1.0]
    assert cases[0].extra["ncu_version"] == "2025.3" and "ncu --csv" in cases[0].extra["ncu_command"]


@pytest.mark.parametrize("failure, reason", [
    ("unavailable", "not permitted here"),
    ("wrong kernels", "expected"),
])
def test_attach_profiles_records_why_it_could_not(monkeypatch, failure, reason):
    from course_lib.measure import profiler

    def fake(*a, **k):
        if failure == "unavailable":
            raise profiler.ProfilerUnavailable("not permitted here")
        return [profiler.KernelProfile(0, "other_kernel", "", "", {})]

    monkeypatch.setattr(profiler, "ncu_metrics", fake)
    cases = _cases(1)
    assert not profiler.attach_profiles(cases, "pass", ["m"], "^k$", ["k"])
    assert reason in cases[0].extra["ncu_unavailable"] and "ncu" not in cases[0].extra


def test_profiled_result_falls_back_to_the_recorded_metrics():
    import dataclasses

    from course_lib.measure import profiler

    recorded = experiments.run("occupancy.register_spill")
    assert profiler.profiled_result(recorded)[0] is recorded
    stripped = [dataclasses.replace(c, extra={"ncu_unavailable": "ERR_NVGPUCTRPERM"}) for c in recorded.cases]
    live = dataclasses.replace(recorded, mode="live", cases=stripped)
    src, note = profiler.profiled_result(live)
    assert src is not None and profiler.has_profile(src)
    assert "ERR_NVGPUCTRPERM" in note and "recorded on NVIDIA H200" in note


def test_the_course_kernel_table_uses_each_kernels_recorded_launch(monkeypatch):
    from course_lib.core import runtime
    from course_lib.labs import occupancy as lab_occupancy
    from course_lib.models import occupancy

    monkeypatch.setenv("COURSE_MODE", "replay")
    rows = {r["kernel"]: r for r in lab_occupancy.course_kernel_rows(occupancy.budget(runtime.replay_gpu()))}
    gemm = rows["gemm_bf16.bf16_gemm_mma"]
    assert (gemm["threads"], gemm["dynamic smem B"], gemm["block from"]) == (128, 99392, "recorded launch")
    assert gemm["resident blocks"] == 2          # 2 x 97 KiB fit in the H200's 228 KiB, 3 do not
    wide = rows["hopper_gemm.hgemm_4_wide"]
    assert wide["threads"] == 384 and wide["dynamic smem B"] > 190_000 and wide["resident blocks"] == 1
    assert rows["elementwise.copy"]["block from"] == "contract" and rows["elementwise.copy"]["dynamic smem B"] == 0


def test_a_recorded_case_names_its_kernel_by_its_trace_when_its_kernel_field_is_a_label():
    from course_lib.labs.occupancy import _launched_kernel

    one = {"kernel": "course one pass", "extra": {"kernels": {"count": 1, "distinct": ["softmax_one_pass"]}}}
    two = {"kernel": "course two pass", "extra": {"kernels": {"count": 2, "distinct": ["softmax_row_stats",
                                                                                      "softmax_normalize"]}}}
    assert _launched_kernel(one) == "fusion.softmax_one_pass"
    assert _launched_kernel(two) is None   # two kernels ran: the one launch recorded is not both of theirs
    assert _launched_kernel({"kernel": "fusion.rmsnorm_reread"}) == "fusion.rmsnorm_reread"
    assert _launched_kernel({"kernel": "cuBLAS bf16", "extra": [1, 2]}) is None
    assert _launched_kernel({"kernel": "course", "extra": {"kernels": {"distinct": ["not_a_course_kernel"]}}}) is None
