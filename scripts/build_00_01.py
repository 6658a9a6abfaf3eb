"""Write notebooks/00 and 01 from the cell lists below (outputs come from executing them on a GPU).

    python scripts/build_00_01.py        # rewrites the .ipynb files, without outputs

Cells whose first line is ``# NBVAL_CHECK_OUTPUT`` are analytic: nbval compares their
output with the committed one in every mode.
"""
from nbbuild import build, code, md


NB00 = [
    md("""
# 00 · Your GPU, and how to measure it

**You will learn** what card you are on and what it can really do, and how to time GPU work without fooling yourself: why a host timer around a launch lies, why the first call is slow, and why we report a median and a spread instead of one number.

**You need** nothing but this notebook. With an NVIDIA GPU every number below is measured now (*live*); without one, each is replayed from a run recorded on an NVIDIA H200 and labelled so (*replay*).

**Time** about 20 minutes.
"""),
    md("""
## Where am I running?

The first cell of every notebook says which mode you are in and which software it found. If something is broken (no driver, a driver older than the CUDA runtime of your CuPy wheel, NVRTC missing), it says so in plain words and falls back to replay.
"""),
    code("""
from course_lib import runtime
env = runtime.banner()
"""),
    md("""
## The machine card: the datasheet beside what we measured

A datasheet gives *theoretical* peaks: pin bandwidth and tensor-core FLOP/s at boost clock. What a program sustains is lower. Two experiments measure this card's ceilings, which every later notebook uses as its roofs:

* **copy bandwidth**: a device-to-device copy of 1 GiB through CuPy (`cudaMemcpyAsync`), counting bytes read plus bytes written, with the L2 cache flushed before each sample;
* **matmul peak**: cuBLAS (through PyTorch) on 8192³ square matrices, per dtype. `fp32` has TF32 switched off; `tf32` is the same fp32 matmul with it on.
"""),
    code("""
from course_lib.ceilings import measured_ceilings
from course_lib.plots import Table

ceilings = measured_ceilings()
Table(ceilings.percent_of_spec(), f"{ceilings.gpu}: datasheet vs measured ({ceilings.provenance})",
      ["ceiling", "unit", "datasheet", "measured", "% of datasheet"])
"""),
    md("""
The datasheet numbers come from one table in `course_lib.hardware`, each entry citing its source:
"""),
    code("""
from course_lib import hardware
sheet = hardware.spec(ceilings.gpu)
print(sheet.name, "—", sheet.source)
print(sheet.notes or "")
Table(ceilings.device_vs_datasheet(), f"what the device reports about itself ({ceilings.provenance})")
"""),
    md("""
Nobody reaches 100% of a datasheet. The copy loses to DRAM refresh, page and bus turnarounds; the matmul to clocks that drop below boost under a full tensor-core load, and to the parts of a GEMM (loading tiles, the epilogue) that are not multiply-adds. That is why the course's roofs are the **measured** ceilings, and every "% of" in it is against a number measured in the same kind of run.

## Our own kernels against the copy ceiling

The first kernels of the course: a copy and a vector add, each written twice. The first version gives each thread one 4-byte float; the second gives each thread one `float4`, 16 bytes, so the same bytes take a quarter of the instructions and each thread keeps four times as many bytes in flight.
"""),
    code("""
from course_lib import cuda
print(cuda.describe("elementwise", "vector_add"))
print()
print(cuda.describe("elementwise", "vector_add_vec4"))
"""),
    md("""
The register counts come from the compiler (NVRTC), which needs no GPU: in replay mode you still see what the kernel costs on the recorded card's architecture.
"""),
    code("""
from course_lib import experiments

copies = experiments.run("machine.copy_bandwidth")
baseline = copies.case("CuPy device-to-device copy").bandwidth_bytes_per_s
Table([{"case": c.name, "kernel": c.kernel, "GB/s": c.bandwidth_bytes_per_s / 1e9,
        "% of CuPy copy": 100 * c.bandwidth_bytes_per_s / baseline,
        "registers": (c.launch or {}).get("registers")} for c in copies.cases],
      f"1 GiB per array, L2 flushed, {len(copies.cases[0].samples_s)} samples each: {copies.provenance}")
"""),
    md("""
A vector add moves 12 bytes per element (two reads, one write) and does one addition: it can only ever be as fast as memory. The `float4` versions sit at the copy ceiling. The one-float-per-thread versions fall short even though they move the same bytes: each load instruction asks for only 4 bytes per thread, and with the number of threads an SM can hold there are not enough bytes in flight to cover the latency of HBM. (Notebook 03 comes back to this as *occupancy is not utilization*.)

## Measuring correctly

A kernel launch is **asynchronous**: the call returns as soon as the launch is queued, long before the GPU has finished. So four ways to time the same vector add give four different answers:

1. a host timer around the launch alone measures the cost of *queueing* it;
2. a host timer around launch + `synchronize()` measures the work, plus the launch and the round trip to the GPU;
3. CUDA events, recorded on the GPU's own stream before and after, measure the time the GPU spent;
4. the very first call also pays for compiling the kernel (NVRTC) and loading it.
"""),
    code("""
timing = experiments.run("timing.measuring_correctly")
Table([{"how it was timed": c.name, "median µs": c.median_s * 1e6, "spread (IQR/median)": c.timing.spread,
        "apparent GB/s": c.bytes / c.median_s / 1e9, "samples": len(c.samples_s)} for c in timing.cases],
      f"vector_add timed four ways: {timing.provenance}")
"""),
    md("""
Read the table from the large size. The host timer without a synchronize reports a few microseconds whatever the size: that is the launch, not the work, and the "bandwidth" it implies is impossible. With a synchronize, and with events, the large add takes the time the bytes need. At the small size the work is shorter than the launch itself, so every method mostly measures overhead; events measure it from the GPU's side. The first call costs milliseconds, thousands of times a warm call: always warm up before timing.

### Why a median and a spread

Here is every raw sample of the event-timed runs and of the host-timed ones. The distribution has a tail (other work on the machine, clock changes, the occasional slow launch), so its mean is pulled by outliers; the median is not. The course reports the median and the interquartile range, and keeps the raw samples in every record.
"""),
    code("""
import matplotlib.pyplot as plt
from course_lib.plots import samples_figure

names = [c.name for c in timing.cases if "first call" not in c.name]
samples_figure(timing, names, f"raw samples of vector_add: {timing.provenance}")
plt.show()
"""),
    md("""
The harness behind every measurement in the course is `course_lib.timing.benchmark`: warm-up calls, then at least 20 samples each bracketed by CUDA events, optionally several calls per sample (throughput, as a training loop sees it) and optionally an L2 flush before each sample so that a bandwidth figure cannot be flattered by cache hits. It refuses fewer than 20 samples.

## Exercises

**1.** From the event-timed large vector add above, compute its bandwidth in GB/s: bytes moved (12 per element) over the median time.
"""),
    code("""
from course_lib.exercises import check_bandwidth
big_add = [c for c in timing.cases if c.name.startswith("CUDA events") and c.params["sizes"] > 1e6][0]
my_answer = None   # your GB/s here
check_bandwidth(big_add, my_answer)
"""),
    md("Reference solution (CI runs it):"),
    code("""
check_bandwidth(big_add, big_add.bytes / big_add.median_s / 1e9)
"""),
    md("""
## Takeaways

* Every number in this course is *analytic* (a model's, inputs shown), *live* (measured on your GPU now) or *recorded* (replayed, with the GPU and date). Tables and figures say which.
* Datasheet peaks are not ceilings. The course measures its own: copy bandwidth and library matmul per dtype.
* Time GPU work with CUDA events, after warm-up, with at least 20 samples; report the median and the spread.

**Next:** [01 · The roofline and the B200 ridge](01_roofline.ipynb) turns these ceilings into roofs and asks of every operation which one it hits.
"""),
]

