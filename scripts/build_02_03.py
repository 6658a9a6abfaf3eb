"""Write notebooks/02 and 03 from the cell lists below (outputs come from executing them on a GPU).

    python scripts/build_02_03.py                    # rewrites both .ipynb files, without outputs
    python scripts/build_02_03.py --keep-outputs 02  # rewrites 02's prose, keeping its outputs;
                                                     # refuses if a code cell changed (see nbbuild.py)

Cells whose first line is ``# NBVAL_CHECK_OUTPUT`` are analytic: nbval compares their
output with the committed one in every mode.
"""
from nbbuild import build, code, md

NB02 = [
    md("""
# 02 · Threads, warps and divergence

**You will learn** how a launch cuts work into a grid of blocks, a block into warps and a warp into 32 lanes; how a block comes to own one tile of the output and how each lane finds its address from strides, with masks at the edges; that blocks start in whatever order the hardware picks; and what a branch costs when it splits the lanes of a warp, predicted and then measured.

**You need** notebook 00 (timing with CUDA events) and the idea of a kernel launch. **Time** about 30 minutes.
"""),
    code("""
from course_lib import runtime
env = runtime.banner()
"""),
    md("""
## The idea: every output has an owner

A launch names a **grid** of **blocks**; each block is a group of threads that run on one SM together and may share memory and barriers. The hardware issues instructions for 32 threads at a time: a **warp**, whose threads are its **lanes**. So the work of a kernel is cut four ways:

| object | scope | owns |
| --- | --- | --- |
| grid | one launch | every block of it |
| block | one SM, for its lifetime | a tile of the output, its shared memory |
| warp | 32 consecutive threads of a block | one instruction stream, issued for all 32 lanes at once |
| lane (thread) | one of the 32 | its indices, its registers, the elements it loads and stores |

For a matrix product C[M, N] = A[M, K] · B[K, N] the usual plan gives each block a BM × BN tile of C. The grid then has ⌈M / BM⌉ × ⌈N / BN⌉ blocks, and block `pid` finds its tile with `pid_m = pid // G_N`, `pid_n = pid % G_N`, `m0 = pid_m · BM`, `n0 = pid_n · BN`. The lesson's example, C of 4096 × 4096 in 128 × 128 tiles:
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib import launch_geometry as lg

grid = lg.tile_grid(4096, 4096, 128, 128)
print(f"grid: {grid.grid_m} x {grid.grid_n} = {grid.blocks:,} blocks")
for pid in (0, 1, 31, 32, 1023):
    t = lg.program_tile(grid, pid)
    print(f"pid {pid:4d} -> pid_m {t.pid_m:2d}, pid_n {t.pid_n:2d}: owns C[{t.m0}:{t.m0 + 128}, {t.n0}:{t.n0 + 128}]")
ragged = lg.tile_grid(1000, 700, 128, 64)
print(f"C of 1000 x 700 in 128 x 64 tiles: {ragged.grid_m} x {ragged.grid_n} = {ragged.blocks} blocks; "
      f"{100 * ragged.useful_fraction:.1f}% of the tiles' area is inside C")
"""),
    md("""
When M or N is not a multiple of the tile, the last row and column of tiles hang over the edge. Their threads still run; a **mask** stops them from touching memory outside the matrix.

### From a lane to an address

Inside stage `k0` of the reduction a lane does not load "the A tile": it loads one element, whose address comes from the strides of the array (in elements; a row-major A has `stride_am = K`, `stride_ak = 1`):

    a_offset = (m0 + i) · stride_am + (k0 + j) · stride_ak      loaded only if m0 + i < M and k0 + j < K

Here the threads of a 256-thread block walk a 64 × 32 tile of A row by row, so warp 3 takes tile row 3. Take the last block of C = 1000 × 700 in 64 × 64 tiles (K = 300) in its last stage, k0 = 288: the row is inside A, but only columns 288 … 299 exist.
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib.plots import Table

tile, trace = lg.operand_trace("A", 1000, 700, 300, 64, 64, 32, stride_row=300, stride_col=1, pid=175,
                               stage=9, warp=3, threads_per_block=256)
print(f"block 175 = (pid_m {tile.pid_m}, pid_n {tile.pid_n}) owns C[{tile.m0}:{tile.m0 + 64}, {tile.n0}:{tile.n0 + 64}]")
rows = [{"lane": a.lane, "A row": a.row, "A col": a.col, "offset": a.offset_elements,
         "byte address": a.address_bytes, "": a.status} for a in trace[::4] + trace[-1:]]
s = lg.summarize(trace)
Table(rows, f"warp 3, every 4th lane (analytic): {s.loading} lanes load, {s.masked} are masked")
"""),
    md("""
## Predict: the launch-geometry calculator

Change the sizes, the tile, the strides (try a column-major A: row stride 1, column stride M), the program id, the stage and the warp. The calculator shows the grid, the tile the block owns, and for each of the warp's 32 lanes which element it loads, at which offset and byte address, and whether the mask switches it off. Impossible input (a zero size, a program id past the grid, a warp the block does not have) gets a message.
"""),
    code("""
from course_lib.widgets_occupancy import launch_geometry_calculator

geometry = launch_geometry_calculator()
geometry
"""),
    md("""
## Run: blocks own tiles, and start in any order

The kernel below gives each block a 16 × 16 tile of a 1000 × 1000 output (so the last row and column of tiles are partly outside) and has every thread write its block's id into the element it owns. The result is checked against the model: every element must hold `owner_of(row, col)`, and no element outside C may be touched.

Thread 0 of each block also records how the block started: a **ticket** from a global atomic counter (the order in which blocks reached that line), the SM it landed on, and the GPU's nanosecond timer. Then it keeps the block busy for a few microseconds, so that the 3,969 blocks need several waves of the GPU's SMs.
"""),
    code("""
from course_lib import cuda
print(cuda.describe("warps", "tile_owner_order"))
"""),
    code("""
from course_lib import experiments
from course_lib import lab_warps

order = experiments.run("warps.block_order")
c = order.cases[0]
print(f"{c.name}: check against launch_geometry.owner_of: {'passed' if c.check['passed'] else 'FAILED'}")
print(f"kernel time, median of {len(c.samples_s)}: {c.median_s * 1e6:.1f} µs ({order.provenance})")
Table([lab_warps.block_order_summary(order)], f"start order of one launch: {order.provenance}")
"""),
    code("""
import matplotlib.pyplot as plt

lab_warps.block_order_figure(order)
plt.show()
"""),
    md("""
Read the right panel first: it shows the waves. The SMs take a first wave of blocks almost at once (as many as fit on them), and each later wave starts as blocks of the one before finish their few microseconds of work. Low program ids do come early, because the hardware hands out blocks roughly in order of their index, but only roughly: within a wave the tickets of neighbouring program ids are scrambled (the streaks in the left panel). The table counts the blocks that took their ticket before a block with a lower id, and its last column shows that another launch of the same kernel scrambles them differently.

Nothing in CUDA promises any of this. A kernel whose correctness depended on block 7 running after block 6 (or on blocks of one launch waiting for each other) would be wrong even on a day it happened to work. Blocks may cooperate only through what the programming model gives them: the end of the kernel, atomics, or a cooperative launch.

## Divergence: one instruction stream for 32 lanes

All lanes of a warp execute the same instruction. When a branch sends some lanes one way and the rest the other, the warp runs both paths one after the other, with the lanes of the other path switched off. If the SM is busy issuing instructions, what a warp costs is **one pass for each distinct path among its lanes**, whatever the fraction of lanes on each.

The `divergence` kernel makes that measurable. Every thread runs a chain of dependent FMAs of one fixed length on its element; there are four different chains (paths), all of the same length. Only the rule that assigns paths to threads changes:
"""),
    code("""
# NBVAL_CHECK_OUTPUT
rows = [{"mode": label, "kernel mode": m.mode, "distinct paths per warp (avg)": lg.divergence_factor(m),
         "predicted time ×": lg.divergence_factor(m), "lanes busy per instruction": 32 * lg.lane_efficiency(m)}
        for label, m in lg.DIVERGENCE_MODES.items()]
Table(rows, "analytic: time relative to one path for every lane, if the SM is issue-bound")
"""),
    md("""
Two of the modes skip work instead of doing a different path: when whole warps skip, their issue slots go to other warps and the time halves; when half the lanes of every warp skip, every warp still issues the whole chain, for 16 lanes instead of 32, and nothing is saved. The last mode branches on the data: with random inputs nearly every warp holds both paths.
"""),
    code("""
print(cuda.describe("warps", "divergence"))
"""),
    md("""
## Measure

About a million threads, 4,096 FMAs each, every result checked against a float64 reference (CuPy) before it was timed:
"""),
    code("""
div = experiments.run("warps.divergence")
Table(lab_warps.divergence_rows(div), f"warps.divergence, median of {len(div.cases[0].samples_s)} samples: "
      f"{div.provenance}", ["mode", "median µs", "measured × (vs one path)", "predicted ×", "measured / predicted"])
"""),
    code("""
lab_warps.divergence_figure(div)
plt.show()
"""),
    md("""
## Reconcile: where the residual comes from

The prediction counts only the FMA chains. Everything else in the kernel (computing the index, choosing the path, one load and one store per thread) is done once per warp whatever the mode, so it dilutes the ratio slightly; the dependent chains also need enough warps per scheduler to cover the FMA latency. The `measured / predicted` column shows how far each mode lands from the count of paths.

Nsight Compute counts what the warps actually issued. `smsp__inst_executed` is the number of warp instructions; `smsp__thread_inst_executed_per_inst_executed` is how many lanes were switched on, on average, for each of them. A mode that splits every warp in two should double the first and halve the second:
"""),
    code("""
from course_lib import profiler

src, note = profiler.profiled_result(div)
print(note)
if src is not None:
    display(Table(lab_warps.divergence_profile_rows(src), f"Nsight Compute, warps.divergence: {src.provenance}"))
"""),
    md("""
The instruction counts follow the model's count of paths per warp, and the active threads per instruction follow its lane efficiency: divergence does not slow a lane down, it makes the warp issue more instructions, each for fewer lanes. That is also why a branch is harmless when it is uniform across each warp, and why a branch that lets *whole warps* skip work is a real saving while one that idles half of every warp's lanes is not.

## Exercises

**1.** C is 1000 × 700, in 128 × 64 tiles. Which tile does block 85 own, and how much of it lies inside C?
"""),
    code("""
from course_lib.exercises_occupancy import check_tile_owner, check_masked_lanes, check_divergence, DIVERGENCE_QUESTIONS
my_tile = None   # e.g. {"pid_m": 0, "pid_n": 0, "m0": 0, "n0": 0, "valid_rows": 128, "valid_cols": 64}
check_tile_owner(my_tile)
"""),
    md("""
**2.** The question of the address-trace cell above, asked of you: in stage 9 of block 175 (C = 1000 × 700 in 64 × 64 tiles, K = 300, A row-major, 64 × 32 tiles of A walked row by row by 256 threads), how many lanes of warp 3 are masked? (Use the calculator to check your reasoning, then answer.)
"""),
    code("""
check_masked_lanes(None)   # replace None with your number
"""),
    md("""
**3.** Predict the time of each branch relative to every lane running one path (A and B equally long, the SM busy issuing).
"""),
    code("""
for q in DIVERGENCE_QUESTIONS:
    print("-", q)
my_factors = {}   # {branch: factor}
check_divergence(my_factors)
"""),
    md("Reference solution (CI runs it):"),
    code("""
from course_lib import exercises_occupancy as ex

print(check_tile_owner(ex.tile_owner_answer()))
print(check_masked_lanes(ex.masked_lanes_answer()))
print(check_divergence({q: ex.divergence_answer(q) for q in DIVERGENCE_QUESTIONS}))
"""),
    md("""
## Takeaways

* A block owns a tile; a lane owns elements. Its address is `row · row_stride + col · col_stride`, and a mask keeps edge tiles inside the matrix (the work they issue is not saved).
* Blocks start in an order the hardware chooses. Correctness may never depend on it.
* A warp pays one pass per distinct path among its lanes. Branch per warp, not per lane, where you can; and let whole warps skip work rather than half of every warp.

**Next:** [03 · Occupancy](03_occupancy.ipynb): how many of these blocks fit on one SM at a time, which resource stops the next one, and why more is not always faster.
"""),
]

