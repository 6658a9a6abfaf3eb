"""Notebook 11's checks: the capstone's diagnosis and its lower bound. The fix itself is checked by
``%%cuda_exercise mystery_rms_norm`` (``kernel_exercises``)."""
from __future__ import annotations

from course_lib.core import stored_run
from course_lib.exercises.base import Verdict, _close, item_marks
from course_lib.exercises.kernel.cases import MYSTERY_SHAPES, MYSTERY_TIMED_SHAPE
from course_lib.exercises.kernel.catalog import MYSTERY_DEFECTS
from course_lib.exercises.kernel.checker import MODEL_NOTE
from course_lib.labs.failure_lab import evidence
from course_lib.models import memory, waves
from course_lib.models.failures import FAMILIES, FAMILY_LIST, failure, link

# Suspects that sound plausible for this kernel and are not its problem, with the evidence that clears them.
CLEARED = {
    "bank conflicts": "the kernel declares no shared memory (0 B in the compile report), so there are no banks to conflict",
    "register spills": "the compile report shows 0 B of spill stores",
    "warp divergence": "every lane of a warp runs the same loop the same number of times (cols does not vary per lane)",
    "tail wave": "a tail is a short last wave after full ones, and this launch runs in a single wave",
    "launch overhead": "at hundreds of microseconds per call, the few microseconds of a launch are not what is slow",
    "compute-bound": "four FLOPs per element (its square added to the sum, then two multiplies) against eight bytes: far left of the ridge, the FP32 units are idle",
}
SUSPECTS = tuple(sorted((*MYSTERY_DEFECTS, *CLEARED)))

# Where to look for a defect not found yet, without naming it.
_WHERE_TO_LOOK = {
    "too little parallelism": "the launch: how many blocks and threads, for how many SMs and the threads they can hold",
    "uncoalesced loads": "which addresses the 32 lanes of one warp read in the same instruction",
    "local memory": "the compile report's stack frame",
    "buffer overflow": "the widest row the kernel can hold, against the widest the checker runs",
    "edges": "what the last block does when rows is not a multiple of ROWS_PER_BLOCK",
}


def check_diagnosis(suspects) -> Verdict:
    """Name the capstone's defects: a set of names from ``SUSPECTS``."""
    if suspects is None:
        return Verdict("Not answered yet: give a set of names from SUSPECTS.", False)
    if isinstance(suspects, str):
        suspects = {suspects}
    canonical = {s.lower(): s for s in SUSPECTS}
    given = {" ".join(str(s).strip().lower().split()) for s in suspects}
    unknown = sorted(given - set(canonical))
    named = {canonical[g] for g in given if g in canonical}
    if unknown:
        return Verdict(f"Not suspects this check knows: {', '.join(map(repr, unknown))}. Use names from "
                       f"SUSPECTS: {', '.join(SUSPECTS)}.", False)
    found = [d for d in MYSTERY_DEFECTS if d in named]
    cleared = [s for s in sorted(named) if s in CLEARED]
    missing = [d for d in MYSTERY_DEFECTS if d not in named]
    if cleared:   # counts only: naming the innocent (or the guilty) among many suspects would give the answer
        return Verdict(f"{len(cleared)} of your {len(named)} suspects are innocent, and {len(missing)} of the "
                       f"{len(MYSTERY_DEFECTS)} defects are not among them. Keep only the suspects a number in "
                       "this notebook convicts.", False)
    lines = [f"{len(found)} of the {len(MYSTERY_DEFECTS)} defects found" + (f": {', '.join(found)}." if found else ".")]
    if missing:
        lines.append(f"{len(missing)} still hidden. Look at " + "; and at ".join(_WHERE_TO_LOOK[d] for d in missing) + ".")
    else:
        lines += ["The other suspects are innocent:"] + [f"  {name}: {why}." for name, why in CLEARED.items()]
    return Verdict("\n".join(lines), not missing)


# The mystery as reported (notebook 11's tables): 16,384 rows of 1,024 floats, ROWS_PER_BLOCK 256.
MYSTERY_ROWS, MYSTERY_COLS, MYSTERY_ROWS_PER_BLOCK = 16384, 1024, 256


