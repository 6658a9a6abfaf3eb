"""Notebooks 04/05: the recorded H200 evidence, the analysis helpers, the exercise checks and the calculators."""
import re

import pytest

from course_lib.exercises import coalescing as coalescing_checks
from course_lib.exercises import shared_memory as shared_memory_checks
from course_lib.labs import coalescing as lab_coalescing
from course_lib.labs import shared_memory as lab_shared_memory
from course_lib.launch import coalescing, transpose
from course_lib.measure import evidence, experiments, launches, profiler
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import Result
from course_lib.measure.target import Target
from course_lib.models import memory
from course_lib.widgets import coalescing as widgets_coalescing
from course_lib.widgets import shared_memory as widgets_shared_memory

EXPERIMENTS = ["coalescing.strided_copy", "coalescing.patterns", "transpose.ladder", "banks.probe"]


@pytest.fixture(scope="module")
def results():
    return {name: experiments.run(name) for name in EXPERIMENTS}


# --------------------------------------------------------------------------- the records

@pytest.mark.parametrize("name", EXPERIMENTS)
def test_records_validate_and_carry_a_profile(name):
    record = evidence.load("h200", name)
    assert evidence.validate(record) == []
    profiled = [c for c in record["cases"] if c["kernel"].split(".")[0] in ("coalescing", "transpose", "elementwise")
                and not (name == "transpose.ladder" and "copy" in c["kernel"])]
    assert profiled and all("ncu" in c["extra"] and c["extra"]["ncu_version"] and c["extra"]["ncu_command"]
                            for c in profiled)


def test_strided_sectors_per_request_are_the_models_exactly(results):
    rows = lab_coalescing.global_profile_rows(results["coalescing.strided_copy"])
    assert len(rows) == 9
    for r in rows:
        assert r["ncu sectors/read"] == r["model sectors/read"]
        assert r["ncu sectors/write"] == r["model sectors/write"] == 4


def test_dram_reads_follow_64_byte_blocks_on_the_h200(results):
    for r in lab_coalescing.global_profile_rows(results["coalescing.strided_copy"]):
        assert r["ncu DRAM read MB"] == pytest.approx(r["model DRAM read MB, 64-B blocks"], rel=0.01)


def test_misaligned_reads_cost_l1_sectors_but_not_dram(results):
    for r in lab_coalescing.global_profile_rows(results["coalescing.patterns"]):
        if r["case"].startswith("offset 1 "):
            assert r["ncu sectors/read"] == 5
            assert r["ncu DRAM read MB"] == pytest.approx(r["requested read MB"], rel=0.01)


def test_probe_wavefronts_are_the_bank_models(results):
    probe = results["banks.probe"]
    for r in lab_shared_memory.probe_rows(probe):
        assert r["ncu wavefronts/request"] == pytest.approx(r["model wavefronts/request"], rel=0.005)
    fit = lab_shared_memory.probe_fit(probe)
    assert 0.9 < fit["cycles_per_wavefront"] < 1.1 and fit["worst_residual"] < 0.05


def test_transpose_bank_model_vs_profiler(results):
    rows = {r["case"]: r for r in lab_shared_memory.smem_profile_rows(results["transpose.ladder"])}
    assert rows["shared tile 32×32"]["model load wavefronts/request"] == 32
    assert rows["shared tile 32×32"]["ncu load wavefronts/request"] == pytest.approx(32, rel=0.05)
    for name in ("padded tile 32×33", "swizzled tile 32×32", "padded tile 64×65"):
        assert rows[name]["model load wavefronts/request"] == 1
        assert rows[name]["ncu load wavefronts/request"] < 1.25


def test_performance_targets_in_one_run(results):
    ladder = results["transpose.ladder"]
    cupy_copy = ladder.case("CuPy device-to-device copy").bandwidth_bytes_per_s
    best = lab_shared_memory.best_transpose(ladder)
    assert best.kernel in {f"transpose.{t[0]}" for t in transpose.TRANSPOSES if t[4] is not None}
    assert best.bandwidth_bytes_per_s >= 0.85 * cupy_copy
    assert ladder.case("course copy_vec4").bandwidth_bytes_per_s >= 0.95 * cupy_copy
    rows = {r["case"]: r for r in lab_shared_memory.transpose_rows(ladder)}
    assert rows["shared tile 32×32"]["GB/s"] < rows["padded tile 32×33"]["GB/s"]
    assert rows["naive (no shared memory)"]["GB/s"] < rows["shared tile 32×32"]["GB/s"]


