"""The probe behind notebook 12's L2 read ceiling: is the plateau of ``read_partitioned`` (the grid sweeping a set
that fits in L2, the same addresses for each thread on every rep) an L2 figure, or an L1 one? Each SM re-reads
a fixed share of the set on every rep (set / SMs: 124 KiB at 16 MiB on 132 SMs), which fits in its L1 for small
sets. Three variants of the sweep, timed in turn at each set size:

    same      the course kernel's loads (__ldg, cached in L1), the same share of the set for a block every rep;
    cg        the same addresses, loaded with ld.global.cg (cached in L2 only): no L1 hit is possible;
    rotated   __ldg, but the grid's partition shifts by one block's share each rep, so a block never re-reads
              what it read the rep before (an L1 hit needs a line another block of its SM read).

On a GPU:
    python scripts/probe_l2_ceiling.py                    # every variant at 4 .. 64 MiB and 1 GiB, GB/s
    ncu --metrics l1tex__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum \
        -k regex:probe python scripts/probe_l2_ceiling.py launch VARIANT MIB

If ``same`` runs well above ``cg`` and ``rotated`` at the sizes where the share fits in L1, and ncu shows L1 hits
for it, the course's "L2 ceiling" includes L1 hits; ``cg`` is then the L2 figure.
"""
import functools
import sys

import numpy as np

from course_lib.core import cuda, timing
from course_lib.core.hardware import detect

SRC = r'''
#ifndef LOAD_CG
#define LOAD_CG 0
#endif
#ifndef ROTATE
#define ROTATE 0
#endif
extern "C" __global__ __launch_bounds__(256) void probe(const uint4* __restrict__ in, long long n16, int reps,
                                                       unsigned* __restrict__ sink) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    unsigned x = 0;
    for (int r = 0; r < reps; ++r) {
        // ROTATE: rep r starts block b where block b + r started on rep 0 (mod the grid)
        const long long first = ROTATE ? (long long)((blockIdx.x + r) % gridDim.x) * blockDim.x + threadIdx.x
                                       : (long long)blockIdx.x * blockDim.x + threadIdx.x;
        for (long long i = first; i < n16; i += stride) {
            const uint4 w = LOAD_CG ? __ldcg(in + i) : __ldg(in + i);
            x ^= w.x ^ w.y ^ w.z ^ w.w;
        }
    }
    if (x == 0x9E3779B9u) sink[0] = x;   // keeps the loads; next to nothing is written
}
'''
VARIANTS = {"same": {}, "cg": {"LOAD_CG": 1}, "rotated": {"ROTATE": 1}}
SIZES_MIB = (4, 8, 16, 24, 32, 48, 64, 1024)


@functools.cache
def build(name: str):
    import cupy

    options = tuple(f"-D{k}={v}" for k, v in VARIANTS[name].items()) + (f"--gpu-architecture={cuda.target_arch()}",
                                                                        "-std=c++17")
    return cupy.RawModule(code=SRC, options=options).get_function("probe")


def call(name: str, mib: int):
    """One launch's callable, and the bytes it reads: the set, reps times (at least 4 GiB read per launch)."""
    import cupy

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    blocks = sms * 2048 // 256
    buf = cupy.ones(mib * 2**20 // 4, cupy.uint32)
    sink = cupy.zeros(1, cupy.uint32)
    reps = max(1, 4 * 1024 // mib)
    fn = build(name)
    return (lambda: fn((blocks,), (256,), (buf, np.int64(buf.nbytes // 16), np.int32(reps), sink))), buf.nbytes * reps


def main(argv: list[str]) -> int:
    import cupy

    if argv[:1] == ["launch"]:
        fn, _ = call(argv[1], int(argv[2]))
        fn()
        cupy.cuda.Device().synchronize()
        return 0
    print(detect().name, "L2", cupy.cuda.Device().attributes["L2CacheSize"] >> 20, "MiB")
    for mib in SIZES_MIB:
        calls = {name: call(name, mib) for name in VARIANTS}
        times = timing.benchmark_interleaved([fn for fn, _ in calls.values()], samples=timing.MIN_SAMPLES)
        row = "  ".join(f"{name} {nbytes / t.median_s / 1e9:8.0f} GB/s" for (name, (_, nbytes)), t
                        in zip(calls.items(), times))
        print(f"{mib:5d} MiB  {row}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
