"""The failure lab: 35 classic GPU-performance mistakes, where the course shows each one, and a quiz."""
from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("execution model", "resources", "memory and layout", "tiling and fusion", "roofline and measurement")


@dataclass(frozen=True)
class Failure:
    number: int            # 1..35
    family: str            # one of FAMILIES
    mistake: str           # one sentence: the mistake, as a learner would make it
    explanation: str       # 2-4 sentences: why it is wrong and what to do instead
    notebook: str | None   # notebook file stem where it is shown or discussed, or None
    section: str | None    # exact heading text in that notebook, or None
    record: str | None     # experiment with a record in data/recorded/h200/, or None
    case: str | None       # a case name inside that record, or None
    contrast: str | None   # a case of the same record that does it right, to compare with, or None
    misreadings: tuple[str, str]  # two wrong explanations of this same mistake, in its own words: the
                                  # tempting misconceptions, each wrong by what the course shows (the quiz's options)


_EXEC, _RES, _MEM, _TILE, _ROOF = FAMILIES

FAILURES: tuple[Failure, ...] = (
    # ---- execution model -------------------------------------------------------------------
    Failure(
        1, _EXEC,
        "Assuming that one call in a framework such as PyTorch launches exactly one GPU kernel.",
        "What runs on the GPU is decided by the framework's dispatcher and compiler, not by the line of code: "
        "one eager operator can launch several kernels, a compiler can merge many operators into one, and an "
        "unsupported case can fall back to a slower path. In the course's elementwise chains, eager PyTorch "
        "launched two kernels for every `y * a + b` step while `torch.compile` ran the whole chain as one. "
        "Count the kernels in a profiler trace before reasoning about launches or bytes.",
        "08_fusion", "The evidence that a fusion happened: kernel lists and DRAM bytes",
        "fusion.chains", "k=8: PyTorch eager", 'k=8: torch.compile (Inductor)',
        misreadings=(
            "It holds in eager mode, where each operator runs as exactly one kernel; only a compiler such as "
            "`torch.compile` changes the count, by merging many operators into one. In the course's elementwise "
            "chains `torch.compile` ran the whole chain as one kernel, while eager PyTorch ran one kernel per "
            "operator. So for eager code the lines themselves are a reliable count of launches and bytes, and a "
            "profiler trace is needed only for compiled code.",
            "It is safe as an upper bound: a framework can merge several calls into one kernel, as `torch.compile` "
            "did with the course's elementwise chains, but it never splits one call into several kernels or sends "
            "it down another path behind your back. Eager PyTorch ran exactly one kernel per operator of the "
            "chain, each reading and writing its whole tensor once. Count the calls in the code and you have the "
            "most kernels the GPU can see, and so the most launches and DRAM bytes you need to reason about.")),
    Failure(
        2, _EXEC,
        "Picturing each block as if it were an SM, or each SM as running a single block.",
        "A block is placed on one SM and stays there until it finishes, but an SM holds several blocks at once "
        "when their resources fit, and takes new ones as old ones retire. A launch of thousands of blocks "
        "therefore runs as a stream of blocks over a fixed number of SMs, in waves. The block-order experiment "
        "records the SM each block landed on and shows many blocks passing through every SM in one launch.",
        "02_threads_warps", "Run: blocks own tiles, and start in any order",
        "warps.block_order", "3969 blocks (63×63) of 16×16 tiles, 1000×1000 output", None,
        misreadings=(
            "A block is placed on one SM and stays there until it finishes, and the SM runs that one block at a "
            "time, taking the next only when the current one retires; a second block would need an SM of its own. "
            "A launch of thousands of blocks therefore runs in waves of exactly one block per SM, 132 at a time on "
            "the H200, which is why the block-order experiment saw many blocks pass through every SM in one "
            "launch.",
            "An SM holds several blocks at once when their resources fit, but a block is not tied to one SM: as "
            "SMs free up, the hardware moves a block's warps onto them to balance the load. The block-order "
            "experiment records many blocks on every SM because each block's warps pass through several SMs during "
            "one launch, not because the SMs take new blocks as old ones retire. Count warps per SM when you "
            "reason about a launch, not blocks.")),
    Failure(
        3, _EXEC,
        "Writing a kernel whose correctness depends on blocks running in the order of their index.",
        "The hardware hands blocks to SMs in roughly increasing order, but within each wave the start order is "
        "scrambled, and it changes from one launch to the next. CUDA makes no promise about it, so code that "
        "relies on block 6 finishing before block 7 is wrong even on a day it happens to pass. Blocks may "
        "cooperate only through the end of the kernel, atomics or a cooperative launch.",
        "02_threads_warps", "Run: blocks own tiles, and start in any order",
        "warps.block_order", "3969 blocks (63×63) of 16×16 tiles, 1000×1000 output", None,
        misreadings=(
            "CUDA hands blocks to SMs in increasing order of their index, so code may rely on block 6 starting "
            "before block 7; only the finish order varies, because blocks run for different times. A kernel goes "
            "wrong only when it assumes block 6 has already finished, and for that the blocks must cooperate "
            "through atomics or a cooperative launch.",
            "Within each wave the start order is scrambled, but for the same grid on the same GPU it is the same "
            "from one launch to the next, so a kernel that relies on block 6 finishing before block 7 and passes "
            "once will keep passing there. What CUDA leaves open is the order on another GPU or for another grid, "
            "so test every target.")),
    Failure(
        4, _EXEC,
        "Using the words block and tile as if they named the same thing.",
        "A block is a unit of execution: a group of threads scheduled together on one SM. A tile is a unit of "
        "data, a piece of the output or of an operand whose shape the kernel's author chooses. One block per "
        "tile is a common plan, not a rule: in a persistent kernel each block loops over many tiles, and the "
        "course's persistent grid of 135 blocks covers 270 tiles.",
        "07_waves", "Remove the tail",
        "waves.remedies", "persistent: course 128x128, persistent grid of 135", 'persistent: course 128x128, one tile per block',
        misreadings=(
            "A tile is the data a block stages in shared memory, so the two come in pairs by definition: one block "
            "per tile is how CUDA ties them together, and a kernel without shared memory has no tiles at all. The "
            "course's persistent grid of 135 blocks covers 270 tiles only because the kernel launches its grid "
            "twice, once for each half of the tiles.",
            "A block and a tile name the same thing from two sides: the block is the group of threads, and the "
            "tile is the share of an SM's shared memory and registers that group occupies. One block per tile "
            "therefore holds on every launch, and the course's persistent grid of 135 blocks covers 270 tiles "
            "because two such shares fit on each SM.")),
    Failure(
        5, _EXEC,
        "Believing that each thread owns a CUDA core of its own for the life of the kernel.",
        "The SM issues instructions for a warp of 32 threads at a time and sends them to shared functional "
        "pipelines; a thread is a lane of that instruction stream, not the owner of a core. When the lanes of a "
        "warp branch different ways, the warp runs each path in turn with the other lanes switched off, so the "
        "kernel with two paths inside every warp took twice as long as the one with a single path. Reason in "
        "warps and issue slots, not in cores per thread.",
        "02_threads_warps", "Divergence: one pass per path",
        "warps.divergence", "2 paths, split inside each warp", '2 paths, split by warp',
        misreadings=(
            "Each thread does get a core of its own while its warp is resident: the SM maps a warp's 32 threads "
            "onto 32 CUDA cores and frees them when the warp retires. When the lanes of a warp branch different "
            "ways, each lane follows its own path on its own core at the same time, so the kernel with two paths "
            "inside every warp cost the same as the one with a single path. Reason in cores per resident thread.",
            "The SM issues instructions for a warp of 32 threads at a time, but a lane switched off by a branch "
            "costs nothing, so a divergent warp pays in proportion to the lanes on each path, not for each path. "
            "The kernel with two paths inside every warp took as long as the one with a single path, because each "
            "lane still ran only one of the two paths and the same total work was done. Reason in active lanes and "
            "their share of the work, not in warps and issue slots.")),
    # ---- resources -------------------------------------------------------------------------
    Failure(
        6, _RES,
        "Letting a kernel keep more live values per thread than the register file can afford.",
        "Registers are shared out among all resident threads, so every extra register per thread lowers the "
        "number of warps that fit on an SM, and past the per-thread limit the compiler moves values to local "
        "memory. The one-pass RMSNorm holds a whole row per block in registers; at 131,072 elements a row they "
        "no longer fit, the compiler spills kilobytes per thread, and the fused kernel ran about 2.5 times "
        "slower than the two-kernel plan. Read the compiler's register and spill report for every build you time.",
        "08_fusion", "When holding the row loses: a row that does not fit",
        "fusion.reductions", "rmsnorm n=131072: course one pass", 'rmsnorm n=131072: course two pass',
        misreadings=(
            "Extra live values only cost occupancy: the compiler keeps every value in registers whatever the "
            "count, and fewer warps fit on an SM. The one-pass RMSNorm holds a whole row per block in registers, "
            "and at 131,072 elements a row it ran about 2.5 times slower than the two-kernel plan because too few "
            "warps were resident to hide latency. Judge such a kernel by its occupancy and the warps it keeps "
            "resident, not by the compiler's report.",
            "Values past the per-thread register limit go to shared memory, which the compiler sets aside for "
            "them, so a kernel that keeps too much alive pays in bank conflicts, not in memory traffic. The "
            "one-pass RMSNorm at 131,072 elements a row ran about 2.5 times slower than the two-kernel plan for "
            "that reason. Pad the spilled arrays against conflicts and the fused kernel catches up with the "
            "two-kernel plan at every row length.")),
    Failure(
        7, _RES,
        "Thinking of local memory as a fast on-chip store next to the registers.",
        "Local memory is private to a thread in how it is addressed, but it lives in device memory and reaches "
        "the SM only through the caches. Every spilled value is a store and a later load through L1 and L2, and "
        "a trip to DRAM when those miss. Capping the register-pressure kernel at 64 registers spilled 304 bytes "
        "per thread, made it more than three times slower, and the profiler counted gigabytes of local-memory "
        "traffic.",
        "03_occupancy", "Experiment (c): register pressure and spills",
        "occupancy.register_spill", "--maxrregcount=64", 'as compiled (no cap)',
        misreadings=(
            "Local memory is on chip, in the same storage as L1 and shared memory, so a spilled value costs a few "
            "cycles more than a register and never reaches DRAM. Capping the register-pressure kernel at 64 "
            "registers spilled 304 bytes per thread, and it ran more than three times slower because of the extra "
            "load and store instructions the spills add, not because of any memory traffic.",
            "Local memory lives in device memory, but a spilled value is written once and rarely read back, so "
            "spills cost bandwidth only on the way out, and the write-back L2 absorbs most of that before it "
            "reaches DRAM. Capping the register-pressure kernel at 64 registers spilled 304 bytes per thread, and "
            "it ran more than three times slower because the cap lowered its occupancy, not because of "
            "local-memory traffic through L1 and L2.")),
    Failure(
        8, _RES,
        "Giving a block more shared memory without working out again how many blocks still fit on an SM.",
        "Shared memory is a per-block cost taken from a fixed budget per SM, so a larger tile or an extra buffer "
        "can remove resident blocks in a single step. In the shared-memory sweep, a copy kernel that never even "
        "touched its shared memory fell to half occupancy at 48 KiB per block and took about 1.8 times as long "
        "as with none. Recompute residency whenever a tile, a stage count or a padding changes.",
        "03_occupancy", "Experiment (a): shared memory lowers residency in steps",
        "occupancy.smem_sweep", "48 KiB shared memory per block", '0 KiB shared memory per block',
        misreadings=(
            "Shared memory counts against residency only when a kernel actually reads or writes it; memory a block "
            "asks for and never touches is not charged to the SM's budget, so a spare buffer is free. In the "
            "shared-memory sweep, the copy kernel that took about 1.8 times as long at 48 KiB per block was slowed "
            "by the time the SM spends setting up each block's larger allocation, not by fewer resident blocks, so "
            "residency needs no recomputing.",
            "Shared memory is taken from a fixed budget per SM, but residency falls with it smoothly, a little for "
            "every extra kilobyte, so a small change of tile or padding costs a small, predictable amount. In the "
            "shared-memory sweep the copy kernel slowed gradually as its shared memory grew, to about 1.8 times as "
            "long at 48 KiB per block. Only the total per SM needs checking, not each step.")),
    Failure(
        9, _RES,
        "Reading a high occupancy figure as proof that the SM is doing useful work.",
        "Occupancy counts the warps that are resident, not the warps able to issue an instruction this cycle, "
        "and resident warps may all be waiting on memory. The copy with one load per thread filled every warp "
        "slot and was still beaten by kernels using half or a quarter of the slots whose threads each kept eight "
        "loads in flight. A memory-bound kernel needs bytes in flight, and they, not the resident warps, tell the "
        "two apart: 4,096 bytes per SM at one load per thread against 32,768 at eight. The faster kernel even "
        "had fewer eligible and issued warps per cycle, since its warps spend longer waiting on each of their loads.",
        "03_occupancy", "Experiment (b): occupancy is not utilization",
        "occupancy.ilp", "ILP 1, 8 blocks/SM wanted", 'ILP 8, 4 blocks/SM wanted',
        misreadings=(
            "For a memory-bound kernel, occupancy is a fair measure of useful work, because every resident warp "
            "keeps its loads in flight. The copy with one load per thread filled every warp slot and was the "
            "fastest of the sweep, ahead of kernels using half or a quarter of the slots; once occupancy is full, "
            "extra independent loads per thread add nothing. Raise occupancy first, and look at the code only when "
            "it is already full: 4,096 bytes per SM in flight is plenty.",
            "Occupancy counts resident warps rather than warps ready to issue, so the figure to read instead is "
            "eligible and issued warps per cycle. The copy with eight loads in flight per thread beat the copy "
            "that filled every warp slot with one load per thread because its warps were eligible to issue more "
            "often. A memory-bound kernel is fast when its warps issue on most cycles, and the profiler's eligible "
            "and issued warps per cycle tell the two kernels apart better than the bytes each SM has in flight.")),
    Failure(
        10, _RES,
        "Forcing a kernel's register count down just to reach the highest possible occupancy.",
        "A register cap such as `--maxrregcount` or `__launch_bounds__` buys residency by spilling whatever no "
        "longer fits to local memory, and it takes away independent work each thread could have had in flight. "
        "Capped at 32 registers, the register-pressure kernel went from 37.5% to full occupancy and ran about "
        "sixteen times slower than the uncapped build. Treat occupancy as a diagnostic, and raise it only when "
        "the profiler shows too few eligible warps to hide latency.",
        "03_occupancy", "Experiment (c): register pressure and spills",
        "occupancy.register_spill", "--maxrregcount=32", 'as compiled (no cap)',
        misreadings=(
            "A register cap such as `--maxrregcount` or `__launch_bounds__` costs only a few extra instructions, "
            "because the compiler recomputes values instead of keeping them, and nothing goes to local memory. "
            "Capped at 32 registers, the register-pressure kernel went from 37.5% to full occupancy, and it ran "
            "about sixteen times slower than the uncapped build because of those recomputed instructions. Cap only "
            "kernels whose arithmetic is cheap to redo, and raise occupancy freely there.",
            "The cap is the right tool, and 32 registers simply overshot. Capped there, the register-pressure "
            "kernel went from 37.5% to full occupancy and ran about sixteen times slower than the uncapped build, "
            "while at 64 registers, at half occupancy, it is faster than the uncapped build. Cap registers until "
            "occupancy reaches about one half, the level at which a kernel hides latency, and stop there.")),
    Failure(
        11, _RES,
        "Computing residency from whole-SM totals and ignoring the units in which the hardware hands out "
        "registers and shared memory.",
        "Registers are allocated per warp in chunks of 256 and must fit in one scheduler's quarter of the "
        "register file, and shared memory is rounded up per block, with 1 KiB reserved per block from compute "
        "capability 8.0 on. Plain floor division ignores all of this and can promise a block that does not fit: "
        "on an A100 the reservation alone turns five resident blocks of 32 KiB into four. The course's residency "
        "model applies these rules, and it agrees with CUDA's own occupancy calculator.",
        "03_occupancy", "Allocation granularity: what real hardware does on top",
        None, None, None,
        misreadings=(
            "Floor division is exact for registers, which are allocated per thread, and shared memory is rounded "
            "only to the next 128 bytes per block, far too little to change a block count. On an A100, five "
            "resident blocks of 32 KiB stay five, and the course's residency model, which uses plain whole-SM "
            "totals for both resources, agrees with CUDA's own occupancy calculator.",
            "Registers are allocated per warp in chunks of 256 and shared memory per block in rounded units, but a "
            "chunk one block leaves unused goes to the next block, so the rounding can only make room. Plain floor "
            "division is therefore a safe lower bound: on an A100 it gives four resident blocks of 32 KiB where "
            "five actually fit, and CUDA's own occupancy calculator says five.")),
    # ---- memory and layout -----------------------------------------------------------------
    Failure(
        12, _MEM,
        "Estimating memory traffic from the elements a kernel uses rather than from the sectors the hardware "
        "fetches.",
        "The memory system moves whole 32-byte sectors, so a warp whose lanes are misaligned, strided or "
        "scattered pulls in bytes that nobody asked for. A strided fp32 copy with stride 8 puts every lane in a "
        "sector of its own, so only an eighth of each fetch is useful, and it ran about four times slower than "
        "the unit-stride copy. Count sectors per request, and check the count against the profiler's L1 and "
        "DRAM figures.",
        "04_coalescing", "Measure",
        "coalescing.strided_copy", "stride 8", 'stride 1',
        misreadings=(
            "The memory system moves only the bytes each lane asks for, so traffic is the elements used times "
            "their size, whatever the pattern. A strided fp32 copy with stride 8 moved the same bytes as the "
            "unit-stride copy, and its four-times slowdown came from the extra address arithmetic of the stride. "
            "Count elements, and check the instruction count in the profiler rather than the L1 and DRAM figures.",
            "The hardware fetches whole 32-byte sectors, but the lanes of a warp share them, so a misaligned, "
            "strided or scattered warp wastes at most one sector beyond the 128 bytes it uses. A strided fp32 copy "
            "with stride 8 thus moves at most a quarter more bytes than the unit-stride copy, and its four-times "
            "slowdown has to come from latency, not bytes. Count elements, and add one sector per request for the "
            "misalignment.")),
    Failure(
        13, _MEM,
        "Expecting the cache behaviour seen in one benchmark to hold for other sizes, batches or neighbouring "
        "work.",
        "Whether a byte comes from a cache depends on how much data passes between two uses of it and who else "
        "touched the cache meanwhile, and that changes with the problem size, the batch, concurrent kernels and "
        "what ran before. Notebook 09's pointer chase, one access pattern throughout, read a load in about 146 ns "
        "with 24 MiB of data and in 260–270 ns with 48 MiB on the H200, though both fit in the 60 MiB of L2 its "
        "device reports: a benchmark at the first size says nothing about the second. State the working set and "
        "the cache state of a measurement, and flush the L2 when a number must not depend on leftovers.",
        "09_async_pipelines", "Measure the latency: pointer chasing",
        "pipeline.latency", "chase_l2, 50331648 B", "chase_l2, 25165824 B",
        misreadings=(
            "Cache behaviour follows from a kernel's own access pattern, so a pattern that hits in one benchmark "
            "hits at every size, batch and neighbour. Notebook 09's pointer chase took about the same time per "
            "load with 24 MiB and with 48 MiB of data, because a random chase misses the same way whatever its "
            "size. Measure a pattern once, and flush the L2 only to make the first sample of a run look like the "
            "rest.",
            "Whether a byte comes from a cache depends only on the size of the working set against the L2: below "
            "it, every reuse hits, and above it none does, whatever ran before or beside it. Notebook 09's pointer "
            "chase kept its L2 latency with 48 MiB of data on the H200, whose device reports 60 MiB of L2, and "
            "only slowed past that size. State the working set, and the cache state follows from it.")),
    Failure(
        14, _MEM,
        "Fixing the global-memory access pattern without checking what it does to shared memory.",
        "Shared memory has an address map of its own, 32 banks of 4-byte words, so a layout chosen to make "
        "global loads and stores coalesced can make shared memory the bottleneck. The tiled transpose reads its "
        "unpadded 32 × 32 tile by columns, a 32-way bank conflict, and ran about twice as slow as the same "
        "kernel with one word of padding per row. After each optimization, look for the next bottleneck at "
        "every level the data passes through.",
        "05_shared_memory", "The transpose ladder",
        "transpose.ladder", "shared tile 32×32", 'padded tile 32×33',
        misreadings=(
            "Shared memory is on chip and has no access pattern to get wrong: a warp's access completes in one "
            "pass whatever addresses its lanes use. The tiled transpose's unpadded 32 × 32 tile ran about twice as "
            "slow as the padded one because one word of padding per row aligns the kernel's global loads and "
            "stores, so the fix was a global-memory one after all. Optimize the global access pattern, and the "
            "rest follows.",
            "Shared memory has 32 banks of 4-byte words, but lanes conflict only when they write to the same bank; "
            "reads are broadcast to every lane that asks. The tiled transpose's unpadded 32 × 32 tile ran about "
            "twice as slow as the padded one because of its stores into the tile, and the column reads that follow "
            "were free. One word of padding per row fixed the stores.")),
    Failure(
        15, _MEM,
        "Assuming that a broadcast tensor, such as the result of `expand`, always stays a view with no data of "
        "its own.",
        "A broadcast is a logical promise that costs nothing only while every consumer reads it through "
        "stride-0 indexing. A reshape that needs contiguous memory, an operator without a strided path, or a "
        "library call that wants a dense input can silently turn it into a full-sized copy, with all the bytes "
        "and the allocation that implies. Check the strides and storage of the tensor the kernel actually "
        "receives, and look for copy kernels in the profiler trace.",
        "11_failure_lab", "Thirty-five mistakes in five families", "failures.broadcast",
        "x + bias.expand(rows, cols).contiguous(): the view made real",
        "x + bias.expand(rows, cols): read through stride 0",
        misreadings=(
            "A broadcast made with `expand` has stride 0 and shares the storage of the original row, and PyTorch "
            "keeps it that way: an operator that needs contiguous memory reads the view through a strided path "
            "instead of copying it, and a reshape returns another view. A bias added through the view and one "
            "added after `.contiguous()` run the same kernel over the same bytes, so the view's cost is settled at "
            "the `expand` call, and the profiler trace shows nothing more.",
            "A broadcast is free only until something reads it: every kernel that receives a stride-0 view copies "
            "it into a full-sized buffer before it starts, so the bytes and the allocation are paid at each use "
            "instead of never. Call `.contiguous()` on the view once, up front, so the copy is made a single time "
            "and every later kernel reads dense memory instead of making its own copy; the trace then shows one "
            "copy kernel, not many.")),
    Failure(
        16, _MEM,
        "Treating a paged key/value cache during decoding as if each sequence's keys and values formed one "
        "contiguous array.",
        "Serving systems often store the key/value cache in fixed-size pages and keep a table that maps each "
        "sequence's logical positions to them, so consecutive tokens can sit far apart in memory. A kernel that "
        "reads the cache must follow that table, and its accesses are only as contiguous as one page is long. "
        "Model the traffic from the physical layout, page size and indirection included, not from the logical "
        "shape of the tensor.",
        None, None, None, None, None,
        misreadings=(
            "Pages and their table are bookkeeping for the allocator only: the pages of one sequence are handed "
            "out in order and side by side, so a kernel that reads the key/value cache can treat each sequence's "
            "keys and values as one contiguous array, as in a plain cache. Model the traffic from the logical "
            "shape of the tensor; the page size changes how memory is reserved and freed between sequences, not "
            "how a decoding kernel reads it.",
            "A kernel follows the page table only once per sequence, when decoding starts, to gather that "
            "sequence's pages into a contiguous copy, and every later step reads the copy. Model the traffic from "
            "the logical shape of the tensor, plus one copy of each sequence's keys and values, and the pages, "
            "their size and their indirection drop out of the model.")),
    # ---- tiling and fusion -----------------------------------------------------------------
    Failure(
        17, _TILE,
        "Choosing the largest tile that shared memory and registers will hold, whatever the problem size.",
        "A big tile reuses each loaded byte more, but it also means fewer blocks, more padding at the edges and "
        "more accumulator registers per thread. At n = 1024 the fp32 ladder's 128 × 128 rung launches only 64 "
        "blocks for 132 SMs, and it was slower than the rung before it, whose 64 × 64 tile gives 256 blocks. "
        "Choose the tile for the shape: enough blocks to fill the GPU, little waste at the edges, and "
        "accumulators that fit.",
        "06_gemm_ladder", "Measure: the ladder beside cuBLAS",
        "gemm.fp32_ladder", "sgemm_reg2d, n=1024", 'sgemm_reg1d, n=1024',
        misreadings=(
            "The largest tile that fits is the right choice, because it reuses each loaded byte most; a big tile "
            "loses only when its accumulators spill to local memory. At n = 1024 the fp32 ladder's 128 × 128 rung "
            "was slower than the 64 × 64 rung before it because its accumulators did not fit in registers. Keep "
            "the largest tile whose accumulators fit, whatever the shape.",
            "Tile size trades reuse against block count only when there are fewer blocks than the SMs can hold, "
            "and at n = 1024 the 128 × 128 rung's 64 blocks still keep all 132 SMs at work, since each block's "
            "warps spread over several SMs. Its loss to the 64 × 64 rung came from run-to-run spread, not from "
            "idle SMs or edge padding. Choose the largest tile that shared memory and registers will hold, and let "
            "its reuse pay for it at every size.")),
    Failure(
        18, _TILE,
        "Adding pipeline stages without charging every stage's buffer to the shared-memory budget.",
        "Double or triple buffering keeps one tile in use while the next ones arrive, so a block's shared "
        "memory is the size of a stage times the number of stages, not the size of one tile. More stages can "
        "therefore push a block past the point where two of them fit on an SM. The course's bf16 GEMM with 3 "
        "stages ran two blocks per SM; with 4 stages only one block fits, and it ran about a third slower (the "
        "row beside this gives both medians).",
        "09_async_pipelines", "The GEMM at 1 to 6 stages",
        "pipeline.gemm_stages", "bf16_gemm_mma (tma), 4 stages, 1 block/SM", 'bf16_gemm_mma (tma), 3 stages, 2 blocks/SM',
        misreadings=(
            "Double or triple buffering reuses one buffer in turn, so a block's shared memory stays the size of "
            "one tile however many stages there are; extra stages cost registers, not shared memory. The course's "
            "bf16 GEMM with 4 stages ran about a third slower than with 3 because its deeper pipeline took longer "
            "to fill at every tile, not because fewer blocks fit on an SM.",
            "Each stage does take a tile's worth of shared memory, but more stages repay the residency they cost, "
            "since a deeper pipeline hides more latency than a second block would. The course's bf16 GEMM at 4 "
            "stages with one block per SM was as fast as at 3 stages with two blocks per SM, and faster still at 5 "
            "and 6 stages. Spend the shared-memory budget on stages before blocks, and add stages until the budget "
            "runs out, whatever the residency.")),
    Failure(
        19, _TILE,
        "Leaving out the synchronization that tells a producer a shared-memory buffer is free again, or tells "
        "its consumers that the data has arrived.",
        "When one set of threads or a copy engine fills a buffer that others read, something must order the "
        "two: a barrier, an mbarrier phase, or a fence between ordinary and asynchronous accesses. Without it "
        "the program usually still runs, and returns wrong results that differ from run to run. Freeing a slot "
        "of the Hopper GEMM before its wgmma reads had finished made all ten runs wrong, and compute-sanitizer's "
        "racecheck cannot see this kind of race; only the comparison with a reference caught it.",
        "10_hopper_gemm", "Five ways to get it wrong",
        "hopper.pitfalls", "hgemm_5_persistent, 4096×4096×4096", None,
        misreadings=(
            "Leaving out that synchronization costs speed, not correctness: each thread's accesses stay in program "
            "order, and a reader that arrives too early simply waits for the data to land. Freeing a slot of the "
            "Hopper GEMM before its wgmma reads had finished kept every output right in all ten runs, and "
            "compute-sanitizer's racecheck flagged the early release as a hazard anyway.",
            "A missing barrier, mbarrier phase or fence does give wrong results, but the same wrong results on "
            "every run, and compute-sanitizer's racecheck reports it at once. Freeing a slot of the Hopper GEMM "
            "before its wgmma reads had finished is the example: racecheck named the race on the first run, so "
            "running it on every kernel makes the comparison with a reference unnecessary.")),
    Failure(
        20, _TILE,
        "Assuming that fusing kernels always makes the work faster.",
        "Fusion removes the round trips of intermediates through HBM, but the fused kernel may need more "
        "registers, keep fewer blocks resident, or repeat work that separate kernels did once. The course's "
        "GEMM with a fused epilogue that calls the C library's `tanhf` ran slower than the plain GEMM "
        "followed by a separate epilogue pass: the tanh's dozens of instructions per output run at the end of "
        "every tile, at low occupancy. Time the fused kernel against the unfused plan, and read its compile "
        "report.",
        "08_fusion", "A GEMM epilogue",
        "fusion.epilogue", "4096x4096x4096: course GEMM, fused bias + GELU + residual, libm tanhf", '4096x4096x4096: course GEMM + separate epilogue pass',
        misreadings=(
            "Fusion always removes work, so a fused kernel can only lose when the fusion did not really happen. "
            "The course's GEMM with a fused epilogue calling the C library's `tanhf` ran slower than the plain "
            "GEMM followed by a separate epilogue pass because `tanhf` cannot run inside a GPU kernel, so the "
            "compiler moved the epilogue back out to a kernel of its own and the intermediate went through HBM "
            "after all. Check the kernel list in a profiler trace, not the timing, to see whether a fusion "
            "happened.",
            "Fusion loses only when the fused kernel spills. The course's GEMM with a fused epilogue calling the C "
            "library's `tanhf` ran slower than the plain GEMM followed by a separate epilogue pass because `tanhf` "
            "needs more registers than the GEMM had left, and its compile report showed the spill to local memory, "
            "with occupancy unchanged. Fuse whenever the compile report shows registers to spare, and skip timing "
            "the unfused plan.")),
    Failure(
        21, _TILE,
        "Believing that an intermediate which never reaches HBM no longer costs anything.",
        "Fusion moves the intermediate rather than removing it: the values still exist, in registers or shared "
        "memory, and the room they take limits residency. When that room runs out they spill to local memory, "
        "which is backed by DRAM. The one-pass softmax keeps a whole row on chip; at 131,072 elements a row it "
        "spilled so much that it moved more DRAM bytes than the two-kernel plan and ran about 2.6 times slower.",
        "08_fusion", "When holding the row loses: a row that does not fit",
        "fusion.reductions", "softmax n=131072: course one pass", 'softmax n=131072: course two pass',
        misreadings=(
            "An intermediate kept in registers or shared memory costs nothing once fused, because that room is "
            "freed the moment the value is read. The one-pass softmax at 131,072 elements a row ran about 2.6 "
            "times slower than the two-kernel plan because it reads its input twice, once for the maximum and once "
            "for the sum, not because of the row it keeps on chip.",
            "Keeping an intermediate on chip costs residency but no DRAM traffic: what does not fit in registers "
            "stays on chip, in local memory beside them, which is why it is called local. The one-pass softmax at "
            "131,072 elements a row ran about 2.6 times slower than the two-kernel plan because fewer of its "
            "blocks were resident on each SM, while it still moved fewer DRAM bytes than the two-kernel plan, as "
            "its ledger says.")),
    # ---- roofline and measurement ----------------------------------------------------------
    Failure(
        22, _ROOF,
        "Comparing a kernel against a peak FLOP rate that belongs to another data type or another instruction.",
        "A datasheet peak holds only for one dtype on one unit, such as dense bf16 on Hopper's tensor cores "
        "issued through `wgmma`. On the H200, `mma.sync` alone, with no memory traffic at all, stopped near "
        "630 TFLOP/s, while `wgmma` came within a few percent of the 989 TFLOP/s peak. Quote the peak for the "
        "exact dtype, sparsity and instruction path the kernel uses.",
        "10_hopper_gemm", "The ceiling `mma.sync` cannot pass",
        "hopper.ceilings", "mma.sync m16n8k16, registers", 'wgmma m64n256k16, A from shared',
        misreadings=(
            "A datasheet peak is a property of the tensor cores, reachable through any instruction that uses them. "
            "On the H200, `mma.sync` stopped near 630 TFLOP/s only because its operands came through memory; fed "
            "from registers it would reach the 989 TFLOP/s that `wgmma` reached. Compare every bf16 kernel against "
            "that one peak.",
            "The peaks of the different dtypes are one rate of the tensor cores counted in different units, so any "
            "tensor-core kernel can be held against the datasheet's bf16 figure. On the H200, `mma.sync` and "
            "`wgmma` both came within a few percent of the 989 TFLOP/s peak; quote it for whatever dtype or "
            "instruction a kernel uses.")),
    Failure(
        23, _ROOF,
        "Using the datasheet bandwidth as the bandwidth a kernel can actually reach.",
        "The datasheet's HBM figure is a pin rate, and refresh, bus turnarounds and protocol overhead keep any "
        "real stream below it. A device-to-device copy on the H200 sustained about 4.2 TB/s against the "
        "datasheet's 4.8 TB/s. Measure a copy ceiling on the machine, and express memory-bound kernels as a "
        "fraction of it.",
        "00_your_gpu", "The machine card: the datasheet beside what we measured",
        "machine.copy_bandwidth", "CuPy device-to-device copy", None,
        misreadings=(
            "The datasheet's HBM figure is what a well-written copy sustains, and a lower number means slow code. "
            "CuPy's device-to-device copy on the H200 sustained about 4.2 TB/s against the datasheet's 4.8 TB/s "
            "only because it is a generic library copy; hold memory-bound kernels against the datasheet.",
            "The gap between datasheet and copy is the copy's own: it must both read and write, and turning the "
            "bus around costs time that a kernel which only reads never pays. A copy on the H200 sustained about "
            "4.2 TB/s against the datasheet's 4.8 TB/s, so read-only kernels can be held against the datasheet "
            "figure, and only copies against the measured one.")),
    Failure(
        24, _ROOF,
        "Quoting an arithmetic intensity without saying which memory boundary its bytes cross.",
        "Intensity is FLOPs divided by the bytes that cross one particular boundary, and the same kernel has a "
        "different intensity for HBM, L2, shared memory and registers. A roofline drawn with HBM bandwidth "
        "needs the HBM bytes, and any other roof needs the bytes of its own level. Write the boundary next to "
        "every intensity you quote.",
        "01_roofline", "The idea: two lower bounds on time",
        "banks.probe", "4 B row", None,
        misreadings=(
            "Arithmetic intensity belongs to the algorithm: FLOPs divided by the bytes of its inputs and outputs, "
            "so a kernel has one intensity whatever memory its bytes come from. A roofline drawn with HBM "
            "bandwidth can take that number as it is, and so can any other roof; the boundary changes where the "
            "roof sits, not the intensity, so there is nothing to write beside it.",
            "Intensity does depend on the boundary, but the HBM figure is always the lowest of them, since every "
            "byte a kernel uses crosses HBM first. Quoting the HBM intensity without naming a boundary is "
            "therefore conservative at every level, and any roof can be drawn with those same bytes.")),
    Failure(
        25, _ROOF,
        "Timing GPU work with a host clock around calls that return before the GPU has finished.",
        "A kernel launch only queues the work, so a host timer read right after it measures the cost of "
        "queueing. Timed this way, a vector add over 2²⁴ elements seemed to take under 7 µs, an apparent "
        "29 TB/s that no GPU can move. Use CUDA events in the stream, or synchronize before reading the host "
        "clock, and keep the launch itself out of the interval.",
        "00_your_gpu", "Measuring correctly",
        "timing.measuring_correctly", "host timer, no synchronize, n=16777216", 'CUDA events, GPU held, n=16777216',
        misreadings=(
            "A host timer is fine if it is read right after the launch, because the launch returns once the kernel "
            "has started running on the GPU. Timed this way, a vector add over 2²⁴ elements took under 7 µs: that "
            "is its real run time, and its apparent 29 TB/s came from the L2 serving most of the bytes. Keep the "
            "host clock, read it right after the call, and take many samples.",
            "A launch only queues the work, but a synchronize right after it makes the host timer exact: it then "
            "measures the kernel and nothing else. Without one, a vector add over 2²⁴ elements seemed to take "
            "under 7 µs, an apparent 29 TB/s; with one, the host clock gives the same time as CUDA events, launch "
            "or no launch.")),
    Failure(
        26, _ROOF,
        "Timing the first call of a kernel as if it showed the kernel's steady-state cost.",
        "The first call pays once for compilation, module loading, memory allocation, autotuning in some "
        "libraries, and cold caches. The course's first vector add took about 12 ms, where a warm call of the "
        "same size takes about 63 µs. Run warm-up calls first, then take many samples and report their median "
        "and spread.",
        "00_your_gpu", "Measuring correctly",
        "timing.measuring_correctly", "first call (compile + load + launch), n=16777216", 'CUDA events, GPU held, n=16777216',
        misreadings=(
            "The first call is slower only because its caches are cold, so flushing the L2 before every sample "
            "makes each call cost what the first did. The course's first vector add took about 12 ms against about "
            "63 µs warm; flush, and the first call is as good a sample as any other.",
            "The first call is slow because the GPU starts at a low clock and needs one long kernel to reach full "
            "speed; nothing is compiled or loaded that a later call would not pay for too. The course's first "
            "vector add took about 12 ms where a warm call takes about 63 µs; one throwaway call of any size "
            "raises the clock, and a single sample after it is the steady-state cost.")),
    Failure(
        27, _ROOF,
        "Profiling one matrix shape and assuming the result holds for every phase of a Transformer.",
        "Prefill multiplies many rows at once and is usually compute-bound, while decode multiplies a few rows "
        "by the same weights and is bound by memory and latency, and libraries pick different kernels for the "
        "two. With M = 16 rows cuBLAS switched to small tiles and split-K, and the course's fixed-tile kernel "
        "took about as long as at M = 512. Profile each phase at the shapes it really runs.",
        "07_waves", "Thin shapes: M small",
        "waves.m_sweep", "cuBLAS 16x4096x4096", 'cuBLAS 512x4096x4096',
        misreadings=(
            "Prefill and decode multiply by the same weights through the same GEMM, so a profile of one shape "
            "carries over once its FLOPs are scaled by the number of rows; both are compute-bound, only of "
            "different sizes. With M = 16 rows cuBLAS ran the same kernel as at M = 512, and the course's "
            "fixed-tile kernel took about as long at both because both shapes fit in a single wave of 264 slots.",
            "Decode is prefill with fewer rows: both are compute-bound, so the time scales with the number of rows "
            "and one profile, rescaled, covers both phases. cuBLAS's switch to small tiles and split-K at M = 16 "
            "is a launch detail that does not change the kernel's cost, and the course's fixed-tile kernel taking "
            "as long at M = 16 as at M = 512 only shows its fixed launch cost, a few microseconds per call.")),
    Failure(
        28, _ROOF,
        "Judging a kernel by one summary utilization number, without the grid it launched and the stalls its "
        "warps hit.",
        "A single percentage, such as GPU busy, achieved occupancy or tensor-pipe activity, says that something "
        "happened but not why the rest did not. Rung 5 of the Hopper GEMM had only 14% of its warp slots active "
        "while its tensor pipe was busy 84% of the time; its launch geometry, one block per SM, and its stall "
        "reasons explain both numbers. Read the grid, the blocks per SM, the eligible warps and the top stall "
        "reasons together.",
        "10_hopper_gemm", "What the profiler says",
        "hopper.profile", "hgemm_5_persistent, 4096×4096×4096", None,
        misreadings=(
            "Achieved occupancy is the summary number to read first, since a kernel with few warps active cannot "
            "keep its units busy. Rung 5 of the Hopper GEMM had only 14% of its warp slots active, so its tensor "
            "pipe must have been idle most of the time, and more blocks per SM is the fix. The grid and the stall "
            "reasons only refine that picture.",
            "For a GEMM, tensor-pipe activity is the summary number that settles it. Rung 5 of the Hopper GEMM "
            "kept its tensor pipe busy 84% of the time against about 95% for cuBLAS, and that gap alone explains "
            "cuBLAS's lead; the grid, the blocks per SM, the eligible warps and the stall reasons matter only when "
            "the pipe is mostly idle.")),
    Failure(
        29, _ROOF,
        "Ignoring the overhead that a profiler or tracer adds, and the clock changes of the GPU during a run.",
        "Profilers replay kernels, fix or change clocks and add instrumentation, so a profiled time is not the "
        "time of an ordinary run. Clocks also move with power and temperature: the ablation run ended at "
        "1,560 MHz near the 700 W cap, far below the 1,980 MHz maximum, and long dense GEMMs ran at a lower rate "
        "than short ones. Record the clock and power with every measurement, and take times from unprofiled runs.",
        "10_hopper_gemm", "Measured: the ladder beside cuBLAS",
        "hopper.ablations", "cuBLAS bf16, 8192×8192×8192", None,
        misreadings=(
            "Profilers read hardware counters that run beside the kernel, so a profiled time is the time of an "
            "ordinary run, and the clock stays at its maximum unless the GPU overheats. The ablation run ended at "
            "1,560 MHz near the 700 W cap only because it was profiled; unprofiled, long dense GEMMs run at the "
            "same rate as short ones. Profile freely, and quote the profiler's times as the kernel's times in an "
            "ordinary run.",
            "Profiler overhead is real, but the clock needs no recording: the GPU holds its 1,980 MHz maximum "
            "whenever it has work. The ablation run's 1,560 MHz near the 700 W cap was read after its last kernel, "
            "as the card idled down. Take times from unprofiled runs, and leave clock and power out of the record.")),
    Failure(
        30, _ROOF,
        "Naming the backend that ran an operation after the API that was called.",
        "One API call can reach several implementations, chosen at run time by dtype, shape, hardware and the "
        "libraries installed. The course's call to `scaled_dot_product_attention` ran a cuDNN flash-attention "
        "kernel on the H200, and the same call may pick another backend on another machine or shape. Read the "
        "kernel names in a profiler trace before saying which backend ran.",
        "08_fusion", "The score-matrix trap",
        "fusion.attention", "N=4096: scaled_dot_product_attention", 'N=4096: naive (matmul, softmax, matmul)',
        misreadings=(
            "The API names its backend: `scaled_dot_product_attention` is PyTorch's own fused attention kernel, "
            "the same on every machine, dtype and shape. On the H200 the course's call ran PyTorch's kernel as it "
            "would anywhere else, so the API's documentation is enough to say which backend ran.",
            "One API call can reach several implementations, but the choice is made once, when the libraries are "
            "installed, from the hardware they find. The course's call to `scaled_dot_product_attention` ran a "
            "cuDNN flash-attention kernel on the H200, so on that machine it runs cuDNN at every shape and dtype; "
            "the list of installed libraries names the backend without a profiler trace.")),
    Failure(
        31, _ROOF,
        "Assuming that masked positions at the edge of a tile cost no work.",
        "A mask stops out-of-range lanes from touching memory, but the tile's instructions are still issued for "
        "the whole tile, and partly empty edge blocks still occupy SMs. With M = 16 rows, the course's 128-row "
        "tile computed eight times the rows it kept, and the kernel took about as long as at M = 128. Count the "
        "padded tile area and the tail blocks as work you pay for.",
        "07_waves", "Thin shapes: M small",
        "waves.m_sweep", "course 16x4096x4096", 'course 128x4096x4096',
        misreadings=(
            "A mask switches out-of-range lanes off before they issue, so a tile's instructions are issued only "
            "for the rows that are kept. With M = 16 rows, the course's 128-row tile did an eighth of the work it "
            "does at M = 128, and the kernel took about as long only because both are dominated by the fixed cost "
            "of a launch.",
            "Masked positions cost work in proportion to the empty rows, but the GPU hides that by running edge "
            "blocks beside full ones. With M = 16 rows, the course's 128-row tile computed eight times the rows it "
            "kept, yet the kernel took about as long as at M = 128, which shows the padding was free. Count only "
            "the real rows as work.")),
    Failure(
        32, _ROOF,
        "Ignoring how the number of blocks divides into the slots the GPU can run at once.",
        "A GPU runs at most SMs × (resident blocks per SM) blocks at a time, and a grid just past a whole number "
        "of waves pays for a nearly empty extra wave. Widening the course's GEMM from N = 2048 to N = 2112 took the grid from 512 "
        "tiles to 544, 16 more than two full waves of 264 slots, and the time rose by about a quarter, from 156 "
        "to 196 µs. Predict the waves before choosing a shape, and pad, split or reschedule to fill the last one.",
        "07_waves", "Measure: the sawtooth",
        "waves.n_sweep", "course 4096x2112x4096", 'course 4096x2048x4096',
        misreadings=(
            "Time grows with the number of blocks, so a grid a few blocks past a whole number of waves costs a few "
            "blocks' worth of time. Widening the course's GEMM from N = 2048 to N = 2112 took the grid from 512 "
            "tiles to 544, 6% more blocks, so the time should have risen by about 6%; the quarter it rose by, from "
            "156 to 196 µs, was run-to-run noise that more samples would remove.",
            "A nearly empty extra wave costs little, because its few blocks spread one per SM and finish in a "
            "fraction of a full wave's time. Widening the course's GEMM from N = 2048 to N = 2112 took the grid "
            "from 512 tiles to 544, 16 more than two full waves of 264 slots, and the time rose by about a "
            "quarter, from 156 to 196 µs, because each block's tile is wider at the larger N. Choose the shape for "
            "the tile, and let the waves fall where they fall.")),
    Failure(
        33, _ROOF,
        "Using one arithmetic intensity for every level of the memory hierarchy.",
        "Each level sees a different amount of traffic, because bytes reused at one level never reach the next. "
        "A 4096³ bf16 GEMM does about 1,365 FLOP per byte of HBM traffic, while its 128 × 256 tiles do only "
        "about 85 FLOP per byte they read from L2, and each number must be held against that level's own "
        "bandwidth. Check every level that could bind, each against its own ceiling.",
        "10_hopper_gemm", "Blackwell, on paper",
        "banks.probe", "4 B row", None,
        misreadings=(
            "The FLOPs and the bytes are fixed by the algorithm, so a kernel has one arithmetic intensity, and "
            "every level of the memory hierarchy sees the same one. A 4096³ bf16 GEMM does about 1,365 FLOP per "
            "byte at HBM and at L2 alike, far right of any ridge, whatever tile shape it runs, so checking it "
            "against the HBM roof covers every level of the hierarchy, with L2 and shared memory included.",
            "Each level sees a different amount of traffic, and the level with the lowest intensity is the one "
            "that binds. A 4096³ bf16 GEMM's 128 × 256 tiles do only about 85 FLOP per byte they read from L2, "
            "against about 1,365 per byte of HBM, so the GEMM is L2-bound whatever the L2's bandwidth; check that "
            "level and ignore the others, HBM included.")),
    Failure(
        34, _ROOF,
        "Taking the distance of a point below the roofline as proof of what slowed it down.",
        "The roofline gives a bound, not a diagnosis: a point can sit far below both roofs because of launch "
        "overhead, too few blocks to fill the GPU, synchronization, a poor instruction mix, or a roof that does "
        "not apply to it. A 64 × 64 fp32 matmul has an intensity of about 10 FLOP per byte, yet it ran at about "
        "a tenth of a TFLOP/s, held back by the fixed cost of a kernel and too little parallelism rather than by "
        "either roof. Find the cause with timings and counters, then use the roofline to say how much there is "
        "to gain.",
        "01_roofline", "Reconcile: where the points sit, and why",
        "roofline.measured", "matmul fp32, n=64", 'matmul fp32, n=4096',
        misreadings=(
            "A point below the roofline is held back by the roof nearest to it: left of the ridge by memory, right "
            "of it by compute, and the distance says how badly. A 64 × 64 fp32 matmul, with an intensity of about "
            "10 FLOP per byte, ran at about a tenth of a TFLOP/s because it is memory-bound, starved of bytes. "
            "Read the cause off the plot, then confirm it with timings and counters, and use the distance to say "
            "how much there is to gain.",
            "The roofline diagnoses by elimination: a point far below both roofs has too little intensity for its "
            "dtype, and the fix is more FLOPs per byte. A 64 × 64 fp32 matmul, with an intensity of about 10 FLOP "
            "per byte, ran at about a tenth of a TFLOP/s for that reason, so larger tiles or fusion would lift it "
            "towards the roof, and the distance below the roof says by how much.")),
    Failure(
        35, _ROOF,
        "Labelling a number that came from a model or a test fixture as a measurement.",
        "An analytic value follows from its inputs, while a measured one needs raw timing samples, the kernel "
        "that actually ran, profiler counters where they matter, and a check that the output was right. Every "
        "table in this course says whether its numbers are analytic, measured now, or replayed from a recorded "
        "run, with the GPU and the date. Keep that label on every number you quote, and call nothing measured "
        "without the raw data behind it.",
        "00_your_gpu", "Takeaways",
        None, None, None,
        misreadings=(
            "A number counts as measured once a GPU has produced it: a test fixture that ran on the machine is a "
            "measurement, and so is a model calibrated with one timing. Every table in this course says whether "
            "its numbers are analytic or measured, and a number replayed from a recorded run counts as measured "
            "now, since it was timed once on a GPU with the same name.",
            "The label matters only for model values: anything that came out of a timer is a measurement, whether "
            "or not its raw samples were kept or the output was checked. Every table in this course marks its "
            "analytic numbers, so keep that label on those, and call every timed number measured, with the GPU and "
            "the date, even when only the median survives.")),
)


