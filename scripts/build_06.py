"""Write notebooks/06_gemm_ladder.ipynb from the cell list below (outputs come from executing it on a GPU).

    python scripts/build_06.py        # rewrites the .ipynb, without outputs

Cells whose first line is ``# NBVAL_CHECK_OUTPUT`` are analytic: nbval compares their
output with the committed one in every mode.
"""
from nbbuild import build, code, md

NB06 = [
    md("""
# 06 · The GEMM ladder: from a naive kernel to tensor cores

**You will learn** how tiling raises the reuse of every byte at each level of the memory hierarchy (HBM → shared memory → registers → tensor-core fragments), what a tile choice costs in shared memory and registers, and how each rung of a hand-written fp32 GEMM moves it towards cuBLAS. Then the same idea on the tensor cores with `mma.sync`, and why that instruction cannot reach a Hopper GPU's peak.

**You need** notebooks 01 (roofline, intensity) and 03–05 (occupancy, coalescing, shared-memory banks). With a GPU every kernel runs and is timed now; without one, the measurements are replayed from an NVIDIA H200 run and say so.

**Time** about 60 minutes.
"""),
    code("""
from course_lib import runtime
env = runtime.banner()
"""),
    md("""
## The idea: reuse each byte before it is evicted

C[M,N] = A[M,K]·B[K,N] does 2·M·N·K FLOPs on M·K + K·N + M·N inputs and outputs, so the operation as a whole is compute-bound at any interesting size (notebook 01). A kernel only gets that intensity if it *reuses* what it loads. The standard plan: a block owns a B_M × B_N tile of C and walks K in slices of depth B_K. Per slice (a *stage*) it brings B_K·(B_M + B_N) elements of A and B into shared memory and does 2·B_M·B_N·B_K FLOPs with them, so its intensity against HBM is

  I_stage = 2·B_M·B_N / (b·(B_M + B_N)) FLOP/byte  (b bytes per element; B_K cancels).

One level down, each thread keeps T_M × T_N outputs in registers and, per k, reads T_M + T_N values from shared memory for 2·T_M·T_N FLOPs: the same formula one level down, the reuse that relieves shared memory. Bigger tiles reuse more, and cost more: staging bytes, accumulator registers, fewer resident blocks. The lesson's worked numbers, from the model in `course_lib.tiling`:
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib import tiling

print(f"128x128 bf16 tile: {tiling.stage_intensity(128, 128, 2):.0f} FLOP/byte; 64x64: {tiling.stage_intensity(64, 64, 2):.0f}")
print(f"one 128x128x32 bf16 stage: {tiling.stage_flop(128, 128, 32):,} FLOPs on {tiling.stage_bytes(128, 128, 32, 2):,.0f} bytes")
print(f"two stages staged: {tiling.staging_bytes(128, 128, 32, 2, stages=2) / 1024:.0f} KiB of shared memory")
print(f"the fp32 accumulator tile: {tiling.accumulator_bytes(128, 128) / 1024:.0f} KiB, spread over the threads' registers")
print(f"M = N = 129 on 128x128 tiles: {100 * tiling.tile_edge_efficiency(129, 129, 128, 128):.2f}% of the issued tile work is useful")
"""),
    md("""
## Predict: the tile calculator

Choose a block tile, its depth, the number of stages, the dtype, the threads per block and the outputs each thread accumulates. The calculator gives the stage's FLOPs and bytes, its intensity against HBM and against shared memory, the shared memory the stages need, the accumulator registers per thread, an estimate of the total registers (or type the compiler's number), the resident blocks per SM from the occupancy model of notebook 03, and whether it fits the chosen GPU at all.

Try: the default (the lesson's 128×128×32 bf16 tile, two stages); then four stages of 128×128×64; then 256×256 with 256 threads (256 outputs each): the accumulators alone overflow the 255-register limit. Switch the GPU to the T4 or L4 and watch the shared-memory ceiling bite first.
"""),
    code("""
from course_lib.widgets_tiling import tile_calculator
tile_calculator()
"""),
    md("""
## The ladder, rung by rung

Nine fp32 kernels, each one change away from the previous, all in `course_lib/kernels/gemm_fp32.cu`, all masking their edges so any M, N, K works. What the tiling model says about each (analytic; the register-tile intensity of step 10, the tensor-core kernel of the second half, is per *warp*: its 64×64 warp tile):
"""),
    code("""
# NBVAL_CHECK_OUTPUT
from course_lib import lab_gemm
from course_lib.plots import Table

Table(lab_gemm.step_model_rows(), "each rung's tile (analytic: course_lib.tiling; intensities in FLOP/byte)")
"""),
    md("""
The first two rungs read every operand from global memory (through L1 and L2): one output per thread, two loads per multiply-add. The difference between them is only which way `threadIdx.x` runs:
"""),
    code("""
from course_lib import cuda
print(lab_gemm.step_source("sgemm_naive"))
print(lab_gemm.step_source("sgemm_coalesced"))
"""),
    md("""
Step 3 stages 32×32 tiles in shared memory; steps 4–6 put several outputs per thread in registers and then move 16 bytes per instruction. Step 7 keeps step 6's arithmetic but lays the threads out by warp, so that the float4s a warp reads from shared memory are a few consecutive addresses (no bank conflicts, notebook 05). Steps 8 and 9 are one template: two shared-memory stages, the next one's loads in flight while the current one is multiplied.
"""),
    code("""
print(lab_gemm.step_source("sgemm_warptile_db_16x8"))
"""),
    md("""
### What the compiler gave each rung

Registers, shared memory and spills come from NVRTC's report for this GPU's architecture (no GPU needed to compile); blocks per SM and occupancy come from the occupancy model of notebook 03 with those numbers. Steps 5–9 trade occupancy for registers: 64 or 128 accumulators per thread leave room for only 8 or 16 warps per SM. Low occupancy is not low utilisation (notebook 03): each of those warps has 64 or 128 independent FMAs in flight.
"""),
    code("""
from course_lib import experiments
ladder = experiments.run("gemm.fp32_ladder")
Table(lab_gemm.resources_rows(ladder.gpu), f"compiler report ({cuda.target_arch()}) and residency on {ladder.gpu} (model)")
"""),
    md("""
### Every rung is checked before it is timed

Each kernel runs on square and non-square shapes that are not multiples of its tile (1×1×1, 127×129×65, K = 77 or 1025 that no vector width divides, …) and is compared with a float64 matmul. The tolerance scales with K (fp32 rounding grows along the reduction); the table shows each error as a fraction of its tolerance.
"""),
    code("""
edges = experiments.run("gemm.edges")
Table(lab_gemm.edges_rows(edges), f"max |error| / tolerance vs float64, per kernel and M×N×K ({edges.provenance})")
"""),
    md("""
## Measure: the ladder beside cuBLAS

Square n×n×n fp32 GEMMs at n = 1024, 2048, 4096 and 8192, every rung and cuBLAS (`torch.mm` with TF32 off, so it too does true fp32 FMAs) in the same run, on the same matrices, each result checked against a float64 matmul first, then timed with CUDA events (warm-up, then at least 20 samples; the median is shown). The slowest rungs take seconds per call at the largest sizes: where a rung's predicted time for all its samples is over the run's budget, that cell was **not measured** and the table says so.
"""),
    code("""
Table(lab_gemm.ladder_rows(ladder), f"fp32 GEMM, GFLOP/s and % of cuBLAS fp32 in the same run: {ladder.provenance}")
"""),
    code("""
import matplotlib.pyplot as plt
for line in lab_gemm.not_measured(ladder):
    print(line)
lab_gemm.ladder_figure(ladder)
plt.show()
"""),
    md("""
Each rung pays off at the large sizes, where there are thousands of blocks. At n = 1024 the big tiles backfire: step 5's 128×128 tile cuts a 1024×1024 output into (1024/128)² = 64 blocks and step 9's 256×128 tile into 32, for an H200's 132 SMs, so most SMs sit idle; step 4's 64×64 tile makes 256 blocks and beats step 5 there (notebook 07 counts this: tile and wave quantization).

What limited each rung, and what the next one changes (the numbers behind these sentences are the tables above):
"""),
    code("""
Table([{"step": f"{s.number} {s.label}", "what limits it": s.limit, "what the next step changes": s.next_change}
       for s in lab_gemm.LADDER], "the ladder, one sentence per rung")
"""),
    md("""
## Reconcile: how close to the hardware?

cuBLAS is one yardstick; the other is the FP32 datasheet peak, 2 FLOPs × 128 FP32 lanes × SMs × boost clock. From step 4 on, each stage's intensity against HBM (the model table) is above the fp32 ridge printed below, so HBM bandwidth is not what separates the later rungs: it is how many of the SM's issue slots go to FFMAs and how often warps wait, for loads (steps 1–4), at barriers (steps 3–7), or on shared-memory bank conflicts (until step 7).
"""),
    code("""
from course_lib import hardware
best = max((c for c in ladder.cases if c.params["sizes"] == 4096 and c.params.get("kernels")), key=lambda c: c.flop_per_s)
lib = lab_gemm._cublas(ladder, 4096)
peak = hardware.spec(ladder.gpu).peak("fp32")
print(f"best rung at n=4096: {best.params['kernels']}, {best.flop_per_s / 1e12:.1f} TFLOP/s = "
      f"{100 * best.flop_per_s / lib.flop_per_s:.0f}% of cuBLAS, {100 * best.flop_per_s / peak:.0f}% of the datasheet peak")
print(f"cuBLAS fp32 at n=4096: {lib.flop_per_s / 1e12:.1f} TFLOP/s = {100 * lib.flop_per_s / peak:.0f}% of the datasheet peak "
      f"({peak / 1e12:.0f} TFLOP/s at boost clock)")
print(f"fp32 ridge: {peak / hardware.spec(ladder.gpu).hbm_bandwidth_bytes_per_s:.0f} FLOP/byte (datasheet peak / bandwidth)")
print("course target, best rung >= 80% of cuBLAS fp32 at 4096:", "met" if best.flop_per_s >= 0.8 * lib.flop_per_s else "missed")
"""),
    md("""
The last rung's inner loop is, per k, 6 float4 shared-memory loads feeding 128 FFMAs, plus a barrier every 8 k. What remains between it and cuBLAS is scheduling: with over 200 registers per thread only one block of 8 warps fits on an SM (the compiler table), so the next stage's global loads, the barrier and the epilogue are hidden only by the independent FMAs inside each warp. Library SGEMM kernels are tuned at the instruction level (register banks, instruction order), which CUDA C does not control directly; and the datasheet peak assumes the boost clock for the whole run.

## Tensor cores: the bf16 rung

fp32 FFMAs top out at the datasheet's fp32 peak. The tensor cores do a small matrix product per instruction: `mma.sync.aligned.m16n8k16` has one warp multiply a 16×16 bf16 tile of A by a 16×8 tile of B into a 16×8 fp32 accumulator, 4,096 FLOPs in one instruction. The kernel keeps the structure of the fp32 ladder's last rungs, with tensor-core parts:

* **three stages** of shared tiles: while tile t is multiplied, tiles t+1 and t+2 are on their way, and tile t's stage is refilled with tile t+3 as soon as every warp has read it. Two copy engines can fill them:
  * **`cp.async`** (compute capability 8.0+): every thread copies 16-byte chunks from global to shared memory without passing them through its registers. Each thread's chunks sit at fixed strides in both memories, so their addresses are worked out once, before the loop;
  * **the TMA** (9.0+, Hopper's tensor memory accelerator): one thread asks for a whole tile, described by a *tensor map* the host encodes once (`lab_gemm.tensor_maps`); the hardware generates the addresses, writes the tile swizzled and zero-fills what lies outside the matrix, and an **mbarrier** counts the bytes in. The other 127 threads issue no copy instructions at all;
* **`ldmatrix`** has a warp load four 8×8 bf16 matrices from shared memory straight into the fragment layout `mma.sync` wants (`.trans` for B, which is row-major [k][n] but must arrive as the MMA's column operand);
* **swizzled shared memory**: each 16-byte chunk of a 128-byte row is stored at its column XOR the row's low three bits, so the eight rows one `ldmatrix` phase reads land in eight different bank groups, with no padding bytes. This is exactly the TMA's 128-byte swizzle, so both engines fill the same layout;
* **fragments read ahead, one barrier per tile**: the A fragment of the next row of MMAs and the B fragments of the next 16-deep step are read while the current MMAs run (two small register sets each), so a warp rarely waits for `ldmatrix`; the block synchronises once per tile, right after its last read of the tile, and the refill starts there. With the TMA, each thread first executes `fence.proxy.async`: `ldmatrix` and the TMA reach shared memory through different *proxies*, and without the fence the refill can overwrite the slot under a read still in flight (while this kernel was written, runs without it sometimes gave wrong outputs at 4096 and 8192);
* a **64×64 warp tile** (128 fp32 accumulators per thread) and a 128×128×64 block tile: 32 FLOP per byte read from shared memory per warp, 64 per byte from HBM.

NVRTC has no `cuda_bf16.h` here, so the kernel handles bf16 as raw 16-bit patterns and says everything in inline PTX. Its body is a template compiled three ways: when K and N are multiples of 8 (rows 16-byte aligned) the pipelined loop runs, fed by `cp.async` or, if the host passed tensor maps, by the TMA; otherwise chunks may be copied element by element and a plain loop (barrier at the top of each tile) is used. It is compiled for every architecture the course supports; below compute capability 8.0 (no bf16 `mma.sync`) its body is compiled out and traps, and the Python side refuses to launch it with a message.
"""),
    code("""
print(lab_gemm.step_source("bf16_gemm_mma"))
"""),
    md("""
Measured beside cuBLAS bf16 (`torch.mm` on bf16 tensors) in the same run, once per copy engine the GPU has. The three are timed call by call in turn: at its power cap the GPU moves its clock with temperature, and timing all of one kernel's samples before the other's would favour whichever ran on the cooler chip. The check is against cuBLAS's own bf16 output: both accumulate in fp32 and round once to bf16, so they may differ by a bf16 rounding step of an output; both are also compared with a float64 product of the same bf16 inputs.
"""),
    code("""
bf16 = experiments.run("gemm.bf16_mma")
Table(lab_gemm.bf16_rows(bf16), f"bf16 GEMM n×n×n: mma.sync kernel per copy engine vs cuBLAS bf16, same run ({bf16.provenance})")
"""),
    code("""
for r in lab_gemm.bf16_rows(bf16):
    for engine in lab_gemm.COPY_ENGINES:
        if f"{engine} TFLOP/s" in r:
            pct = r[f"{engine} % of cuBLAS"]
            target = f"(course target >= 50%: {'met' if pct >= 50 else 'missed'})" if r["n"] in (4096, 8192) else ""
            print(f"n={r['n']}, {engine:8s}: {r[f'{engine} TFLOP/s']:.0f} TFLOP/s, {pct:.1f}% of cuBLAS bf16 {target}")
peak_bf16 = hardware.spec(bf16.gpu).peak("bf16")
print(f"datasheet dense bf16 peak: {peak_bf16 / 1e12:.0f} TFLOP/s; cuBLAS reaches "
      f"{100 * max(r['cuBLAS TFLOP/s'] for r in lab_gemm.bf16_rows(bf16)) * 1e12 / peak_bf16:.0f}% of it")
"""),
    md("""
### Why `mma.sync` cannot reach a Hopper GPU's peak

On an H100 or H200 the datasheet's dense bf16 peak belongs to **`wgmma`**, Hopper's warpgroup MMA; `mma.sync` is the Ampere instruction, which Hopper still runs but not at that rate. Three things separate them:

* **Who issues and waits.** `mma.sync` is synchronous per warp: each warp issues its own small MMAs, and its registers are tied up until each one completes. `wgmma.mma_async` is issued by a *warpgroup* (4 warps) for a much larger tile (up to 64×256×16) and runs asynchronously: the warps go on issuing while it works, and wait only when they need the result.
* **Where the operands come from.** With `mma.sync` every operand passes through registers: every byte of A and B is read from shared memory by `ldmatrix` first, which costs issue slots and shared-memory bandwidth per MMA. `wgmma` reads A and B directly from shared memory through matrix descriptors: no `ldmatrix`, no fragment registers.
* **How the data arrives.** The table shows what the copies cost: the same MMAs fed by the TMA instead of 2,048 `cp.async` instructions per tile run measurably faster, because the copy instructions and their address arithmetic no longer compete with `ldmatrix` and `mma.sync` for issue slots and the load/store pipeline. The fastest Hopper GEMMs go further and split the block into producer and consumer warps (warp specialisation), so loading, waiting and computing overlap without the per-tile barrier this kernel still pays.

The per-thread accumulators also cap this kernel: 128 fp32 registers per thread for a 64×64 warp tile, over 250 registers in all, so only two blocks of 4 warps fit on an SM. A later notebook builds the TMA + `wgmma` + warp-specialised kernel.

## Exercises

**1. A tile's index arithmetic.** In `sgemm_reg2d` (and `sgemm_vec4`) a block of 256 threads owns a 128×128 tile of C, block (block_row, block_col) starting at row 128·block_row and column 128·block_col; the threads form a 16×16 grid over the tile (consecutive `tid`s along a row of that grid), and each owns an 8×8 block of outputs. Write the function that gives the global (row, col) of the output in accumulator `acc[i][j]` of thread `tid`.
"""),
    code("""
from course_lib.exercises_tiling import check_tile_choice, check_tile_index

def owner(block_row, block_col, tid, i, j):
    return None   # your (row, col) here

check_tile_index(None)   # replace None with owner when it is written
"""),
    md("""
**2. A tile that fits a given GPU.** Choose a bf16 tile for an **NVIDIA L4** (about 100 KiB of shared memory per SM): at least 3 stages, a stage intensity against HBM of at least 64 FLOP/byte, and at least 2 resident blocks per SM (with the calculator's register estimate). Use the calculator above to try candidates.
"""),
    code("""
my_tile = dict(block_m=None, block_n=None, block_k=None, stages=None, threads=None, outputs_per_thread=None)
check_tile_choice(my_tile)
"""),
    md("Reference solution (CI runs it):"),
    code("""
def owner(block_row, block_col, tid, i, j):
    return block_row * 128 + (tid // 16) * 8 + i, block_col * 128 + (tid % 16) * 8 + j

print(check_tile_index(owner))
print(check_tile_choice(dict(block_m=128, block_n=128, block_k=32, stages=3, threads=256, outputs_per_thread=64)))
"""),
    md("""
A 128×128 tile is the smallest square tile that reaches 64 FLOP/byte in bf16; at B_K = 32 three stages take 48 KiB, so two blocks share the L4's 100 KiB. At B_K = 64 the same three stages need 96 KiB and only one block fits.

## Takeaways

* Tiling is the same trade at every level: a bigger tile reuses each loaded byte more (2·B_M·B_N/(b·(B_M+B_N)) against HBM, 2·T_M·T_N/(b·(T_M+T_N)) against shared memory) and costs shared memory, registers and resident blocks. The calculator makes the cost visible before any code is written.
* The fp32 ladder climbs from coalescing, to shared-memory tiles, to register tiles, to conflict-free warp layouts and double buffering; its last rungs run at low occupancy on purpose, because the registers buy reuse and independent FMAs.
* Tensor cores change the unit of work to a warp-wide matrix product; `cp.async` (or the TMA), `ldmatrix` and a swizzled layout keep them fed. On Hopper, `mma.sync` leaves much of the peak on the table; `wgmma` takes it.

**Next:** [07 · Waves and tile quantization](07_waves.ipynb) counts what these tiles cost at the edges of a matrix and in the last wave of blocks.
"""),
]

if __name__ == "__main__":
    build({"06_gemm_ladder.ipynb": NB06})
