"""Host launcher of ``kernels/transpose.cu`` (notebook 05's kernels): the transpose ladder (naive, shared
tile, padded, swizzled) beside two copies, and the bank probe's warp patterns of shared-memory loads,
each case with its sector and bank model; the launches that profile them; and the family's smoke launch."""
from __future__ import annotations

from course_lib.core import cuda
from course_lib.core.hardware import detect
from course_lib.launch.coalescing import BLOCK, global_model
from course_lib.launch.elementwise import geometry as elementwise_launch
from course_lib.measure.experiments import check_close, kernel_launch_record
from course_lib.measure.launches import Launch, launch_profiled
from course_lib.measure.smoke import covers
from course_lib.models import memory

SHARED_METRICS = [   # ncu's counters of shared-memory instructions, wavefronts and bank conflicts
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
]

# kernel, label, tile, block rows, shared row pitch (words), swizzled
TRANSPOSES = [
    ("transpose_naive", "naive (no shared memory)", 32, 8, None, False),
    ("transpose_tiled", "shared tile 32×32", 32, 8, 32, False),
    ("transpose_padded", "padded tile 32×33", 32, 8, 33, False),
    ("transpose_swizzled", "swizzled tile 32×32", 32, 8, 32, True),
    ("transpose_padded_32x4", "padded tile 32×33, 32×4 threads", 32, 4, 33, False),
    ("transpose_padded_64", "padded tile 64×65", 64, 8, 65, False),
    ("transpose_swizzled_64", "swizzled tile 64×64", 64, 8, 64, True),
]


def transpose_model(kernel: str, n: int) -> dict:
    """Sector and bank model of one transpose variant on an n x n fp32 matrix (n a multiple of its tile)."""
    _, _, tile, rows, pitch, swz = next(t for t in TRANSPOSES if t[0] == kernel)
    unit = memory.warp_addresses("unit", 4)
    column = memory.warp_addresses("strided", 4, stride=n)      # the naive kernel's write: one column
    model = global_model(unit, 4, column if pitch is None else unit, 4)
    if pitch is not None:
        p = memory.transpose_smem_full_tiles(n, tile, rows, pitch, swz)
        model.update(smem_store_requests=p.store_requests, smem_load_requests=p.load_requests,
                     smem_store_wavefronts=p.store_wavefronts, smem_load_wavefronts=p.load_wavefronts)
    return model


