"""The sector and bank models: the seed's worked examples, a brute-force cross-check, clear errors."""
import random

import pytest

from course_lib.models import memory


def sectors(**kw):
    return memory.sector_count(memory.warp_addresses(**kw), kw.get("element_bytes", 4))


# --------------------------------------------------------------------------- the seed's numbers (lesson 001, 0x06)

def test_aligned_fp32_is_four_sectors_at_full_efficiency():
    c = sectors()
    assert (c.n_sectors, c.requested_bytes, c.fetched_bytes, c.efficiency) == (4, 128, 128, 1.0)
    assert c.n_lines == 1


def test_shifted_by_four_bytes_is_five_sectors_eighty_percent():
    c = sectors(offset_bytes=4)
    assert (c.n_sectors, c.fetched_bytes) == (5, 160)
    assert c.efficiency == pytest.approx(0.8)


def test_stride_two_is_eight_sectors_fifty_percent():
    c = sectors(pattern="strided", stride=2)
    assert (c.n_sectors, c.efficiency) == (8, 0.5)


def test_bf16_aligned_fits_two_sectors():
    c = sectors(element_bytes=2)
    assert (c.requested_bytes, c.n_sectors, c.efficiency) == (64, 2, 1.0)


@pytest.mark.parametrize("stride, n", [(1, 4), (2, 8), (3, 12), (4, 16), (8, 32), (9, 32), (33, 32), (1025, 32)])
def test_strided_fp32_sector_counts(stride, n):
    assert memory.strided_sectors(stride).n_sectors == n


def test_permuted_lanes_touch_the_same_sectors_and_random_gathers_scatter():
    assert sectors(pattern="permuted", seed=3).sectors == sectors().sectors
    assert sectors(pattern="random", seed=1).n_sectors == 32


def test_fewer_active_lanes_request_fewer_bytes():
    c = sectors(active_lanes=8)
    assert (c.active_lanes, c.requested_bytes, c.n_sectors, c.efficiency) == (8, 32, 1, 1.0)


def test_vector_elements():
    assert sectors(element_bytes=16).n_sectors == 16
    assert sectors(element_bytes=8, pattern="strided", stride=2).n_sectors == 16


def test_shifted_pattern_is_a_unit_stride_one_element_on():
    assert sectors(pattern="shifted", shift=1).addresses_bytes == sectors(offset_bytes=4).addresses_bytes


def test_unpadded_column_is_bank_c_padded_is_r_plus_c():
    col = memory.bank_conflicts(memory.shared_addresses("column", pitch=32, index=7))
    assert all(b == (7,) for b in col.lane_banks)
    assert (col.wavefronts, col.ways, col.conflict_degree) == (32, 32, 32.0)
    padded = memory.bank_conflicts(memory.shared_addresses("column", pitch=33, index=7))
    assert [b[0] for b in padded.lane_banks] == [(r + 7) % 32 for r in range(32)]
    assert (padded.wavefronts, padded.extra_wavefronts) == (1, 0)


def test_row_broadcast_and_swizzle_are_conflict_free():
    for kw in ({"pattern": "row"}, {"pattern": "broadcast"}, {"pattern": "swizzled column", "index": 11}):
        assert memory.bank_conflicts(memory.shared_addresses(**kw)).wavefronts == 1