def test_copy_rows_use_the_sector_model(results):
    strided = results["coalescing.strided_copy"]
    rows = lab_coalescing.copy_rows(strided, 4e12, "strides")
    assert [r["strides"] for r in rows] == strided.params["strides"]
    two = next(r for r in rows if r["strides"] == 2)
    assert two["model GB/s"] == pytest.approx(4e12 * 2 / 3 / 1e9)
    blocks = {r["case"]: r for r in lab_coalescing.dram_rows(strided, 4e12)}
    assert blocks["stride 16"]["model GB/s, 64-B blocks"] == pytest.approx(4e12 * 2 / 17 / 1e9)


def test_transpose_model_matches_memory_module():
    m = transpose.transpose_model("transpose_tiled", 8192)
    p = memory.transpose_smem_full_tiles(8192, 32, 8, 32, False)
    assert (m["smem_load_wavefronts"], m["smem_load_requests"]) == (p.load_wavefronts, p.load_requests)
    assert transpose.transpose_model("transpose_naive", 8192)["write_sectors_per_request"] == 32


def test_the_template_source_is_shown():
    src = lab_shared_memory.tiled_transpose_source()
    assert "template <int TILE, int ROWS, int PITCH, bool SWIZZLE>" in src and "__syncthreads" in src


# --------------------------------------------------------------------------- profiling plumbing (no GPU needed)

def _launches(n):
    return [launches.Launch(f"case {i}", {}, "coalescing.strided_copy", lambda: None, dict, 8.0, function="strided_copy")
            for i in range(n)]


TARGET = Target(coalescing.profile_strided, (1 << 10, [1]))


def _cases(n):
    return [Case(f"case {i}", {}, "coalescing.strided_copy", [1e-3] * 20, 0, 8.0, {}) for i in range(n)]


def test_profile_unavailable_is_recorded_not_raised(monkeypatch):
    def refuse(*a, **k):
        raise profiler.ProfilerUnavailable("no permission (ERR_NVGPUCTRPERM)")

    monkeypatch.setattr(profiler, "ncu_metrics", refuse)
    cases = _cases(2)
    launches.attach_known_profiles(cases, _launches(2), TARGET, ["dram__bytes_read.sum"], "x")
    assert all("ERR_NVGPUCTRPERM" in c.extra["ncu_unavailable"] and "ncu" not in c.extra for c in cases)


def test_profile_metrics_attach_in_launch_order(monkeypatch):
    fake = [profiler.KernelProfile(i, "strided_copy", "", "", {"dram__bytes_read.sum": float(i), "x.sum": "n/a"})
            for i in range(2)]
    monkeypatch.setattr(profiler, "ncu_metrics", lambda *a, **k: fake)
    monkeypatch.setattr(profiler, "ncu_version", lambda: "Version test")
    cases = _cases(2)
    launches.attach_known_profiles(cases, _launches(2), TARGET, ["dram__bytes_read.sum", "x.sum"], "x")
    assert [c.extra["ncu"]["dram__bytes_read.sum"] for c in cases] == [0.0, 1.0]
    assert cases[0].extra["ncu"]["x.sum"] is None and cases[0].extra["ncu_version"] == "Version test"


def test_profile_of_the_wrong_kernels_is_refused(monkeypatch):
    fake = [profiler.KernelProfile(0, "copy", "", "", {})]
    monkeypatch.setattr(profiler, "ncu_metrics", lambda *a, **k: fake)
    cases = _cases(1)
    launches.attach_known_profiles(cases, _launches(1), TARGET, ["a.sum"], "x")
    assert "expected" in cases[0].extra["ncu_unavailable"]


def test_live_result_without_profile_falls_back_to_the_recording(results):
    rec = results["coalescing.strided_copy"]
    stripped = [Case(c.name, c.params, c.kernel, c.samples_s, c.flop, c.bytes, c.check, c.launch,
                     extra={"model": c.extra["model"], "ncu_unavailable": "counters not accessible"})
                for c in rec.cases]
    live = Result(rec.experiment, "live", rec.machine, rec.recorded_at, rec.params, stripped)
    shown, note = profiler.profiled_result(live)
    assert shown is not None and shown.mode == "recorded" and profiler.has_profile(shown)
    assert "counters not accessible" in note and "recorded on NVIDIA H200" in note


# --------------------------------------------------------------------------- exercise checks

