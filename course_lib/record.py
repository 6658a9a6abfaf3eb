"""Record experiments live on this machine's GPU into ``data/recorded/<gpu-slug>/``.

    python -m course_lib.record                  # every experiment
    python -m course_lib.record machine.copy_bandwidth roofline.measured
    python -m course_lib.record --list
    python -m course_lib.record --runs 3 hopper.ladder   # three runs, the last the record, all kept
    python -m course_lib.record multi_gpu.collectives    # on a machine of 2-8 GPUs: into <gpu>-x<N>/

An experiment that measures between GPUs (``min_gpus``) is skipped, with a line that says so, on a machine
with fewer; its record goes to ``data/recorded/<gpu-slug>-x<N>/`` with the GPU count, topology and NCCL.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from course_lib.core import runtime
from course_lib.launch import collectives
from course_lib.measure import conditions, evidence, experiments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_lib.record", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="experiments to record (default: all)")
    parser.add_argument("--out", type=Path, default=evidence.RECORDED_DIR, help="root of the recorded tree")
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    parser.add_argument("--runs", type=int, default=None,
                        help="runs of each experiment (default: its record_runs, 3 for headline comparisons)")
    args = parser.parse_args(argv)
    if args.list:
        for name, exp in sorted(experiments.all_experiments().items()):
            print(f"{name:32s} {exp.summary}")
        return 0
    unknown = [n for n in args.names if n not in experiments.all_experiments()]
    if unknown:
        parser.error(f"unknown experiments {unknown}; see --list")
    if runtime.mode() != "live":
        ok, why = runtime._probe_gpu()
        print(f"Recording needs a CUDA GPU, and none is usable here: {why}", file=sys.stderr)
        return 2
    gpus = collectives.gpu_count()
    for name in args.names or sorted(experiments.all_experiments()):
        t0 = time.perf_counter()
        exp = experiments.all_experiments()[name]
        if exp.min_gpus > gpus:
            print(f"{name}: skipped, it measures between {exp.min_gpus} or more GPUs and this machine has {gpus}",
                  file=sys.stderr)
            if args.names:
                return 2
            continue
        runs = args.runs or exp.record_runs
        results = [experiments.run_live(name, experiments.resolve_params(name)) for _ in range(runs)]
        if exp.min_gpus > 1:
            for r in results:
                r.machine.update(collectives.machine_manifest(), slug=f"{r.machine['slug']}-x{gpus}")
        result = results[-1]
        result.repeats = results[:-1]
        conditions.mark_moving_references(result)
        command = "python -m course_lib.record " + name
        path = evidence.save(result.to_record(command, results[:-1]), args.out)
        print(f"{name}: {len(result.cases)} cases in {time.perf_counter() - t0:.1f} s -> {path}")
        for c in result.cases:
            rate = (f"{c.flop_per_s / 1e12:8.2f} TFLOP/s" if c.flop and c.flop / max(c.bytes, 1) > 1
                    else f"{c.bandwidth_bytes_per_s / 1e9:8.1f} GB/s")
            spread = ""
            if runs > 1:
                lo, _, hi = result.case_range_s(c.name)
                spread = f"  runs {lo * 1e6:.2f}-{hi * 1e6:.2f} us"
            flags = " power-limited" * c.power_limited + " protocols-disagree" * c.protocols_disagree
            print(f"    {c.name:50s} median {c.median_s * 1e6:10.2f} us  {rate}{spread}{flags}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
