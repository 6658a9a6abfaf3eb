"""Write notebooks/04 and 05 from the cell lists below (outputs come from executing them on a GPU).

    python scripts/build_04_05.py                 # rewrites the .ipynb files, without outputs
    python scripts/build_04_05.py --keep-outputs  # prose-only edit: keeps every code cell's outputs,
                                                  # refuses if a code cell changed (see nbbuild.py)

Cells whose first line is ``# NBVAL_CHECK_OUTPUT`` are analytic: nbval compares their
output with the committed one in every mode.
"""
from nbbuild import build, code, md

NB04 = [
    md("""
# 04 · Coalescing: how a warp's addresses become memory traffic

**You will learn** how the 32 addresses of one warp turn into 32-byte sectors, how to count them before you run anything, and what a bad access pattern costs on a real GPU: strided reads, misaligned starts, arrays of structures, narrow loads. You will check the count against Nsight Compute and see where the simple count stops being the whole story (caches).

**You need** notebook 00 (the copy ceiling, honest timing) and 01 (memory-bound work). With a GPU every measurement below is live; without one it is replayed from the H200 recording and says so.

**Time** about 40 minutes.
"""),
    code("""
from course_lib import runtime
env = runtime.banner()
"""),
    md("""
## The idea: one instruction, 32 addresses, a handful of sectors

A load in a kernel is one instruction for a whole warp: 32 lanes each name an address. The memory system does not fetch 32 separate numbers. From compute capability 6.0 on, the L1 works out which **32-byte sectors** cover all the bytes the active lanes asked for, and fetches exactly those (four sectors make one 128-byte cache line). So the cost of an instruction is its number of sectors, not its number of lanes.

Counting them is mechanical. Take every active lane's byte range [a, a + b − 1], where b is the element size, map each byte x to sector ⌊x / 32⌋, and count the distinct sectors. The useful fraction is

  efficiency = (active lanes × b) / (sectors × 32).

Three worked cases: 32 consecutive fp32 values starting on a sector boundary fill exactly 4 sectors (100%). Start them 4 bytes later and the same 128 bytes straddle 5 sectors (80%). Read every second fp32 value and the 128 useful bytes are spread over 256, so 8 sectors (50%). `course_lib.memory` does this count:
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib import memory

for label, kw in [("fp32, aligned", {}), ("fp32, 4 bytes late", {"offset_bytes": 4}),
                  ("fp32, stride 2", {"pattern": "strided", "stride": 2}),
                  ("bf16, aligned", {"element_bytes": 2}), ("float4, aligned", {"element_bytes": 16})]:
    c = memory.sector_count(memory.warp_addresses(**kw), kw.get("element_bytes", 4))
    print(f"{label:20s} {c.n_sectors:2d} sectors: {c.requested_bytes:3d} B asked for, "
          f"{c.fetched_bytes:3d} B fetched -> {100 * c.efficiency:.0f}%")
"""),
    md("""
This is a count at the **request boundary**: what one instruction asks of the memory system. Whether DRAM really moves all those bytes depends on what happens next. If a neighbouring warp needs the other half of a sector a moment later, the sector may still sit in L1 or L2, and DRAM moves it once. Keep that in mind: it is exactly where the measurements below part from the count.

## Predict: the sector calculator

Choose the element size, the lane pattern, a stride or shift, the starting offset in bytes, and how many lanes are active (a tail block often has fewer). Each row of the drawing is one 128-byte line; thick lines separate its four sectors; blue bytes were asked for, orange ones fetched for nothing. Things to try:

* **strided**, 4 B: step the stride 1, 2, 3, 4, 8, 9. Where does it stop getting worse, and why there?
* **unit stride** with offset 4, then 32, then 128: which offsets cost a sector and which do not?
* **16 B** elements (float4): is a 512-byte request less efficient than a 128-byte one?
* **permuted**: does the order of the lanes matter?
* a **stride of 0**, or an offset of 2 bytes for fp32: the calculator says why it refuses.
"""),
    code("""
from course_lib.widgets_memory import SectorCalculator

SectorCalculator(pattern="strided", stride=2)
"""),
    md("""
Every fp32 stride of 8 or more puts each lane in its own sector: 32 sectors for 128 useful bytes, 12.5%, the worst a 4-byte access can do. The table is the model's whole story for the strides the next experiment runs. The last column is what it predicts for a copy that reads with that stride and writes contiguously, if every fetched sector crosses DRAM once and DRAM runs at the copy ceiling: time = (read bytes / efficiency + write bytes) / ceiling.
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib import experiments
from course_lib.plots import Table

strides = experiments.all_experiments()["coalescing.strided_copy"].defaults["strides"]
rows = []
for s in strides:
    c = memory.strided_sectors(s)
    p = memory.predicted_copy(1.0, 1.0, c.efficiency, 1.0, 1.0)
    rows.append({"stride": s, "sectors per read": c.n_sectors, "efficiency %": 100 * c.efficiency,
                 "predicted fraction of copy ceiling": p.bandwidth_bytes_per_s})
Table(rows, "analytic: the sector model, fp32 reads, no reuse of over-fetched sectors")
"""),
    md("""
## Run: a strided copy

The lesson this course builds on measured a strided copy on a laptop GPU, out[i] = a[(i · stride) mod n] for strides 1, 3, 9, 33 and 1025, and found that bandwidth halved at stride 3 and fell to about a tenth from stride 33 on. We repeat it on this GPU, with a few more strides. n is a power of two, so `mod n` is a bit mask, and an odd stride visits every element exactly once. Each thread copies four elements, a block-width apart, so that every warp instruction is still one warp-wide request but each thread keeps four loads in flight; otherwise the stride-1 copy would already fall short of the ceiling for a reason unrelated to sectors (notebook 00 showed why).
"""),
    code("""
from course_lib import cuda

print(cuda.describe("coalescing", "strided_copy"))
"""),
    md("""
## Measure

2²⁶ fp32 elements (256 MiB read, 256 MiB written), the L2 flushed before every sample, every stride checked against CuPy's gather `a[(i * stride) & (n - 1)]` before it is timed. Bandwidth counts useful bytes, 8 per element, as the lesson did. The prediction uses the copy ceiling from notebook 00's `machine.copy_bandwidth` experiment (CuPy's device-to-device copy).
"""),
    code("""
from course_lib import lab_memory
from course_lib.ceilings import measured_ceilings

ceilings = measured_ceilings()
ceiling = ceilings.copy_bandwidth_bytes_per_s
strided = experiments.run("coalescing.strided_copy")
Table(lab_memory.copy_rows(strided, ceiling, "strides"),
      f"strided copy, {strided.provenance}; copy ceiling {ceiling / 1e9:,.0f} GB/s, {ceilings.provenance}",
      ["case", "sectors per read", "read efficiency %", "model GB/s", "measured GB/s", "measured / model",
       "% of copy ceiling"])
"""),
    code("""
import matplotlib.pyplot as plt

lab_memory.strided_figure(strided, ceiling, ceilings.provenance)
plt.show()
"""),
    md("""
## Reconcile: the count against the profiler

The sector model makes claims that can be checked one boundary at a time. Per load instruction, L1 should see the predicted number of sectors: Nsight Compute counts requests and sectors there (`l1tex__t_requests…` and `l1tex__t_sectors…_op_ld`). The L1 should pass the same sectors on to the L2 (`lts__t_sectors_srcunit_tex_op_read`), because in this kernel nobody nearby wants the rest of a sector. And DRAM should read about read-bytes ÷ efficiency (`dram__bytes_read`), because a warp's over-fetched bytes are wanted again only a whole pass over the array later, a quarter of a GiB on, far more than the L2 holds.
"""),
    code("""
from IPython.display import display

profiled, note = lab_memory.profile_source(strided)
print(note)
if profiled is not None:
    print(lab_memory.ncu_provenance(profiled))
    display(Table(lab_memory.global_profile_rows(profiled), f"ncu beside the sector model: {profiled.provenance}"))
"""),
    md("""
Read the table boundary by boundary.

* **L1**: the profiler's sectors per request are the model's. At this boundary the count is not an approximation; it is what the hardware does.
* **L1 → L2**: the L2 receives exactly those sectors, so nothing was saved by the L1 here.
* **DRAM**: for small strides DRAM reads what the sector count says. For wide strides it reads *more*: compare the two model columns. When a warp's lanes land in different 64-byte blocks, DRAM delivers the whole 64-byte block (two sectors) for every sector asked for, so a stride of 16 or more costs 16 times the useful bytes, not 8. The sector model is right about L1 and wrong about DRAM by exactly that granularity; counting 64-byte blocks instead of 32-byte sectors (`memory.dram_blocks`) reproduces the profiler's DRAM bytes.

So the prediction for time should use the bytes DRAM really moves. Both predictions against the measurement:
"""),
    code("""
Table(lab_memory.dram_rows(strided, ceiling),
      f"no-reuse predictions vs measured, {strided.provenance}; ceiling {ceilings.provenance}")
"""),
    md("""
With 64-byte blocks the model follows the measurement for small and medium strides. The widest strides fall below even that, although the profiler shows DRAM moving the *same* bytes for all strides from 16 up: what changes is how fast DRAM delivers them. A stride of 33 puts a warp's blocks 132 bytes apart; a stride of 1025 puts each block about 4 KB from the next, so nearly every block comes from a different DRAM row, and opening rows, not moving bytes, becomes the limit. The copy ceiling was measured on a dense stream, where each opened row delivers many blocks, so it overstates what DRAM can do for scattered blocks. That residual is outside the sector model, and it shows up where it should: the model is too optimistic exactly where the accesses are most scattered.
"""),
    md("""
## Alignment, layout and vector width

Three more patterns, each a lesson about what the sector count does and does not say.

* **Offset copies**: out[i] = in[i + k]. Every warp's 128 bytes start k·4 bytes into a sector, so each read touches 5 sectors instead of 4 (unless k·4 is a multiple of 32).
* **Array of structures vs structure of arrays**: particles of 16 bytes (x, y, z, mass); a kernel that needs only x reads one float every 16 bytes from the array of structures (16 sectors per warp, 25%), or a dense array of x (4 sectors, 100%).
* **4, 8 and 16 bytes per thread**: plain copies with one float, one float2 or one float4 per thread. All three are 100% efficient by the sector count.
"""),
    code("""
pat = experiments.run("coalescing.patterns")
pat_rows = lab_memory.copy_rows(pat, ceiling)
Table(pat_rows, f"alignment, layout, vector width: {pat.provenance}; copy ceiling {ceilings.provenance}",
      ["case", "sectors per read", "read efficiency %", "model GB/s", "measured GB/s", "measured / model",
       "% of copy ceiling"])
"""),
    code("""
lab_memory.bars_figure(pat_rows, f"{pat.gpu}: measured vs sector model ({pat.provenance})", ceiling / 1e9)
plt.show()
"""),
    code("""
pat_prof, note = lab_memory.profile_source(pat)
print(note)
if pat_prof is not None:
    display(Table(lab_memory.global_profile_rows(pat_prof), f"ncu beside the sector model: {pat_prof.provenance}"))
"""),
    md("""
What the three groups show:

* **Offsets**: L1 does see 5 sectors per request, as counted. But the fifth sector of one warp is the first sector of the next warp's request, and both warps run on the same SM moments apart: the L1 → L2 column shows the extra sector almost never leaves the SM, and DRAM reads the requested bytes. So the misaligned copies run at about the aligned copy's speed, well above the "no reuse" prediction. At the request boundary misalignment costs 20%; at DRAM, here, almost nothing. It costs real bandwidth when no neighbour is about to ask for the rest of the sector: a gather, a narrow tensor, the edge of a 2-D tile.
* **Array of structures**: the other 12 bytes of each particle are wanted by nobody, so nothing reuses them: DRAM reads the whole array, four times the useful bytes, and the time follows the model.
* **Vector width**: all three are 100% efficient by the sector count and read the same DRAM bytes, so their different speeds have nothing to do with sectors. A thread that moves 4 bytes per instruction keeps too few bytes in flight to cover DRAM latency with the threads an SM can hold; 16 bytes per thread does. That is latency hiding (notebook 03), not coalescing: the model is silent about it, rightly.

## Exercises

**1. Predict sectors.** For each warp request, how many 32-byte sectors does it touch? Work them out by hand, then check with the calculator.
"""),
    code("""
from course_lib.exercises_memory import SECTOR_QUESTIONS, check_sectors

for q in SECTOR_QUESTIONS:
    print("-", q)
my_sectors = {}   # e.g. {"fp32, stride 2": 8, ...}
check_sectors(my_sectors)
"""),
    md("""
**2. Fix the kernel.** `my_scale` doubles every element of an n × n row-major matrix, launched with blocks of 32 × 8 threads. It is correct, but consecutive lanes of a warp walk *down a column*: each lane's address is a whole row (n · 4 bytes) after its neighbour's, so every lane has a sector to itself. Change one line so that a warp reads 32 consecutive floats. The check compiles your source with NVRTC; without a GPU it reads your index arithmetic, runs it for every thread of a small launch in Python and counts warp 0's sectors with the model; on a GPU it also runs the kernel, compares it with 2 · in, and times it against the course's coalesced version.
"""),
    code("""
from course_lib.exercises_memory import check_coalescing_fix

MY_SCALE = r'''
extern "C" __global__ void my_scale(float* out, const float* in, int rows, int cols) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;   // consecutive lanes: consecutive a
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    int row = a, col = b;                            // which element this thread owns
    if (row < rows && col < cols) out[(size_t)row * cols + col] = 2.0f * in[(size_t)row * cols + col];
}'''
check_coalescing_fix(MY_SCALE)
"""),
    md("""
Reference solutions (CI runs them):
"""),
    code("""
from course_lib import exercises_memory

print(check_sectors({q: exercises_memory.sectors_of(q) for q in SECTOR_QUESTIONS}))
print(check_coalescing_fix(MY_SCALE.replace("int row = a, col = b;", "int row = b, col = a;")))
"""),
    md("""
## Takeaways

* A warp's access costs the 32-byte sectors that cover its active lanes' bytes. Count them: unit-stride fp32 is 4 per request, stride 2 is 8, stride 8 or more is 32.
* The count is exact at L1 (the profiler agrees). DRAM traffic is the count *minus* what caches catch (a misaligned stream's extra sector) and *plus* what DRAM's larger blocks drag in (64 bytes per scattered sector on the H200). A model without reuse is a pessimistic bound for streams that neighbours share and a fair one for waste nobody reuses (strides, arrays of structures).
* Put neighbouring lanes on neighbouring addresses: map `threadIdx.x` to the contiguous dimension, prefer structures of arrays for fields used alone, and give each thread 16 bytes per access when the data allows.

**Next:** [05 · Shared memory and bank conflicts](05_shared_memory.ipynb) fixes the one access a transpose cannot make coalesced on both sides, and meets a second address map on the way.
"""),
]