def test_check_sectors():
    right = {q: coalescing_checks.sectors_of(q) for q in coalescing_checks.SECTOR_QUESTIONS}
    assert coalescing_checks.check_sectors(right).correct
    # by hand: bytes 28..155 span sectors 0-4; bf16 at stride 3 spans bytes 0..187; float2 at stride 2 puts two
    # lanes in each sector; fp32 at stride 6 puts lanes 24 bytes apart, 3 sectors per 4 lanes; 16 lanes from
    # byte 16 span bytes 16..79; a shuffled warp still covers one 128-byte block; 8 lanes fill one sector
    assert list(right.values()) == [5, 6, 16, 24, 3, 4, 1]
    wrong = dict(right, **{"fp32, stride 6": 32})   # "each lane its own sector", the rule for strides of 8 or more
    verdict = coalescing_checks.check_sectors(wrong)
    assert not verdict.correct and "fp32, stride 6" in verdict
    assert not coalescing_checks.check_sectors({}).correct
    assert not coalescing_checks.check_sectors(8).correct


def test_check_wavefronts():
    right = {q: shared_memory_checks.wavefronts_of(q) for q in shared_memory_checks.BANK_QUESTIONS}
    assert shared_memory_checks.check_wavefronts(right).correct
    # by hand: pitch 40 puts lanes 4 apart in one bank (8-way), pitch 48 lanes 2 apart (16-way); word 6i meets
    # word 6(i + 16) in one bank; doubles 3i fill a half-warp's 32 banks once; at pitch 34 doubles lanes 8 apart
    # share a bank pair (2 per half-warp); float4 3i fill a quarter-warp's 32 banks once; float4 at pitch 34
    # put lanes 4 apart in one bank group (2 per quarter-warp); lanes 4 apart sharing merge no phases
    assert list(right.values()) == [8, 16, 2, 2, 4, 4, 8, 4]
    wrong = dict(right, **{"16 B, lanes 4 apart share (lane i reads float4 i % 4)": 2})   # merged, as n ^ 1 or n ^ 2 are
    verdict = shared_memory_checks.check_wavefronts(wrong)
    assert not verdict.correct and "lanes 4 apart" in verdict


SCALE = r'''
extern "C" __global__ void my_scale(float* out, const float* in, int rows, int cols) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    int row = a, col = b;
    if (row < rows && col < cols) out[(size_t)row * cols + col] = 2.0f * in[(size_t)row * cols + col];
}'''

TRANSPOSE = r'''
#define PITCH 32
#define TILE_AT(r, c) tile[(r) * PITCH + (c)]
extern "C" __global__ void my_transpose(float* out, const float* in, int n) {
    __shared__ float tile[32 * PITCH];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) if (x < n && y + j < n) TILE_AT(threadIdx.y + j, threadIdx.x) = in[(size_t)(y + j) * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) if (x < n && y + j < n) out[(size_t)(y + j) * n + x] = TILE_AT(threadIdx.x, threadIdx.y + j);
}'''


def test_the_notebooks_exercise_sources_are_these():
    import json
    from pathlib import Path

    nb = Path(__file__).resolve().parent.parent / "notebooks"
    src04 = "".join("".join(c["source"]) for c in json.loads((nb / "04_coalescing.ipynb").read_text())["cells"])
    src05 = "".join("".join(c["source"]) for c in json.loads((nb / "05_shared_memory.ipynb").read_text())["cells"])
    assert "int row = a, col = b;" in src04 and "#define TILE_AT(r, c) tile[(r) * PITCH + (c)]" in src05


@pytest.mark.parametrize("edit, correct, text", [
    (lambda s: s, False, "32 sectors"),
    (lambda s: s.replace("int row = a, col = b;", "int row = b, col = a;"), True, "4 sectors"),
    (lambda s: s.replace("int row = a, col = b;", "int row = b, col = b;"), False, "Not correct yet"),
    (lambda s: s.replace("2.0f * in[(size_t)row * cols + col]", "2.0f * in[(size_t)col * cols + row]")
     .replace("int row = a, col = b;", "int row = b, col = a;"), False, "writes out["),
    (lambda s: s.replace("int row = a, col = b;", "int row = b, col = a"), False, "does not compile"),
    (lambda s: s.replace("int row = a, col = b;", "int row = b, col = a; float z = 1.0f;"), False,
     "could not follow"),
    (lambda s: "no kernel here", False, "defines my_scale"),
])
def test_coalescing_fix_check_in_replay(edit, correct, text):
    v = coalescing_checks.check_coalescing_fix(edit(SCALE))
    assert v.correct is correct and text in v, v


