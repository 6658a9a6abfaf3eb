"""Notebook 13's experiments: attention written, predicted by ``models.attention`` and then measured.

* ``attention.ladder``: a prefill's attention in Llama 3 8B's heads (32 query heads on 8 KV heads), bf16, at
  d = 128 and 64, causal and not, sequences of 1k to 16k tokens, the batch chosen so that every case holds
  the same number of tokens (``tokens``: batch x heads fill the GPU at every length). Each rung of the
  course's CUDA ladder (``launch/attention.py``), the course's Triton kernel (``launch/attention_triton.py``,
  autotuned on its first call) and PyTorch's SDPA (with the backend it picked, named from the kernels it
  launched) run on the same operands, each checked against float64 before it is timed; the harness times
  them call by call in turn, SDPA also by the second protocol. SDPA runs grouped heads on its
  FlashAttention-2 backend only, so it is timed a second way too, on K and V expanded to every query head
  beforehand, where its other fused backends (cuDNN's) may take the call. TFLOP/s from the model's FLOPs (the visible
  pairs, exactly), and each plan's throughput as a share of SDPA's in the same run. Recorded three times.
* ``attention.ceilings``: at one length, the last CUDA rung, the Triton kernel and SDPA timed again beside
  the model's three floors (tensor cores, HBM, the MUFU's exponentials), with Nsight Compute's evidence:
  how busy the tensor pipe was, how many MUFU results the kernel asked for against the rate the datasheet
  allows, DRAM bytes against the compulsory bytes and L2 bytes against the tiled plan's re-reads.

How the check stays cheap: the float64 reference runs on a slice, the last ``CHECK_ROWS`` query rows of the
first sequence for the query heads of its first ``CHECK_KV_HEADS`` KV heads, over every key. Because the
causal mask is aligned to the bottom-right corner (``models.attention``), those rows passed alone with all
the keys see exactly the keys they see in the whole pass, so the slice's reference is the whole pass's,
row for row; and the last rows are the ones that see every key. Two KV heads catch a wrong head mapping.

The analytic tables the notebook shows before it measures (bytes of the two plans, the three ceilings, the
online softmax on one row) are here too, as is the Triton kernel's generated code.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from course_lib.core.hardware import detect, gpu_spec
from course_lib.core.timing import benchmark_interleaved
from course_lib.launch import attention as cuda_attention
from course_lib.launch import attention_triton
from course_lib.launch.operands import bf16_tolerance_rel
from course_lib.measure import conditions, profiler
from course_lib.measure.evidence import Case
from course_lib.measure.experiments import (beside_reference, beside_reference_figure, check_close, experiment,
                                            require_passed)
from course_lib.measure.target import Target
from course_lib.models import attention as attention_model
from course_lib.models.transformer import MODELS

MIB = 1 << 20
TRITON = "Triton (the course's kernel)"
SDPA = "PyTorch SDPA"
# SDPA runs grouped-query heads on its FlashAttention-2 backend only (PyTorch's documentation: GQA "currently
# works only for Flash_attention and math kernel"); with K and V expanded to one head per query head, every
# fused backend may take the call, cuDNN's included. Timed as a second reference, expanded beforehand.
SDPA_EXPANDED = "PyTorch SDPA, K and V expanded to every query head"
SDPA_PLANS = (SDPA, SDPA_EXPANDED)
CHECK_ROWS = 128
CHECK_KV_HEADS = 2
# Two bf16 ulps of the largest output: P is rounded to bf16 before P·V and O once more at the end, and
# the sums run in a different order from the reference's.
CHECK_RTOL = 2 * bf16_tolerance_rel()
# SDPA may pick any fused backend; its math backend (the score matrix materialized, in fp32) is left out:
# at 16k tokens it needs gigabytes a head and is no baseline for a fused kernel.
FUSED_SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


def rung_label(index: int, rung: str) -> str:
    """The case label of CUDA rung ``index`` (1-based) of the ladder."""
    return f"CUDA rung {index}: {rung}"


def plan_labels() -> list[str]:
    """Every plan of the ladder, in the order it is shown: the CUDA rungs, Triton, SDPA."""
    return [rung_label(i, r) for i, r in enumerate(cuda_attention.RUNGS, 1)] + [TRITON, SDPA, SDPA_EXPANDED]


def sdpa_backend(kernel_names: list[str]) -> str:
    """Which SDPA backend ran, from the names of the kernels one call launched (PyTorch's profiler)."""
    names = " ".join(kernel_names).lower()
    for marker, backend in (("cudnn", "cuDNN"), ("fmha", "memory-efficient (CUTLASS)"),
                            ("memeff", "memory-efficient (CUTLASS)"), ("flash", "FlashAttention-2 (flash)")):
        if marker in names:
            return backend
    return "unknown (kernels: " + ", ".join(kernel_names)[:120] + ")"


def _mask(causal: bool) -> str:
    return "causal" if causal else "full"


# --------------------------------------------------------------------------- operands and plans

def _operands(shape: attention_model.AttentionShape, seed: int):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(heads: int, length: int):
        return torch.randn(shape.batch, heads, length, shape.head_dim, device="cuda", generator=gen,
                           dtype=torch.float32).to(torch.bfloat16)

    return randn(shape.q_heads, shape.q_len), randn(shape.kv_heads, shape.kv_len), randn(shape.kv_heads, shape.kv_len)


def _sdpa(q, k, v, causal: bool):
    """SDPA with enable_gqa (K and V not expanded), among the fused backends only."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([getattr(SDPBackend, b) for b in FUSED_SDPA_BACKENDS]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def _check_slice(shape: attention_model.AttentionShape) -> tuple[int, int]:
    """(query heads, rows) of the checked slice of ``shape``: see the module's docstring."""
    return min(shape.q_heads, CHECK_KV_HEADS * shape.group), min(CHECK_ROWS, shape.q_len)


def check_description(shape: attention_model.AttentionShape) -> str:
    heads, rows = _check_slice(shape)
    return (f"float64 reference (launch.attention.reference) on the last {rows} query rows of sequence 0, "
            f"query heads 0-{heads - 1}, over all {shape.kv_len} keys")


def _reference(q, k, v, shape: attention_model.AttentionShape):
    heads, rows = _check_slice(shape)
    kv_heads = heads // shape.group
    return cuda_attention.reference(q[:1, :heads, -rows:], k[:1, :kv_heads], v[:1, :kv_heads], causal=shape.causal)


def _checked(out, want, shape: attention_model.AttentionShape) -> dict:
    heads, rows = _check_slice(shape)
    return check_close(out[:1, :heads, -rows:].double(), want, check_description(shape), CHECK_RTOL)


def _kernel_names(fn) -> list[str]:
    return [k for k in profiler.kernels_launched(fn) if not k.startswith("Memset")]


def _shape_params(shape: attention_model.AttentionShape) -> dict:
    return {"head_dim": shape.head_dim, "causal": shape.causal, "seq_len": shape.q_len, "batch": shape.batch}


def _triton_extra() -> dict:
    """The autotuner's pick for the shape just run, what the compiler gave it, and its code in summary."""
    config = attention_triton.last_config()
    extra = {"triton_config": config.label, "triton_config_fields": list(dataclasses.astuple(config))}
    try:
        extra["triton_resources"] = attention_triton.last_resources()
        extra["triton_code"] = attention_triton.code_summary(attention_triton.last_generated_code())
    except (ValueError, KeyError) as exc:
        extra["triton_code_unavailable"] = str(exc)
    return extra


def _plans(q, k, v, causal: bool, rungs: list[str], expanded_sdpa: bool) -> dict:
    plans = {rung_label(cuda_attention.RUNGS.index(r) + 1, r):
             (lambda r=r: cuda_attention.forward(q, k, v, causal=causal, rung=r)) for r in rungs}
    plans[TRITON] = lambda: attention_triton.forward(q, k, v, causal=causal)
    plans[SDPA] = lambda: _sdpa(q, k, v, causal)
    if expanded_sdpa:
        group = q.shape[1] // k.shape[1]
        k_all, v_all = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        plans[SDPA_EXPANDED] = lambda: _sdpa(q, k_all, v_all, causal)
    return plans


def _run_cases(shape: attention_model.AttentionShape, rungs: list[str], samples: int, seed: int,
               skipped: dict[str, str], expanded_sdpa: bool = True) -> list[Case]:
    """Every plan on one shape: checked, then timed call by call in turn; one Case each."""
    q, k, v = _operands(shape, seed)
    want = _reference(q, k, v, shape)
    plans = _plans(q, k, v, shape.causal, rungs, expanded_sdpa)
    checks, extras = {}, {}
    for label, fn in list(plans.items()):
        try:
            out = fn()
        except ValueError as exc:      # a rung this GPU cannot run (the launcher says which and why)
            if not label.startswith("CUDA"):
                raise
            skipped[label] = str(exc)
            del plans[label]
            continue
        checks[label] = _checked(out, want, shape)
        extras[label] = _triton_extra() if label == TRITON else {}
    times = benchmark_interleaved(list(plans.values()), samples,
                                  references=[i for i, label in enumerate(plans) if label in SDPA_PLANS])
    flop, compulsory = attention_model.flop(shape), attention_model.compulsory_bytes(shape)
    cases = []
    for (label, fn), t in zip(plans.items(), times):
        names = _kernel_names(fn)
        extra = {**extras[label], "kernels": names, "pairs": attention_model.pairs(shape)}
        if label in SDPA_PLANS:
            extra.update(sdpa_backend=sdpa_backend(names), sdpa_backends_allowed=list(FUSED_SDPA_BACKENDS),
                         skipped_rungs=dict(skipped))
            kernel = f"torch SDPA{' (K and V expanded)' if label == SDPA_EXPANDED else ''}, {extra['sdpa_backend']}"
        elif label == TRITON:
            kernel = f"triton {attention_triton.KERNEL_NAME}"
        else:
            rung = label.split(": ", 1)[1]
            extra.update(rung=rung, describe=cuda_attention.describe(rung),
                         compile_report=cuda_attention.compile_report(rung, shape.head_dim, causal=shape.causal))
            kernel = f"attention.cu, rung {rung}"
        cases.append(require_passed(Case(
            f"d={shape.head_dim}, {_mask(shape.causal)}, S={shape.q_len}: {label}", {**_shape_params(shape), "plan": label},
            kernel, t, flop, compulsory, checks[label], extra=extra)))
    return cases


def _free() -> None:
    import torch

    torch.cuda.empty_cache()


@experiment("attention.ladder",
            "A prefill's attention in Llama 3 8B's heads (32 query on 8 KV), bf16: each rung of the course's CUDA "
            "ladder, the course's Triton kernel and PyTorch SDPA, at d = 128 and 64, causal and not, 1k-16k tokens "
            "a sequence and the same tokens in every case; each checked against float64, then timed in turn.",
            record_runs=3, model="Llama 3 8B", head_dims=[128, 64], causal=[False, True],
            seq_lens=[1024, 2048, 4096, 8192, 16384], tokens=16384, samples=20, expanded_sdpa=True)
def ladder(model: str, head_dims: list[int], causal: list[bool], seq_lens: list[int], tokens: int,
           samples: int, expanded_sdpa: bool) -> list[Case]:
    heads = MODELS[model]
    cases, skipped = [], _rungs_this_gpu_cannot_run()
    for d in head_dims:
        for is_causal in causal:
            for s in seq_lens:
                shape = _prefill(heads, s, tokens, d, is_causal)
                rungs = [r for r in cuda_attention.RUNGS if rung_label(cuda_attention.RUNGS.index(r) + 1, r) not in skipped]
                cases += _run_cases(shape, rungs, samples, seed=s + d + is_causal, skipped=skipped,
                                    expanded_sdpa=expanded_sdpa)
                _free()
    return cases


def _rungs_this_gpu_cannot_run() -> dict[str, str]:
    """{label: why} for the CUDA rungs below this GPU's compute capability (bf16 mma.sync needs 8.0)."""
    cc = float(detect().compute_capability)
    if cc >= cuda_attention.MIN_CC:
        return {}
    return {rung_label(i, r): f"needs compute capability {cuda_attention.MIN_CC}+, this GPU is {cc}"
            for i, r in enumerate(cuda_attention.RUNGS, 1)}


def _prefill(heads, seq_len: int, tokens: int, head_dim: int, causal: bool) -> attention_model.AttentionShape:
    """``tokens // seq_len`` sequences (at least one) of ``seq_len`` tokens in ``heads``'s heads."""
    return attention_model.prefill_shape(max(1, tokens // seq_len), seq_len, head_dim, causal, heads)


# --------------------------------------------------------------------------- the ceilings, measured

CEILING_METRICS = ["gpu__time_duration.sum", "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                   "smsp__inst_executed_pipe_xu.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
                   "lts__t_sectors_op_read.sum", "smsp__issue_active.avg.pct_of_peak_sustained_active",
                   "sm__warps_active.avg.pct_of_peak_sustained_active"]
# The course's kernels are named attention_* (CUDA) and _attention_fwd (Triton); SDPA's backends launch
# pytorch_flash::flash_fwd_kernel, fmha_cutlassF_* or cudnn_*sdpa*.
PROFILED_KERNELS = r"attention|flash|fmha|sdpa|cudnn"
TILED_BLOCK_MS = (64, 128)


def profile_plans(model_name: str, head_dim: int, causal: bool, seq_len: int, tokens: int, rung: str,
                  triton_config: list[int]) -> None:
    """The CUDA rung, the Triton kernel (at ``triton_config``: no autotuning under the profiler) and SDPA,
    each launched once on one shape: what ncu profiles for ``attention.ceilings``."""
    import torch

    shape = _prefill(MODELS[model_name], seq_len, tokens, head_dim, causal)
    q, k, v = _operands(shape, 1)
    cuda_attention.forward(q, k, v, causal=causal, rung=rung)
    attention_triton.forward(q, k, v, causal=causal, config=attention_triton.TileConfig(*triton_config))
    _sdpa(q, k, v, causal)
    torch.cuda.synchronize()


def _summed(profiles: list) -> dict:
    """One plan's metrics over its kernels: counts and times summed, percentages weighted by time."""
    time = sum(p.metrics["gpu__time_duration.sum"] for p in profiles)
    out = {}
    for m in CEILING_METRICS:
        if m.endswith(".pct_of_peak_sustained_active"):
            out[m] = sum(p.metrics[m] * p.metrics["gpu__time_duration.sum"] for p in profiles) / time
        else:
            out[m] = sum(p.metrics[m] for p in profiles)
    return out


def _attach_ceiling_profile(by_plan: dict[str, Case], model_name: str, shape: attention_model.AttentionShape, tokens: int,
                            rung: str) -> None:
    """ncu's counters for each plan of one shape; the reason in ``ncu_unavailable`` where there are none."""
    triton_case = by_plan[TRITON]
    target = Target(profile_plans, (model_name, shape.head_dim, shape.causal, shape.q_len, tokens, rung,
                                    triton_case.extra["triton_config_fields"]))
    try:
        profiles = profiler.ncu_metrics(target, CEILING_METRICS, PROFILED_KERNELS)
        names = [p.function for p in profiles]
        at = [i for i, n in enumerate(names) if n.endswith(attention_triton.KERNEL_NAME)]
        if len(at) != 1 or at[0] == 0 or at[0] == len(names) - 1:
            raise profiler.ProfilerUnavailable(f"ncu profiled {names}: expected the CUDA rung's kernels, then "
                                               f"{attention_triton.KERNEL_NAME}, then SDPA's")
    except profiler.ProfilerUnavailable as exc:
        for c in by_plan.values():
            c.extra["ncu_unavailable"] = str(exc)
        return
    groups = {next(label for label in by_plan if label.startswith("CUDA")): profiles[:at[0]],
              TRITON: profiles[at[0]:at[0] + 1], SDPA: profiles[at[0] + 1:]}
    for label, group in groups.items():
        by_plan[label].extra.update(ncu=_summed(group), ncu_kernels=[p.function for p in group],
                                    ncu_command=profiler.command_line(CEILING_METRICS, PROFILED_KERNELS),
                                    ncu_version=profiler.ncu_version())


def model_extra(shape: attention_model.AttentionShape, gpu: str) -> dict:
    """The model's floors for ``shape`` on ``gpu``, for a case's ``extra``."""
    c = attention_model.ceilings(shape, gpu)
    return {"tensor_s": c.tensor_s, "memory_s": c.memory_s, "exp_s": c.exp_s, "binding": c.binding,
            "serial_s": c.serial_s, "exps": c.exps, "compulsory_bytes": c.compulsory_bytes,
            "tiled_bytes": {str(m): attention_model.tiled_bytes(shape, m) for m in TILED_BLOCK_MS}}


@experiment("attention.ceilings",
            "At one length, the last rung of the CUDA ladder, the Triton kernel and SDPA beside the model's three "
            "floors (tensor cores, HBM, the MUFU's exponentials), with Nsight Compute's tensor-pipe, MUFU, DRAM "
            "and L2 counts.",
            model="Llama 3 8B", head_dims=[128, 64], causal=[False, True], seq_len=8192, tokens=16384, samples=20,
            profile=True)
def ceilings(model: str, head_dims: list[int], causal: list[bool], seq_len: int, tokens: int, samples: int,
             profile: bool) -> list[Case]:
    heads = MODELS[model]
    gpu = detect().name
    rung = cuda_attention.RUNGS[-1]
    cases = []
    for d in head_dims:
        for is_causal in causal:
            shape = _prefill(heads, seq_len, tokens, d, is_causal)
            skipped = _rungs_this_gpu_cannot_run()
            rungs = [] if rung_label(len(cuda_attention.RUNGS), rung) in skipped else [rung]
            got = _run_cases(shape, rungs, samples, seed=seq_len + d + is_causal, skipped=skipped,
                             expanded_sdpa=False)
            floors = model_extra(shape, gpu) if gpu_spec_known(gpu) else {}
            for c in got:
                c.extra["model"] = floors
            by_plan = {c.params["plan"]: c for c in got}
            if profile and len(by_plan) == 3:
                _attach_ceiling_profile(by_plan, model, shape, tokens, rung)
            cases += got
            _free()
    return cases


def gpu_spec_known(gpu: str) -> bool:
    try:
        attention_model.exp_results_per_s(gpu_spec(gpu))
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- tables and figures

def _by_shape(result) -> dict:
    """{(d, causal, seq_len): {plan: case}} in the order the cases were recorded."""
    out: dict = {}
    for c in result.cases:
        p = c.params
        out.setdefault((p["head_dim"], p["causal"], p["seq_len"]), {})[p["plan"]] = c
    return out


def _share_of(case: Case, sdpa: Case) -> float:
    """A plan's throughput as a % of SDPA's on the same shape in the same run (SDPA's time over its)."""
    return 100 * sdpa.median_s / case.median_s


SHORT = {TRITON: "Triton", SDPA: "SDPA", SDPA_EXPANDED: "SDPA expanded"}


@beside_reference
def ladder_rows(result) -> list[dict]:
    """Per shape: SDPA's backend and TFLOP/s, then each plan's TFLOP/s and its % of SDPA's throughput."""
    rows = []
    for (d, causal, s), cs in _by_shape(result).items():
        sdpa = cs[SDPA]
        row = {"d": d, "mask": _mask(causal), "S": s, "batch": sdpa.params["batch"],
               "SDPA backend": sdpa.extra.get("sdpa_backend"), "SDPA TFLOP/s": sdpa.flop_per_s / 1e12}
        for label, c in cs.items():
            if label == SDPA:
                continue
            short = SHORT.get(label) or label.split(": ", 1)[1]
            row[f"{short} TFLOP/s"] = c.flop_per_s / 1e12
            row[f"{short} % of SDPA"] = _share_of(c, sdpa)
        if SDPA_EXPANDED in cs:
            row["SDPA expanded backend"] = cs[SDPA_EXPANDED].extra.get("sdpa_backend")
        if TRITON in cs:
            row["Triton config"] = cs[TRITON].extra.get("triton_config")
        row["SDPA's two protocols"] = _protocols(sdpa)
        rows.append(row)
    return rows


def _protocols(case: Case) -> str | None:
    if not conditions.is_reference(case):
        return None
    return conditions.protocol_cells(case)["protocols"] + (" at the power cap" if case.power_limited else "")


TARGET_D = 128
TARGET_SEQ_LENS = (4096, 8192, 16384)
TARGETS = {"CUDA": (70.0, 90.0), "Triton": (70.0, None)}


def _range(values: list[float]) -> str:
    """Lowest–highest over the runs, in whole percent (one value: itself)."""
    return f"{min(values):.0f}–{max(values):.0f}" if len(values) > 1 else f"{values[0]:.0f}"


def _last_rung_label(cs: dict) -> str | None:
    rungs = [label for label in cs if label.startswith("CUDA")]
    return rungs[-1] if rungs else None


@beside_reference
def target_rows(result) -> list[dict]:
    """The headline: at d = 128 and 4k-16k tokens, the end of the CUDA ladder and the Triton kernel as a % of
    SDPA's throughput, lowest to highest over the recorded runs, beside the targets (CUDA at least 70%,
    aiming at 90%; Triton at least 70%) and whether SDPA's two timing protocols agreed in every run."""
    runs = [_by_shape(r) for r in result.runs()]
    rows = []
    for (d, causal, s), cs in runs[-1].items():
        if d != TARGET_D or s not in TARGET_SEQ_LENS:
            continue
        last = _last_rung_label(cs)
        shares = {"CUDA": [], "Triton": []}
        against_expanded = {"CUDA": [], "Triton": []}
        for by_shape in runs:
            run_cs = by_shape[(d, causal, s)]
            for who, label in (("CUDA", last), ("Triton", TRITON)):
                if label in run_cs:
                    shares[who].append(_share_of(run_cs[label], run_cs[SDPA]))
                    if SDPA_EXPANDED in run_cs:
                        against_expanded[who].append(_share_of(run_cs[label], run_cs[SDPA_EXPANDED]))
        row = {"d": d, "mask": _mask(causal), "S": s, "runs": len(runs),
               "CUDA rung": last.split(": ", 1)[1] if last else None}
        for who, values in shares.items():
            row[f"{who} % of SDPA"] = _range(values) if values else "not run"
            floor, aim = TARGETS[who]
            row[f"{who} ≥ {floor:.0f}%"] = ("yes" if values and min(values) >= floor else "no") if values else None
            if aim is not None:
                row[f"{who} ≥ {aim:.0f}%"] = ("yes" if min(values) >= aim else "no") if values else None
        for who, values in against_expanded.items():
            if values:
                row[f"{who} % of SDPA expanded"] = _range(values)
        flags = [c for by_shape in runs for c in [by_shape[(d, causal, s)][SDPA]] if conditions.flagged(c)]
        row["SDPA flagged in a run"] = "yes" if flags else "no"
        rows.append(row)
    return rows


PLAN_STYLE = {TRITON: ("C3", "s--"), SDPA: ("k", "o-"), SDPA_EXPANDED: ("0.5", "o:")}


@beside_reference_figure
def ladder_figure(result):
    """TFLOP/s against sequence length, one panel per (d, mask): every plan, the datasheet bf16 peak, and the
    ceiling of a kernel whose exponentials never overlap its matrix products (analytic, ``serial_s``)."""
    import matplotlib.pyplot as plt

    by_shape = _by_shape(result)
    panels = sorted({(d, causal) for d, causal, _ in by_shape}, key=lambda x: (-x[0], x[1]))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0), sharey=True, squeeze=False)
    g = gpu_spec(result.gpu) if gpu_spec_known(result.gpu) else None
    for ax, (d, causal) in zip(axes[0], panels):
        lengths = sorted(s for dd, cc, s in by_shape if (dd, cc) == (d, causal))
        labels = list(dict.fromkeys(label for s in lengths for label in by_shape[(d, causal, s)]))
        for i, label in enumerate(labels):
            pts = [(s, by_shape[(d, causal, s)][label].flop_per_s / 1e12) for s in lengths
                   if label in by_shape[(d, causal, s)]]
            color, style = PLAN_STYLE.get(label, (f"C{i}", "^-"))
            ax.plot(*zip(*pts), style, color=color, ms=4, lw=1.2,
                    label=label.replace("CUDA rung ", "CUDA ") if label.startswith("CUDA") else label)
        if g is not None:
            peak = g.peak("bf16") / 1e12
            serial = attention_model.ceilings(attention_model.prefill_shape(1, lengths[-1], d, causal), g).serial_fraction_of_peak
            ax.axhline(peak, color="grey", lw=0.8, ls=":", label=f"bf16 peak {peak:.0f} (datasheet)")
            ax.axhline(peak * serial, color="grey", lw=0.8, ls="--",
                       label=f"exp not overlapped: {100 * serial:.0f}% of peak (analytic)")
        ax.set(xscale="log", xlabel="tokens a sequence", title=f"d = {d}, {_mask(causal)}")
        ax.set_xticks(lengths, [f"{s // 1024}k" for s in lengths])
        ax.title.set_fontsize(9)
    axes[0][0].set_ylabel("TFLOP/s (model FLOPs over median time)")
    axes[0][-1].legend(fontsize=6, loc="lower right")
    fig.suptitle(f"attention forward, Llama 3 8B heads (32 query, 8 KV), bf16; {result.provenance}", fontsize=9)
    fig.tight_layout()
    return fig


@beside_reference
def ceiling_rows(result) -> list[dict]:
    """Each plan beside the model's three floors: which binds, the measured time over it, and ncu's evidence
    (tensor pipe busy; MUFU results asked for over what the datasheet rate allows in the kernel's time;
    DRAM bytes over the compulsory bytes; L2 bytes read over the tiled plan's, K and V re-read per query tile)."""
    rows = []
    rate = attention_model.exp_results_per_s(result.gpu) if gpu_spec_known(result.gpu) else None
    for c in result.cases:
        m = c.extra.get("model") or {}
        if not m:
            continue
        floor = max(m["tensor_s"], m["memory_s"], m["exp_s"])
        row = {"d": c.params["head_dim"], "mask": _mask(c.params["causal"]), "plan": c.params["plan"],
               "measured µs": c.median_s * 1e6, "tensor floor µs": m["tensor_s"] * 1e6,
               "HBM floor µs": m["memory_s"] * 1e6, "exp floor µs": m["exp_s"] * 1e6, "binds (model)": m["binding"],
               "measured ÷ floor": c.median_s / floor, "% of bf16 peak": 100 * m["tensor_s"] / c.median_s,
               "exp not overlapped, % of peak (analytic)": 100 * m["tensor_s"] / m["serial_s"]}
        nc = c.extra.get("ncu")
        if nc:
            t = nc["gpu__time_duration.sum"] * 1e-9
            row.update({
                "tensor pipe busy % (ncu)": nc["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"],
                "MUFU results ÷ rate × time %": (100 * 32 * nc["smsp__inst_executed_pipe_xu.sum"] / (rate * t)
                                                  if rate else None),
                "DRAM read ÷ compulsory": nc["dram__bytes_read.sum"] / m["compulsory_bytes"],
                "L2 read ÷ tiled (BLOCK_M = 128)": 32 * nc["lts__t_sectors_op_read.sum"] / m["tiled_bytes"]["128"],
                "issue slots busy %": nc["smsp__issue_active.avg.pct_of_peak_sustained_active"]})
        else:
            row["ncu"] = c.extra.get("ncu_unavailable", "not profiled")
        rows.append(row)
    return rows


@beside_reference_figure
def ceilings_figure(result):
    """Per (d, mask): the three floors (analytic) as grey bars and each plan's measured time as a coloured one."""
    import matplotlib.pyplot as plt

    groups: dict = {}
    for c in result.cases:
        if c.extra.get("model"):
            groups.setdefault((c.params["head_dim"], c.params["causal"]), []).append(c)
    fig, axes = plt.subplots(1, max(1, len(groups)), figsize=(4.2 * max(1, len(groups)), 3.6), squeeze=False)
    for ax, ((d, causal), cs) in zip(axes[0], groups.items()):
        m = cs[0].extra["model"]
        bars = [("tensor floor", m["tensor_s"], "0.75"), ("HBM floor", m["memory_s"], "0.55"),
                ("exp floor", m["exp_s"], "0.35")]
        bars += [(c.params["plan"].replace("CUDA rung ", "CUDA "), c.median_s, f"C{i}") for i, c in enumerate(cs)]
        ax.barh(range(len(bars)), [b[1] * 1e6 for b in bars], color=[b[2] for b in bars])
        ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
        ax.invert_yaxis()
        ax.set(xlabel="µs (floors analytic, plans measured)", title=f"d = {d}, {_mask(causal)}, S = {cs[0].params['seq_len']}")
        ax.title.set_fontsize(9)
    fig.suptitle(f"attention's three floors against the measured time; {result.provenance}", fontsize=9)
    fig.tight_layout()
    return fig


def sdpa_backends(result) -> dict[str, str]:
    """The backend SDPA picked for each shape, named from its kernels."""
    return {c.name: c.extra.get("sdpa_backend") for c in result.cases if c.params["plan"] in SDPA_PLANS}


def triton_code(result, head_dim: int = 128, causal: bool = True) -> dict | None:
    """The recorded summary of the Triton kernel's generated code (TTGIR layouts, PTX instruction counts) for
    the first recorded Triton case of ``head_dim`` and mask; None if none was recorded."""
    for c in result.cases:
        p = c.params
        if p["plan"] == TRITON and p["head_dim"] == head_dim and p["causal"] == causal and "triton_code" in c.extra:
            return {"shape": c.name.split(":")[0], **c.extra["triton_code"], **c.extra.get("triton_resources", {})}
    return None


# --------------------------------------------------------------------------- analytic tables (no GPU)

def plan_bytes_rows(seq_lens=(1024, 4096, 16384), head_dim: int = 128, batch: int = 1, gpu: str = "h200",
                    block_m: int = 128, model_name: str = "Llama 3 8B") -> list[dict]:
    """Notebook 08's trap generalised: HBM bytes of the materialized plan, the tiled plan with no re-read
    cached, and each tensor once, at each length (one causal prefill in the model's heads), and what each
    costs at the datasheet bandwidth."""
    g = gpu_spec(gpu)
    rows = []
    for s in seq_lens:
        shape = attention_model.prefill_shape(batch, s, head_dim, True, MODELS[model_name])
        f = attention_model.flop(shape)
        for plan, q in (("materialized (scores to HBM)", attention_model.materialized_bytes(shape)),
                        (f"tiled, K and V re-read per {block_m}-row query tile", attention_model.tiled_bytes(shape, block_m)),
                        ("each tensor once (compulsory)", attention_model.compulsory_bytes(shape))):
            rows.append({"S": s, "plan": plan, "MiB": q / MIB, "FLOP per byte": f / q,
                         "at HBM bandwidth µs": q / g.hbm_bandwidth_bytes_per_s * 1e6})
    return rows


def ceiling_model_rows(gpu: str = "h200", seq_len: int = 8192, tokens: int = 16384,
                       model_name: str = "Llama 3 8B", block_m: int = 128) -> list[dict]:
    """The three floors at d = 128 and 64, causal and not, on ``gpu`` (analytic, from the spec table): which
    binds, the exponentials' time over the matrix products', and the share of the tensor peak a kernel can
    reach if its softmax never overlaps its MMAs."""
    rows = []
    for d in (128, 64):
        for causal in (False, True):
            shape = _prefill(MODELS[model_name], seq_len, tokens, d, causal)
            c = attention_model.ceilings(shape, gpu, block_m)
            rows.append({"d": d, "mask": _mask(causal), "TFLOP": c.flop / 1e12, "exponentials (G)": c.exps / 1e9,
                         "tensor µs": c.tensor_s * 1e6, "HBM µs (compulsory)": c.memory_s * 1e6,
                         f"HBM µs (tiled, BLOCK_M = {block_m}, nothing cached)": c.memory_tiled_s * 1e6,
                         "exp µs": c.exp_s * 1e6, "binds": c.binding, "exp ÷ tensor": c.exp_s / c.tensor_s,
                         "exp not overlapped, % of peak": 100 * c.serial_fraction_of_peak})
    return rows


def online_softmax_rows(scores, values, tile: int, digits: int = 4) -> list[dict]:
    """One query row's online softmax tile by tile (``models.attention.online_softmax_row``), then the same
    row computed directly: the numbers the notebook prints."""
    row = attention_model.online_softmax_row(scores, values, tile)

    def r(x):
        return round(x, digits) if math.isfinite(x) else x

    def vec(xs):
        return "(" + ", ".join(f"{x:.{digits}f}" for x in xs) + ")"

    rows = [{"tile": f"keys {st.first_key}–{st.first_key + len(st.scores) - 1}", "scores": vec(st.scores),
             "m old": r(st.m_old), "m new": r(st.m_new), "rescale exp(m old − m new)": r(st.rescale),
             "p = exp(s − m new)": vec(st.p), "l": r(st.l_new), "acc": vec(st.acc_new)} for st in row.steps]
    direct = attention_model.softmax_row(scores, values)
    rows.append({"tile": "output acc / l", "acc": vec(row.output)})
    rows.append({"tile": "softmax · V directly", "acc": vec(direct),
                 "l": r(float(np.sum(np.exp(np.asarray(scores, dtype=float) - max(scores)))))})
    return rows
