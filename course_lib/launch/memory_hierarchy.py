"""Host launcher of ``kernels/memory_hierarchy.cu``: read a working set over and over, so that it is
served by L1 (every block reads the whole set), by L2 or by HBM (the grid shares one sweep a rep);
and its smoke launch. Notebook 12's lab measures the hierarchical roofline's ceilings with it."""
from __future__ import annotations

import numpy as np

from course_lib.core import cuda
from course_lib.measure.smoke import covers

FAMILY = "memory_hierarchy"
THREADS = 256
KINDS = {"per block": "read_per_block", "partitioned": "read_partitioned"}


def full_grid(sms: int) -> int:
    """Blocks that fill every SM's 2,048 threads at once: the grid the ceilings are measured with."""
    return sms * 2048 // THREADS


def bytes_read(kind: str, set_bytes: int, reps: int, blocks: int) -> int:
    """What one launch reads: the set ``reps`` times, by every block (``per block``) or by the grid once."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    return set_bytes * reps * (blocks if kind == "per block" else 1)


def run_read(kind: str, buf, reps: int, blocks: int, sink, check: bool = False) -> None:
    """One launch reading ``buf`` (a CuPy array whose size is a multiple of 16 bytes) ``reps`` times."""
    if buf.nbytes % 16 or buf.nbytes == 0:
        raise ValueError(f"the set must be a positive multiple of 16 bytes, got {buf.nbytes}")
    if reps < 1 or blocks < 1:
        raise ValueError(f"reps and blocks must be at least 1, got {reps} and {blocks}")
    cuda.kernel(FAMILY, KINDS[kind])((blocks,), (THREADS,),
                                     (buf, np.int64(buf.nbytes // 16), np.int32(reps), sink, np.int32(check)))


@covers(FAMILY, *KINDS.values())
def hierarchy_smoke() -> None:
    """Each kernel reads every word of odd-sized sets: the XOR of what all threads read must be the
    set's XOR (per block: once per block, so an odd number of blocks gives it again)."""
    import cupy

    for words in (1, 3, 1000, 4099):
        buf = cupy.random.default_rng(words).integers(0, 2**32, words * 4, dtype=cupy.uint64).astype(cupy.uint32)
        want = int(np.bitwise_xor.reduce(cupy.asnumpy(buf)))
        for kind in KINDS:
            for blocks in (1, 3, 200):
                sink = cupy.zeros(1, cupy.uint32)
                run_read(kind, buf, 1, blocks, sink, check=True)
                expected = want if kind == "partitioned" or blocks % 2 else 0
                if int(sink[0]) != expected:
                    raise AssertionError(f"{KINDS[kind]} with {blocks} blocks did not read each of {words} words "
                                         "exactly once a sweep")