FAMILY_LIST = ", ".join(f'"{f}"' for f in FAMILIES)


def by_family(family: str) -> list[Failure]:
    """The failures of one family, in order."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}: the families are {FAMILY_LIST}")
    return [f for f in FAILURES if f.family == family]


def failure(number: int) -> Failure:
    """Failure ``number``, 1-35."""
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= len(FAILURES):
        raise ValueError(f"failures are numbered 1-{len(FAILURES)}, not {number!r}")
    return FAILURES[number - 1]


def demonstrated() -> list[Failure]:
    """The failures that a recorded experiment demonstrates with a measurement."""
    return [f for f in FAILURES if f.record is not None and f.case is not None]


def _anchor(heading: str) -> str:
    """Jupyter's anchor for a heading: lowercase, spaces to '-', only letters, digits, '-' and '_' kept."""
    return "".join(c for c in heading.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def href(f: Failure) -> str | None:
    """The notebook (and section anchor) that shows ``f``, relative to the notebooks folder, or None."""
    if f.notebook is None:
        return None
    return f"{f.notebook}.ipynb" + (f"#{_anchor(f.section)}" if f.section else "")


def link(f: Failure) -> str | None:
    """A markdown link to the notebook section that shows ``f``, or None."""
    if f.notebook is None:
        return None
    return f"[{f.notebook}" + (f" · {f.section}" if f.section else "") + f"]({href(f)})"


def undemonstrated_rows() -> list[dict]:
    """The failures no record demonstrates: discussed (where a notebook does) but not measured."""
    return [{"#": f.number, "family": f.family, "mistake": f.mistake,
             "discussed in": " · ".join(filter(None, (f.notebook, f.section))) or "not in a notebook"}
            for f in FAILURES if f not in demonstrated()]
