"""Notebook 08's experiments: what fusion saves, measured, and where it stops saving.

* ``fusion.chains``: k elementwise ops on a tensor several times the L2, as k course kernels, as one
  course kernel generated from the op list (``chain_source``) and compiled by NVRTC, as PyTorch
  eager and as ``torch.compile``; the copy kernel in the same run is the bandwidth they are held to.
* ``fusion.epilogue``: bias + GELU (+ residual) inside the course's bf16 GEMM (``TC_EPILOGUE``)
  against the plain GEMM and a separate pass, and against cuBLAS with PyTorch's epilogue.
* ``fusion.reductions``: softmax and RMSNorm rows, one pass (the row held in registers) against two
  kernels (statistics, then a second read), PyTorch and ``torch.compile``; at 16k and 32k also the
  row split over two blocks, prefetched (RMSNorm) and held half in shared memory; and rows too long
  for the registers, where the one-pass kernel spills.
* ``fusion.attention``: the N x N score matrix that naive attention materializes, against
  ``scaled_dot_product_attention``.

Each experiment's plans are ``Plan`` values: the label its cases are recorded under, and fields for what
it runs (whose code, fused or not, which ``gemm_bf16.Variant``, which ``RowPlan``). A recorded case's
plan is found by its label in the experiment's table (``EPILOGUE_PLANS``, ``REDUCTION_PLANS``,
``chain_plans(k)``).
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from course_lib.core import cuda
from course_lib.core.hardware import detect, gpu_spec
from course_lib.core.timing import benchmark_interleaved
from course_lib.launch import gemm_bf16, hopper_gemm
from course_lib.launch.elementwise import geometry as elementwise_launch
from course_lib.launch.fusion import (
    CHAIN_SHAPES,
    DEFAULT_SHAPE,
    FAMILY,
    OP_SHAPE,
    SPLIT_MIN_CC,
    STAGED_MIN_CC,
    ChainShape,
    PointwiseOp,
    RowPlan,
    affine_op,
    chain_source,
    compiled_chain,
    half_shared_launch,
    half_shared_one_per_sm_launch,
    half_shared_plans,
    one_pass_family,
    one_pass_row_vecs,
    prefetch_launch,
    reread_family,
    reread_launch,
    row_threads,
    row_vecs_default,
    run_epilogue_pass,
    run_fused,
    run_gemm,
    run_rmsnorm,
    run_softmax,
    run_unfused,
    split_threads,
)
from course_lib.launch.gemm_bf16 import Variant, bf16_geometry, require_bf16_mma, run_bf16
from course_lib.launch.operands import (
    bf16_bits_to_float32,
    bf16_tolerance_rel,
    random_operand,
    to_bf16_bits,
    torch_view,
)
from course_lib.measure import conditions, profiler
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import (
    beside_reference,
    beside_reference_figure,
    check_close,
    experiment,
    launch_record,
    require_passed,
)
from course_lib.measure.profiler import kernels_launched, short_kernel_name
from course_lib.measure.target import Target
from course_lib.models import fusion, occupancy

FP32_BYTES = 4


class Source(enum.Enum):
    """Whose code a plan runs."""

    COPY = "the course's copy kernel, the bandwidth the others are held to"
    COURSE = "course kernels"
    LIBRARY = "PyTorch (cuBLAS, cuDNN, Inductor)"
    PART = "a course kernel that is one piece of another plan, timed alone"


@dataclass(frozen=True)
class Plan:
    """One plan of an experiment. ``label`` is the text of its case names in the records
    (``data/recorded``), so it never changes; the other fields say what the plan runs."""

    label: str
    source: Source
    fused: bool = False               # the whole computation in one kernel
    gemm: Variant | None = None       # the course GEMM variant it launches
    rows: RowPlan | None = None       # the course row kernels' plan

    @property
    def course(self) -> bool:
        return self.source is Source.COURSE

    @property
    def staged_stores(self) -> bool:
        return self.gemm is not None and self.gemm.staged_stores


def by_label(*plans: Plan) -> dict[str, Plan]:
    """A plan table: each plan by its label, in order (what a recorded case's ``plan`` looks up)."""
    return {p.label: p for p in plans}


COPY = Plan("copy (course copy_vec4)", Source.COPY)
TORCH_COMPILE = Plan("torch.compile (Inductor)", Source.LIBRARY, fused=True)


# --------------------------------------------------------------------------- generated elementwise chains


def torch_chain(ops: list[PointwiseOp]):
    """The chain as a learner writes it in PyTorch: y = y * a + b for every step."""
    coeffs = [ab for op in ops for ab in op.coefficients]

    def chain(y):
        for a, b in coeffs:
            y = y * a + b
        return y
    return chain


def _compiled(fn, *example_args, dynamic: bool | None = False):
    """``torch.compile(fn)`` after one successful call on ``example_args`` (compiling is lazy: a
    missing Triton or a failed compile shows at the first call), or None and the reason.
    ``dynamic=None`` is torch.compile's default: recompile for dynamic shapes when a shape changes."""
    import torch

    try:
        torch._dynamo.reset()
        compiled = torch.compile(fn, dynamic=dynamic)
        compiled(*example_args)
        return compiled, None
    except Exception as exc:  # noqa: BLE001  (any failure to compile is a finding to record)
        return None, f"torch.compile failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"


CHAIN_FUSED = Plan("course, one fused kernel", Source.COURSE, fused=True)
CHAIN_EAGER = Plan("PyTorch eager", Source.LIBRARY)


def chain_unfused(k: int) -> Plan:
    """The chain as k course kernels, one launch an op."""
    return Plan(f"course, {k} kernels", Source.COURSE)


def chain_plans(k: int) -> dict[str, Plan]:
    """``fusion.chains``'s plans at chain length k, by label."""
    return by_label(COPY, CHAIN_FUSED, chain_unfused(k), CHAIN_EAGER, TORCH_COMPILE)


def library_indices(plans) -> list[int]:
    """Where PyTorch's plans sit among ``plans``: the references the harness checks by a second protocol."""
    return [i for i, plan in enumerate(plans) if plan.source is Source.LIBRARY]


def launched_by(plans: dict) -> dict:
    """Each plan's kernels (memsets left out), listed by the PyTorch profiler after the timing, not
    before: a profiler session left behind could slow the timed calls' launches."""
    return {plan: [k for k in kernels_launched(fn) if not k.startswith("Memset")] for plan, fn in plans.items()}


def _kernel_summary(names: list[str]) -> dict:
    return {"count": len(names), "distinct": sorted(set(names))}


DRAM_METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum"]


def profile_chain(k: int, fmas: int, elements: int, shape_kernel: str = DEFAULT_SHAPE.kernel) -> None:
    """The unfused chain then the fused one, each launched once: what ncu profiles for ``fusion.chains``."""
    import cupy

    fam = compiled_chain([affine_op(i, fmas) for i in range(k)])
    x = cupy.random.default_rng(3).random(elements, dtype=cupy.float32)
    out, scratch = cupy.empty_like(x), (cupy.empty_like(x), cupy.empty_like(x))
    run_unfused(fam, k, x, out, scratch)
    run_fused(fam, x, out, next(s for s in CHAIN_SHAPES if s.kernel == shape_kernel))
    cupy.cuda.Device().synchronize()


def profile_shapes(k: int, fmas: int, elements: int) -> None:
    """The fused chain in every shape, each launched once: what ncu profiles for the shape table."""
    import cupy

    fam = compiled_chain([affine_op(i, fmas) for i in range(k)])
    x = cupy.random.default_rng(3).random(elements, dtype=cupy.float32)
    out = cupy.empty_like(x)
    for shape in CHAIN_SHAPES:
        run_fused(fam, x, out, shape)
    cupy.cuda.Device().synchronize()


# Where each shape's time goes: the share of cycles a scheduler issues, the FMA pipe's share, the
# warps resident, and DRAM throughput.
SHAPE_METRICS = ["smsp__issue_active.avg.pct_of_peak_sustained_active",
                 "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
                 "sm__warps_active.avg.pct_of_peak_sustained_active",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                 "smsp__inst_executed.sum"]
SHAPE_KERNELS = r"^fused_chain_\w+$"


def _attach_shape_profile(case: Case, k: int, fmas: int, elements: int) -> None:
    """ncu's issue, FMA-pipe, occupancy and DRAM figures for every shape at one chain length."""
    try:
        profiles = profiler.ncu_metrics(Target(profile_shapes, (k, fmas, elements)), SHAPE_METRICS, SHAPE_KERNELS)
        if [p.function for p in profiles] != [s.kernel for s in CHAIN_SHAPES]:
            raise profiler.ProfilerUnavailable(f"ncu profiled {[p.function for p in profiles]}, "
                                               f"expected {[s.kernel for s in CHAIN_SHAPES]}")
    except profiler.ProfilerUnavailable as exc:
        case.extra["shape_ncu_unavailable"] = str(exc)
        return
    case.extra["shape_ncu"] = {s.label: p.metrics for s, p in zip(CHAIN_SHAPES, profiles)}
    case.extra["shape_ncu_command"] = profiler.command_line(SHAPE_METRICS, SHAPE_KERNELS)


def pick_shape(fam, x, out, samples: int = 20) -> tuple[ChainShape, dict[str, float]]:
    """Time the fused chain in every shape, in turn, and keep the fastest (as Inductor autotunes its
    block size); the pick is timed again with the other plans, so its figure is not the minimum of
    five draws. Returns the shape and each shape's median µs."""
    times = benchmark_interleaved([lambda s=s: run_fused(fam, x, out, s) for s in CHAIN_SHAPES], samples)
    medians = {s.label: t.median_s * 1e6 for s, t in zip(CHAIN_SHAPES, times)}
    return min(CHAIN_SHAPES, key=lambda s: medians[s.label]), medians


def _attach_dram(unfused: Case, fused: Case, k: int, fmas: int, elements: int, shape: ChainShape) -> None:
    """ncu's DRAM bytes, summed over each plan's launches, beside the ledger's prediction."""

    target = Target(profile_chain, (k, fmas, elements, shape.kernel))
    expected = [f"op_{i}" for i in range(1, k + 1)] + [shape.kernel]
    try:
        profiles = profiler.ncu_metrics(target, DRAM_METRICS, r"^(op_\d+|fused_chain\w*)$")
        if [p.function for p in profiles] != expected:
            raise profiler.ProfilerUnavailable(f"ncu profiled {[p.function for p in profiles]}, expected {expected}")
    except profiler.ProfilerUnavailable as exc:
        unfused.extra["ncu_unavailable"] = fused.extra["ncu_unavailable"] = str(exc)
        return
    for case, launches in ((unfused, profiles[:k]), (fused, profiles[k:])):
        case.extra["ncu"] = {m: sum(p.metrics[m] for p in launches) for m in DRAM_METRICS}
        case.extra["ncu_launches"] = len(launches)
        case.extra["ncu_command"] = profiler.command_line(DRAM_METRICS, r"^(op_\d+|fused_chain\w*)$")
        case.extra["ncu_version"] = profiler.ncu_version()


@experiment("fusion.chains",
            "k elementwise ops: k course kernels, one generated fused kernel, PyTorch eager and torch.compile, "
            "beside the copy kernel in the same run.",
            record_runs=3, elements=1 << 26, ks=[1, 2, 4, 8, 12, 16, 24, 32], compiled_ks=[1, 2, 4, 8, 16, 32], fmas_per_op=4,
            samples=20, profiled_k=8, shapes_profiled_k=16)
def chains(elements: int, ks: list[int], compiled_ks: list[int], fmas_per_op: int, samples: int,
           profiled_k: int, shapes_profiled_k: int) -> list[Case]:
    import cupy
    import torch

    x = cupy.random.default_rng(1).random(elements, dtype=cupy.float32) * 2 - 1
    tx = torch.as_tensor(x, device="cuda")
    out, scratch = cupy.empty_like(x), (cupy.empty_like(x), cupy.empty_like(x))
    copy_fn = cuda.kernel("elementwise", "copy_vec4")
    copy_grid, copy_block = elementwise_launch("copy_vec4", elements)
    tensor_bytes = FP32_BYTES * elements
    cases = []
    for k in ks:
        ops = [affine_op(i, fmas_per_op) for i in range(k)]
        fam = compiled_chain(ops)
        ref = x.astype(cupy.float64)
        for op in ops:
            ref = op.apply(ref)
        eager = torch_chain(ops)
        compiled, why_not = _compiled(eager, tx) if k in compiled_ks else (None, None)
        unfused = chain_unfused(k)
        for shape in CHAIN_SHAPES:   # every shape right before any is timed
            out.fill(np.nan)
            run_fused(fam, x, out, shape)
            check = check_close(out, ref, "float64 chain", 1e-4)
            if not check["passed"]:
                raise AssertionError(f"k={k}: the fused chain in the shape {shape.label} differs from the "
                                     f"float64 chain (max abs err {check['max_abs_err']:.3g})")
        shape, shape_us = pick_shape(fam, x, out)
        plans = {COPY: lambda: copy_fn(copy_grid, copy_block, (out, x, np.int64(elements))),
                 CHAIN_FUSED: lambda: run_fused(fam, x, out, shape),
                 unfused: lambda: run_unfused(fam, k, x, out, scratch),
                 CHAIN_EAGER: lambda: eager(tx)}
        if compiled is not None:
            plans[TORCH_COMPILE] = lambda: compiled(tx)
        checks = {}
        for plan, fn in plans.items():
            out.fill(np.nan)
            got = fn()
            got = out if got is None else cupy.asarray(got)
            want = x if plan is COPY else ref
            checks[plan] = check_close(got, want, "float64 chain" if want is ref else "source array", 1e-4)
        times = benchmark_interleaved(list(plans.values()), samples, references=library_indices(plans))
        kernels = launched_by(plans)
        flop = elements * sum(op.flop_per_element for op in ops)
        by_plan = {}
        for (plan, _), t in zip(plans.items(), times):
            launched = kernels[plan]   # memsets already left out (launched_by)
            is_copy = plan is COPY
            kernel_shape = shape if plan.fused else OP_SHAPE
            res = (cuda.resources("elementwise", "copy_vec4") if is_copy
                   else fam.resources[kernel_shape.kernel if plan.fused else "op_1"] if plan.course else None)
            grid, block = (copy_grid, copy_block) if is_copy else kernel_shape.launch(elements)
            extra = {"kernels": _kernel_summary(launched), "ops": k, "fmas_per_op": fmas_per_op}
            if plan is CHAIN_FUSED:
                extra |= {"shape": shape.label, "shapes_us": shape_us,
                          "shapes_registers": {s.label: fam.resources[s.kernel].registers for s in CHAIN_SHAPES}}
            case = Case(f"k={k}: {plan.label}", {"k": k, "plan": plan.label},
                        "elementwise.copy_vec4" if is_copy else plan.label, t,
                        0.0 if is_copy else flop, 2.0 * tensor_bytes * len(launched), checks[plan],
                        launch_record(grid, block, res) if res else None, extra=extra)
            by_plan[plan.label] = require_passed(case)
            cases.append(case)
        if why_not:
            cases[-1].extra["torch_compile_unavailable"] = why_not
        if k == profiled_k:
            _attach_dram(by_plan[unfused.label], by_plan[CHAIN_FUSED.label], k, fmas_per_op, elements, shape)
        if k == shapes_profiled_k:
            _attach_shape_profile(by_plan[CHAIN_FUSED.label], k, fmas_per_op, elements)
    fused_source = chain_source([affine_op(i, fmas_per_op) for i in range(2)], (DEFAULT_SHAPE,))
    cases[0].extra["example_source_k2"] = fused_source
    return cases


# --------------------------------------------------------------------------- the GEMM epilogue

def _fused_gemm(label: str, variant: Variant) -> Plan:
    return Plan(label, Source.COURSE, fused=True, gemm=variant)


PLAIN_GEMM = Plan("course GEMM (plain)", Source.COURSE, gemm=gemm_bf16.PLAIN)
BIAS_ONLY = _fused_gemm("course GEMM, fused bias only (no GELU)", gemm_bf16.BIAS_ONLY)
GELU_FUSED = _fused_gemm("course GEMM, fused bias + GELU", gemm_bf16.BIAS_GELU)
RESIDUAL_FUSED = _fused_gemm("course GEMM, fused bias + GELU + residual", gemm_bf16.BIAS_GELU_RESIDUAL)
TANHF_FUSED = _fused_gemm("course GEMM, fused bias + GELU + residual, libm tanhf", gemm_bf16.BIAS_GELU_RESIDUAL_TANHF)
GEMM_THEN_PASS = Plan("course GEMM + separate epilogue pass", Source.COURSE, gemm=gemm_bf16.PLAIN)
PASS_ALONE = Plan("separate epilogue pass alone", Source.PART)
CUBLAS = Plan("cuBLAS GEMM (torch.mm)", Source.LIBRARY)
CUBLAS_EAGER = Plan("cuBLAS + PyTorch eager epilogue", Source.LIBRARY)
# Three of them again with C sent out through shared memory in 16-byte stores (TC_STAGE_C, sm_90+).
PLAIN_STAGED = Plan("course GEMM (plain), 16-byte stores", Source.COURSE, gemm=gemm_bf16.PLAIN_STAGED)
GELU_STAGED = _fused_gemm("course GEMM, fused bias + GELU, 16-byte stores", gemm_bf16.BIAS_GELU_STAGED)
RESIDUAL_STAGED = _fused_gemm("course GEMM, fused bias + GELU + residual, 16-byte stores",
                              gemm_bf16.BIAS_GELU_RESIDUAL_STAGED)
EPILOGUE_PLANS = by_label(PLAIN_GEMM, BIAS_ONLY, GELU_FUSED, RESIDUAL_FUSED, TANHF_FUSED, GEMM_THEN_PASS, PASS_ALONE,
                          CUBLAS, CUBLAS_EAGER, TORCH_COMPILE, PLAIN_STAGED, GELU_STAGED, RESIDUAL_STAGED)
EPILOGUE_PROFILED = (PLAIN_GEMM, BIAS_ONLY, GELU_FUSED, RESIDUAL_FUSED, TANHF_FUSED, PLAIN_STAGED, RESIDUAL_STAGED)
# What the tanhf variant's extra time is: instructions to issue, or the waits of their dependent chains.
EPILOGUE_STALLS = {"a fixed latency (wait)": "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
                   "MUFU/shared (short scoreboard)":
                       "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
                   "a busy pipe (math throttle)":
                       "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio"}
EPILOGUE_METRICS = ["gpu__time_duration.sum", "sm__inst_executed.sum",
                    "smsp__issue_active.avg.pct_of_peak_sustained_active",
                    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                    "dram__bytes_read.sum", "dram__bytes_write.sum", *EPILOGUE_STALLS.values()]


def _epilogue_inputs(m: int, n: int, k: int):
    """The experiment's operands, bias and residual (raw bf16), the same for the timed and the profiled runs."""

    a, b = to_bf16_bits(random_operand((m, k), 21)), to_bf16_bits(random_operand((k, n), 22))
    return a, b, to_bf16_bits(random_operand((n,), 23)), to_bf16_bits(random_operand((m, n), 24))


def profile_epilogue(m: int, n: int, k: int, staged: bool = True) -> None:
    """The plain GEMM, then bias only, bias + GELU and bias + GELU + residual fused, then the plain
    GEMM and the residual epilogue with 16-byte stores, each launched once (``EPILOGUE_PROFILED``'s
    order): what ncu profiles for ``fusion.epilogue``."""
    import cupy

    a, b, bias, res = _epilogue_inputs(m, n, k)
    c = cupy.empty((m, n), dtype=cupy.uint16)
    for plan in EPILOGUE_PROFILED:
        if staged or not plan.staged_stores:
            run_gemm(plan.gemm, a, b, c, bias, res)
    cupy.cuda.Device().synchronize()


def _epilogue_reference(ta, tb, tbias, tres):
    import torch

    z = torch.nn.functional.gelu(ta.double() @ tb.double() + tbias.double(), approximate="tanh")
    return z + tres.double() if tres is not None else z


@experiment("fusion.epilogue",
            "Bias + GELU (+ residual) fused into the course's bf16 GEMM, against the plain GEMM, a separate "
            "pass, cuBLAS with PyTorch's epilogue, and torch.compile.",
            shapes=[[4096, 4096, 4096], [4096, 4096, 1024], [4096, 4096, 256]], samples=20)
def epilogue(shapes: list[list[int]], samples: int) -> list[Case]:
    import cupy
    import torch

    cc = detect().compute_capability
    require_bf16_mma(cc)
    cases = []
    for m, n, k in shapes:
        a, b, bias, res = _epilogue_inputs(m, n, k)
        c, out = cupy.empty((m, n), dtype=cupy.uint16), cupy.empty((m, n), dtype=cupy.uint16)
        ta, tb, tbias, tres = (torch_view(v) for v in (a, b, bias, res))
        ref_gelu, ref_full = _epilogue_reference(ta, tb, tbias, None), _epilogue_reference(ta, tb, tbias, tres)
        ref_mm = ta.double() @ tb.double()

        def torch_epilogue(x, y, bb, r):
            return torch.nn.functional.gelu(x @ y + bb, approximate="tanh") + r

        compiled, why_not = _compiled(torch_epilogue, ta, tb, tbias, tres)

        def fused(plan: Plan, ref):
            return lambda: run_gemm(plan.gemm, a, b, c, bias, res), c, ref

        plans = {
            PLAIN_GEMM: fused(PLAIN_GEMM, ref_mm),
            BIAS_ONLY: fused(BIAS_ONLY, ref_mm + tbias.double()),
            GELU_FUSED: fused(GELU_FUSED, ref_gelu),
            RESIDUAL_FUSED: fused(RESIDUAL_FUSED, ref_full),
            TANHF_FUSED: fused(TANHF_FUSED, ref_full),
            GEMM_THEN_PASS: (lambda: (run_bf16(a, b, c), run_epilogue_pass(out, c, bias, res)), out, ref_full),
            PASS_ALONE: (lambda: run_epilogue_pass(out, c, bias, res), out, None),
            CUBLAS: (lambda: torch.mm(ta, tb), None, ref_mm),
            CUBLAS_EAGER: (lambda: torch_epilogue(ta, tb, tbias, tres), None, ref_full),
        }
        if compiled is not None:
            plans[TORCH_COMPILE] = (lambda: compiled(ta, tb, tbias, tres), None, ref_full)
        if float(cc) >= STAGED_MIN_CC:
            plans |= {PLAIN_STAGED: fused(PLAIN_STAGED, ref_mm), GELU_STAGED: fused(GELU_STAGED, ref_gelu),
                      RESIDUAL_STAGED: fused(RESIDUAL_STAGED, ref_full)}
        checks = {}
        run_bf16(a, b, c)   # the pass alone reads a real GEMM output
        for plan, (fn, buf, ref) in plans.items():
            if buf is not None:
                buf.fill(0xFFFF)   # NaN bits: an unwritten output fails the check
            got = fn()
            if plan is PASS_ALONE:
                z = torch.nn.functional.gelu(torch_view(c).double() + tbias.double(), approximate="tanh") + tres.double()
                checks[plan] = check_close(bf16_bits_to_float32(out), cupy.asarray(z),
                                           "float64 epilogue of the same bf16 GEMM output", bf16_tolerance_rel())
            else:
                got = bf16_bits_to_float32(buf) if buf is not None else cupy.asarray(got.float())
                checks[plan] = check_close(got, cupy.asarray(ref), "float64 GEMM and epilogue of the same bf16 inputs",
                                           bf16_tolerance_rel())
        times = benchmark_interleaved([fn for fn, _, _ in plans.values()], samples,
                                      references=library_indices(plans))
        kernels = launched_by({plan: fn for plan, (fn, _, _) in plans.items()})
        flop = 2.0 * m * n * k
        grid, block, smem = bf16_geometry(m, n)
        for (plan, _), t in zip(plans.items(), times):
            launch = None
            if plan.gemm is not None:
                launch = launch_record(grid, block, plan.gemm.family().resources[gemm_bf16.KERNEL], smem)
            cases.append(require_passed(Case(
                f"{m}x{n}x{k}: {plan.label}", {"shape": [m, n, k], "plan": plan.label}, plan.label, t,
                0.0 if plan is PASS_ALONE else flop,
                2.0 * (m * k + k * n + m * n), checks[plan], launch,
                extra={"kernels": _kernel_summary(kernels[plan]),
                       **({"torch_compile_unavailable": why_not} if why_not and plan is CUBLAS_EAGER else {})})))
        if [m, n, k] == shapes[0]:
            staged = float(cc) >= STAGED_MIN_CC
            profiled = [c for p in EPILOGUE_PROFILED for c in cases
                        if c.params == {"shape": [m, n, k], "plan": p.label}]
            profiler.attach_profiles(profiled, Target(profile_epilogue, (m, n, k, staged)),
                                     EPILOGUE_METRICS, "^bf16_gemm_mma$", ["bf16_gemm_mma"] * len(profiled))
    return cases


# --------------------------------------------------------------------------- the epilogue on the Hopper GEMM

# Rung 7 of notebook 10 (sm_90a) with notebook 08's epilogue fused (HG_EPILOGUE), against the same rung
# plain and cuBLAS with PyTorch's epilogue, eager and compiled. B is N×K here (torch.nn.Linear's weight).
HOPPER_PLAIN = Plan("Hopper rung 7 (plain)", Source.COURSE)
HOPPER_FUSED = {name: Plan(f"Hopper rung 7, fused {name}", Source.COURSE, fused=True)
                for name in hopper_gemm.FUSED_EPILOGUES}
HOPPER_CUBLAS = Plan("cuBLAS GEMM (torch.mm, B as N×K)", Source.LIBRARY)
HOPPER_CUBLAS_EAGER = Plan("cuBLAS + PyTorch eager epilogue (B as N×K)", Source.LIBRARY)
HOPPER_COMPILE = Plan("torch.compile (Inductor), B as N×K", Source.LIBRARY, fused=True)
HOPPER_EPILOGUE_PLANS = by_label(HOPPER_PLAIN, *HOPPER_FUSED.values(), HOPPER_CUBLAS, HOPPER_CUBLAS_EAGER,
                                 HOPPER_COMPILE)
HOPPER_PROFILED = (HOPPER_PLAIN, *HOPPER_FUSED.values())


def _hopper_epilogue_inputs(m: int, n: int, k: int):
    a, b, _, _ = hopper_gemm.operands(m, n, k, 31)
    return (a, b, *hopper_gemm.epilogue_operands(m, n, 33))


def profile_hopper_epilogue(m: int, n: int, k: int) -> None:
    """Rung 7 plain, then with each fused epilogue, each launched once (``HOPPER_PROFILED``'s order):
    what ncu profiles for ``fusion.hopper_epilogue``."""
    import cupy

    a, b, bias, res = _hopper_epilogue_inputs(m, n, k)
    c = hopper_gemm.nan_output(m, n)
    hopper_gemm.run(7, a, b, c)
    for defines in hopper_gemm.FUSED_EPILOGUES.values():
        hopper_gemm.run(7, a, b, c, defines, bias_bits=bias, residual_bits=res)
    cupy.cuda.Device().synchronize()


@experiment("fusion.hopper_epilogue",
            "Bias + GELU (+ residual) fused into notebook 10's fastest Hopper GEMM (rung 7), against the same "
            "GEMM plain, cuBLAS alone, and cuBLAS with PyTorch's epilogue, eager and torch.compile'd.",
            record_runs=2, shapes=[[4096, 4096, 4096], [8192, 8192, 8192], [4096, 4096, 1024]], samples=20)
def hopper_epilogue(shapes: list[list[int]], samples: int) -> list[Case]:
    import cupy
    import torch

    hopper_gemm.require_hopper(detect().compute_capability)
    cases = []
    for m, n, k in shapes:
        a, b, bias, res = _hopper_epilogue_inputs(m, n, k)
        c = hopper_gemm.nan_output(m, n)
        ta, tb, tbias, tres = (torch_view(v) for v in (a, b, bias, res))
        product = ta.double() @ tb.double().t()
        activated = torch.nn.functional.gelu(product + tbias.double(), approximate="tanh")

        def torch_epilogue(x, w, bb, r):
            return torch.nn.functional.gelu(x @ w.t() + bb, approximate="tanh") + r

        compiled, why_not = _compiled(torch_epilogue, ta, tb, tbias, tres)
        plans = {HOPPER_PLAIN: (lambda: hopper_gemm.run(7, a, b, c), c, product)}
        for name, defines in hopper_gemm.FUSED_EPILOGUES.items():
            plans[HOPPER_FUSED[name]] = (
                lambda d=defines: hopper_gemm.run(7, a, b, c, d, bias_bits=bias, residual_bits=res), c,
                activated + tres.double() if hopper_gemm.epilogue_of(defines) == 2 else activated)
        plans[HOPPER_CUBLAS] = (lambda: torch.mm(ta, tb.t()), None, product)
        plans[HOPPER_CUBLAS_EAGER] = (lambda: torch_epilogue(ta, tb, tbias, tres), None, activated + tres.double())
        if compiled is not None:
            plans[HOPPER_COMPILE] = (lambda: compiled(ta, tb, tbias, tres), None, activated + tres.double())
        checks = {}
        for plan, (fn, buf, ref) in plans.items():
            if buf is not None:
                buf.fill(0xFFFF)   # NaN bits: an unwritten output fails the check
            got = fn()
            got = bf16_bits_to_float32(buf) if buf is not None else cupy.asarray(got.float())
            # Eager PyTorch rounds to bf16 four times (the product, + bias, GELU, + residual), the others once.
            rounding = 2.0 if plan is HOPPER_CUBLAS_EAGER else 1.0
            checks[plan] = check_close(got, cupy.asarray(ref), "float64 GEMM and epilogue of the same bf16 inputs",
                                       rounding * bf16_tolerance_rel())
        times = benchmark_interleaved([fn for fn, _, _ in plans.values()], samples,
                                      references=library_indices(plans))
        kernels = launched_by({plan: fn for plan, (fn, _, _) in plans.items()})
        for (plan, _), t in zip(plans.items(), times):
            launch = None
            if plan.course:
                defines = hopper_gemm.FUSED_EPILOGUES.get(plan.label.removeprefix("Hopper rung 7, fused "))
                launch = hopper_gemm.launch_entry(hopper_gemm.rung(7), m, n, defines)
            cases.append(require_passed(Case(
                f"{m}x{n}x{k}: {plan.label}", {"shape": [m, n, k], "plan": plan.label}, plan.label, t,
                2.0 * m * n * k, 2.0 * (m * k + k * n + m * n), checks[plan], launch,
                extra={"kernels": _kernel_summary(kernels[plan]),
                       **({"torch_compile_unavailable": why_not} if why_not and plan is HOPPER_CUBLAS_EAGER else {})})))
        if [m, n, k] == shapes[0]:
            profiled = [c for p in HOPPER_PROFILED for c in cases if c.params == {"shape": [m, n, k], "plan": p.label}]
            profiler.attach_profiles(profiled, Target(profile_hopper_epilogue, (m, n, k)), HOPPER_EPILOGUE_METRICS,
                                     "^hgemm_7_tma_store$", ["hgemm_7_tma_store"] * len(profiled))
    return cases


HOPPER_EPILOGUE_METRICS = ["gpu__time_duration.sum", "sm__inst_executed.sum",
                           "smsp__issue_active.avg.pct_of_peak_sustained_active",
                           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                           "dram__bytes_read.sum", "dram__bytes_write.sum",
                           "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
                           "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
                           "smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
                           "smsp__inst_executed_pipe_xu.sum"]


# --------------------------------------------------------------------------- row reductions


SPILL_METRICS = DRAM_METRICS + ["l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
                                "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
                                "sm__warps_active.avg.pct_of_peak_sustained_active"]


ROW_PLANS = {rp: Plan(f"course {rp.value}", Source.COURSE, fused=rp is not RowPlan.TWO_PASS, rows=rp) for rp in RowPlan}
ROW_EAGER = {"softmax": Plan("PyTorch eager (torch.softmax)", Source.LIBRARY),
             "rmsnorm": Plan("PyTorch eager (F.rms_norm)", Source.LIBRARY)}
REDUCTION_PLANS = by_label(COPY, *ROW_PLANS.values(), *ROW_EAGER.values(), TORCH_COMPILE)


def profile_rows(op: str, n: int, elements: int) -> None:
    """One one-pass launch and one two-pass pair at row length n: what ncu profiles for the long rows."""
    import cupy

    x = cupy.random.default_rng(4).standard_normal((elements // n, n), dtype=cupy.float32)
    out, stats = cupy.empty_like(x), cupy.empty(2 * x.shape[0], dtype=cupy.float32)
    w = cupy.ones(n, dtype=cupy.float32)
    for plan in (RowPlan.ONE_PASS, RowPlan.TWO_PASS):
        if op == "softmax":
            run_softmax(out, x, plan, stats)
        else:
            run_rmsnorm(out, x, w, plan, stats)
    cupy.cuda.Device().synchronize()


def _attach_row_profile(one: Case, two: Case, op: str, n: int, elements: int) -> None:
    names = {"softmax": ["softmax_one_pass", "softmax_row_stats", "softmax_normalize"],
             "rmsnorm": ["rmsnorm_one_pass", "rmsnorm_row_stats", "rmsnorm_normalize"]}[op]
    regex = "^(" + "|".join(names) + ")$"
    target = Target(profile_rows, (op, n, elements))
    try:
        profiles = profiler.ncu_metrics(target, SPILL_METRICS, regex)
        if [p.function for p in profiles] != names:
            raise profiler.ProfilerUnavailable(f"ncu profiled {[p.function for p in profiles]}, expected {names}")
    except profiler.ProfilerUnavailable as exc:
        one.extra["ncu_unavailable"] = two.extra["ncu_unavailable"] = str(exc)
        return
    for case, launches in ((one, profiles[:1]), (two, profiles[1:])):
        case.extra["ncu"] = {m: sum(p.metrics[m] for p in launches) for m in SPILL_METRICS[:4]}
        case.extra["ncu"]["sm__warps_active.avg.pct_of_peak_sustained_active"] = \
            launches[-1].metrics["sm__warps_active.avg.pct_of_peak_sustained_active"]
        case.extra["ncu_command"] = profiler.command_line(SPILL_METRICS, regex)
        case.extra["ncu_version"] = profiler.ncu_version()


@experiment("fusion.reductions",
            "Softmax and RMSNorm rows: one pass (row in registers) against two kernels, PyTorch and torch.compile, "
            "beside the copy kernel; and rows too long for the registers.",
            record_runs=3, elements=1 << 26, row_lengths=[1024, 2048, 4096, 8192, 16384, 32768], spill_row_lengths=[65536, 131072],
            split_row_lengths=[16384, 32768], samples=20)
def reductions(elements: int, row_lengths: list[int], spill_row_lengths: list[int], split_row_lengths: list[int],
               samples: int) -> list[Case]:
    import cupy
    import torch

    copy_fn = cuda.kernel("elementwise", "copy_vec4")
    splits = split_row_lengths if float(detect().compute_capability) >= SPLIT_MIN_CC else []
    budget = occupancy.budget_from_device(detect())

    def half_shared(op: str, n: int) -> tuple[RowPlan, ...]:
        res = cuda.compile_family(FAMILY).resources[f"{op}_half_shared"]
        return half_shared_plans(budget, res.registers, res.static_smem_bytes, n, split_row_lengths)

    cases = []
    for op in ("softmax", "rmsnorm"):
        eager = ((lambda t: torch.softmax(t, dim=-1)) if op == "softmax"
                 else (lambda t, w: torch.nn.functional.rms_norm(t, (t.shape[-1],), w, eps=1e-6)))
        for n in row_lengths + spill_row_lengths:
            rows = elements // n
            tx = torch.randn(rows, n, device="cuda", dtype=torch.float32, generator=torch.Generator("cuda").manual_seed(n))
            tw = torch.rand(n, device="cuda", generator=torch.Generator("cuda").manual_seed(1)) + 0.5
            x, w = cupy.asarray(tx), cupy.asarray(tw)
            out, stats = cupy.empty_like(x), cupy.empty(2 * rows, dtype=cupy.float32)
            if op == "softmax":
                ref = torch.softmax(tx.double(), dim=-1)
                course = {p: (lambda p=p: run_softmax(out, x, p, stats))
                          for p in (RowPlan.ONE_PASS, RowPlan.TWO_PASS) + (RowPlan.SPLIT,) * (n in splits)
                          + half_shared("softmax", n)}
                args = (tx,)
            else:
                ref = tx.double() * torch.rsqrt(tx.double().pow(2).mean(-1, keepdim=True) + 1e-6) * tw.double()
                course = {p: (lambda p=p: run_rmsnorm(out, x, w, p, stats))
                          for p in (RowPlan.ONE_PASS, RowPlan.TWO_PASS) + (RowPlan.SPLIT, RowPlan.PREFETCH) * (n in splits)
                          + half_shared("rmsnorm", n) + (RowPlan.REREAD,) * (n in row_lengths)}
                args = (tx, tw)
            # Compiled afresh for each row length with static shapes, as a model that runs one shape gets it
            # (compiled once and called at new lengths, Inductor recompiles for dynamic shapes: slower kernels).
            compiled, why_not = _compiled(eager, *args, dynamic=False)
            lib = {ROW_EAGER[op]: lambda: eager(*args)}
            if compiled is not None:
                lib[TORCH_COMPILE] = lambda: compiled(*args)
            cgrid, cblock = elementwise_launch("copy_vec4", rows * n)
            plans = {COPY: lambda: copy_fn(cgrid, cblock, (out, x, np.int64(rows * n))),
                     **{ROW_PLANS[p]: fn for p, fn in course.items()}, **lib}
            checks = {}
            for plan, fn in plans.items():
                out.fill(np.nan)
                got = fn()
                got = out if got is None else cupy.asarray(got)
                want = x if plan is COPY else cupy.asarray(ref)
                checks[plan] = check_close(got, want, "source array" if plan is COPY else f"float64 {op}", 1e-4)
            times = benchmark_interleaved(list(plans.values()), samples, references=library_indices(plans))
            kernels = launched_by(plans)
            by_plan = {}
            for (plan, _), t in zip(plans.items(), times):
                launch, extra = None, {"kernels": _kernel_summary(kernels[plan]), "rows": rows, "n": n,
                                       "spill_case": n in spill_row_lengths}
                rp = plan.rows
                if rp is RowPlan.PREFETCH:
                    grid, block, smem = prefetch_launch(rows, n)
                    launch = launch_record(grid, block, cuda.compile_family(FAMILY).resources["rmsnorm_prefetch"], smem)
                elif rp in (RowPlan.HALF_SHARED, RowPlan.HALF_SHARED_ONE_PER_SM):
                    block, smem = (half_shared_launch(n) if rp is RowPlan.HALF_SHARED
                                   else half_shared_one_per_sm_launch(op, n))
                    launch = launch_record((rows,), block, cuda.compile_family(FAMILY).resources[f"{op}_half_shared"],
                                           smem)
                elif rp is RowPlan.REREAD:
                    vecs, threads = reread_launch(n)
                    launch = launch_record((rows,), (threads,), reread_family(vecs).resources["rmsnorm_reread"])
                    extra["reread_vecs"] = vecs
                    extra["ledger_bytes"] = 2 * FP32_BYTES * rows * n   # the second read from the caches
                elif rp is RowPlan.SPLIT:
                    launch = launch_record((2 * rows,), (split_threads(n),),
                                           cuda.compile_family(FAMILY).resources[f"{op}_split"])
                elif rp is not None:
                    one = rp is RowPlan.ONE_PASS
                    kname = f"{op}_one_pass" if one else f"{op}_row_stats"
                    fam = one_pass_family(n) if one else cuda.compile_family(FAMILY)
                    threads = row_threads(n, one_pass_row_vecs(n)) if one else row_threads(n)
                    launch = launch_record((rows,), (threads,), fam.resources[kname])
                    extra["row_vecs"] = one_pass_row_vecs(n) if one else None
                    extra["ledger_bytes"] = (2 if one else 3) * FP32_BYTES * rows * n
                if rp in (RowPlan.PREFETCH, RowPlan.HALF_SHARED, RowPlan.HALF_SHARED_ONE_PER_SM,
                          RowPlan.SPLIT):   # one pass, another layout
                    extra["row_vecs"] = row_vecs_default()
                    extra["ledger_bytes"] = 2 * FP32_BYTES * rows * n
                if why_not and plan is ROW_EAGER[op]:
                    extra["torch_compile_unavailable"] = why_not
                case = Case(f"{op} n={n}: {plan.label}", {"op": op, "n": n, "plan": plan.label}, plan.label,
                            t, 0.0, 2.0 * FP32_BYTES * rows * n, checks[plan], launch, extra=extra)
                by_plan[rp] = require_passed(case)
                cases.append(case)
            if n in spill_row_lengths:
                _attach_row_profile(by_plan[RowPlan.ONE_PASS], by_plan[RowPlan.TWO_PASS], op, n, elements)
    return cases


# --------------------------------------------------------------------------- attention's score matrix

NAIVE_ATTENTION = Plan("naive (matmul, softmax, matmul)", Source.LIBRARY)
SDPA = Plan("scaled_dot_product_attention", Source.LIBRARY, fused=True)


@experiment("fusion.attention",
            "Naive attention (scores materialized) against scaled_dot_product_attention, bf16, for several "
            "sequence lengths, with the kernels each launched.",
            seq_lens=[512, 1024, 2048, 4096, 8192], batch=4, heads=16, head_dim=64, samples=20)
def attention(seq_lens: list[int], batch: int, heads: int, head_dim: int, samples: int) -> list[Case]:
    import cupy
    import torch
    import torch.nn.functional as F

    cases = []
    for s in seq_lens:
        gen = torch.Generator("cuda").manual_seed(s)
        q, k, v = (torch.randn(batch, heads, s, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(3))
        scale = 1.0 / math.sqrt(head_dim)

        def naive():
            return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v  # noqa: F821 (see the del)

        plans = {NAIVE_ATTENTION: naive,
                 SDPA: lambda: F.scaled_dot_product_attention(q, k, v)}  # noqa: F821 (see the del)
        ref = cupy.asarray(F.scaled_dot_product_attention(q.float(), k.float(), v.float()))
        checks = {p: check_close(cupy.asarray(fn().float()), ref, "fp32 scaled_dot_product_attention", 2.0 ** -5)
                  for p, fn in plans.items()}
        times = benchmark_interleaved(list(plans.values()), samples, references=library_indices(plans))
        kernels = launched_by(plans)
        flop = 4.0 * batch * heads * s * s * head_dim
        for (plan, _), t in zip(plans.items(), times):
            predicted = fusion.attention_bytes(s, head_dim, batch * heads, 2, fused=plan.fused)
            cases.append(require_passed(Case(
                f"N={s}: {plan.label}", {"seq_len": s, "plan": plan.label}, plan.label, t, flop, predicted,
                checks[plan], extra={"kernels": {"count": len(kernels[plan]), "names": kernels[plan]}})))
        del q, k, v   # after every call of the closures over them (ruff's F821 cannot tell)
        torch.cuda.empty_cache()
    return cases


# --------------------------------------------------------------------------- smoke launches (sanitizer)


# --------------------------------------------------------------------------- analysis for the notebook

def _by(result, *keys) -> dict:
    return {tuple(c.params[k] for k in keys): c for c in result.cases}


def _chain_rows(result) -> list[dict]:
    """Per chain length: each plan's time, the fused kernel against copy, and its speedup over k launches."""
    cases = _by(result, "k", "plan")
    rows = []
    for k in sorted({c.params["k"] for c in result.cases}):
        copy, fused, split = (cases[(k, p.label)] for p in (COPY, CHAIN_FUSED, chain_unfused(k)))
        eager, comp = cases[(k, CHAIN_EAGER.label)], cases.get((k, TORCH_COMPILE.label))
        rows.append({"k": k, "FLOP/byte (fused, analytic)": fused.flop / fused.bytes,
                     "copy µs": copy.median_s * 1e6, "fused µs": fused.median_s * 1e6,
                     "fused, % of copy bandwidth": 100 * copy.median_s / fused.median_s,
                     "k kernels µs": split.median_s * 1e6, "speedup over k kernels": split.median_s / fused.median_s,
                     "target 0.8·k": 0.8 * k,
                     "eager µs (kernels)": f"{eager.median_s * 1e6:,.0f} ({eager.extra['kernels']['count']})",
                     "torch.compile µs (kernels)": (f"{comp.median_s * 1e6:,.0f} ({comp.extra['kernels']['count']})"
                                                    if comp else "not run")})
    return rows


@beside_reference
def chain_rows(result) -> list[dict]:
    return _chain_rows(result)


@beside_reference
def shape_rows(result) -> list[dict]:
    """Per chain length: the fused chain's median µs in every shape (the pass that picked one), the
    shape picked, and torch.compile's µs in the timed run beside it."""
    cases = _by(result, "k", "plan")
    rows = []
    for k in sorted({c.params["k"] for c in result.cases}):
        fused, comp = cases[(k, CHAIN_FUSED.label)], cases.get((k, TORCH_COMPILE.label))
        if "shapes_us" not in fused.extra:
            continue
        rows.append({"k": k, **{f"{label} µs": us for label, us in fused.extra["shapes_us"].items()},
                     "picked": fused.extra["shape"], "picked, timed with the others µs": fused.median_s * 1e6,
                     "torch.compile µs": comp.median_s * 1e6 if comp else None})
    return rows


@beside_reference
def shape_profile_rows(result) -> list[dict]:
    """ncu's figures for each shape at the profiled chain length (``shapes_profiled_k``)."""
    fused = next((c for c in result.cases if "shape_ncu" in c.extra), None)
    if fused is None:
        return []
    names = {"smsp__issue_active.avg.pct_of_peak_sustained_active": "issue slots used %",
             "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": "FMA pipe busy %",
             "sm__warps_active.avg.pct_of_peak_sustained_active": "warps resident % of max",
             "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM % of peak",
             "smsp__inst_executed.sum": "warp instructions"}
    regs = fused.extra["shapes_registers"]
    return [{"k": fused.params["k"], "shape": label, "registers": regs[label],
             **{names[m]: v for m, v in metrics.items()}} for label, metrics in fused.extra["shape_ncu"].items()]


def copy_bandwidth(result) -> float:
    """The copy kernel's median bandwidth over the whole run, bytes/s."""
    copies = [c for c in result.cases if c.params["plan"] == COPY.label]
    return float(np.median([c.bandwidth_bytes_per_s for c in copies]))


def compute_bound_k(result, slowdown: float = 1.2) -> dict:
    """Where the fused chain stops being memory-bound: measured, the first k whose fused kernel takes
    ``slowdown`` times the copy of the same bytes or more; analytic, the k at which k·c/(2b) reaches
    the ridge, from the datasheet and from this run's copy bandwidth."""

    rows = _chain_rows(result)
    # the first k from which every longer chain is slower than the copy by the threshold: one noisy
    # point below the ridge does not count as the turn
    slow = [r["fused µs"] >= slowdown * r["copy µs"] for r in rows]
    measured = next((r["k"] for i, r in enumerate(rows) if all(slow[i:])), None)
    any_case = next(c for c in result.cases if c.params["plan"] == CHAIN_FUSED.label)
    flop_per_op = any_case.flop / any_case.params["k"] / (any_case.bytes / 2 / FP32_BYTES)
    g = gpu_spec(result.gpu)
    measured_ridge = g.peak("fp32") / copy_bandwidth(result)
    return {"measured k": measured, "slowdown threshold": slowdown,
            "analytic k (datasheet fp32 peak and HBM bandwidth)": fusion.compute_bound_chain_length(
                flop_per_op, FP32_BYTES, g.name),
            "analytic k (datasheet peak, measured copy bandwidth)": math.ceil(measured_ridge * 2 * FP32_BYTES / flop_per_op),
            "FLOP per op per element": flop_per_op}


@beside_reference_figure
def chain_figure(result):
    """Left: time against chain length for every plan. Right: the fused chain on the roofline,
    with the copy bandwidth measured in the same run and the datasheet fp32 peak."""
    import matplotlib.pyplot as plt

    cases = _by(result, "k", "plan")
    ks = sorted({c.params["k"] for c in result.cases})
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    series = [(COPY.label, "copy of the same bytes"), (CHAIN_FUSED.label, "course, fused"),
              (None, "course, k kernels"), (CHAIN_EAGER.label, "PyTorch eager"), (TORCH_COMPILE.label, "torch.compile")]
    for plan, label in series:
        pts = [(k, cases[(k, plan or chain_unfused(k).label)].median_s * 1e6) for k in ks
               if (k, plan or chain_unfused(k).label) in cases]
        left.plot(*zip(*pts), "o-", ms=4, label=label)
    left.set(xscale="log", yscale="log", xlabel="ops in the chain, k", ylabel="median µs",
             title="k elementwise ops on 256 MiB")
    left.set_xticks(ks, [str(k) for k in ks])
    left.legend(fontsize=8)
    g = gpu_spec(result.gpu)
    bw, peak = copy_bandwidth(result), g.peak("fp32")
    xs = np.logspace(-1, 2.3, 200)
    right.plot(xs, np.minimum(peak, xs * bw) / 1e12, "k-", lw=1,
               label=f"roof: measured copy {bw / 1e12:.2f} TB/s, datasheet fp32 {peak / 1e12:.0f} TFLOP/s")
    fused = [cases[(k, CHAIN_FUSED.label)] for k in ks]
    right.plot([c.flop / c.bytes for c in fused], [c.flop_per_s / 1e12 for c in fused], "o", color="C1",
               label="course fused chain (measured)")
    for c in fused:
        right.annotate(f"k={c.params['k']}", (c.flop / c.bytes, c.flop_per_s / 1e12), fontsize=7,
                       textcoords="offset points", xytext=(4, -8))
    right.axvline(peak / bw, color="grey", ls=":", lw=1)
    right.set(xscale="log", yscale="log", xlabel="FLOP per HBM byte", ylabel="TFLOP/s",
              title="the fused chain on the roofline")
    right.legend(fontsize=7, loc="lower right")
    fig.suptitle(result.provenance, fontsize=9)
    fig.tight_layout()
    return fig


@beside_reference
def dram_rows(result) -> list[dict]:
    """ncu's DRAM bytes for the profiled chain against the ledger's prediction for each plan."""
    rows = []
    for c in result.cases:
        if "ncu" not in c.extra:
            continue
        k = c.params["k"]
        chain = fusion.elementwise_chain(k, result.params["elements"], dtype="fp32")
        plans = fusion.ledger(chain, result.gpu)
        predicted = (plans.fused if chain_plans(k)[c.params["plan"]].fused else plans.unfused).bytes_moved
        measured = c.extra["ncu"]["dram__bytes_read.sum"] + c.extra["ncu"]["dram__bytes_write.sum"]
        rows.append({"plan": c.params["plan"], "launches (ncu)": c.extra["ncu_launches"],
                     "ledger MB (analytic)": predicted / 1e6, "DRAM read MB (ncu)": c.extra["ncu"]["dram__bytes_read.sum"] / 1e6,
                     "DRAM write MB (ncu)": c.extra["ncu"]["dram__bytes_write.sum"] / 1e6,
                     "ncu / ledger": measured / predicted})
    return rows


@beside_reference
def kernel_rows(result, **where) -> list[dict]:
    """Which kernels each plan launched (the PyTorch profiler's list), for the cases matching ``where``."""
    rows = []
    for c in result.cases:
        if all(c.params.get(k) == v for k, v in where.items()):
            names = c.extra["kernels"].get("distinct") or c.extra["kernels"].get("names")
            rows.append({"plan": c.params["plan"], "kernels launched": c.extra["kernels"]["count"],
                         "which": ", ".join(sorted({short_kernel_name(n) for n in names}))})
    return rows


def _cases_by_shape(result):
    """(shape, {plan label: case}) for each GEMM shape of an epilogue experiment, in its order."""
    for shape in result.params["shapes"]:
        yield shape, {c.params["plan"]: c for c in result.cases if c.params["shape"] == shape}


def _profile_rows(result, plain_plan: Plan, plans, columns) -> list[dict]:
    """ncu's rows for ``plans`` at an epilogue experiment's first shape: each one's time and instructions
    beside ``plain_plan``'s, then ``columns(metrics)``; plans recorded without a profile say why, and
    plans not recorded on this GPU (the 16-byte stores below sm_90) are left out."""
    _, cs = next(_cases_by_shape(result))
    plain = cs[plain_plan.label].extra.get("ncu")
    rows = []
    for label in (p.label for p in plans if p.label in cs):
        nc = cs[label].extra.get("ncu")
        if not nc or not plain:
            rows.append({"plan": label, "ncu": cs[label].extra.get("ncu_unavailable", "not profiled")})
            continue
        rows.append({"plan": label, "µs (ncu)": nc["gpu__time_duration.sum"] / 1e3,
                     "warp instructions (M)": nc["sm__inst_executed.sum"] / 1e6,
                     "more than plain (M)": (nc["sm__inst_executed.sum"] - plain["sm__inst_executed.sum"]) / 1e6,
                     **columns(nc)})
    return rows


@beside_reference
def epilogue_rows(result) -> list[dict]:
    """Every epilogue plan at each shape, against the plain course GEMM and cuBLAS of the same run."""
    rows = []
    for shape, cs in _cases_by_shape(result):
        plain, lib = cs[PLAIN_GEMM.label], cs[CUBLAS.label]
        plain_staged = cs.get(PLAIN_STAGED.label)
        for label, c in cs.items():
            plan = EPILOGUE_PLANS[label]
            same_stores = plain_staged if plan.staged_stores else plain
            rows.append({"M x N x K": "x".join(map(str, shape)), "plan": label, "median µs": c.median_s * 1e6,
                         "over the plain course GEMM": (f"{100 * (c.median_s / plain.median_s - 1):+.1f}%"
                                                        if plan.course else ""),
                         "over plain, same stores": (f"{100 * (c.median_s / same_stores.median_s - 1):+.1f}%"
                                                     if plan.course and plan.fused else ""),
                         "over cuBLAS alone": (f"{100 * (c.median_s / lib.median_s - 1):+.1f}%"
                                               if plan.source is Source.LIBRARY else ""),
                         "kernels": c.extra["kernels"]["count"]})
    return rows


@beside_reference
def epilogue_profile_rows(result) -> list[dict]:
    """ncu on the course GEMM's epilogue plans at the first shape: instructions executed, how busy the
    issue slots and tensor pipe were, and DRAM traffic, each beside the plain GEMM's."""
    return _profile_rows(result, PLAIN_GEMM, EPILOGUE_PROFILED, lambda nc: {
        "issue slots busy %": nc["smsp__issue_active.avg.pct_of_peak_sustained_active"],
        "tensor pipe busy %": nc["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"],
        "DRAM read MB": nc["dram__bytes_read.sum"] / 1e6, "DRAM write MB": nc["dram__bytes_write.sum"] / 1e6,
        **{f"stalled on {why} per issue": nc[m] for why, m in EPILOGUE_STALLS.items() if m in nc}})


@beside_reference
def hopper_epilogue_rows(result) -> list[dict]:
    """Each plan of ``fusion.hopper_epilogue`` at each shape: the course's against plain rung 7, the
    libraries' against cuBLAS alone, and every plan against cuBLAS + torch.compile's epilogue."""
    rows = []
    for shape, cs in _cases_by_shape(result):
        plain, lib = cs[HOPPER_PLAIN.label], cs[HOPPER_CUBLAS.label]
        compiled = cs.get(HOPPER_COMPILE.label)
        for label, c in cs.items():
            plan = HOPPER_EPILOGUE_PLANS[label]
            rows.append({"M x N x K": "x".join(map(str, shape)), "plan": label, "median µs": c.median_s * 1e6,
                         "over plain rung 7": f"{100 * (c.median_s / plain.median_s - 1):+.1f}%" if plan.course else "",
                         "over cuBLAS alone": (f"{100 * (c.median_s / lib.median_s - 1):+.1f}%"
                                               if plan.source is Source.LIBRARY else ""),
                         "time / cuBLAS + compile": (f"{c.median_s / compiled.median_s:.3f}"
                                                     if compiled is not None and plan.fused else ""),
                         "kernels": c.extra["kernels"]["count"]})
    return rows


HOPPER_WHOLE_EPILOGUE = HOPPER_FUSED["bias + GELU + residual"]


@beside_reference
def hopper_epilogue_compile_rows(result) -> list[dict]:
    """At each shape of each run: rung 7 with bias + GELU + residual fused (the residual brought in by the TMA) against
    cuBLAS followed by torch.compile's epilogue kernel. Both are timed by the harness's held calls; the
    library's second protocol (blocks of back-to-back calls) is set beside them with its verdict, so a
    ratio to a flagged reference is shown with the flag and with the other protocol's figure."""
    rows = []
    runs = result.runs()   # a record holds two runs: each is shown
    for i, run in enumerate(runs, 1):
        for shape, cs in _cases_by_shape(run):
            fused, compiled = cs[HOPPER_WHOLE_EPILOGUE.label], cs.get(HOPPER_COMPILE.label)
            if compiled is None:   # torch.compile was unavailable in that run: the full table says why
                continue
            protocols = conditions.protocol_cells(compiled)
            rows.append({"run": f"{i} of {len(runs)}", "M x N x K": "x".join(map(str, shape)),
                         "fused rung 7 µs": fused.median_s * 1e6,
                         "cuBLAS + torch.compile µs": protocols["held calls µs"],
                         "ratio": fused.median_s * 1e6 / protocols["held calls µs"],
                         "its back-to-back µs": protocols["back-to-back µs"],
                         "ratio to back-to-back": fused.median_s * 1e6 / protocols["back-to-back µs"],
                         "protocols": protocols["protocols"],
                         "power-limited": "yes" if fused.power_limited or compiled.power_limited else "no"})
    return rows


@beside_reference
def hopper_epilogue_profile_rows(result) -> list[dict]:
    """ncu on rung 7 plain and with each fused epilogue at the first shape, each launched once. The tensor
    pipe's busy time is its busy share of the SMs' active cycles times the kernel's time: what an epilogue
    adds there is work the MMAs do; what it adds to the kernel's time beyond it, time the MMAs wait."""
    return _profile_rows(result, HOPPER_PLAIN, HOPPER_PROFILED, lambda nc: {
        "MUFU (XU) instructions (M)": nc["smsp__inst_executed_pipe_xu.sum"] / 1e6,
        "tensor pipe busy %": nc["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"],
        "tensor pipe busy µs": (nc["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] / 100
                                * nc["gpu__time_duration.sum"] / 1e3),
        "issue slots busy %": nc["smsp__issue_active.avg.pct_of_peak_sustained_active"],
        "stalled on memory (long scoreboard) %": nc["smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct"],
        "DRAM read MB": nc["dram__bytes_read.sum"] / 1e6})


@beside_reference
def reduction_rows(result, op: str) -> list[dict]:
    """Per row length: each plan's bandwidth as a % of the copy measured beside it (the minimum bytes,
    one read and one write of the tensor, over the time). The rows too long for the registers are
    ``spill_rows``'s: 08 asks the learner to predict them before it shows them."""
    rows = []
    plans = list(dict.fromkeys(c.params["plan"] for c in result.cases
                               if c.params["op"] == op and c.params["plan"] != COPY.label))
    for n in result.params["row_lengths"]:
        cs = {c.params["plan"]: c for c in result.cases if c.params["op"] == op and c.params["n"] == n}
        copy = cs.pop(COPY.label)
        row = {"row length": n, "rows": copy.extra["rows"], "copy µs": copy.median_s * 1e6}
        for plan in plans:   # a plan not run at this length (the split: long rows only) shows a dash
            row[f"{plan}, % of copy"] = 100 * copy.median_s / cs[plan].median_s if plan in cs else "-"
        rows.append(row)
    return rows


@beside_reference
def spill_rows(result) -> list[dict]:
    """The long rows: the one-pass kernel's spills (compiler) and their traffic (ncu) beside two passes."""
    rows = []
    for c in result.cases:
        if not c.extra.get("spill_case") or not REDUCTION_PLANS[c.params["plan"]].course:
            continue
        nc = c.extra.get("ncu", {})
        rows.append({"op": c.params["op"], "row length": c.params["n"], "plan": c.params["plan"],
                     "median µs": c.median_s * 1e6, "registers": c.launch["registers"],
                     "spilled B per thread (ptxas)": c.launch["spill_store_bytes"],
                     "local-memory sectors (ncu)": (nc.get("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", 0)
                                                    + nc.get("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum", 0)) if nc else None,
                     "DRAM MB (ncu)": (nc["dram__bytes_read.sum"] + nc["dram__bytes_write.sum"]) / 1e6 if nc else None,
                     "ledger MB (analytic)": c.extra["ledger_bytes"] / 1e6})
    return rows


@beside_reference
def attention_rows(result) -> list[dict]:
    """Naive attention against the fused kernel: the ledger's bytes, measured time, and the kernels."""

    rows, hbm = [], gpu_spec(result.gpu).hbm_bandwidth_bytes_per_s
    for s in result.params["seq_lens"]:
        cs = {c.params["plan"]: c for c in result.cases if c.params["seq_len"] == s}
        naive, fused = cs[NAIVE_ATTENTION.label], cs[SDPA.label]
        rows.append({"N": s, "naive MB (ledger)": naive.bytes / 1e6, "fused MB (ledger)": fused.bytes / 1e6,
                     "naive bytes at datasheet HBM bandwidth µs (analytic)": naive.bytes / hbm * 1e6,
                     "naive µs": naive.median_s * 1e6,
                     "SDPA µs": fused.median_s * 1e6, "speedup": naive.median_s / fused.median_s,
                     "SDPA kernel": short_kernel_name(fused.extra["kernels"]["names"][0])})
    return rows