def check_models(gpu, blocks, addresses) -> Verdict:
    """The capstone's models cell: the learner's launch (``blocks`` at 16,384 rows) and the 32 byte addresses
    of warp 0's first load (lane t at row t, c = 0, from the start of ``in``), each said right or wrong, then
    notebook 07's wave model and notebook 04's sector model applied to what the learner entered, not to the
    right answer."""
    if blocks is None or addresses is None:
        return Verdict("Not answered yet: give my_blocks (how many blocks the mystery launches for 16,384 rows) and "
                       "my_addresses (the 32 byte addresses warp 0's first load reads).", False)
    try:
        lanes = [int(a) for a in addresses]
        sched = waves.schedule(blocks=int(blocks), sm_count=gpu.sm_count, resident_blocks_per_sm=1)
        load = memory.sector_count(lanes, 4)
    except (TypeError, ValueError) as exc:
        return Verdict(f"The models cannot take that: {exc}", False)
    want_blocks = -(-MYSTERY_ROWS // MYSTERY_ROWS_PER_BLOCK)
    want = [4 * lane * MYSTERY_COLS for lane in range(32)]
    marks = [("the blocks", int(blocks) == want_blocks), ("the 32 addresses", lanes == want)]
    right = all(ok for _, ok in marks)
    idle = max(0, gpu.sm_count - sched.blocks)
    return Verdict(("Correct.\n" if right else "Not yet:\n")
                   + item_marks(marks)
                   + f"\nThe models on your numbers: {sched.blocks:,} blocks for {gpu.sm_count} SMs"
                   + (f", {idle} SMs with no block" if idle else f", {sched.waves} rounds of one block per SM")
                   + f"; one load: {load.n_sectors} sectors for {load.requested_bytes} useful bytes "
                   f"({100 * load.requested_bytes / (32 * load.n_sectors):.1f}% of the fetched bytes used).", right)


def mystery_lower_bound_s(result) -> float:
    """The HBM lower bound of the mystery at the recorded shape: its compulsory bytes (x read, out
    written, the weights read once) at the copy bandwidth measured in the same run."""
    mystery = result.cases[0]
    copy = next(c for c in result.cases if c.kernel == "elementwise.copy_vec4")
    return mystery.bytes / (copy.bytes / copy.median_s)


def check_lower_bound(result, seconds) -> Verdict:
    """The learner's lower bound for the mystery, in seconds, against ``mystery_lower_bound_s``."""
    if seconds is None:
        return Verdict("Not answered yet: replace None with your lower bound in seconds.", False)
    want = mystery_lower_bound_s(result)
    observed = result.cases[0].median_s
    if _close(seconds, want, 0.03):
        return Verdict(f"Correct: {want * 1e6:,.1f} µs. The mystery took {observed * 1e6:,.0f} µs, "
                       f"{observed / want:,.0f}× its bound: a residual of {(observed - want) * 1e6:,.0f} µs to explain.", True)
    if _close(seconds, want * 1e6, 0.03):
        return Verdict("That is the right number in microseconds; the check wants seconds.", False)
    return Verdict("Not quite: the bound is the bytes the kernel must move (x read once, out written once, the "
                   "weights once) divided by the copy kernel's bandwidth in the same run (its bytes ÷ its median).", False)


# Mistakes told as scenarios, in words the catalogue and its tables do not use: the learner has to
# recognise the family from what goes wrong, not look it up.
FAMILY_SCENARIOS = {
    "A kernel's author says it runs at 90% of the GPU's capability, because the profiler's timeline "
    "shows the GPU busy for 90% of the run.": "roofline and measurement",
    "A reduction kernel has block 0 spin until block 1,000 sets a flag in global memory; on a big "
    "input it sometimes never finishes.": "execution model",
    "Adding an 8 KiB lookup table to a kernel's shared memory takes it from five resident blocks per SM "
    "to four, and its author never re-derives that.": "resources",
    "A kernel timed with time.perf_counter() around its launch takes 8 µs, and the profiler says it "
    "runs for 2 ms.": "roofline and measurement",
    "Each thread reads one 4-byte field of a 64-byte record, the records packed one after another, and the "
    "kernel's author budgets its memory traffic at 4 bytes a thread.": "memory and layout",
    "A matrix multiply ran fastest with 256 × 256 blocks of output at 8,192 rows; given a 512 × 512 output, "
    "its author keeps that block shape: four blocks for a GPU with 132 SMs.": "tiling and fusion",
}


def check_families(answers) -> Verdict:
    """Exercise: the family of each scenario in ``FAMILY_SCENARIOS``. Says how many are right, never
    which scenario is wrong, so guessing one scenario at a time does not pay."""

    if not answers:
        return Verdict("Not answered yet: give a dict {scenario: family} with one of the families "
                       f"{', '.join(FAMILIES)} for each scenario.", False)
    if not isinstance(answers, dict):
        return Verdict("Answer with a dict {scenario: family}.", False)
    unknown = [a for a in answers.values() if not isinstance(a, str) or a.strip().lower() not in FAMILIES]
    if unknown:
        return Verdict(f"Not a family: {', '.join(map(repr, unknown))}. The families are {', '.join(FAMILIES)}.", False)
    missing = [s for s in FAMILY_SCENARIOS if s not in answers]
    if missing:
        return Verdict(f"Not answered yet: {len(missing)} of the {len(FAMILY_SCENARIOS)} scenarios have no family "
                       "(use the scenario strings as keys).", False)
    right = sum(answers[s].strip().lower() == f for s, f in FAMILY_SCENARIOS.items())
    if right == len(FAMILY_SCENARIOS):
        return Verdict("Correct: a busy timeline and a host clock are measurement mistakes, a block waiting on a "
                       "later block assumes an order the hardware does not promise, shared memory per block is a "
                       "resource that sets residency, the bytes a load moves are the memory's units, not the "
                       "fields a thread uses, and a block shape fitted to one size can leave most SMs idle at "
                       "another.", True)
    return Verdict(f"Not yet: {right} of {len(FAMILY_SCENARIOS)} are right. For each scenario, ask what the author "
                   "believes that is false: how the GPU runs blocks, what an SM can hold, how bytes move, how work "
                   "is tiled or fused, or what a number measures.", False)




def check_answer(number: int, family_guess: str) -> Verdict:
    """Quiz: name the family of failure ``number``."""
    f = failure(number)
    if not isinstance(family_guess, str):
        return Verdict(f"Not answered yet: name one of the families {FAMILY_LIST}.", False)
    guess = " ".join(family_guess.strip().lower().split())
    if guess not in FAMILIES:
        return Verdict(f"{family_guess!r} is not one of the families; answer with one of {FAMILY_LIST}.", False)
    if guess != f.family:
        return Verdict(f"Not {guess!r}. Read the mistake again: {f.mistake} "
                       f"Which of these does it belong to: {FAMILY_LIST}?", False)
    where = link(f)
    return Verdict(f"Correct: failure {f.number} is a {f.family} failure. {f.explanation}"
                   + (f" See {where}." if where else ""), True)


def choices(number: int) -> list[str]:
    """Three explanations of failure ``number``'s mistake: its own and its two misreadings (tempting
    wrong explanations of the same mistake, in the same words), in an order fixed per failure, so a quiz
    can ask which one is right and vocabulary alone does not tell."""
    import random

    f = failure(number)
    options = [f.explanation, *f.misreadings]
    random.Random(number).shuffle(options)
    return options


def check_choice(number: int, chosen: str | None) -> Verdict:
    """Quiz: which explanation of failure ``number``'s mistake is right? ``chosen`` is one of
    ``choices(number)``; a misreading is refused with a nudge that does not give the answer away."""
    f = failure(number)
    if chosen is None:
        return Verdict("Not answered yet: pick the explanation that fits the mistake.", False)
    if chosen not in choices(number):
        return Verdict("That is not one of the three explanations offered for this mistake; pick one of them.", False)
    if chosen != f.explanation:
        return Verdict("Not that one: it is a misreading of this mistake, tempting but wrong. Test each of its "
                       "claims against what the course measured or showed, and pick the explanation whose every "
                       "claim holds.", False)
    shown, where = evidence(f), link(f)
    return Verdict(f"Right. {f.explanation}" + (f" Measured: {shown}" if shown else " (Not measured in this course.)")
                   + (f" See {where}." if where else ""), True)


# --------------------------------------------------------------------------- the publish gate

# The five questions a performance claim answers, in order (operation, backend and kernel, mapping, state,
# evidence), then the evidence the last one needs.
GATES = (
    "1. operation: which operation, on which tensors",
    "2. kernel: which kernel ran, with what resources",
    "3. mapping: blocks, warps and lanes to the data (launch and sector models)",
    "4. state: registers, stack and spills",
    "5a. evidence: the label (measured now, on which GPU)",
    "5b. evidence: right against a float64 reference at every size",
    "5c. evidence: memory-safe under compute-sanitizer (memcheck; racecheck and synccheck where it shares memory)",
    "5d. evidence: timed with CUDA events, 20 or more samples, beside a reference kernel",
    "5e. evidence: the lower bound and the residual",
)


def _timed(verdict: str):
    """(shape rows, cols, yours µs, reference µs, samples) from the checker's timing line, or None."""
    import re

    m = re.search(r"Timed at (\d+)×(\d+): yours ([\d.]+) µs, the course's (\S+) ([\d.]+) µs .*?medians of (\d+), "
                  r"CUDA events", verdict)
    if not m:
        return None
    return int(m[1]), int(m[2]), float(m[3]), m[4], float(m[5]), int(m[6])


def _mapping_crosses(lines: list[str]) -> list[str]:
    """The verdict's failed static findings and counts. A model's finding the checker deferred to a count
    (``checker.MODEL_NOTE``) is the count's to decide, unless the counters could not be read."""
    counted = not any(ln.startswith("(Not counted") for ln in lines)
    return [ln.strip() for ln in lines if ln.strip().startswith("✘") and "compute-sanitizer" not in ln
            and not (counted and ln.endswith(MODEL_NOTE))]


def publish_gate(verdict, result) -> list[dict]:
    """The publish gate a claim about the capstone's fix must pass before it is stated as measured:
    one row per gate (``GATES``: the five questions in order, then the evidence), its status
    (passes, fails, or not measured) and the evidence for it. ``verdict`` is what
    ``kernel_exercises.check("mystery_rms_norm", source, sanitize=True)`` returned (the verdict's text); ``result`` is
    ``failures.mystery`` (its copy kernel gives the bandwidth for the bound)."""
    text = str(verdict)
    lines = text.splitlines()
    ran = not any(ln.startswith("Not run") for ln in lines) and stored_run.runs_kernels()
    unmeasured = "not measured"
    compiled = next((ln for ln in lines if ln.startswith("Compiled for")), None)
    crosses = _mapping_crosses(lines)
    sizes = [ln.strip() for ln in lines if ln.strip().endswith(": correct") or ": WRONG" in ln]
    wrong = [s for s in sizes if "WRONG" in s]
    sanitizer = [ln.strip() for ln in lines if "compute-sanitizer" in ln]
    timed = _timed(text)
    copy = next(c for c in result.cases if c.kernel == "elementwise.copy_vec4")
    rows, cols = MYSTERY_TIMED_SHAPE

    def row(gate, ok, evidence):
        status = unmeasured if ok is None else "passes" if ok else "fails"
        return {"gate": gate, "status": status, "evidence": evidence}

    out = [row(GATES[0], True, f"RMSNorm over rows, fp32 in and out, timed at {rows:,} × {cols:,}, checked at "
                               + ", ".join(f"{r}×{c}" for r, c in MYSTERY_SHAPES)),
           row(GATES[1], compiled is not None, compiled or "no compile report in the verdict"),
           row(GATES[2], not crosses if compiled else False,
               "every static check passes" if compiled and not crosses else "; ".join(crosses) or "not checked"),
           row(GATES[3], bool(compiled) and "no spills" in compiled and not any("local memory" in c for c in crosses),
               (compiled or "").split(": ", 1)[-1] or "not checked")]
    out.append(row(GATES[4], True if ran else None,
                   "measured now on this GPU (live mode)" if ran else
                   "replay: nothing was run here, so the claim stays unmeasured"))
    out.append(row(GATES[5], (not wrong and len(sizes) == len(MYSTERY_SHAPES)) if ran else None,
                   f"{len(sizes) - len(wrong)} of {len(MYSTERY_SHAPES)} sizes right" if ran else "not run"))
    memory_safe = any("memcheck" in s for s in sanitizer) and all(s.endswith("no errors.") for s in sanitizer)
    out.append(row(GATES[6], memory_safe if ran else None,
                   "; ".join(s.lstrip("✔✘ ") for s in sanitizer) if sanitizer else
                   "not run: the checker runs it once everything else passes"))
    out.append(row(GATES[7], (timed is not None and timed[5] >= 20) if ran else None,
                   f"median of {timed[5]} samples: {timed[2]:.1f} µs, beside {timed[3]} at {timed[4]:.1f} µs"
                   if timed else "no timing line (the kernel must be right first)"))
    bound_s = (2 * rows * cols + cols) * 4 / (copy.bytes / copy.median_s)
    m_rows, m_cols = result.cases[0].params.get("rows"), result.cases[0].params.get("cols")
    at = f" at {m_rows:,} × {m_cols:,}" if m_rows and m_cols else ""
    source = (f"{rows:,} × {cols:,}'s compulsory bytes (input, output, weights once) at the copy kernel's bandwidth "
              f"in {result.experiment}{at}, {result.provenance}: another run than your timing")
    if timed and ran:
        yours_s = timed[2] * 1e-6
        out.append(row(GATES[8], yours_s >= bound_s,
                       f"bound {bound_s * 1e6:.1f} µs ({source}); "
                       f"residual {(yours_s - bound_s) * 1e6:.1f} µs" + ("" if yours_s >= bound_s else
                                                                          ": below the bound, so the timing is wrong")))
    else:
        out.append(row(GATES[8], None, f"bound {bound_s * 1e6:.1f} µs ({source}); no measured time beside it, so "
                                       "no residual"))
    return out