NB05 = [
    md("""
# 05 · Shared memory and bank conflicts

**You will learn** how shared memory maps addresses to its 32 banks, how to count the wavefronts a warp's access needs, why reading a tile by column takes 32 times the wavefronts of reading it by row, and how padding or an XOR swizzle fixes it. You will use it to make a matrix transpose run close to copy speed, and check every count against Nsight Compute.

**You need** notebook 04 (sectors, coalescing). With a GPU every measurement is live; without one, replayed from the H200 recording.

**Time** about 40 minutes.
"""),
    code("""
from course_lib import runtime
env = runtime.banner()
"""),
    md("""
## The idea: a second address map

Shared memory is split into **32 banks**, each 4 bytes wide; consecutive 4-byte words go to consecutive banks, so word w lives in bank w mod 32. Each bank delivers one word per cycle. When the lanes of a warp ask for words in 32 different banks, the request is served in one pass, a **wavefront**. When k lanes ask for k *different* words of the same bank, the bank needs k passes: a k-way **bank conflict**. Lanes that ask for the *same* word are served together (a broadcast), which costs nothing.

A 32 × 32 fp32 tile stored row by row makes this concrete. A warp reading one row reads words 32r + 0 … 32r + 31: 32 banks, one wavefront. A warp reading one column c reads words 32·0 + c, 32·1 + c, …: all in bank c, 32 wavefronts. Give each row one extra, unused word (a pitch of 33) and the column's words become 33r + c, in bank (r + c) mod 32: all different again.
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib import memory
from course_lib.widgets_memory import banks_line, describe_pattern

for label, kw in [("row", dict(pattern="row")), ("column, pitch 32", dict(pattern="column", pitch=32)),
                  ("column, pitch 33", dict(pattern="column", pitch=33))]:
    r = memory.bank_conflicts(memory.shared_addresses(**kw, index=3))
    print(f"{label:17s} banks of lanes 0-31: {banks_line(r)}")
    print(f"{'':17s} {describe_pattern(r)}")
"""),
    md("""
**Wider accesses.** A wavefront delivers at most 32 × 4 = 128 bytes. A warp of 8-byte loads asks for 256 bytes, so current NVIDIA GPUs serve it in two phases, one per half-warp (lanes 0–15, then 16–31), and look for conflicts only inside each phase; 16-byte loads go a quarter-warp at a time. So 8 bytes per lane takes at least 2 wavefronts, and that is not a conflict. The course's model does exactly this, and the probe below checks it on the GPU.

## Predict: the bank calculator

Pick a pattern of a warp's access to a tile, the word size, the row pitch (32 = unpadded, 33 = padded) and which row or column. Each cell is a 4-byte word under its bank, labelled with the lane that reads it and coloured by the phase that serves it; a red border marks a conflict. Things to try: a column at pitch 32, 33, 34 and 48; a column of the XOR-swizzled tile; 8-byte words in a row and in a padded column; a stride of 2 and of 32; a stride of 0, or a pitch of 0.
"""),
    code("""
from course_lib.widgets_memory import BankCalculator

BankCalculator(pattern="column", pitch=32)
"""),
    md("""
**The XOR swizzle** is the other cure. Instead of wasting a word per row, store element (r, c) of the tile at column c ⊕ (r mod 32) of row r. Along a row, c ⊕ r takes every value 0–31 once, so a row is still conflict-free; down a column c is fixed and r varies, so c ⊕ r again takes every value once: no conflict, and no padding. The price is an XOR in the index arithmetic.

## Does the hardware do what the model says?

Before trusting the model with a kernel, test it. `banks.probe` launches one kernel per pattern in which every warp repeats the same shared-memory load a thousand times; the loads are independent, so the time is set by the wavefronts they need. Nsight Compute counts the wavefronts (`l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld`) and the load instructions; the last column is each pattern's time over that of a conflict-free 4-byte row.
"""),
    code("""
from course_lib import experiments, lab_memory
from course_lib.plots import Table

probe = experiments.run("banks.probe")
probe_prof, note = lab_memory.profile_source(probe)
print(note)
Table(lab_memory.probe_rows(probe_prof or probe), f"bank model vs the GPU: {(probe_prof or probe).provenance}",
      ["pattern", "model wavefronts/request", "ncu wavefronts/request", "model conflict degree",
       "time / 4 B row"])
"""),
    md("""
The last pattern tests the half-warp rule: lanes 0–15 all read different words of banks 0–1, lanes 16–31 different words of banks 2–3. If the hardware formed its two phases freely it could serve one lane of each half in every pass and finish in 16 wavefronts; the model, which serves lanes 0–15 and then lanes 16–31, says 32. And the time: if each wavefront costs one cycle of the SM's shared-memory pipe, the probe's times should sit on one straight line against wavefronts per SM. A least-squares fit of all the patterns:
"""),
    code("""
half = probe_prof or probe
hw = half.case("8 B two bank pairs, split by half-warp")
ncu_hw = lab_memory.probe_rows(half)[-1]["ncu wavefronts/request"]
print(f"half-warp test: model {hw.extra['model']['wavefronts_per_request']}, profiler {ncu_hw} wavefronts per request")
fit = lab_memory.probe_fit(probe)
print(f"time fit ({probe.provenance}): {fit['cycles_per_wavefront']:.2f} SM cycles per wavefront at "
      f"{fit['sm_clock_mhz']:.0f} MHz, fixed cost {fit['overhead_s'] * 1e6:.1f} µs per launch, "
      f"largest residual {100 * fit['worst_residual']:.1f}%")
"""),
    md("""
The profiler's count decides the half-warp question, and the fit says what a wavefront costs in time. The "time / 4 B row" column is not exactly the wavefront ratio only because every launch also pays a fixed cost (launch, filling the shared array), which the fit separates out.

## The transpose ladder

A transpose reads a matrix by rows and writes it by columns, out[c][r] = in[r][c]. Notebook 04 settled that one side must then be uncoalesced: if a warp's lanes read along a row, they write down a column, 32 sectors per request. Shared memory breaks the tie: a block reads a 32 × 32 tile with coalesced row reads, stores it in shared memory, and writes it out with coalesced row writes of the *transposed* tile, which means reading the shared tile **by column**. Which is precisely the access the bank model calls a 32-way conflict.

The ladder: **naive** (no shared memory), **shared tile** (32 × 32), **padded tile** (32 × 33), **swizzled tile** (32 × 32 with c ⊕ r), and larger variants that give each thread more rows in flight. All are one template:
"""),
    code("""
from course_lib import cuda

print(lab_memory.tiled_transpose_source())
Table(lab_memory.resources_rows(), f"NVRTC {cuda.nvrtc_version()} for {cuda.target_arch()}: resources per kernel")
"""),
    md("""
## Measure

An 8192 × 8192 fp32 matrix (256 MiB each way), the L2 flushed before every sample, every transpose checked against CuPy's `a.T` first. In the same run, with the same bytes, the two copies the course measures against: CuPy's device-to-device copy and the course's `copy_vec4`. Every percentage below is a ratio within this one run.
"""),
    code("""
ladder = experiments.run("transpose.ladder")
ladder_rows = lab_memory.transpose_rows(ladder)
Table(ladder_rows, f"transpose ladder, n = {ladder.params['n']}: {ladder.provenance}",
      ["case", "kernel", "median µs", "GB/s", "% of CuPy copy", "% of copy_vec4"])
"""),
    code("""
import matplotlib.pyplot as plt

copy_gbps = ladder.case("CuPy device-to-device copy").bandwidth_bytes_per_s / 1e9
lab_memory.bars_figure(ladder_rows, f"{ladder.gpu}: transpose ladder, 8192² fp32 ({ladder.provenance})",
                       copy_gbps, measured_key="GB/s", model_key=None)
plt.show()
"""),
    md("""
## Reconcile: wavefronts and sectors, counted by the profiler

For every tiled variant the bank model predicts the shared-memory wavefronts per request of both sides (stores: a row of the tile; loads: a column), and so the total extra wavefronts, the conflicts. Nsight Compute counts both on the same launch:
"""),
    code("""
from IPython.display import display

ladder_prof, note = lab_memory.profile_source(ladder)
print(note)
if ladder_prof is not None:
    print(lab_memory.ncu_provenance(ladder_prof))
    display(Table(lab_memory.smem_profile_rows(ladder_prof), f"shared memory: ncu vs bank model, {ladder_prof.provenance}"))
    display(Table(lab_memory.transpose_global_rows(ladder_prof), f"global memory: ncu vs sector model, {ladder_prof.provenance}"))
"""),
    md("""
What the two tables say:

* **Shared memory**: the bank model gives the unpadded tile's column reads 32 wavefronts per request and the padded and swizzled tiles' 1. The profiler agrees on the unpadded tile, and its time shows the cost. But on every tiled variant, conflict-free ones included, the profiler counts somewhat *more* wavefronts than the layout explains, where the probe above matched the model exactly. The difference between the two experiments: the probe's loop touches only shared memory, while a transpose streams global loads and stores through the same SM's L1 at the same moment, and on this GPU the L1 cache and shared memory are one array of banks. That sharing is our reading of the residual; the bank model sees addresses only, and the course has not isolated the effect further.
* **Global memory**: the naive kernel's stores are 32 sectors per request at L1, as counted. Yet DRAM moves only a little more than the matrix (the ratios below): the rows a block writes for one output column land in the same sectors, which fill up in the L2 before they are written back. The naive transpose is slow because of the traffic between the SMs and the L2, eight partial-sector writes for every sector's worth of data, not because of DRAM bytes.
"""),
    code("""
naive = (ladder_prof or ladder).case("naive (no shared memory)")
if "ncu" in naive.extra:
    moved = naive.extra["ncu"]["dram__bytes_read.sum"] + naive.extra["ncu"]["dram__bytes_write.sum"]
    print(f"naive transpose: DRAM moved {moved / naive.bytes:.2f} x the matrix's read + write bytes "
          f"({(ladder_prof or ladder).provenance})")
t_copy = ladder.case("CuPy device-to-device copy").median_s
print(f"and took {ladder.case('naive (no shared memory)').median_s / t_copy:.1f} x the copy's time ({ladder.provenance})")
"""),
    md("""
With the conflicts gone, what separates a transpose from a copy is latency hiding again: each thread of the 32 × 8 block handles 4 rows, and the variants that give it 8 (a 32 × 4 block, or a 64 × 64 tile) keep more loads in flight per SM and come closer to the copy, which is the most a transpose can reach: it must read and write every byte once.

## The targets, from this run
"""),
    code("""
cupy_copy = ladder.case("CuPy device-to-device copy").bandwidth_bytes_per_s
vec4 = ladder.case("course copy_vec4").bandwidth_bytes_per_s
best = lab_memory.best_transpose(ladder)
for c in (ladder.case("padded tile 32×33"), ladder.case("swizzled tile 32×32"), best):
    print(f"{c.name:34s} {c.bandwidth_bytes_per_s / 1e9:7,.0f} GB/s = {100 * c.bandwidth_bytes_per_s / cupy_copy:5.1f}% "
          f"of CuPy's copy (target 85%)")
print(f"{'course copy_vec4':34s} {vec4 / 1e9:7,.0f} GB/s = {100 * vec4 / cupy_copy:5.1f}% of CuPy's copy (target 95%)")
print(f"({ladder.provenance}; best transpose: {best.kernel})")
"""),
    md("""
## Exercises

**1. Predict wavefronts.** For each warp access to shared memory, how many wavefronts does it take? Find each lane's bank, remember broadcasts and the half-warp phases of 8-byte words, then check with the calculator.
"""),
    code("""
from course_lib.exercises_memory import BANK_QUESTIONS, check_wavefronts

for q in BANK_QUESTIONS:
    print("-", q)
my_wavefronts = {}   # e.g. {"4 B, a row of a 32 x 32 tile": 1, ...}
check_wavefronts(my_wavefronts)
"""),
    md("""
**2. Fix the tile.** `my_transpose` is the shared-tile transpose of the ladder, 32 × 32 tile, 32 × 8 threads. Its tile layout is two macros: `PITCH` (words per tile row) and `TILE_AT(r, c)` (where element (r, c) lives). Change the layout, by padding or by swizzling, so that neither the row writes nor the column reads have bank conflicts. Without a GPU the check compiles your source, reads `TILE_AT`, proves that no two elements share a word and counts the wavefronts of every row and column with the bank model; on a GPU it also runs your kernel against `a.T` and times it against the course's padded transpose.
"""),
    code("""
from course_lib.exercises_memory import check_transpose_fix

MY_TRANSPOSE = r'''
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
check_transpose_fix(MY_TRANSPOSE)
"""),
    md("""
Reference solutions (CI runs them): padding, and the XOR swizzle.
"""),
    code("""
from course_lib import exercises_memory

print(check_wavefronts({q: exercises_memory.wavefronts_of(q) for q in BANK_QUESTIONS}))
print(check_transpose_fix(MY_TRANSPOSE.replace("#define PITCH 32", "#define PITCH 33")))
print(check_transpose_fix(MY_TRANSPOSE.replace("(r) * PITCH + (c)", "(r) * PITCH + ((c) ^ (r))")))
"""),
    md("""
## Takeaways

* Shared memory has its own address map: word w is in bank w mod 32, and a warp's access costs as many wavefronts as the busiest bank has distinct words (per 128-byte phase for 8- and 16-byte accesses). The profiler's counts match this model, exactly so in an isolated probe.
* A layout that is coalesced in global memory can be the worst case in shared memory: reading a row-major tile by column is a 32-way conflict. Pad the row by one word, or XOR-swizzle the column index.
* With the conflict gone, and enough rows in flight per thread, a transpose moves its bytes at close to copy speed: the tile turned an uncoalesced access into two coalesced ones and a cheap shared-memory shuffle.

**Next:** 06 · GEMM builds the same kind of tiles, reused many times each, and meets the bank map again.
"""),
]


if __name__ == "__main__":
    build({"04_coalescing.ipynb": NB04, "05_shared_memory.ipynb": NB05})
