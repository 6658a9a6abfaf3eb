"""Write-it-yourself kernel exercises: the learner's CUDA C, compiled, checked statically, and (with
a GPU) run against a reference at adversarial sizes in a child process under a time limit.

``check(name, source)`` does the whole thing and returns a ``Verdict`` (a string with ``.correct``):

1. NVRTC compiles the source for the exercise's target (``exercise_arch``): this GPU's architecture
   (in replay, the recorded GPU's), the exercise's minimum where this GPU is older, or the one
   architecture an exercise of architecture-specific instructions names (``arch``, sm_90a). A
   compile error is shown with NVRTC's log, its line numbers those of the learner's cell.
2. The exercise's static checks read the compiled kernel, never the spelling of the source: ptxas's report
   (registers, shared memory, stack frame, spills), the SASS (nvdisasm: barriers, waits, fences and the paths
   between them, local loads and stores), and the PTX NVRTC keeps in the cubin, which they also run on the CPU
   for one block (``measure.sass.emulate``) to get the addresses it computes: the bank model reads them, a word
   two warps touch between barriers is a race, an access past an array overflows it.
3. Live, a child process (``python -m course_lib.exercises.kernel.runner``) loads the cubin and runs the
   kernel at each of the exercise's sizes against a reference (hostile ones: one element, primes,
   multiples and non-multiples of every width, past 2³¹ elements where the GPU has the memory, values
   where the op is numerically hard, a second grid), then times it beside the course kernel that moves
   the same bytes and the exercise's reference solution. A kernel that hangs is stopped after the time
   limit, one that faults is reported with CUDA's error; either way the notebook's GPU context is untouched.
4. Where the exercise is about bytes, coalescing or bank conflicts (``KernelExercise.counts``), a kernel
   whose results are right is launched once more at the timed size under Nsight Compute, and what it
   did is held against the exercise's model: bytes against the plan's bytes (``Traffic``), the share of
   each sector its accesses use (``SectorUse``), shared-memory wavefronts per instruction
   (``BankWavefronts``). A static finding that only models the same thing from the source
   (``Finding.counted``) then gives way to the count. Where ncu cannot count (not installed, or the
   counters closed to this user), the verdict says so and the models stand.
5. A kernel that passed all of that runs once more under compute-sanitizer at the exercise's small sizes:
   memcheck, and racecheck and synccheck where its SASS has shared memory or barriers, so that a race
   or a read past an input (the inputs have no room past them in that run) fails it. ``sanitize=True``
   runs every size under them whatever the rest found; ``sanitize=False`` leaves them out.

The exercises live in ``catalog`` (re-exported here), their CUDA in ``kernels/exercises/<name>/``; each has starter code, a hint, a reference solution and
deliberately wrong solutions, which tests pass through the same checker.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

from course_lib.core import cuda, stored_run
from course_lib.core.runtime import REPO_ROOT
from course_lib.exercises.base import Verdict
from course_lib.exercises.kernel.catalog import (
    BankWavefronts,
    Count,
    KernelExercise,
    SectorUse,
    Traffic,
    compiled,
    exercise,
    mnemonic,
)
from course_lib.exercises.kernel import runner
from course_lib.exercises.kernel.runner import REFERENCE, cases_address
from course_lib.measure import profiler, sass

DEFAULT_TIME_LIMIT_S = 20


# --------------------------------------------------------------------------- checking

def kernel_sass(cubin: bytes, kernel: str) -> sass.Listing | None:
    """The learner's kernel's SASS with its labels, what the static checks read; None where nvdisasm is missing."""
    try:
        return sass.listings(cubin).get(kernel)
    except sass.DisassemblerUnavailable:
        return None


ARCH_GPUS = {"sm_90a": "a Hopper GPU (H100, H200, GH200)"}   # what a learner reads for an architecture-specific target


def _capability(arch: str) -> str:
    digits = arch.removeprefix("sm_").rstrip("a")
    return f"{digits[:-1]}.{digits[-1]}"


def exercise_arch(ex: KernelExercise) -> tuple[str, str | None]:
    """(the architecture the exercise compiles for here, why it cannot run on this GPU or None). An exercise
    for an architecture-specific target (``ex.arch``, sm_90a) compiles for it alone; one whose GPU is too old
    compiles for its minimum. Without a GPU this is the recorded GPU's architecture."""
    here = cuda.target_arch()
    if ex.arch is not None:
        if here.rstrip("a") == ex.arch.rstrip("a"):
            return ex.arch, None
        return ex.arch, (f"This exercise's instructions exist on {ex.arch} alone (compute capability "
                         f"{_capability(ex.arch)}: the \"a\" marks features later GPUs do not keep) and this GPU is "
                         f"{_capability(here)}: it is compiled for {ex.arch} and checked statically, but it cannot run "
                         f"here. It runs on {ARCH_GPUS.get(ex.arch, f'a GPU of compute capability {_capability(ex.arch)}')}.")
    if int(here.removeprefix("sm_").rstrip("a")) < round(10 * ex.min_cc):
        return f"sm_{round(10 * ex.min_cc)}", (
            f"This exercise needs compute capability {ex.min_cc:g} or newer and this GPU is {_capability(here)}: it "
            f"is compiled for sm_{round(10 * ex.min_cc)} and checked statically, but it cannot run here.")
    return here, None