NB03 = [
    md("""
# 03 · Occupancy

**You will learn** how many blocks of a kernel one SM can hold at once and which resource (threads, registers, shared memory, block slots) stops the next one; how the hardware's allocation rules change the simple formula; how to read a real kernel's registers and shared memory from the compiler; and, measured, why occupancy is not utilization: what a memory-bound kernel needs is bytes in flight, which more warps *or* more independent loads per warp can supply, and why fast modern kernels run at low occupancy on purpose.

**You need** notebook 02 (blocks, warps). **Time** about 40 minutes.
"""),
    code("""
from course_lib import runtime
env = runtime.banner()
"""),
    md("""
## The idea: resident blocks, one ceiling per resource

A block becomes **resident** on an SM only when everything it needs fits beside the blocks already there. Each resource gives a ceiling on the number of resident blocks, and the smallest wins:

  N = min( N_arch, ⌊T_SM / T_block⌋, ⌊W_SM / ⌈T_block / 32⌉⌋, ⌊R_SM / (R_thread · T_block)⌋, ⌊S_SM / S_block⌋ )

Occupancy is the resident warps over the SM's warp slots: N · ⌈T_block / 32⌉ / W_SM. The lesson's worked example uses an illustrative SM (not a real GPU): 2,048 threads, 64 warps, 65,536 registers, 164 KiB of shared memory and at most 32 blocks; the kernel has 256-thread blocks, 64 registers per thread and 48 KiB of shared memory per block.
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib import occupancy as occ

r = occ.residency(occ.LESSON_SM, threads_per_block=256, registers_per_thread=64, smem_per_block_bytes=48 * 1024)
for limit, blocks in r.limits.items():
    print(f"{limit:>14s} ceiling: {blocks}")
print(f"resident blocks {r.resident_blocks}, limited by {r.limiter}; "
      f"active warps {r.active_warps}; occupancy {100 * r.occupancy:.1f}%")
"""),
    md("""
The same block moves between limiters when one coordinate changes. The lesson's sensitivity table, computed:
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib.plots import Table

Table(occ.sensitivity_table(), "analytic: the lesson's illustrative SM",
      ["change", "thread ceiling", "register ceiling", "shared ceiling", "resident blocks", "active warps",
       "occupancy %", "binds"])
"""),
    md("""
Halving the block to 128 threads does not raise residency: shared memory is a per-block cost, and it still allows three blocks. And nothing here says the 50% configuration is faster than the 37.5% one.

## Allocation granularity: what real hardware does on top

The formula is first-order. A real SM hands out its resources in chunks, and CUDA's occupancy calculator applies the same rules:

* **registers** are allocated per warp, in units of 256, and the register file is split between the SM's 4 schedulers (sub-partitions): a warp's registers must fit in one quarter, so the register ceiling is ⌊16,384 / per-warp allocation⌋ × 4 warps;
* **shared memory** is allocated per block in units of 128 bytes (256 on compute capability 7.x), and from compute capability 8.0 on the driver **reserves 1 KiB per block** on top of what the kernel asks for;
* each architecture caps **resident blocks and warps per SM**:
"""),
    code("""
# NBVAL_CHECK_OUTPUT
budgets = occ.spec_budgets()
Table([{"GPU": b.name, "cc": b.compute_capability, "max blocks/SM": b.max_blocks_per_sm, "max warps/SM": b.max_warps_per_sm,
        "registers/SM": b.registers_per_sm, "smem/SM KiB": b.smem_per_sm_bytes / 1024,
        "smem/block KiB": b.max_smem_per_block_bytes / 1024, "smem unit B": b.smem_alloc_unit_bytes,
        "reserved/block B": b.reserved_smem_per_block_bytes} for b in budgets],
      "analytic: the spec table plus each compute capability's rules (occupancy.ARCH_RULES)")
"""),
    md("""
The lesson's four rows again, on an A100 (whose SM has the illustrative 164 KiB) and on an H200 (228 KiB). On the A100 the 1 KiB reservation alone turns the 32 KiB row's shared-memory ceiling from 5 into 4: the first-order formula overestimates, which is exactly the lesson's warning about ignoring allocation granularity.
"""),
    code("""
# NBVAL_CHECK_OUTPUT
cols = ["change", "register ceiling", "shared ceiling", "resident blocks", "occupancy %", "binds"]
for gpu in ("a100-sxm", "h200"):
    display(Table(occ.sensitivity_table(occ.budget(gpu)), f"analytic: the lesson's rows on one SM of {gpu}", cols))
"""),
    md("""
## Predict: the residency calculator

Pick an SM (the lesson's, any GPU of the spec table, this GPU when you are live, or a custom one) and a block: threads, registers per thread, shared memory per block. Or pick one of the course's kernels: its registers and static shared memory come straight from the compiler for that GPU's architecture (NVRTC needs no GPU, so this works in replay too). Impossible blocks (no threads, more threads than a block may have, more shared memory than the SM has) get a message.
"""),
    code("""
from course_lib.widgets_occupancy import residency_calculator

calc = residency_calculator()
calc
"""),
    md("""
### Every course kernel, from its compiled resources

Each kernel of the course at the block size of its launch contract, its registers, shared memory and spills as NVRTC reports them for the recorded GPU's architecture (or this GPU's, live), fed into the model:
"""),
    code("""
from course_lib import cuda, lab_occupancy
from course_lib.experiments import replay_gpu
from course_lib.hardware import detect

target = occ.budget_from_device(detect()) if runtime.mode() == "live" else occ.budget(replay_gpu())
Table(lab_occupancy.course_kernel_rows(target),
      f"analytic: NVRTC {cuda.nvrtc_version()} for {cuda.target_arch()}, one SM of {target.name}")
"""),
    md("""
### The model against CUDA's own calculator

The driver has an occupancy function, `cuOccupancyMaxActiveBlocksPerMultiprocessor(kernel, block size, dynamic shared memory)`. The experiment below asked it about every course kernel, and about kernels compiled with sixteen register counts from 24 to 255 (`__maxnreg__` on a body that wants more), each at random block sizes (some not whole warps) and random amounts of dynamic shared memory, and recorded the inputs with the answers. The table recomputes the model for each configuration now:
"""),
    code("""
from course_lib import experiments

api = experiments.run("occupancy.api_agreement")
rows, n, ok = lab_occupancy.agreement(api)
print(f"model = occupancy API for {ok} of {n} configurations ({api.provenance}; model recomputed now)")
Table([r for r in rows if not r["agree"]] or rows[::9], f"{'disagreements' if ok < n else 'every 9th configuration'}: "
      f"{api.provenance}")
"""),
    md("""
## Experiment (a): shared memory lowers residency in steps

A copy, one float per thread, 256-thread blocks, 2²⁶ floats (256 MiB each way). Each block is launched with more and more dynamic shared memory that the kernel never touches: it only takes up room on the SM, so fewer blocks fit. CuPy's device-to-device copy of the same bytes is measured in the same run as the ceiling; the L2 is flushed before every sample.
"""),
    code("""
print(cuda.describe("occupancy", "copy_ilp1"))
"""),
    code("""
sweep = experiments.run("occupancy.smem_sweep")
Table(lab_occupancy.sweep_rows(sweep), f"occupancy.smem_sweep: {sweep.provenance}")
"""),
    code("""
import matplotlib.pyplot as plt

lab_occupancy.sweep_figure(sweep)
plt.show()
"""),
    md("""
Occupancy falls in steps (a few KiB more shared memory changes nothing until a block no longer fits), and the bandwidth of this copy falls with it. Each thread here has exactly one 4-byte load outstanding, so the bytes an SM can have in flight are proportional to its resident warps; fewer warps, fewer bytes in flight, less bandwidth. Is occupancy itself what matters, then?

## Experiment (b): occupancy is not utilization

The same copy, with each thread issuing 1, 2, 4 or 8 independent loads before its first store (ILP, instruction-level parallelism), at residencies of 8, 4, 2 and 1 blocks per SM (set with unused shared memory as above):
"""),
    code("""
print(cuda.describe("occupancy", "copy_ilp8"))
ilp = experiments.run("occupancy.ilp")
Table(lab_occupancy.ilp_rows(ilp), f"occupancy.ilp: {ilp.provenance}")
"""),
    code("""
lab_occupancy.ilp_figure(ilp)
plt.show()
"""),
    code("""
full = lab_occupancy.best_case(ilp, ilp=1, resident_blocks=8)
print(f"{full.name}: occupancy {100 * full.extra['occupancy']:.1f}% (model), "
      f"{full.bandwidth_bytes_per_s / 1e9:,.0f} GB/s ({ilp.provenance})")
for blocks in (4, 2):
    c = lab_occupancy.best_case(ilp, ilp=8, resident_blocks=blocks)
    print(f"{c.name}: occupancy {100 * c.extra['occupancy']:.1f}% (model), {c.bandwidth_bytes_per_s / 1e9:,.0f} GB/s "
          f"= {c.bandwidth_bytes_per_s / full.bandwidth_bytes_per_s:.2f}x one load per thread at full occupancy")
"""),
    md("""
With half of the SM's warp slots filled, eight independent loads per thread move more bytes per second than one load per thread with every slot filled; with a quarter of the slots, they still do. Occupancy was never the point.

Plot both experiments against the bytes each SM can have in flight (resident threads × loads per thread × 4 bytes) instead of against occupancy, and the points gather along one rising curve up to the copy ceiling. Little's law says why: to sustain a bandwidth B through a memory whose latency is L, B · L bytes must be in flight. Warps are one way to supply them; independent loads within a warp are another.
"""),
    code("""
lab_occupancy.bytes_in_flight_figure(sweep, ilp)
plt.show()
"""),
    md("""
At equal nominal bytes in flight the points with more loads per thread sit somewhat lower. The nominal count is an upper bound: the profiler (below) finds fewer warps active than the theoretical occupancy in every case, and a warp that issued all its loads at once then has all of them waiting at once, so the fewer and fatter the warps, the further the count is from what is really outstanding at a given moment.
"""),
    md("""
## Experiment (c): register pressure and spills

`register_pressure` keeps 64 independent accumulators per thread alive through its loop. Compiled as is, it needs more than 64 registers, which limits residency. Cap the registers (`--maxrregcount`, or `__launch_bounds__` in the source) and the compiler must put the accumulators that no longer fit into **local memory**, per-thread memory that lives in the cache hierarchy and DRAM, not on chip. The compiler says so (NVRTC needs no GPU):
"""),
    code("""
arch = cuda.target_arch()
rows = []
for cap in (0, 64, 48, 32):
    res = cuda.compile_family("occupancy", arch, (f"--maxrregcount={cap}",) if cap else ()).resources["register_pressure"]
    rows.append({"build": lab_occupancy.cap_label(cap), "registers": res.registers, "stack B": res.stack_frame_bytes,
                 "spill stores B": res.spill_store_bytes, "spill loads B": res.spill_load_bytes,
                 "occupancy % (model)": 100 * occ.residency(target, 256, res.registers).occupancy})
Table(rows, f"analytic: NVRTC {cuda.nvrtc_version()} for {arch}, one SM of {target.name}")
"""),
    code("""
spill = experiments.run("occupancy.register_spill")
Table(lab_occupancy.spill_rows(spill), f"occupancy.register_spill, 2¹⁹ threads × 64 inputs: {spill.provenance}",
      ["build", "registers", "spill stores B", "occupancy % (model)", "median µs", "× as compiled",
       "local loads MB (ncu)", "local stores MB (ncu)"])
"""),
    md("""
The cap buys occupancy and pays for it in local-memory traffic: every spilled accumulator is stored and reloaded around the loop, and the `× as compiled` column shows what that costs here. A kernel with 64-way instruction-level parallelism per thread does not need many warps to keep the FMA pipes busy; it needs its registers.

## Reconcile: what the profiler sees

Occupancy is a bound on how many warps *can* be resident. Nsight Compute reports what happened: the theoretical occupancy and the ceiling from each resource (to compare with the model's), the **achieved** occupancy, and, per scheduler per cycle, how many warps were active, how many were **eligible** to issue, and how often one **issued**. High occupancy with few eligible warps means warps are waiting (here, on memory); low occupancy with a high issue rate means the few warps have enough independent work.
"""),
    code("""
from course_lib import profiler

for result in (sweep, ilp, spill):
    src, note = profiler.profiled_result(result)
    print(note)
    if src is not None:
        display(Table(lab_occupancy.warp_state_rows(src), f"{src.experiment}: Nsight Compute, {src.provenance}"))
"""),
    md("""
Read the tables against the measurements:

* ncu's theoretical occupancy equals the model's in every row, and so does the resident count its limits imply. Two ceilings are reported differently. ncu's shared-memory limit counts the carveout the driver picked for the launch (a few fixed sizes; enough for the blocks the other limits allow, the rest left to L1), while the model and the occupancy API count all 228 KiB. And for the copies with 8 registers per thread ncu's register ceiling is half the model's (it is what 16 registers per thread would give). Neither changes the resident count: the warp limit binds first there.
* Achieved occupancy is below the theoretical one everywhere, most for the one-load copy at full occupancy: its blocks live only as long as one load and one store, and a slot stays empty between one block finishing and the next one starting.
* In the copies, eligible and issued warps per cycle are tiny at every occupancy: the warps are waiting on memory, which is what memory-bound looks like.
* In the register experiment the capped builds have more warps active but fewer eligible and far fewer issuing: they wait on local memory. The build as compiled has the fewest warps and issues the most.

## Why fast kernels run at low occupancy on purpose

Lesson `000` makes the same point from the other side. A modern tensor-core GEMM or attention kernel spends its registers on large accumulator fragments and its shared memory on several stages of operand tiles, and dedicates whole warps to roles (one issues copies, others issue matrix instructions). One or two such blocks fill an SM's budget, so its occupancy is low, and it is fast, because it hides memory latency inside the block: the copy of tile k + 1 overlaps the math on tile k. The notebooks on tiling and pipelines build that schedule. Occupancy is a diagnostic, not a target: check that it is not so low that nothing can hide latency, then look at what the warps are doing.

## Exercises

**1.** Resident blocks per SM for each configuration (use the rules above, then check with the calculator).
"""),
    code("""
from course_lib.exercises_occupancy import check_residency, check_smem_budget, check_register_cap, RESIDENCY_QUESTIONS
for q in RESIDENCY_QUESTIONS:
    print("-", q)
my_blocks = {}   # {question: resident blocks}
check_residency(my_blocks)
"""),
    md("""
**2.** The most shared memory per block, in bytes (static + dynamic), that still lets four blocks share one H200 SM.
"""),
    code("""
check_smem_budget(None)   # replace None with bytes
"""),
    md("""
**3.** The most registers per thread that still let eight 256-thread blocks (100% occupancy) share one H200 SM.
"""),
    code("""
check_register_cap(None)   # replace None with a register count
"""),
    md("Reference solution (CI runs it):"),
    code("""
from course_lib import exercises_occupancy as ex

print(check_residency({q: ex.residency_answer(q).resident_blocks for q in RESIDENCY_QUESTIONS}))
print(check_smem_budget(ex.smem_budget_answer()))
print(check_register_cap(ex.register_cap_answer()))
"""),
    md("""
## Takeaways

* Residency is the smallest of one ceiling per resource: threads and warps, registers (allocated per warp in units of 256), shared memory (per block, rounded, plus 1 KiB reserved from cc 8.0), and the architecture's block cap. The model here equals CUDA's occupancy API.
* A kernel's registers and shared memory come from the compiler; read them before guessing.
* Occupancy is not utilization. A memory-bound kernel needs bytes in flight, from many warps or from independent loads in each; a compute-bound one needs independent instructions. Trading registers for occupancy can cost more in spills than it gains.

**Next:** [04 · Coalescing](04_coalescing.ipynb): once enough bytes are in flight, are they the right bytes?
"""),
]


if __name__ == "__main__":
    build({"02_threads_warps.ipynb": NB02, "03_occupancy.ipynb": NB03})