@pytest.mark.parametrize("edit, correct, text", [
    (lambda s: s, False, "takes 32"),
    (lambda s: s.replace("#define PITCH 32", "#define PITCH 33"), True, "32 unused"),
    (lambda s: s.replace("(r) * PITCH + (c)", "(r) * PITCH + ((c) ^ (r))"), True, "0 unused"),
    (lambda s: s.replace("#define PITCH 32", "#define PITCH 16"), False, "outside the tile"),
    (lambda s: s.replace("(r) * PITCH + (c)", "(r) * PITCH + ((c) ^ 1)"), False, "takes 32"),
    (lambda s: s.replace("(r) * PITCH + (c)", "(r) + (c)"), False, "overwrite each other"),
    (lambda s: s.replace("__syncthreads();", "__syncthreads()"), False, "does not compile"),
])
def test_transpose_fix_check_in_replay(edit, correct, text):
    v = shared_memory_checks.check_transpose_fix(edit(TRANSPOSE))
    assert v.correct is correct and text in v, v


# --------------------------------------------------------------------------- calculators, headless

def shown(calc, cls):
    m = re.search(rf'class="{cls}">([^<]*)<', calc.answer.value)
    return m.group(1) if m else None


def test_sector_calculator_shows_the_models_numbers():
    calc = widgets_coalescing.SectorCalculator(pattern="unit")
    assert (shown(calc, "course-sectors"), shown(calc, "course-efficiency")) == ("4", "100.0")
    calc.offset.value = 4
    assert (shown(calc, "course-sectors"), shown(calc, "course-efficiency")) == ("5", "80.0")
    calc.offset.value = 0
    calc.pattern.value = "strided"
    calc.stride.value = 2
    assert (shown(calc, "course-sectors"), shown(calc, "course-efficiency"), shown(calc, "course-lines")) == \
        ("8", "50.0", "2")
    calc.element_bytes.value = 16
    c = memory.sector_count(memory.warp_addresses("strided", 16, stride=2), 16)
    assert shown(calc, "course-sectors") == str(c.n_sectors) and shown(calc, "course-fetched") == f"{c.fetched_bytes:,}"
    calc.lanes.value = 8
    assert shown(calc, "course-active") == "8"


@pytest.mark.parametrize("setup, message", [
    (lambda c: (setattr(c.pattern, "value", "strided"), setattr(c.stride, "value", 0)), "stride 0"),
    (lambda c: setattr(c.offset, "value", 2), "misaligns"),
    (lambda c: setattr(c.offset, "value", -4), "0 or more"),
    (lambda c: (setattr(c.pattern, "value", "shifted"), setattr(c.shift, "value", -1)), "shift must be"),
])
def test_sector_calculator_bad_input(setup, message):
    calc = widgets_coalescing.SectorCalculator(pattern="unit")
    setup(calc)
    assert "course-calc-error" in calc.answer.value and message in calc.answer.value
    assert "Traceback" not in calc.answer.value


def test_bank_calculator_shows_the_models_numbers():
    calc = widgets_shared_memory.BankCalculator(pattern="column", pitch=32)
    assert (shown(calc, "course-wavefronts"), shown(calc, "course-ways")) == ("32", "32")
    calc.pitch.value = 33
    assert (shown(calc, "course-wavefronts"), shown(calc, "course-degree")) == ("1", "1.00")
    calc.access_bytes.value = 8
    assert (shown(calc, "course-wavefronts"), shown(calc, "course-ideal")) == ("2", "2")
    assert "served 16 lanes at a time" in calc.answer.value
    calc.pitch.value = 32
    assert (shown(calc, "course-wavefronts"), shown(calc, "course-ways")) == ("32", "16")
    calc.pattern.value = "swizzled column"
    assert shown(calc, "course-wavefronts") == "2"


def test_bank_calculator_pairs_16_byte_loads():
    calc = widgets_shared_memory.BankCalculator(pattern="row", access_bytes=16)
    assert (shown(calc, "course-wavefronts"), shown(calc, "course-ideal")) == ("4", "4")
    calc.pattern.value = "grouped"
    calc.stride.value = 8          # a GEMM warp's A reads: 8 neighbouring lanes on one float4
    assert (shown(calc, "course-wavefronts"), shown(calc, "course-ideal")) == ("2", "2")
    assert "lane n ^ 1" in calc.answer.value
    calc.pattern.value = "repeating"   # its B reads: lanes 8 apart share, neighbours do not
    assert shown(calc, "course-wavefronts") == "4"
    calc.stride.value = 0
    assert "course-calc-error" in calc.answer.value and "period 0" in calc.answer.value


