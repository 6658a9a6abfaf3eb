"""The experiment coalescing.l2_fetch as a standalone probe: the strided copy (coalescing.strided_copy) with the
runtime's limit cudaLimitMaxL2FetchGranularity set to 32, 64 and 128 bytes. On a GPU:

    python scripts/probe_l2_fetch.py time
        Each limit in turn: the limit read back, then the strides timed (L2 flushed, 20 samples), n = 2^26 floats.

    ncu --csv --print-units base --clock-control none \
        --metrics dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum -k regex:^strided_copy$ \
        python scripts/probe_l2_fetch.py launch LIMIT
        One launch of each stride with the limit at LIMIT bytes, for Nsight Compute.

The runtime documents the limit as a hint ("maximum fetch granularity of L2 (in bytes)"): whether the L2 follows it
is what the probe measures, by the DRAM bytes read.
"""
import sys

from course_lib.launch.coalescing import set_l2_fetch_granularity as set_limit, strided_launches
from course_lib.measure.launches import launch_profiled, measure

N = 1 << 26
STRIDES = [1, 16, 33, 1025]   # coalescing.l2_fetch's
LIMITS = [32, 64, 128]


def main(argv: list[str]) -> None:
    if argv[:1] == ["launch"]:
        print("limit read back:", set_limit(int(argv[1])), file=sys.stderr)
        launch_profiled(strided_launches(N, STRIDES))
        return
    if argv[:1] != ["time"]:
        raise SystemExit(__doc__)
    for limit in LIMITS:
        got = set_limit(limit)
        for case in measure(strided_launches(N, STRIDES), 20, flush_l2=True):
            print(f"limit {limit:4d} (read back {got:4d})  {case.name:12s} {case.median_s * 1e6:9.1f} µs  "
                  f"{case.bytes / case.median_s / 1e9:7.1f} GB/s")


if __name__ == "__main__":
    main(sys.argv[1:])