def transpose_launches(n: int) -> list[Launch]:
    """CuPy's copy and the course's copy_vec4 (not profiled), then every transpose of an n x n matrix."""
    import cupy

    a = cupy.random.random((n, n), dtype=cupy.float32)
    out = cupy.empty_like(a)
    copy_out = cupy.empty_like(a)
    nbytes = 2.0 * a.nbytes
    launches = []

    def memcpy():
        copy_out.data.copy_from_device_async(a.data, a.nbytes)

    def check_copy(run):
        copy_out.fill(-1)
        run()
        return check_close(copy_out, a, "source array", 0.0)

    launches.append(Launch("CuPy device-to-device copy", {"variant": "copy"}, "cudaMemcpyAsync (CuPy)", memcpy,
                           lambda: check_copy(memcpy), nbytes, library=True))
    vec4 = cuda.kernel("elementwise", "copy_vec4")
    g4, b4 = elementwise_launch("copy_vec4", n * n)
    vec4_run = lambda: vec4(g4, b4, (copy_out, a, cupy.int64(n * n)))
    launches.append(Launch("course copy_vec4", {"variant": "copy"}, "elementwise.copy_vec4", vec4_run,
                           lambda: check_copy(vec4_run), nbytes,
                           launch=kernel_launch_record(g4, b4, "elementwise", "copy_vec4")))
    for kernel, label, tile, rows, pitch, swz in TRANSPOSES:
        fn = cuda.kernel("transpose", kernel)
        grid, block = ((n + tile - 1) // tile, (n + tile - 1) // tile), (tile, rows)
        args = (out, a, cupy.int32(n), cupy.int32(n))

        def check(fn=fn, grid=grid, block=block, args=args):
            out.fill(-1)
            fn(grid, block, args)
            return check_close(out, a.T, "CuPy a.T", 0.0)

        launches.append(Launch(label, {"variant": kernel}, f"transpose.{kernel}",
                               lambda fn=fn, grid=grid, block=block, args=args: fn(grid, block, args), check,
                               nbytes, launch=kernel_launch_record(grid, block, "transpose", kernel),
                               extra={"model": transpose_model(kernel, n)}, function=kernel))
    return launches


def _probe_patterns() -> list[tuple[str, int, tuple]]:
    """(label, access bytes, the warp's byte addresses) of every probed pattern."""
    sa = memory.shared_addresses
    halves = tuple(8 * (16 * (i % 16) + i // 16) for i in range(32))   # 16 lanes per bank pair, two pairs
    return [
        ("4 B row", 4, sa("row", 4)),
        ("4 B stride 2", 4, sa("strided", 4, stride=2)),
        ("4 B column, pitch 32", 4, sa("column", 4, pitch=32)),
        ("4 B column, pitch 34", 4, sa("column", 4, pitch=34)),
        ("4 B column, pitch 33", 4, sa("column", 4, pitch=33)),
        ("4 B column, XOR swizzle", 4, sa("swizzled column", 4, pitch=32, index=5)),
        ("4 B broadcast", 4, sa("broadcast", 4)),
        ("8 B row", 8, sa("row", 8)),
        ("8 B stride 2", 8, sa("strided", 8, stride=2)),
        ("8 B column, pitch 32", 8, sa("column", 8, pitch=32)),
        ("8 B column, pitch 33", 8, sa("column", 8, pitch=33)),
        ("8 B column, XOR swizzle", 8, sa("swizzled column", 8, pitch=32, index=5)),
        ("8 B two bank pairs, split by half-warp", 8, halves),
    ]


def _wide_patterns() -> list[tuple[str, int, tuple]]:
    """(label, access bytes, addresses) of the 16-byte loads and of 8- and 16-byte loads whose lanes share
    addresses: the cases that decide how the hardware groups lanes into wavefronts for wide words."""
    sa = memory.shared_addresses
    pairs_n2 = tuple(16 * (2 * (i >> 2) + (i & 1)) for i in range(32))   # lane n reads what lane n ^ 2 reads
    return [
        ("16 B row", 16, sa("row", 16)),
        ("16 B stride 2", 16, sa("strided", 16, stride=2)),
        ("16 B column, pitch 32", 16, sa("column", 16, pitch=32)),
        ("16 B column, pitch 33", 16, sa("column", 16, pitch=33)),
        ("16 B lanes n, n ^ 1 share", 16, sa("grouped", 16, stride=2)),
        ("16 B lanes n, n ^ 2 share", 16, pairs_n2),
        ("16 B groups of 4 lanes share", 16, sa("grouped", 16, stride=4)),
        ("16 B lanes 8 apart share", 16, sa("repeating", 16, stride=8)),
        ("16 B lanes 16 apart share", 16, sa("repeating", 16, stride=16)),
        ("16 B broadcast", 16, sa("broadcast", 16)),
        ("8 B lanes n, n ^ 1 share", 8, sa("grouped", 8, stride=2)),
        ("8 B lanes 16 apart share", 8, sa("repeating", 8, stride=16)),
        ("8 B broadcast", 8, sa("broadcast", 8)),
    ]


PROBE_PATTERNS = [p[0] for p in _probe_patterns()]
WIDE_PROBE_PATTERNS = [p[0] for p in _wide_patterns()]


def probe_load_sum(offsets, width: int):
    """What one probe load of ``width`` bytes at element ``offsets`` (NumPy or CuPy) sums: the W = width / 4
    words W·e … W·e + W − 1 (the probe fills word w with w), so W²·e + W(W − 1)/2."""
    w = width // 4
    return w * w * offsets + w * (w - 1) // 2


def probe_launches(patterns: list[str], iters: int) -> list[Launch]:
    """One bank-probe launch per pattern: every warp repeats the pattern's loads ``iters`` times."""
    import cupy
    import numpy as np

    known = {p[0]: p for p in _probe_patterns() + _wide_patterns()}
    bad = [p for p in patterns if p not in known]
    if bad:
        raise ValueError(f"unknown probe patterns {bad}; known: {PROBE_PATTERNS + WIDE_PROBE_PATTERNS}")
    blocks = detect().sm_count * 8
    out = cupy.empty(blocks * BLOCK, dtype=cupy.uint32)
    launches = []
    for label in patterns:
        _, width, addrs = known[label]
        offsets = np.array([a // width for a in addrs], dtype=np.int32)
        kernel = f"bank_probe_{width}b"
        fn = cuda.kernel("transpose", kernel)
        dev_offsets = cupy.asarray(offsets)
        args = (out, dev_offsets, cupy.int32(iters))
        per_lane = probe_load_sum(offsets.astype(np.uint64), width)
        want = cupy.asarray(np.tile((per_lane * iters) % (1 << 32), blocks * BLOCK // 32).astype(np.float64))

        def check(fn=fn, args=args, want=want):
            out.fill(0)
            fn((blocks,), (BLOCK,), args)
            return check_close(out, want, "iters x the words each lane reads (NumPy)", 0.0)

        bank = memory.bank_conflicts(addrs, width)
        model = {"wavefronts_per_request": bank.wavefronts, "ideal_wavefronts": bank.ideal_wavefronts,
                 "ways": bank.ways, "requests": blocks * BLOCK // 32 * iters}
        launches.append(Launch(label, {"patterns": label, "access_bytes": width}, f"transpose.{kernel}",
                               lambda fn=fn, args=args: fn((blocks,), (BLOCK,), args), check,
                               float(blocks * BLOCK * iters * width),
                               launch=kernel_launch_record((blocks,), (BLOCK,), "transpose", kernel),
                               extra={"model": model, "addresses_bytes": list(addrs)}, function=kernel))
    return launches


def profile_transposes(n: int) -> None:
    """What runs under ncu for ``transpose.ladder``: the transposes (the copies are not profiled)."""
    launch_profiled(transpose_launches(n))


def profile_probes(patterns: list[str], iters: int) -> None:
    """What runs under ncu for ``banks.probe``."""
    launch_profiled(probe_launches(patterns, iters))


@covers("transpose", *[t[0] for t in TRANSPOSES], "bank_probe_4b", "bank_probe_8b", "bank_probe_16b")
def transpose_smoke() -> None:
    import cupy

    for rows, cols in ((37, 70), (64, 64), (1, 5)):
        a = cupy.arange(rows * cols, dtype=cupy.float32).reshape(rows, cols)
        for kernel, _, tile, brows, _, _ in TRANSPOSES:
            out = cupy.full((cols, rows), -1, dtype=cupy.float32)
            grid = ((cols + tile - 1) // tile, (rows + tile - 1) // tile)
            cuda.kernel("transpose", kernel)(grid, (tile, brows), (out, a, cupy.int32(rows), cupy.int32(cols)))
            assert bool((out == a.T).all()), f"{kernel} {rows}x{cols}"
    offsets = cupy.asarray([31 * i for i in range(32)], dtype=cupy.int32)   # < 1,024: in range for every width
    for width in (4, 8, 16):
        out = cupy.zeros(2 * BLOCK, dtype=cupy.uint32)
        cuda.kernel("transpose", f"bank_probe_{width}b")((2,), (BLOCK,), (out, offsets, cupy.int32(3)))
        per_lane = probe_load_sum(offsets, width)
        assert bool((out == cupy.tile(3 * per_lane, 2 * BLOCK // 32).astype(cupy.uint32)).all()), f"probe {width}"