def test_bank_calculator_pairs_8_byte_loads_by_neighbours():
    calc = widgets_shared_memory.BankCalculator(pattern="broadcast", access_bytes=8)
    assert (shown(calc, "course-wavefronts"), shown(calc, "course-ideal")) == ("1", "1")
    assert "lane n ^ 1" in calc.answer.value and "32 lanes at a time" in calc.answer.value
    assert "32 lanes x 4 bytes" not in calc.answer.value


@pytest.mark.parametrize("setup, message", [
    (lambda c: setattr(c.pitch, "value", 0), "at least 1 element"),
    (lambda c: (setattr(c.pattern, "value", "strided"), setattr(c.stride, "value", 0)), "stride 0"),
    (lambda c: (setattr(c.pattern, "value", "swizzled column"), setattr(c.pitch, "value", 33)), "multiple of 32"),
    (lambda c: setattr(c.index, "value", 40), "outside the tile"),
])
def test_bank_calculator_bad_input_and_recovery(setup, message):
    calc = widgets_shared_memory.BankCalculator(pattern="column", pitch=32)
    setup(calc)
    assert "course-calc-error" in calc.answer.value and message in calc.answer.value
    calc.pattern.value = "row"
    calc.pitch.value = 32
    calc.index.value = 0
    calc.stride.value = 1
    assert shown(calc, "course-wavefronts") == "1"


# --------------------------------------------------------------------------- tables of experiments not yet recorded

def _as_l2_fetch(strided: Result, granularity: int, dram_scale: float) -> Result:
    """The strided record's cases as coalescing.l2_fetch would record them at one granularity, with DRAM bytes
    scaled by ``dram_scale`` (a stand-in for what the limit might do)."""
    import dataclasses

    cases = []
    for c in strided.cases:
        extra = {**c.extra, "granularity_read_back": granularity,
                 "ncu": {**c.extra["ncu"], "dram__bytes_read.sum": c.extra["ncu"]["dram__bytes_read.sum"] * dram_scale}}
        cases.append(dataclasses.replace(c, name=f"{c.name}, fetch {granularity} B",
                                         params={**c.params, "granularity": granularity}, extra=extra))
    return Result("coalescing.l2_fetch", "live", strided.machine, strided.recorded_at, strided.params, cases)


def test_the_l2_fetch_table_holds_ncus_dram_bytes_against_both_models(results):
    strided = results["coalescing.strided_copy"]
    rows = lab_coalescing.l2_fetch_rows(_as_l2_fetch(strided, 32, 0.5))
    assert [r["stride"] for r in rows] == [c.params["strides"] for c in strided.cases]
    assert all(r["granularity asked B"] == 32 and r["read back B"] == 32 for r in rows)
    wide = next(r for r in rows if r["stride"] == 1025)
    # the recorded 64-byte-block reading (ncu / model about 1) halved: what a 32-byte fetch would show
    assert wide["ncu / 64-B model"] == pytest.approx(0.5, rel=0.05)
    assert wide["model DRAM read MB, 64-B blocks"] == pytest.approx(2 * wide["model DRAM read MB, sectors"])


def test_the_bank_model_counts_what_ncu_counted_for_every_wide_probe_pattern():
    """banks.wide_probe's record: ncu's shared wavefronts per load instruction, pattern by pattern, are the
    model's (the 8-byte pairing rule came from this record: it had predicted 2 for the paired 8-byte loads)."""
    probe = experiments.run("banks.wide_probe")   # replay: conftest.py runs the suite without a GPU
    counted = {c.name: c.extra["ncu"]["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
               / c.extra["ncu"]["smsp__sass_inst_executed_op_shared_ld.sum"] for c in probe.cases}
    modelled = {label: memory.bank_conflicts(addrs, width).wavefronts for label, width, addrs in transpose._wide_patterns()}
    assert set(counted) == set(modelled)
    assert all(counted[p] == pytest.approx(modelled[p], rel=0.02) for p in modelled), (counted, modelled)
    assert modelled["8 B lanes n, n ^ 1 share"] == 1 and modelled["16 B lanes n, n ^ 1 share"] == 2
    times = {r["pattern"]: r["time / 16 B row"] for r in lab_shared_memory.probe_rows(probe)}
    assert times["16 B row"] == 1 and 0.45 < times["16 B broadcast"] < 0.6 and times["16 B stride 2"] > 1.8


def test_the_wide_probe_patterns_fit_the_probe_array():
    for _, width, addrs in transpose._wide_patterns():
        assert all(a % width == 0 and a + width <= 4 * 4096 for a in addrs)   # PROBE_WORDS words of 4 bytes