def test_eight_byte_accesses_are_served_per_half_warp():
    row = memory.bank_conflicts(memory.shared_addresses("row", 8), 8)
    assert (row.lanes_per_phase, row.wavefronts, row.ideal_wavefronts, row.conflict_degree) == (16, 2, 2, 1.0)
    col = memory.bank_conflicts(memory.shared_addresses("column", 8, pitch=32), 8)
    assert (col.phase_wavefronts, col.ways) == ((16, 16), 16)
    assert memory.bank_conflicts(memory.shared_addresses("column", 8, pitch=33), 8).wavefronts == 2
    assert memory.bank_conflicts(memory.shared_addresses("swizzled column", 8, index=5), 8).wavefronts == 2
    # lanes 0-15 on banks 0-1, lanes 16-31 on banks 2-3: fixed half-warp phases give 16 + 16, not 16
    halves = [8 * (16 * (i % 16) + i // 16) for i in range(32)]
    assert memory.bank_conflicts(halves, 8).wavefronts == 32


def test_sixteen_byte_accesses_are_served_per_quarter_warp():
    r = memory.bank_conflicts(memory.shared_addresses("row", 16), 16)
    assert (r.lanes_per_phase, r.wavefronts, r.paired) == (8, 4, False)
    # lanes 4 apart share an address (NVIDIA forum thread 77228's case): not paired, still 4
    assert memory.bank_conflicts([16 * (i % 4) for i in range(32)], 16).wavefronts == 4
    assert memory.bank_conflicts(memory.shared_addresses("repeating", 16, stride=8), 16).wavefronts == 4


def test_sixteen_byte_loads_with_paired_lanes_take_half_the_wavefronts():
    # lanes n and n^1, or n and n^2, on one address: packed returns, served per half-warp
    for addrs in (memory.shared_addresses("broadcast", 16), memory.shared_addresses("grouped", 16, stride=2),
                  memory.shared_addresses("grouped", 16, stride=8),
                  tuple(16 * ((i % 2) + 2 * (i // 4)) for i in range(32))):   # n == n^2, not n^1
        r = memory.bank_conflicts(addrs, 16)
        assert (r.lanes_per_phase, r.wavefronts, r.ideal_wavefronts, r.paired) == (16, 2, 2, True)
    assert memory.paired_lanes(memory.shared_addresses("grouped", 16, stride=2)) == 1
    assert memory.paired_lanes(tuple(16 * ((i % 2) + 2 * (i // 4)) for i in range(32))) == 2
    # the rule is about loads: a store keeps quarter-warp phases
    assert memory.bank_conflicts(memory.shared_addresses("broadcast", 16), 16, store=True).wavefronts == 4
    # 8-byte loads pair by n ^ 1 (banks.wide_probe: 1 wavefront), not by lanes 16 apart (2), and
    # by n ^ 2 only where it was measured, at 16 bytes
    assert memory.bank_conflicts(memory.shared_addresses("broadcast", 8), 8).wavefronts == 1
    assert memory.bank_conflicts(memory.shared_addresses("grouped", 8, stride=2), 8).paired
    assert memory.bank_conflicts(memory.shared_addresses("repeating", 8, stride=16), 8).wavefronts == 2
    assert memory.bank_conflicts(tuple(8 * ((i % 2) + 2 * (i // 4)) for i in range(32)), 8).wavefronts == 2
    assert memory.bank_conflicts(memory.shared_addresses("broadcast", 8), 8, store=True).wavefronts == 2
    # a paired half-warp still conflicts inside its phase: 8 distinct float4s 32 bytes apart
    conflicted = tuple(32 * (i // 2 % 8) for i in range(32))
    assert memory.bank_conflicts(conflicted, 16).wavefronts == 4


def test_grouped_and_repeating_patterns():
    assert memory.shared_addresses("grouped", 4, stride=4)[:6] == (0, 0, 0, 0, 4, 4)
    assert memory.shared_addresses("repeating", 4, stride=4)[:6] == (0, 4, 8, 12, 0, 4)
    with pytest.raises(ValueError, match="group size 0"):
        memory.shared_addresses("grouped", 4, stride=0)


def test_dram_blocks_of_64_bytes():
    assert memory.dram_blocks(memory.warp_addresses("strided", 4, stride=16), 4).fetched_bytes == 2048
    assert memory.dram_blocks(memory.warp_addresses("strided", 4, stride=9), 4).n_sectors == 18
    assert memory.dram_blocks(memory.warp_addresses("unit", 4), 4).efficiency == 1.0


def test_predicted_copy():
    p = memory.predicted_copy(100.0, 100.0, 0.5, 1.0, 10.0)
    assert (p.dram_bytes, p.seconds, p.bandwidth_bytes_per_s) == (300.0, 30.0, pytest.approx(200 / 30))
    assert memory.predicted_copy(1, 1, 1, 1, 5.0).bandwidth_bytes_per_s == 5.0


# --------------------------------------------------------------------------- brute force over random lane patterns

def brute_sectors(addrs, b, s=32):
    touched = set()
    for a in addrs:
        if a is not None:
            for byte in range(a, a + b):
                touched.add(byte // s)
    return touched


def brute_wavefronts(addrs, b):
    """Simulate the banks: each pass serves, per phase, one pending word per bank (all lanes wanting it).
    A 16-byte load whose lanes n and n^1 (or n and n^2) all share addresses is served per half-warp."""
    per_phase = max(1, min(32, 128 // b))
    if b == 16 and any(all(addrs[n] == addrs[n ^ d] for n in range(32)) for d in (1, 2)):
        per_phase = 16
    total = 0
    for start in range(0, 32, per_phase):
        pending = {w for a in addrs[start:start + per_phase] if a is not None for w in range(a // 4, (a + b - 1) // 4 + 1)}
        while pending:
            served = {}
            for w in sorted(pending):
                served.setdefault(w % 32, w)
            pending -= set(served.values())
            total += 1
    return total


@pytest.mark.parametrize("seed", range(40))
def test_bank_model_matches_brute_force_on_random_paired_16_byte_loads(seed):
    rng = random.Random(1000 + seed)
    d = rng.choice([1, 2])
    addrs = [None] * 32
    for n in range(32):
        if addrs[n] is None:
            addrs[n] = addrs[n ^ d] = rng.randrange(rng.choice([64, 512, 4096])) // 16 * 16
    assert memory.bank_conflicts(addrs, 16).paired
    assert memory.bank_conflicts(addrs, 16).wavefronts == brute_wavefronts(addrs, 16)


@pytest.mark.parametrize("seed", range(200))
def test_models_match_brute_force_on_random_warps(seed):
    rng = random.Random(seed)
    b = rng.choice([1, 2, 4, 8, 16])
    span = rng.choice([64, 512, 4096, 1 << 20])
    addrs = [rng.randrange(span) // b * b if rng.random() < 0.85 else None for _ in range(32)]
    if all(a is None for a in addrs):
        addrs[0] = 0
    c = memory.sector_count(addrs, b)
    assert set(c.sectors) == brute_sectors(addrs, b)
    assert c.efficiency == pytest.approx(sum(a is not None for a in addrs) * b / (32 * len(c.sectors)))
    assert memory.bank_conflicts(addrs, b).wavefronts == brute_wavefronts(addrs, b)


# --------------------------------------------------------------------------- bad input gets a clear message

@pytest.mark.parametrize("call, message", [
    (lambda: memory.warp_addresses("strided", 4, stride=0), "stride 0"),
    (lambda: memory.warp_addresses("strided", 4, stride=-2), "must be positive"),
    (lambda: memory.shared_addresses("strided", 4, stride=0), "stride 0"),
    (lambda: memory.sector_count([0] * 31, 4), "exactly 32 addresses"),
    (lambda: memory.bank_conflicts([0] * 33, 4), "exactly 32 addresses"),
    (lambda: memory.sector_count([0] * 32, 3), "power of two"),
    (lambda: memory.warp_addresses("unit", 12), "power of two"),
    (lambda: memory.bank_conflicts([0] * 32, 6), "power of two"),
    (lambda: memory.sector_count([0] * 32, 32), "at most 16 bytes"),
    (lambda: memory.warp_addresses("unit", 4, offset_bytes=2), "misaligns"),
    (lambda: memory.sector_count([4 * i + 2 for i in range(32)], 4), "misaligned"),
    (lambda: memory.sector_count([None] * 32, 4), "no active lanes"),
    (lambda: memory.warp_addresses("diagonal"), "unknown pattern"),
    (lambda: memory.warp_addresses("unit", active_lanes=0), "between 1 and 32"),
    (lambda: memory.shared_addresses("column", pitch=0), "at least 1 element"),
    (lambda: memory.shared_addresses("swizzled column", pitch=33), "multiple of 32"),
    (lambda: memory.shared_addresses("row", pitch=16), "shorter than"),
    (lambda: memory.predicted_copy(1, 1, 0.0, 1, 1), "efficiency"),
    (lambda: memory.predicted_copy(1, 1, 1, 1, 0), "ceiling must be positive"),
    (lambda: memory.sector_count("0, 4, 8", 4), "list of 32 byte addresses"),
])
def test_bad_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------- the transpose tile

def test_swizzle_is_a_permutation_of_every_row_and_column():
    for r in range(32):
        assert sorted(memory.swizzle(r, c) for c in range(32)) == list(range(32))
    for c in range(32):
        assert sorted(memory.swizzle(r, c) for r in range(32)) == list(range(32))
    for c in range(32, 64):   # a 64-wide tile swizzles within each group of 32 columns
        assert {memory.swizzle(r, c) for r in range(32)} == set(range(32, 64))


@pytest.mark.parametrize("pitch, swz, load_per_request", [(32, False, 32), (33, False, 1), (32, True, 1)])
def test_transpose_tile_wavefronts(pitch, swz, load_per_request):
    p = memory.transpose_smem_full_tiles(64, 32, 8, pitch, swz)
    assert p.store_requests == p.load_requests == 4 * 32
    assert p.store_wavefronts == p.store_requests
    assert p.load_wavefronts == load_per_request * p.load_requests
    assert p.load_conflicts == (load_per_request - 1) * p.load_requests


def test_transpose_edges_count_partial_warps():
    full = memory.transpose_smem_full_tiles(64, 32, 8, 33, False)
    assert memory.transpose_smem(64, 64, 32, 8, 33, False) == full
    edge = memory.transpose_smem(37, 70, 32, 8, 32, False)
    assert edge.store_requests < full.store_requests and edge.load_wavefronts > edge.load_requests
    with pytest.raises(ValueError, match="multiple of the tile"):
        memory.transpose_smem_full_tiles(100, 32, 8, 33, False)


# --------------------------------------------------------------------------- notebook 06's ladder through the bank model

def test_warp_tiles_are_the_kernel_files_macros():
    from course_lib.core.cuda import macros

    d = macros("gemm_fp32")
    for prefix, tile in (("WT", memory.WARPTILE), ("WB", memory.WARPTILE_16X8)):
        assert {k: d[f"{prefix}_{k.upper()}"] for k in tile} == tile


def test_ladder_wavefronts_per_warp_and_k():
    # step 9: per k, 4 paired A reads (2 wavefronts) + 2 unpaired B reads (4): 16 per warp; 4096 warps
    r = memory.gemm_fp32_wavefronts("sgemm_warptile_db_16x8", 4096)
    assert r.load_wavefronts == 16 * 4096 * 4096 and r.conflicts == 0
    # a quarter-warp rule for every LDS.128 would need 6 x 4 = 24 per warp and k
    assert r.load_wavefronts < 24 * 4096 * 4096
    # step 4's transposed A store: 8 lanes of a warp on each of 4 banks, an 8-way conflict
    assert memory.gemm_fp32_wavefronts("sgemm_reg1d", 4096).store_conflicts == 7 * 512 * 4096 * 16
    assert memory.gemm_fp32_wavefronts("sgemm_vec4", 4096).store_conflicts == 0    # PAD removes it
    with pytest.raises(ValueError, match="multiple"):
        memory.gemm_fp32_wavefronts("sgemm_vec4", 1000)


def test_ladder_wavefronts_match_the_h200_profile():
    from course_lib.measure import experiments

    prof = experiments.run("gemm.profile")
    for c in prof.cases:
        k = c.params["kernel"]
        if not k.startswith("sgemm_") or k in ("sgemm_naive", "sgemm_coalesced"):
            continue
        model, m = memory.gemm_fp32_wavefronts(k, c.params["n"]), c.extra["ncu"]
        assert m["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] == pytest.approx(model.wavefronts, rel=0.02), k
        assert m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"] == pytest.approx(
            model.conflicts, rel=0.05, abs=0.02 * model.wavefronts), k