NB01 = [
    md("""
# 01 · The roofline and the B200 ridge

**You will learn** to decide from two numbers whether an operation is limited by arithmetic or by memory, why a B200 needs about 250 FLOPs per byte to be fed, and how real operations on this GPU sit under its measured roofs.

**You need** notebook 00's ideas (measured ceilings, honest timing). **Time** about 30 minutes.
"""),
    code("""
from course_lib import runtime
env = runtime.banner()
"""),
    md("""
## The idea: two lower bounds on time

An operation does **F** useful floating-point operations and moves **Q** bytes across some memory boundary (here: HBM). The GPU can do at most **C** FLOP/s and move at most **B** bytes/s. Neither can be beaten, so

  t ≥ max(F / C, Q / B)  and the attainable rate is  P = F / t ≤ min(C, B · I),  with I = F / Q.

**I** is the *arithmetic intensity*, FLOPs per byte. Plotted on log-log axes, B·I is a sloped roof and C a flat one; they meet at the **ridge point** I = C / B. Left of it an operation is memory-bound, right of it compute-bound. It is a bound, not a prediction: launch overhead, too little parallelism or a poor instruction mix keep real kernels below it.

A worked example on an illustrative accelerator (300 TFLOP/s, 1.5 TB/s), for a kernel of 120 GFLOP moving 3 GB:
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib import roofline

b = roofline.time_lower_bound(flop=120e9, bytes_moved=3e9, peak_flop_per_s=300e12, bandwidth_bytes_per_s=1.5e12)
print(f"compute {b.compute_seconds * 1e3:.1f} ms, memory {b.memory_seconds * 1e3:.1f} ms "
      f"-> at least {b.seconds * 1e3:.1f} ms, {b.binding_roof}-bound; ridge "
      f"{roofline.ridge_point(300e12, 1.5e12):.0f} FLOP/byte, this kernel's intensity {b.intensity:.0f}")
"""),
    md("""
## The B200 ridge

A B200 does roughly 2 PFLOP/s of dense fp16 on its tensor cores and reads HBM3e at roughly 8 TB/s. A square fp16 GEMM of size N does 2N³ FLOPs and, if each matrix crosses HBM once, moves 3·N²·2 bytes, so its intensity is N/3:
"""),
    code("""
# NBVAL_CHECK_OUTPUT
ridge_b200 = roofline.ridge_point(2e15, 8e12)
print(f"B200 ridge: {ridge_b200:.0f} FLOP/byte")
for n in (256, 750, 4096):
    print(f"fp16 GEMM N={n}: intensity {roofline.gemm_intensity(n, n, n, 2):7.1f} FLOP/byte "
          f"({'above' if roofline.gemm_intensity(n, n, n, 2) > ridge_b200 else 'at or below'} the ridge)")
"""),
    md("""
Not every GEMM is square. For C[M,N] = A[M,K]·B[K,N] in bf16 with K = N = 4096, the compulsory bytes are 2·(MK + KN + MN). With one row (a decode step) the weights dominate and intensity is about 1; with many rows it climbs past any ridge:
"""),
    code("""
# NBVAL_CHECK_OUTPUT
for m in (1, 128, 4096):
    f = roofline.gemm_flop(m, 4096, 4096)
    q = roofline.gemm_compulsory_bytes(m, 4096, 4096, bytes_a=2)
    print(f"M={m:5d}: {f:>17,.0f} FLOP  {q:>13,.0f} bytes  intensity {f / q:9.4f} FLOP/byte")
"""),
    md("""
## Predict: the roofline calculator

Pick a GPU, a dtype and a size N. The bars are the time to do 2N³ FLOPs at the dtype's peak and the time to move the three N×N matrices at the GPU's bandwidth; the longer bar is the bound. Slide N down until the GEMM tips into memory-bound. The GPU list has the lesson's round B200 numbers, every card in the spec table, this GPU with its **measured** ceilings, and a custom entry where you type the roofs (try a bandwidth of 0).
"""),
    code("""
from course_lib.ceilings import measured_ceilings
from course_lib.widgets import roofline_calculator

ceilings = measured_ceilings()
print(f"measured ceilings of {ceilings.gpu}: {ceilings.provenance}")
calc = roofline_calculator(extra_gpus=[ceilings.as_gpu()])
calc
"""),
    md("""
Two things the calculator makes concrete.

* **The crossover N is small.** Setting 2N³/C = 3N²b/B gives N = 3·b·C / (2·B), which is 750 for the lesson's B200 in fp16. Any real GEMM is compute-bound; the job is to keep the tensor cores busy.
* **Switching dtype moves the ridge, not the crossover.** fp8 doubles C and halves b. The ridge doubles (C/B), and the GEMM's intensity doubles too (half the bytes), so N = 3bC/(2B) stays where it was. At fp32 on CUDA cores the peak is ~30× lower and the crossover N is 30× smaller too, but so is the speed.

The same question for every GPU in the table, per dtype (datasheet peaks over datasheet bandwidth):
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib import hardware
from course_lib.plots import Table

Table(roofline.ridge_table(list(hardware.SPECS.values())),
      "ridge point, FLOP/byte (analytic: dense datasheet peak ÷ datasheet memory bandwidth)",
      ["gpu", *hardware.DTYPES])
"""),
    md("""
The H100's bf16 ridge, 989 TFLOP/s over 3.35 TB/s, is about 295 FLOP/byte. The H200 has the same chip with faster memory, so its ridge is lower (206): easier to feed. Every generation's tensor cores grew faster than its memory.

## Run and measure: real operations under the measured roofs

Now the measured roofline of this GPU. Each operation is timed with CUDA events (queued 20 calls per sample where a call is short, as a training loop sees it) and placed at its compulsory-byte intensity:

* our own `vector_add_vec4` kernel (I = 1/12),
* fp32 matrix-vector products, n = 4096 and 8192 (I ≈ 0.5),
* square matmuls from 64 to 8192 in fp32 (TF32 off) and bf16 (I = n/6 and n/3),
* 1,024 independent 64×64 matmuls in one batched call.

Every result was checked against a float64 reference before it was timed.
"""),
    code("""
from course_lib import experiments
from course_lib.ceilings import roofline_points

measured = experiments.run("roofline.measured")
points = roofline_points(measured, ceilings)
Table(points, f"measured roofline: {measured.provenance}; roofs: {ceilings.provenance}",
      ["label", "intensity", "median µs", "TFLOP/s", "GB/s", "binding roof", "roof TFLOP/s", "% of roof"])
"""),
    code("""
import matplotlib.pyplot as plt
from course_lib.plots import roofline_figure

roofs = {d: ceilings.matmul_flop_per_s[d] for d in ("fp32", "bf16") if d in ceilings.matmul_flop_per_s}
roofline_figure(points, ceilings.copy_bandwidth_bytes_per_s, roofs,
                f"{measured.gpu}: operations under the measured roofs ({measured.provenance})")
plt.show()
"""),
    md("""
## Reconcile: where the points sit, and why

* **Low intensity rides the memory roof.** The vector add reaches the copy ceiling. The matrix-vector products read their matrix once, so they could too; the `% of roof` column shows how far cuBLAS's kernel for this shape falls short of it, a residual of the implementation, not of the roof. Their FLOP rates are tiny because every byte buys a fraction of a FLOP, and no amount of arithmetic skill would change that: only moving fewer bytes would.
* **Large matmuls approach the compute roof.** From a few thousand up, fp32 and bf16 matmuls reach most of their measured peaks (the peak *is* the 8192 matmul, so that point is ~100% by construction).
* **Small matmuls hit neither roof.** Their intensity (a 64³ fp32 matmul has I ≈ 10.7) says they could run at tens of TFLOP/s; they run at a few GFLOP/s. Each call has a fixed cost, and a 64×64 output is far too little work to fill 132 SMs. The number below shows that cost directly.
"""),
    code("""
one = measured.case("matmul fp32, n=64, one call at a time")
queued = measured.case("matmul fp32, n=64")
batched = measured.case("1,024 matmuls fp32 n=64, batched")
print(f"64x64 fp32 matmul, one call at a time: {one.median_s * 1e6:.1f} µs per call ({measured.provenance})")
print(f"                     20 calls queued:   {queued.median_s * 1e6:.1f} µs per call")
print(f"1,024 of them in one batched call:     {batched.median_s * 1e6:.1f} µs for all "
      f"= {batched.flop / batched.median_s / queued.flop_per_s:.0f}x the throughput")
"""),
    md("""
Queueing did not help here: PyTorch's dispatch on the CPU takes about as long per call as the GPU needs, so the GPU waits for the CPU either way; the time per call is the *launch path*, not the math. Batching 1,024 products into one call pays that cost once. The same lesson returns at scale as kernel fusion (notebook 08) and CUDA graphs.

## Exercises

**1.** The ridge point of an H100 SXM in bf16, from its datasheet numbers (989.4 TFLOP/s dense, 3.35 TB/s), in FLOP/byte.
"""),
    code("""
from course_lib.exercises import check_ridge, check_binding_roof, check_crossover, BINDING_QUESTIONS
check_ridge("h100-sxm", "bf16", None)   # replace None with your answer
"""),
    md("""
**2.** For each operation, which roof binds: `"memory"` or `"compute"`? Work out F, Q and the ridge of the named GPU (datasheet numbers).
"""),
    code("""
for q in BINDING_QUESTIONS:
    print("-", q)
my_answers = {}   # e.g. {"bf16 matmul 4096³ on an H200": "compute", ...}
check_binding_roof(my_answers)
"""),
    md("""
**3.** Below which square size N is an fp8 GEMM on an H200 memory-bound (datasheet numbers)?
"""),
    code("""
check_crossover("h200", "fp8", None)   # replace None with your N
"""),
    md("Reference solutions (CI runs them):"),
    code("""
from course_lib import exercises
h100 = hardware.spec("h100-sxm")
print(check_ridge("h100-sxm", "bf16", h100.peak("bf16") / h100.hbm_bandwidth_bytes_per_s))
print(check_binding_roof({q: exercises.binding_roof(q) for q in BINDING_QUESTIONS}))
h200 = hardware.spec("h200")
print(check_crossover("h200", "fp8", 3 * 1 * h200.peak("fp8") / (2 * h200.hbm_bandwidth_bytes_per_s)))
"""),
    md("""
## Takeaways

* Intensity against the ridge tells you which roof binds; the time bound is max(F/C, Q/B).
* Modern ridges are in the hundreds of FLOPs per byte. Elementwise work and decode-time matrix-vector products are far left of them, large GEMMs far right.
* A measured point far below both roofs (small matmuls) is a sign of overhead or too little parallelism, not of the wrong roof.

**Next:** 02 · threads, warps and divergence: how the work of a kernel is cut up and handed to the hardware.
"""),
]


if __name__ == "__main__":
    build({"00_your_gpu.ipynb": NB00, "01_roofline.ipynb": NB01})