def compile_exercise(ex: KernelExercise, source: str, arch: str) -> tuple[bytes, cuda.KernelResources | None, list[str]]:
    """(cubin, the kernel's resources, problems). NVRTC's messages keep the cell's line numbers."""
    return ex.files.compile(source, arch)


STARTUP_LIMIT_S = 180   # the child's imports and CuPy's first compiles, before the kernel runs


def _communicate(proc, limit_s: float) -> tuple[list[str], str | None]:
    """The child's stdout lines, and "hung" if it ran past ``limit_s`` after saying READY (or
    "startup" if it never got that far): the time limit is the kernel's, not Python's start-up."""
    import queue
    import threading
    import time

    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: ([lines.put(ln) for ln in proc.stdout], lines.put(None)), daemon=True).start()
    out, ready, deadline = [], False, time.monotonic() + STARTUP_LIMIT_S
    while True:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            proc.kill()
            proc.wait()
            return out, "hung" if ready else "startup"
        if line is None:
            proc.wait()
            return out, None
        out.append(line.rstrip("\n"))
        if line.strip() in ("READY", REFERENCE):   # the kernel's limit; then the reference's, as long
            ready, deadline = True, time.monotonic() + limit_s


def measured_by(live, source: str, reference_source: str | None = None) -> dict[str, str]:
    """What a child run's answer was produced from: the kernel's CUDA source (and the reference solution's,
    where it was timed beside it), the cases function that built the inputs and judged the results, and the
    child process's runner. A notebook rendered from its stored run refuses an answer whose inputs changed."""
    return {"kernel source": stored_run.sha16(source), "reference source": stored_run.sha16(reference_source or ""),
            "cases function": stored_run.source_sha16(live), "runner": stored_run.source_sha16(runner)}


def run_child(live, kernel: str, sizes, cubin: bytes, time_limit_s: float, tool: str | None, time_it: bool,
              launch: dict, reference_cubin: bytes | None = None, reference_launch: dict | None = None,
              source: str = "", reference_source: str | None = None) -> dict:
    """Run ``live`` (a cases function) on the cubin's ``kernel`` in a child process, so a hang or
    fault cannot take the notebook's GPU context; with ``reference_cubin``, a timed run also times
    the reference solution (``runner``). ``source`` (and ``reference_source``): the CUDA the cubins were
    compiled from. The answer is stored with the notebook's run, so its verdict can be rendered again
    without a GPU (``core.stored_run``)."""
    what = "under " + tool if tool else "timed" if time_it else "checked"
    key = f"kernel run: {kernel} {what} at sizes {list(sizes)}"
    inputs = measured_by(live, source, reference_source if reference_cubin is not None else None)
    return stored_run.capture(key, lambda: _run_child_now(live, kernel, sizes, cubin, time_limit_s, tool, time_it, launch,
                                                          reference_cubin, reference_launch), inputs)


