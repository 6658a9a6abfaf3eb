"""Check notebook 13's attention kernels on one GPU in one call, compactly: every rung against float64 at
hostile shapes, then each rung's time beside SDPA's (and the kernel SDPA picked) at prefill shapes.

    python scripts/check_attention.py            # the correctness sweep and the timings
    python scripts/check_attention.py --quick    # fewer shapes and repetitions

The times are rough (CUDA events around back-to-back calls, the median of a few blocks): enough to see
the ladder, not a recorded measurement (the lab's harness makes those). Exit status 1 if any check failed.
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib.launch import attention  # noqa: E402
from course_lib.launch.operands import bf16_bits  # noqa: E402
from course_lib.measure.profiler import kernels_launched  # noqa: E402

BUILDS = [(r, d, c) for r in attention.RUNGS for d in attention.HEAD_DIMS for c in (False, True)
          if not (r == "causal_skip" and not c)]
SWEEP = [(1, 1, 1, 1, 1), (1, 2, 1, 1, 300), (1, 2, 1, 300, 1), (2, 4, 2, 65, 130), (2, 4, 2, 130, 65),
         (1, 32, 8, 127, 129), (1, 2, 2, 200, 200), (1, 2, 1, 333, 1000), (1, 1, 1, 1000, 1000)]
QUICK_SWEEP = [(1, 2, 1, 1, 300), (2, 4, 2, 130, 65), (1, 32, 8, 127, 129), (1, 2, 1, 333, 1000)]
# (batch, query heads, KV heads, sequence, head dim): Llama 3 8B's heads, batch x heads filling the GPU
TIMED = [(4, 32, 8, 4096, 128), (1, 32, 8, 16384, 128), (4, 32, 8, 4096, 64)]
QUICK_TIMED = [(4, 32, 8, 4096, 128)]


def correctness(sweep) -> int:
    import cupy
    import numpy as np

    failures = 0
    for rung, d, causal in BUILDS:
        worst, bad = 0.0, []
        for shape, case in itertools.product(sweep, attention.CASES):
            q, k, v = attention.hostile_operands(*shape, d, case, seed=7)
            out = cupy.full(q.shape, 0xFFFF, dtype=cupy.uint16)
            try:
                attention.run_bits(cupy.asarray(q), cupy.asarray(k), cupy.asarray(v), out, causal=causal, rung=rung)
                cupy.cuda.Device().synchronize()
            except Exception as exc:   # a launch failure is a result here, reported with its shape
                bad.append(f"{shape} {case}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            f = attention.bits_to_float
            want = attention.reference_numpy(f(q), f(k), f(v), causal=causal)
            err, where = attention.worst_error(f(cupy.asnumpy(out)), want)
            tol = attention.tolerance(float(np.abs(f(v)).max()), float(np.abs(want).max()))
            worst = max(worst, err / tol)
            if not err <= tol:
                bad.append(f"B,Hq,Hkv,Sq,Sk={shape} {case}: err {err:.3g} > tol {tol:.3g} at (b,h,q,d)={where}")
        label = f"{rung:11s} d{d:<3d} {'causal' if causal else 'full  '}"
        print(f"{'FAIL' if bad else 'ok  '} {label} {len(sweep) * len(attention.CASES)} checks, worst err/tol {worst:.2f}")
        for line in bad[:4]:
            print(f"       {line}")
        failures += len(bad)
    return failures


def time_ms(fn, calls: int, blocks: int) -> float:
    """Median milliseconds per call over ``blocks`` blocks of ``calls`` back-to-back calls."""
    import torch

    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(blocks):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return statistics.median(samples)


def sdpa_calls(q, k, v, causal) -> dict:
    """SDPA two ways: on the grouped heads as given (enable_gqa, where this PyTorch has it), and on K and V
    expanded to one head per query head (what every backend takes). The faster is the baseline."""
    import torch
    import torch.nn.functional as F

    g = q.shape[1] // k.shape[1]
    ke, ve = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    calls = {"K/V expanded": lambda: F.scaled_dot_product_attention(q, ke, ve, is_causal=causal)}
    try:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        torch.cuda.synchronize()
        calls["enable_gqa"] = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    except (RuntimeError, TypeError):
        pass
    return calls


def timing(shapes, blocks: int) -> int:
    import cupy
    import torch

    failures = 0
    for (b, hq, hkv, s, d), causal in itertools.product(shapes, (False, True)):
        gen = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(shape, generator=gen, device="cuda").bfloat16()
                   for shape in ((b, hq, s, d), (b, hkv, s, d), (b, hkv, s, d)))
        pairs = s * (s + 1) // 2 if causal else s * s   # query-key pairs computed (Sq = Sk: both alignments agree)
        flop = 4 * b * hq * pairs * d
        calls = max(1, int(2e12 / flop))              # about 2 TFLOP per block of calls
        timed = {how: time_ms(fn, calls, blocks) for how, fn in sdpa_calls(q, k, v, causal).items()}
        how = min(timed, key=timed.get)
        t_sdpa = timed[how]
        names = [n for n in kernels_launched(sdpa_calls(q, k, v, causal)[how]) if "elementwise" not in n.lower()]
        head = (f"d{d} S{s} B{b} H{hq}/{hkv} {'causal' if causal else 'full  '}: SDPA {t_sdpa:7.3f} ms "
                f"{flop / t_sdpa / 1e9:5.0f} TFLOP/s")
        parts = []
        g = hq // hkv
        want = attention.reference(q[:1, :g], k[:1, :1], v[:1, :1], causal=causal)   # one group of heads
        tol = attention.tolerance(float(v[:1, :1].abs().max()), float(want.abs().max()))
        bits = [bf16_bits(x) for x in (q, k, v)]
        for rung in attention.RUNGS:
            try:
                out = attention.forward(q, k, v, causal=causal, rung=rung)
                err = float((out[:1, :g].double() - want).abs().max())
                out_bits = bf16_bits(out)
                # timed without forward's checks and conversions: the launch alone, on torch's stream
                with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
                    t = time_ms(lambda: attention.run_bits(*bits, out_bits, causal=causal, rung=rung), calls, blocks)
            except Exception as exc:
                parts.append(f"{rung} {type(exc).__name__}: {str(exc)[:80]}")
                failures += 1
                continue
            flag = "" if err <= tol else f" ERR {err:.2g}>{tol:.2g}"
            failures += bool(flag)
            parts.append(f"{rung} {t:.3f} ms {flop / t / 1e9:.0f} TF = {t_sdpa / t:.2f} of SDPA{flag}")
        print(head + " | " + " | ".join(parts))
        others = ", ".join(f"{h} {t:.3f} ms" for h, t in timed.items() if h != how)
        print(f"      SDPA baseline: {how} ({others or 'the only way'}); it ran: "
              f"{', '.join(dict.fromkeys(n[:60] for n in names))}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer shapes and timing blocks")
    parser.add_argument("--no-timing", action="store_true")
    args = parser.parse_args()
    import torch

    from course_lib.core import cuda

    name = torch.cuda.get_device_name()
    began = time.time()
    arch = cuda.device_arch()
    regs = {kname: r.registers for kname, r in cuda.compile_family(attention.FAMILY, arch).resources.items()}
    print(f"{name} ({arch}), torch {torch.__version__}; registers: "
          + ", ".join(f"{k.removeprefix('attention_')} {v}" for k, v in regs.items()))
    failures = correctness(QUICK_SWEEP if args.quick else SWEEP)
    if not args.no_timing:
        failures += timing(QUICK_TIMED if args.quick else TIMED, 5 if args.quick else 10)
    print(f"{'ALL OK' if not failures else f'{failures} FAILED'} in {time.time() - began:.0f} s "
          f"(scale 1/sqrt(d), causal bottom-right; times are rough: events around back-to-back calls)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
