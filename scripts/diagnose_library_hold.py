"""Why fusion.chains once recorded torch.compile about 2x slow at k = 8 and 32: the host-side time of a
compiled call against the old harness's fixed hold (twice the fastest of three warm-up enqueues + 20 µs),
with and without the PyTorch profiler run first. Run on a GPU: python scripts/diagnose_library_hold.py
(writes diag.json under $OUT or /tmp). Notebook 08 quotes its 2026-12-02 H200 run."""
import json
import os
import statistics
import time

import cupy
import torch

from course_lib.core import timing
from course_lib.core.gpu_monitor import GpuMonitor
from course_lib.labs import fusion as lf
from course_lib.launch.fusion import affine_op
from course_lib.measure.profiler import kernels_launched

out = {}
x = cupy.random.default_rng(1).random(1 << 26, dtype=cupy.float32) * 2 - 1
tx = torch.as_tensor(x, device="cuda")
with GpuMonitor() as m:
    time.sleep(0.05)
print("monitor", m.summary())

def enqueue_stats(fn, n=50):
    e = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        e.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return {"min_us": min(e) * 1e6, "median_us": statistics.median(e) * 1e6, "max_us": max(e) * 1e6}

def fixed_hold(fn, samples=20):
    """The old harness: hold = 2 x fastest of 3 warm-up enqueues + 20 us, never longer."""
    hold = timing.hold_seconds(timing._warm_up(fn, 3), 1)
    spin, a, b = timing.GpuHold(), cupy.cuda.Event(), cupy.cuda.Event()
    s, late = [], 0
    for _ in range(samples):
        t, was_late = timing._held_sample(fn, 1, spin, hold, a, b)
        s.append(t)
        late += was_late
    return {"median_us": statistics.median(s) * 1e6, "late": late, "hold_us": hold * 1e6}

for k in (8, 16, 32):
    ops = [affine_op(i, 4) for i in range(k)]
    compiled, why = lf._compiled(lf.torch_chain(ops), tx)

    def fn():
        return compiled(tx)

    r = {"enqueue_fresh": enqueue_stats(fn), "old_harness_fresh": fixed_hold(fn)}
    t = timing.benchmark(fn, 20, reference=True)
    r["new_harness_fresh"] = {"median_us": t.median_s * 1e6, "late": t.late_samples,
                              "blocks_median_us": statistics.median(t.second["samples_s"]) * 1e6, "agree": t.second["agree"],
                              "gpu": t.gpu}
    r["kernels"] = kernels_launched(fn)
    r["enqueue_after_profiler"] = enqueue_stats(fn)
    r["old_harness_after_profiler"] = fixed_hold(fn)
    t = timing.benchmark(fn, 20, reference=True)
    r["new_harness_after_profiler"] = {"median_us": t.median_s * 1e6, "late": t.late_samples,
                                       "blocks_median_us": statistics.median(t.second["samples_s"]) * 1e6}
    out[k] = r
    print(k, json.dumps(r, default=str)[:1500])
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "diag.json"), "w"), indent=1, default=str)