def _run_child_now(live, kernel: str, sizes, cubin: bytes, time_limit_s: float, tool: str | None, time_it: bool,
                   launch: dict, reference_cubin: bytes | None, reference_launch: dict | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path, reference_path = os.path.join(tmp, "kernel.cubin"), os.path.join(tmp, "reference.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        timed = time_it and tool is None
        if timed and reference_cubin is not None:
            with open(reference_path, "wb") as f:
                f.write(reference_cubin)
        spec = json.dumps({"cases": cases_address(live), "kernel": kernel, "sizes": list(sizes), "cubin": path,
                           "time_it": timed, "launch": launch, "no_pool": tool is not None,
                           "reference_cubin": reference_path if timed and reference_cubin is not None else None,
                           "reference_launch": reference_launch or {}})
        cmd = [sys.executable, "-m", "course_lib.exercises.kernel.runner", spec]
        if tool is not None:
            san = shutil.which("compute-sanitizer")
            if san is None:
                return {"sanitizer": "compute-sanitizer is not on PATH (it ships with the CUDA toolkit)"}
            # Host API errors are not the kernel's: the CUDA Python bindings probe driver entry points this
            # driver may lack (cuGetProcAddress), which memcheck would report against a clean kernel.
            cmd = [san, "--tool", tool, "--report-api-errors", "no", "--error-exitcode", "86", "--print-limit", "5"] + cmd
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        with tempfile.TemporaryFile(mode="w+") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
            out, stopped = _communicate(proc, time_limit_s * (1 if tool is None else 6))
            err.seek(0)
            stderr = err.read()
    if stopped == "hung" and REFERENCE in out:   # the learner's kernel finished; the reference ran out of time
        result = json.loads(next(ln for ln in reversed(out[:out.index(REFERENCE)]) if ln.startswith("{")))
        result["timing"]["reference_error"] = f"the reference solution did not finish in {time_limit_s:g} s"
        return result
    if stopped == "hung":
        return {"hung": time_limit_s}
    if stopped == "startup":
        return {"error": f"the checker's process did not start within {STARTUP_LIMIT_S} s"}
    result = {}
    for line in out:
        if line.startswith("{"):
            result = json.loads(line)
    result["returncode"] = proc.returncode
    if tool is not None:
        result["sanitizer_lines"] = [ln for ln in out + stderr.splitlines()
                                     if ln.startswith("=========") and ln.strip("= ")][:12]
    if not result.get("cases") and proc.returncode and "error" not in result:
        result["error"] = (stderr.strip().splitlines() or ["(no message)"])[-1]
    return result


def _live_lines(ex: KernelExercise, run: dict, time_limit_s: float) -> tuple[bool, list[str]]:
    if "hung" in run:
        return False, [f"Your kernel did not finish in {time_limit_s:g} s, so the checker stopped it (it ran in a "
                       "separate process: this notebook's GPU state is untouched). Look for a loop whose index "
                       "never reaches its bound, or a barrier not every thread reaches; then run the cell again."]
    if "sanitizer" in run:
        return False, [run["sanitizer"]]
    lines, ok = [], True
    for case in run.get("cases", []):
        size = case["size"] if isinstance(case["size"], str) else f"n = {case['size']:,}"
        if case.get("skipped"):
            lines.append(f"  {size}: {case['skipped']}")
        elif case["passed"]:
            lines.append(f"  {size}: correct")
        else:
            ok = False
            lines.append(f"  {size}: WRONG. {case['first_wrong']}")
    if run.get("error"):
        ok = False
        cause = ex.fault_hint or ("CUDA errors such as an illegal address come from reading or writing outside "
                                  "an array")
        lines.append(f"The launch failed: {run['error']}. {cause}; the checker's process ended, this notebook's "
                     "did not.")
    if "timing" in run:
        t = run["timing"]
        size = t["size"] if isinstance(t["size"], str) else f"n = {t['size']:,}"
        reference = (f", this exercise's reference solution {t['reference_us']:.1f} µs" if "reference_us" in t else "")
        lines.append(f"Timed at {size}: yours {t['yours_us']:.1f} µs, the course's {t['course_kernel']} "
                     f"{t['course_us']:.1f} µs for the same bytes{reference} (medians of {t['samples']}, CUDA events, "
                     "GPU held).")
        if "reference_error" in t:
            lines.append(f"(The reference solution could not be timed beside yours, {t['reference_error']}: "
                         "no speed bar this time.)")
        slow = slowdown(t)
        if ok and slow is not None and slow > ex.max_slowdown:
            ok = False
            lines.append(f"Right results, but not yet what this exercise asks: yours takes {slow:.2f}× the reference "
                         f"solution's time (a correct kernel passes at {ex.max_slowdown:g}× or less). {ex.slow_hint}")
    return ok, lines


def slowdown(timing: dict) -> float | None:
    """The learner's time over the reference solution's, each first divided by the course kernel's time in
    its own run (so that a drift of the GPU's clock between the two runs cancels); None where the
    reference was not timed."""
    if not timing.get("reference_us"):
        return None
    ratio = timing["yours_us"] / timing["reference_us"]
    if timing.get("reference_course_us"):
        ratio *= timing["reference_course_us"] / timing["course_us"]
    return ratio


COUNTERS_CLOSED = ("the GPU's performance counters are closed to this user (ERR_NVGPUCTRPERM; on your own machine, run "
                   "as root or set the driver option NVreg_RestrictProfilingToAdminUsers=0)")


def counted_values(ex: KernelExercise, cubin: bytes, launch: dict, time_limit_s: float, source: str = "") -> dict[str, float]:
    """Every counter the exercise's counts read, over one launch of the cubin's kernel at the timed size (one
    ncu run). ``CountersUnavailable`` where this machine cannot count; ``ProfilerUnavailable`` where the count failed.
    ``source``: the CUDA the cubin was compiled from; the counts are stored with the notebook's run."""
    return stored_run.capture(f"kernel count: {ex.kernel}", lambda: _counted_values_now(ex, cubin, launch, time_limit_s),
                              measured_by(ex.live, source), raises=(profiler.CountersUnavailable, profiler.ProfilerUnavailable))


def _counted_values_now(ex: KernelExercise, cubin: bytes, launch: dict, time_limit_s: float) -> dict[str, float]:
    metrics = list(dict.fromkeys(m for c in ex.counts for m in c.metrics))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        spec = json.dumps({"cases": cases_address(ex.live), "kernel": ex.kernel, "cubin": path, "profile": True,
                           "launch": launch})
        cmd = profiler.ncu_command(metrics, f"^{ex.kernel}$", 1)
        profiles = profiler.run_ncu(cmd + [sys.executable, "-m", "course_lib.exercises.kernel.runner", spec],
                                    timeout_s=int(60 + 6 * time_limit_s))
    values = {m: profiles[0].metrics.get(m) for m in metrics}
    for m, value in values.items():
        if not isinstance(value, float):
            raise profiler.ProfilerUnavailable(f"ncu reported {value!r} for {m}")
    return values


def traffic_lines(traffic: Traffic, measured_bytes: float) -> tuple[bool, list[str]]:
    """The byte count against the model: within ``max_ratio`` of it, or not yet what the exercise asks."""
    ratio = measured_bytes / traffic.model_bytes
    ok = ratio <= traffic.max_ratio
    name = traffic.metric.removesuffix(".sum")
    lines = [f"  {'✔' if ok else '✘'} Counted by Nsight Compute ({name}): {measured_bytes / 1e6:,.1f} MB "
             f"{traffic.counted}, {ratio:.2f}× the {traffic.model_bytes / 1e6:,.1f} MB {traffic.model}."]
    if not ok:
        lines.append(f"Right results, but not yet what this exercise asks: a kernel that does it moves at most "
                     f"{traffic.max_ratio:g}× those bytes.")
    return ok, lines


def sector_lines(use: SectorUse, asked_bytes: float, sectors: float) -> tuple[bool, list[str]]:
    """The share of each fetched sector the kernel's accesses used, against the coalescing bar."""
    fetched = 32.0 * sectors
    used = asked_bytes / fetched if fetched else 1.0
    ok = used >= use.min_used
    lines = [f"  {'✔' if ok else '✘'} Counted by Nsight Compute: the global {use.accesses} asked for "
             f"{asked_bytes / 1e6:,.1f} MB in {sectors:,.0f} sectors of 32 B ({fetched / 1e6:,.1f} MB), so they use "
             f"{100 * used:.1f}% of each sector they touch ({use.metrics[0].removesuffix('.sum')} over 32 × "
             f"{use.metrics[1].removesuffix('.sum')})."]
    if not ok:
        lines.append(f"Right results, but not yet what this exercise asks: {use.accesses} that are coalesced use at "
                     f"least {100 * use.min_used:g}% of each sector. Make the 32 lanes of a warp touch neighbouring "
                     "addresses in the same instruction.")
    return ok, lines


def wavefront_lines(bank: BankWavefronts, wavefronts: float, instructions: float) -> tuple[bool, list[str]]:
    """Shared-memory wavefronts per warp-wide shared instruction, against the conflict-free bar."""
    if not instructions:
        return False, [f"  ✘ Counted by Nsight Compute: no shared-memory {bank.accesses} at all "
                       f"({bank.metrics[1].removesuffix('.sum')} = 0): the exercise goes through a shared tile."]
    per = wavefronts / instructions
    ok = per <= bank.max_per_instruction
    lines = [f"  {'✔' if ok else '✘'} Counted by Nsight Compute: {instructions:,.0f} shared {bank.accesses} took "
             f"{wavefronts:,.0f} wavefronts, {per:.2f} per instruction ({bank.metrics[0].removesuffix('.sum')} over "
             f"{bank.metrics[1].removesuffix('.sum')}; 1 is conflict-free)."]
    if not ok:
        lines.append(f"Right results, but not yet what this exercise asks: lanes of a warp's shared {bank.accesses} "
                     f"fall in the same bank at different addresses, so each instruction is served in {per:.1f} passes "
                     f"on average. Conflict-free {bank.accesses} take at most {bank.max_per_instruction:g} per "
                     "instruction: put the 32 elements a warp touches at once in 32 different banks.")
    return ok, lines


def count_lines(count: Count, values: dict[str, float]) -> tuple[bool, list[str]]:
    if isinstance(count, Traffic):
        return traffic_lines(count, 32.0 * values[count.metric])
    if isinstance(count, BankWavefronts):
        return wavefront_lines(count, *(values[m] for m in count.metrics))
    return sector_lines(count, *(values[m] for m in count.metrics))


def _counts_verdict(ex: KernelExercise, cubin: bytes, launch: dict, time_limit_s: float,
                    source: str = "") -> tuple[bool | None, list[str]]:
    """(ok, lines): the exercise's counts of the learner's kernel. ok is None where this machine cannot count (the
    verdict then rests on the rest, the models included); a count that failed (ncu timed out, or the kernel
    failed under it) fails the check, saying why."""
    try:
        values = counted_values(ex, cubin, launch, time_limit_s, source)
    except profiler.CountersUnavailable as why:
        reason = COUNTERS_CLOSED if "ERR_NVGPUCTRPERM" in str(why) else str(why)
        return None, [f"(Not counted: {reason}. The results, the speed and the models above are all that judge it "
                      "here.)"]
    except profiler.ProfilerUnavailable as why:
        return False, [f"  ✘ The count failed: {why}. Run the cell again; a kernel that fails under Nsight "
                       "Compute's replay of it may read or write outside its arrays."]
    ok, lines = True, []
    for count in ex.counts:
        one_ok, more = count_lines(count, values)
        ok, lines = ok and one_ok, lines + more
    return ok, lines


def sanitizer_tools(listing: list[str] | None) -> tuple[str, ...]:
    """The compute-sanitizer tools a kernel's SASS calls for: memcheck always; racecheck where it touches shared
    memory; synccheck where it has a barrier or a warp sync (every tool where the SASS could not be read)."""
    if listing is None:
        return ("memcheck", "racecheck", "synccheck")
    ops = {mnemonic(i).split(".")[0] for i in listing}
    shared = ops & {"LDS", "STS", "ATOMS", "LDSM", "STSM", "LDGSTS", "UBLKCP", "UTMALDG", "UTMASTG", "SYNCS"}
    barriers = ops & {"BAR", "WARPSYNC", "SYNCS"}   # BSSY/BSYNC are the compiler's own reconvergence, not a barrier
    return ("memcheck",) + (("racecheck",) if shared else ()) + (("synccheck",) if barriers else ())


def _sanitizer_lines(tool: str, run: dict, time_limit_s: float, sizes_text: str, required: bool) -> tuple[bool, list[str]]:
    """compute-sanitizer's verdict on one more run of ``sizes_text`` (no timing). Where the sanitizer is not
    installed, a run that asked for it (``required``) fails; the default run says so and passes."""
    if "sanitizer" in run:
        return not required, [run["sanitizer"] + ("" if required else ": the memory and race checks were not run")]
    if "hung" in run:
        return False, [f"compute-sanitizer {tool} at {sizes_text}: did not finish in {6 * time_limit_s:g} s (it slows "
                       "kernels down many times), so the checker stopped it; the results above come from the run "
                       "without it"]
    clean = run["returncode"] == 0
    return clean, [f"  {'✔' if clean else '✘'} compute-sanitizer {tool} at {sizes_text}: "
                   + ("no errors." if clean else f"errors (exit status {run['returncode']}):"),
                   *([] if clean else [f"    {ln}" for ln in run.get("sanitizer_lines", [])])]


MODEL_NOTE = " [a model; the count below decides]"


def mark(finding) -> str:
    """✔ passed, ✘ failed, – not judged here (a tool missing, code the emulator cannot follow)."""
    return "–" if not finding.judged else "✔" if finding.ok else "✘"


def check(name: str, source: str, sanitize: bool | None = None, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
          live: bool | None = None) -> Verdict:
    """Compile, check and (live) run the learner's kernel for exercise ``name``; see the module doc.
    ``sanitize``: by default (None) a kernel that passed everything else runs once more under compute-sanitizer
    at the exercise's small sizes (memcheck, and racecheck and synccheck where its SASS has shared memory or
    barriers); True runs every size under them whatever the rest found; False leaves them out."""

    ex = exercise(name)
    if not source.strip():
        return Verdict("The cell is empty: write the kernel (the starter code is printed by "
                       f"kernel_exercises.starter({name!r})).", False)
    live = stored_run.runs_kernels() if live is None else live
    arch, too_old = exercise_arch(ex)
    live = live and too_old is None
    cubin, res, problems = compile_exercise(ex, source, arch)
    if problems:
        return Verdict("\n".join(problems), False)
    lines = [f"Compiled for {arch} ({cuda.nvrtc_version()}): {res.registers} registers/thread, "
             f"{res.static_smem_bytes} B static shared memory, "
             + ("no spills" if not res.spills else f"spills {res.spill_store_bytes} B stored / {res.spill_load_bytes} B loaded")
             + (f", a {res.stack_frame_bytes:,} B stack frame (local memory)." if res.stack_frame_bytes else ".")]
    listing = kernel_sass(cubin, ex.kernel)
    findings = ex.static_findings(source, compiled(cubin, res, ex.kernel, listing))
    if listing is None:
        lines.append("  (nvdisasm is not installed here: the checks that read the compiled SASS are not judged, marked –)")
    deferred = live and bool(ex.counts)   # live, a model's finding waits for the count it stands in for
    lines += [f"  {mark(f)} {f.text}" + (MODEL_NOTE if f.counted and deferred and f.judged else "") for f in findings]
    static_ok = all(f.ok for f in findings)
    judged_ok = all(f.ok for f in findings if not (f.counted and deferred))
    modelled_ok = all(f.ok for f in findings if f.counted)
    if too_old:
        lines.append(too_old)
        return Verdict("\n".join(lines), False)
    if not live:
        lines.append(f"Not run: {stored_run.why_kernels_not_run()}. Checked: it compiles and {'passes' if static_ok else 'fails'} "
                     f"the static checks above. Not checked: its results at {ex.sizes_text()} "
                     "against the reference, its speed, its memory accesses under compute-sanitizer"
                     + (", and what Nsight Compute counts of it" if ex.counts else "") + ". "
                     "Open this notebook on a CUDA GPU (see the README) to run it."
                     + ("" if static_ok else f" Stuck? print(kernel_exercises.hint({name!r}))"))
        return Verdict("\n".join(lines), static_ok)
    launch = ex.launch(source)
    if launch is None:
        lines.append("Not run: the checker cannot work out your launch (see the first ✘ above).")
        return Verdict("\n".join(lines), False)
    reference_cubin = None
    if judged_ok:   # only a kernel that is timed is held to the reference's speed
        reference_cubin, _, reference_problems = compile_exercise(ex, ex.solution, arch)
        if reference_problems:
            lines.append("(The reference solution did not compile here, so there is no speed bar this time: "
                         f"{reference_problems[0]})")
            reference_cubin = None
    run = run_child(ex.live, ex.kernel, ex.sizes, cubin, time_limit_s, None, time_it=judged_ok, launch=launch,
                    reference_cubin=reference_cubin, reference_launch=ex.launch(ex.solution),
                    source=source, reference_source=ex.solution)
    ok, more = _live_lines(ex, run, time_limit_s)
    lines += more
    correct = bool(run.get("cases")) and all(c["passed"] for c in run["cases"]) and not run.get("error")
    if correct and judged_ok and ex.counts:
        counted_ok, more = _counts_verdict(ex, cubin, launch, time_limit_s, source)
        ok, lines = ok and (modelled_ok if counted_ok is None else counted_ok), lines + more
    verdict = judged_ok and ok
    if sanitize or (sanitize is None and verdict):
        sizes = ex.sizes if sanitize else ex.sanitize_sizes
        text = ex.sizes_text(sizes)
        for tool in sanitizer_tools(listing):
            run = run_child(ex.live, ex.kernel, sizes, cubin, time_limit_s, tool, False, launch, source=source)
            clean, more = _sanitizer_lines(tool, run, time_limit_s, text, required=bool(sanitize))
            verdict, lines = verdict and clean, lines + more
            if "sanitizer" in run:   # not installed: one message is enough
                break
    lines.append("Correct." if verdict else "Not yet: fix what is marked above and run the cell again. "
                 f"Stuck? print(kernel_exercises.hint({name!r}))")
    return Verdict("\n".join(lines), verdict)


def resources(name: str, source: str) -> cuda.KernelResources:
    """What ptxas gives ``source`` for the exercise's target (``exercise_arch``), with no verdict: the
    compile report alone. A source that does not compile raises with NVRTC's log."""
    ex = exercise(name)
    return ex.files.resources(source, exercise_arch(ex)[0])


def starter(name: str) -> str:
    return exercise(name).starter


def hint(name: str) -> str:
    return exercise(name).hint
