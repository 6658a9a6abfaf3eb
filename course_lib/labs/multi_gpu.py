"""Notebook 14's experiments: beyond one GPU, with NCCL through ``torch.distributed`` (every process
started by ``launch.collectives``, NVLink multicast off in each).

* ``multi_gpu.links``: copies from GPU 0 to each other GPU, one way at several sizes and both ways at
  once, each checked byte for byte; the topology as ``nvidia-smi topo -m`` prints it; the NCCL version.
* ``multi_gpu.collectives``: all-reduce, all-gather, reduce-scatter and broadcast from 8 bytes to 1 GiB on
  2, 4 and 8 GPUs (those the machine has), each size checked exactly; then the all-reduce on the most GPUs
  under each of NCCL's algorithms and protocols (``NCCL_ALGO``, ``NCCL_PROTO``).
* ``multi_gpu.tensor_parallel_mlp``: notebook 12's Llama 3 8B MLP split over p GPUs (column-parallel gate
  and up, row-parallel down, one all-reduce), checked against the unsplit MLP; its compute alone, its
  all-reduce alone, the two in turn, and the all-reduce on a second stream beside independent compute,
  with both streams' timelines.
* ``multi_gpu.gradient_buckets``: a chain of GEMMs standing in for a backward pass, its 1 GiB of gradients
  all-reduced in buckets of 4 MiB to 1 GiB as they become ready, beside the backward alone and the
  all-reduces alone.

Records go to ``data/recorded/<gpu>-x<N>/`` (N: the machine's GPU count), with the GPU count, the topology
and the NCCL version in the machine manifest: ``python -m course_lib.record multi_gpu.links ...`` records
them, and ``run`` replays them (``COURSE_REPLAY_GPUS`` picks N, else the largest recorded). On a machine with one
GPU ``run`` says what the measurements need and shows the recorded run.
"""
from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from course_lib.core import runtime
from course_lib.core.hardware import GpuSpec, gpu_spec
from course_lib.launch import collectives as launcher
from course_lib.measure import evidence, experiments
from course_lib.measure.evidence import Case, Check, NotRecorded
from course_lib.measure.experiments import Result, beside_reference, beside_reference_figure, experiment
from course_lib.models import collectives as alpha_beta
from course_lib.models import transformer
from course_lib.models.transformer import MODELS

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
SWEEP_BYTES = [2 ** k for k in range(3, 31, 2)] + [GIB]      # 8 B, 32 B, ..., 512 MiB, 1 GiB
LINK_BYTES = [8, 64 * KIB, MIB, 16 * MIB, 256 * MIB, GIB]
RANKS = [2, 4, 8]
NCCL_CHOICE = "NCCL's choice"
VARIANTS = [NCCL_CHOICE] + [f"{a}/{p}" for a in launcher.NCCL_ALGOS for p in launcher.NCCL_PROTOS]
SWEPT = ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
EXPERIMENTS = ("multi_gpu.links", "multi_gpu.collectives", "multi_gpu.tensor_parallel_mlp",
               "multi_gpu.gradient_buckets")
COPY_KERNEL = "torch.Tensor.copy_ between GPUs (a peer copy)"


def _size(n: float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n:g} B"


def _median(xs) -> float:
    return statistics.median(xs)


def _timing_extra(run: dict) -> dict:
    """What a case keeps beside its samples: calls per block, the hold, late blocks, each rank's median."""
    extra = {"calls_per_block": run["calls_per_block"], "late_blocks": run.get("late_blocks", 0)}
    if "hold_s" in run:
        extra["hold_s"] = run["hold_s"]
    if "issue_s" in run:
        extra["issue_median_s"] = _median(run["issue_s"])
    if run.get("rank_samples_s"):
        extra["rank_medians_s"] = [_median(r) for r in run["rank_samples_s"]]
    return extra


def ranks_that_fit(ranks: list[int], what: str) -> list[int]:
    """The GPU counts of ``ranks`` this machine has; NeedsMoreGpus naming the need when it has none of them."""
    have = launcher.gpu_count()
    fits = [p for p in ranks if p <= have]
    if not fits:
        launcher.require_gpus(min(ranks), what)
    return fits


# --------------------------------------------------------------------------- the links

def copy_case(row: dict) -> Case:
    src, dst, size = row["src"], row["dst"], row["bytes"]
    return Case(f"copy GPU {src} → GPU {dst}, {_size(size)}", {"kind": "one way", "src": src, "dst": dst,
                                                               "bytes": size},
                COPY_KERNEL, row["samples_s"], 0.0, float(size),
                Check("the source, byte for byte", float(row["wrong_bytes"]), 0.0).to_json(),
                timer="CUDA events on the source GPU around blocks of back-to-back copies",
                extra={**_timing_extra(row), "peer_access": row["peer_access"]})


def both_ways_case(row: dict, first: int, second: int) -> Case:
    """Both directions at once: a sample is the slower direction's time per copy, the bytes both copies'."""
    directions = list(row["samples_s"].values())
    return Case(f"copies both ways GPU {first} ↔ GPU {second}, {_size(row['bytes'])} each",
                {"kind": "both ways", "src": first, "dst": second, "bytes": row["bytes"]},
                COPY_KERNEL + ", one each way on streams of their own", [max(a, b) for a, b in zip(*directions)],
                0.0, 2.0 * row["bytes"], Check("the sources, byte for byte", float(row["wrong_bytes"]), 0.0).to_json(),
                timer="CUDA events on each source GPU; a sample is the slower direction's",
                extra={"calls_per_block": row["calls_per_block"],
                       "direction_medians_s": {k: _median(v) for k, v in row["samples_s"].items()}})


@experiment("multi_gpu.links",
            "Copies from GPU 0 to each other GPU (PyTorch's copy_, a peer copy over NVLink where there is one), one "
            "way at 8 B to 1 GiB and both ways at once, each checked byte for byte; the topology and NCCL version.",
            min_gpus=2, sizes=LINK_BYTES, pair_bytes=256 * MIB, samples=20)
def links(sizes: list[int], pair_bytes: int, samples: int) -> list[Case]:
    launcher.require_gpus(2, "multi_gpu.links (copies between GPUs)")
    gpus = launcher.gpu_count()
    rows = launcher.peer_copy(0, 1, sizes, samples)
    for dst in range(2, gpus):
        rows += launcher.peer_copy(0, dst, [pair_bytes], samples)
    cases = [copy_case(r) for r in rows]
    cases.append(both_ways_case(launcher.bidirectional_copy(0, 1, pair_bytes, samples), 0, 1))
    cases[0].extra["machine"] = launcher.machine_manifest()
    return [experiments.require_passed(c) for c in cases]


def _nvlink(result: Result) -> float | None:
    try:
        return gpu_spec(result.gpu).nvlink_per_direction_bytes_per_s
    except ValueError:
        return None


@beside_reference
def link_rows(result: Result) -> list[dict]:
    """Each copy: its median, its bandwidth and that over the datasheet's NVLink (one direction; both
    directions' sum for the copies both ways)."""
    one_way = _nvlink(result)
    rows = []
    for c in result.cases:
        both = c.params["kind"] == "both ways"
        link = one_way * 2 if (one_way and both) else one_way
        rows.append({"copy": f"GPU {c.params['src']} {'↔' if both else '→'} GPU {c.params['dst']}",
                     "size": _size(c.params["bytes"]), "median µs": c.median_s * 1e6,
                     "GB/s": c.bandwidth_bytes_per_s / 1e9,
                     "÷ NVLink (datasheet)": c.bandwidth_bytes_per_s / link if link else None,
                     "late blocks": c.extra.get("late_blocks", 0)})
    return rows


def machine_of(result: Result) -> dict:
    """The GPU count, topology and NCCL version of the machine a multi-GPU result was measured on."""
    if "gpu_count" in result.machine:
        return {k: result.machine.get(k) for k in ("gpu_count", "topology", "nccl")}
    for c in result.cases:
        if "machine" in c.extra:
            return c.extra["machine"]
    return {"gpu_count": None, "topology": "not recorded", "nccl": None}


# --------------------------------------------------------------------------- collectives swept

def collective_case(row: dict, variant: str) -> Case:
    c, p, size = row["collective"], row["ranks"], row["bytes"]
    check = Check("exact: whole numbers float32 sums exactly", float(row["max_abs_err"]), 0.0)
    return Case(f"{c}, {p} GPUs, {variant}, {_size(size)}",
                {"collective": c, "ranks": p, "variant": variant, "requested_bytes": row["requested_bytes"],
                 "bytes": size},
                f"{'NCCL' if row['backend'] == 'nccl' else 'gloo'} {c} ({variant})", row["samples_s"], 0.0,
                float(size), check.to_json(), timer=row["timer"], extra=_timing_extra(row))


def _variant_env(variant: str) -> tuple[str | None, str | None]:
    if variant == NCCL_CHOICE:
        return None, None
    algo, proto = variant.split("/")
    return algo, proto


@experiment("multi_gpu.collectives",
            "All-reduce, all-gather, reduce-scatter and broadcast from 8 B to 1 GiB on 2, 4 and 8 GPUs (NCCL's "
            "choice of algorithm), then the all-reduce on the most GPUs under each NCCL_ALGO and NCCL_PROTO; "
            "each size checked exactly, timed in blocks of back-to-back calls.",
            min_gpus=2, collective=SWEPT, ranks=RANKS, requested_bytes=SWEEP_BYTES, variant=VARIANTS, samples=20)
def collectives(collective: list[str], ranks: list[int], requested_bytes: list[int], variant: list[str],
                samples: int) -> list[Case]:
    fits = ranks_that_fit(ranks, "multi_gpu.collectives")
    cases, unavailable = [], []
    for v in variant:
        algo, proto = _variant_env(v)
        runs = [(c, p) for c in collective for p in fits] if v == NCCL_CHOICE else [("all_reduce", max(fits))]
        for c, p in runs:
            try:
                rows = launcher.sweep(c, p, requested_bytes, "nccl", samples, algo, proto)
            except (launcher.RankFailed, launcher.CollectiveTimeout) as exc:
                if v == NCCL_CHOICE:
                    raise
                why = exc.detail.splitlines()[0] if isinstance(exc, launcher.RankFailed) else str(exc)
                unavailable.append({"variant": v, "ranks": p, "why": why})
                continue
            cases += [experiments.require_passed(collective_case(r, v)) for r in rows]
    cases[0].extra["unavailable_variants"] = unavailable
    cases[0].extra["machine"] = launcher.machine_manifest()
    return cases


@dataclass(frozen=True)
class FittedLink:
    """α and B of the α–β model fitted to measured times (relative least squares): measured, not datasheet."""

    collective: str
    ranks: int
    step_latency_s: float
    link_bytes_per_s: float
    points: int


def fit_alpha_beta(points: list[tuple[float, float]], collective: str, ranks: int) -> FittedLink:
    """α (per step) and B (per direction) that make ``steps·α + sent/B`` closest to each measured
    (bytes, seconds), each point weighted by 1/t so that the small messages count as much as the large."""
    steps = alpha_beta.steps(collective, ranks)
    fraction = alpha_beta.sent_fraction(collective, ranks)
    if len(points) < 2 or steps == 0:
        raise ValueError("a fit needs at least two sizes on two or more GPUs")
    # rows (steps/t, fraction·S/t), target 1: normal equations of a 2 × 2 least-squares problem
    a = [(steps / t, fraction * s / t) for s, t in points]
    s11 = sum(x * x for x, _ in a)
    s12 = sum(x * y for x, y in a)
    s22 = sum(y * y for _, y in a)
    b1, b2 = sum(x for x, _ in a), sum(y for _, y in a)
    det = s11 * s22 - s12 * s12
    if det <= 0:
        raise ValueError("the sizes are too alike to separate latency from bandwidth: measure a wider range")
    alpha, beta = (b1 * s22 - b2 * s12) / det, (s11 * b2 - s12 * b1) / det
    if alpha < 0 or beta <= 0:
        raise ValueError(f"the times do not fit latency plus bytes over bandwidth (α = {alpha:.3g} s, "
                         f"1/B = {beta:.3g} s/B): look at the table before trusting a model line")
    return FittedLink(collective, ranks, alpha, 1 / beta, len(points))


def _swept(result: Result, collective: str, ranks: int, variant: str = NCCL_CHOICE) -> list[Case]:
    cases = sorted((c for c in result.cases if c.params["collective"] == collective and c.params["ranks"] == ranks
                    and c.params["variant"] == variant), key=lambda c: c.params["bytes"])
    if not cases:
        raise NotRecorded(f"{collective} on {ranks} GPUs ({variant}) is not in this run ({result.provenance}); it has "
                          f"{sorted({c.params['ranks'] for c in result.cases})} GPUs")
    return cases


def fitted_link(result: Result, collective: str, ranks: int, variant: str = NCCL_CHOICE) -> FittedLink:
    return fit_alpha_beta([(c.bytes, c.median_s) for c in _swept(result, collective, ranks, variant)],
                          collective, ranks)


@beside_reference
def collective_rows(result: Result, collective: str, ranks: int, step_latency_s: float | None = None,
                    link_bytes_per_s: float | None = None, variant: str = NCCL_CHOICE) -> list[dict]:
    """Each size: the median, nccl-tests' algbw and busbw, busbw over the link, and the α–β model's time with
    ``step_latency_s`` and ``link_bytes_per_s`` (default: α fitted to this run, B the datasheet's NVLink)."""
    cases = _swept(result, collective, ranks, variant)
    link = link_bytes_per_s or _nvlink(result)
    alpha = step_latency_s if step_latency_s is not None else fitted_link(result, collective, ranks, variant) \
        .step_latency_s
    rows = []
    for c in cases:
        busbw = alpha_beta.link_bandwidth_from_busbw(collective, ranks, c.bytes, c.median_s)
        pred = alpha_beta.predict(collective, c.bytes, ranks, link, alpha) if link else None
        rows.append({"size": _size(c.bytes), "median µs": c.median_s * 1e6, "algbw GB/s": c.bytes / c.median_s / 1e9,
                     "busbw GB/s": busbw / 1e9, "busbw ÷ link": busbw / link if link else None,
                     "model µs": pred.seconds * 1e6 if pred else None,
                     "measured ÷ model": c.median_s / pred.seconds if pred else None,
                     "model's larger term": pred.dominant if pred else None})
    return rows


@beside_reference
def variant_rows(result: Result, ranks: int | None = None) -> list[dict]:
    """The all-reduce's bus bandwidth (GB/s) at each size under each recorded algorithm and protocol."""
    ranks = ranks or max(c.params["ranks"] for c in result.cases if c.params["variant"] != NCCL_CHOICE)
    variants = [v for v in VARIANTS if any(c.params["variant"] == v and c.params["ranks"] == ranks
                                           for c in result.cases if c.params["collective"] == "all_reduce")]
    by = {(c.params["variant"], c.params["bytes"]): c for c in result.cases
          if c.params["collective"] == "all_reduce" and c.params["ranks"] == ranks}
    rows = []
    for size in sorted({b for _, b in by}):
        row = {"size": _size(size)}
        for v in variants:
            c = by.get((v, size))
            row[v] = alpha_beta.link_bandwidth_from_busbw("all_reduce", ranks, c.bytes, c.median_s) / 1e9 if c else None
        rows.append(row)
    return rows


def unavailable_variants(result: Result) -> list[dict]:
    return result.cases[0].extra.get("unavailable_variants", [])


@beside_reference_figure
def collectives_figure(result: Result, collective: str = "all_reduce"):
    """Time against message size for each GPU count, with the α–β model (α fitted to each count's sweep,
    B the datasheet's NVLink) dashed beside it; log-log."""
    import matplotlib.pyplot as plt

    link = _nvlink(result)
    fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(11, 4.2))
    for p in sorted({c.params["ranks"] for c in result.cases if c.params["collective"] == collective}):
        cases = _swept(result, collective, p)
        sizes = [c.bytes for c in cases]
        line, = ax_t.plot(sizes, [c.median_s * 1e6 for c in cases], "o-", ms=3, label=f"{p} GPUs, measured")
        ax_b.plot(sizes, [alpha_beta.link_bandwidth_from_busbw(collective, p, c.bytes, c.median_s) / 1e9 for c in cases],
                  "o-", ms=3, color=line.get_color(), label=f"{p} GPUs")
        if link:
            alpha = fitted_link(result, collective, p).step_latency_s
            ax_t.plot(sizes, [alpha_beta.predict(collective, s, p, link, alpha).seconds * 1e6 for s in sizes], "--",
                      color=line.get_color(), lw=1, label=f"{p} GPUs, model (α = {alpha * 1e6:.1f} µs fitted)")
    if link:
        ax_b.axhline(link / 1e9, color="k", lw=0.8, ls=":", label=f"NVLink, one direction (datasheet) {link / 1e9:.0f}")
    ax_t.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="time (µs)",
             title=f"{collective}: time against size")
    ax_b.set(xscale="log", xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)",
             title=f"{collective}: nccl-tests' bus bandwidth")
    ax_t.legend(fontsize=7)
    ax_b.legend(fontsize=7)
    fig.suptitle(result.provenance, fontsize=8)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- tensor-parallel MLP

TP_PLANS = {"compute alone": "cuBLAS GEMMs and SiLU·up (PyTorch), one rank's shard",
            "all-reduce alone": "NCCL all_reduce of the partial sums",
            "compute, then all-reduce": "the shard's GEMMs, then NCCL all_reduce, one stream",
            "all-reduce beside independent compute": "NCCL all_reduce on a second stream beside the GEMMs"}


def tensor_parallel_cases(run: dict, phase: str, shape: transformer.ModelShape) -> list[Case]:
    p, rows = run["ranks"], run["rows"]
    mlp = alpha_beta.tensor_parallel_mlp(shape, rows, p) if shape.mlp % p == 0 else None
    check = Check(f"the unsplit MLP in float32 on the same {run['dtype']} inputs", float(run["max_abs_err"]),
                  float(run["tolerance"])).to_json()
    cases = []
    for plan, timing in run["plans"].items():
        computes = plan != "all-reduce alone"
        moves = plan != "compute alone"
        flop = mlp.flop_per_rank if (mlp and computes) else 0.0
        nbytes = (float(run["all_reduce_bytes"]) if moves else
                  float(sum(op.bytes for op in mlp.ops)) if mlp else 0.0)
        extra = {**_timing_extra(timing), "all_reduce_bytes": run["all_reduce_bytes"], "d_model": run["d_model"],
                 "mlp": run["mlp"], "dtype": run["dtype"]}
        if timing.get("timelines"):
            extra["timelines_s"] = timing["timelines"]
        cases.append(Case(f"{phase}, {p} GPUs: {plan}", {"phase": phase, "rows": rows, "ranks": p, "plan": plan},
                          TP_PLANS[plan], timing["samples_s"], flop, nbytes, check, timer=run["timer"], extra=extra))
    return cases


@experiment("multi_gpu.tensor_parallel_mlp",
            "Llama 3 8B's MLP split over 2, 4 and 8 GPUs (column-parallel gate and up, row-parallel down, one "
            "all-reduce), at prefill and decode, checked against the unsplit MLP: its compute alone, its all-reduce "
            "alone, both in turn, and the all-reduce on a second stream beside independent compute.",
            min_gpus=2, model="Llama 3 8B", phase=["prefill", "decode"], prefill=[1, 4096], decode=[16, 8192], ranks=RANKS,
            samples=20)
def tensor_parallel(model: str, phase: list[str], prefill: list[int], decode: list[int], ranks: list[int],
                    samples: int) -> list[Case]:
    shape = MODELS[model]
    fits = ranks_that_fit(ranks, "multi_gpu.tensor_parallel_mlp")
    steps = {"prefill": transformer.prefill(*prefill), "decode": transformer.decode(*decode)}
    cases = []
    for name in phase:
        for p in fits:
            run = launcher.tensor_parallel_mlp(p, steps[name].rows, shape.d_model, shape.mlp, "nccl", samples)
            cases += [experiments.require_passed(c) for c in tensor_parallel_cases(run, name, shape)]
    cases[0].extra["machine"] = launcher.machine_manifest()
    return cases


@beside_reference
def tensor_parallel_rows(result: Result, step_latency_s: float, link_bytes_per_s: float | None = None,
                         model_name: str = "Llama 3 8B", gpu: GpuSpec | None = None) -> list[dict]:
    """Each phase, GPU count and plan: measured median against the prediction (compute: the atlas's floor on
    ``gpu``'s datasheet, by default the run's GPU; all-reduce: the α–β model with ``step_latency_s`` and the
    link, by default the datasheet's NVLink; in turn: their sum; beside each other: the longer)."""
    gpu = gpu or gpu_spec(result.gpu)
    link = link_bytes_per_s or gpu.nvlink_per_direction_bytes_per_s
    shape = MODELS[model_name]
    rows = []
    for c in result.cases:
        p, plan = c.params["ranks"], c.params["plan"]
        pred = alpha_beta.tensor_parallel_prediction(alpha_beta.tensor_parallel_mlp(shape, c.params["rows"], p), gpu, link,
                                                step_latency_s)
        predicted = {"compute alone": pred.compute_s, "all-reduce alone": pred.communication.seconds,
                     "compute, then all-reduce": pred.serialized_s,
                     "all-reduce beside independent compute": pred.overlapped_s}[plan]
        rows.append({"phase": c.params["phase"], "GPUs": p, "plan": plan, "median µs": c.median_s * 1e6,
                     "predicted µs": predicted * 1e6, "measured ÷ predicted": c.median_s / predicted})
    return rows


@beside_reference
def overlap_rows(result: Result) -> list[dict]:
    """What running the all-reduce beside the compute saved, measured: the serialized time less the overlapped,
    against the most it could save (the shorter of compute alone and all-reduce alone)."""
    by = {(c.params["phase"], c.params["ranks"], c.params["plan"]): c.median_s for c in result.cases}
    rows = []
    for phase, p in sorted({(k[0], k[1]) for k in by}, key=lambda k: (k[0] != "prefill", k[1])):
        compute, comm = by[(phase, p, "compute alone")], by[(phase, p, "all-reduce alone")]
        serial, beside = by[(phase, p, "compute, then all-reduce")], by[(phase, p, "all-reduce beside independent compute")]
        rows.append({"phase": phase, "GPUs": p, "saved µs": (serial - beside) * 1e6,
                     "most it could save µs": min(compute, comm) * 1e6,
                     "share of the most": (serial - beside) / min(compute, comm)})
    return rows


def median_timeline(case: Case) -> dict[str, tuple[float, float]]:
    """Each stream's median [start, end] (seconds from the step's start) over the overlapped case's steps."""
    steps = case.extra["timelines_s"]
    return {k: (_median(t[k][0] for t in steps), _median(t[k][1] for t in steps)) for k in steps[0]}


@beside_reference_figure
def timeline_figure(result: Result, phase: str, ranks: int):
    """The overlapped step on rank 0: the all-reduce's stream and the compute's, median start and end."""
    import matplotlib.pyplot as plt

    case = result.case(f"{phase}, {ranks} GPUs: all-reduce beside independent compute")
    if "timelines_s" not in case.extra:
        raise NotRecorded(f"{case.name} has no stream timeline (a CPU run has no streams)")
    spans = median_timeline(case)
    fig, ax = plt.subplots(figsize=(8, 1.9))
    for y, (name, colour) in enumerate((("compute", "#4c72b0"), ("all_reduce", "#c44e52"))):
        start, end = spans[name]
        ax.barh(y, (end - start) * 1e6, left=start * 1e6, color=colour, height=0.5)
        ax.text(end * 1e6, y, f"  {(end - start) * 1e6:.0f} µs", va="center", fontsize=8)
    ax.set(yticks=[0, 1], yticklabels=["compute (main stream)", "all-reduce (second stream)"],
           xlabel="µs from the step's start (median over the steps)",
           title=f"{phase}, {ranks} GPUs: the all-reduce beside independent compute, rank 0")
    ax.title.set_fontsize(9)
    fig.suptitle(result.provenance, fontsize=8)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- gradient buckets

BUCKET_PLANS = {"backward alone": "cuBLAS GEMMs (torch.mm), the stand-in backward pass",
                "all-reduces alone": "NCCL all_reduce of each bucket in turn",
                "backward with all-reduces": "GEMMs, each bucket's NCCL all_reduce on a second stream once ready"}


def bucket_cases(run: dict) -> list[Case]:
    p, grads, n = run["ranks"], run["gradient_bytes"], run["gemm_size"]
    backward_flop = float(run["gemms"] * 2 * n ** 3)
    check = Check("every gradient summed over the ranks: p(p+1)/2, exact", float(run["max_abs_err"]), 0.0).to_json()
    cases = []
    for plan in run["plans"]:
        kind, bucket = plan["plan"], plan["bucket_bytes"]
        params = {"ranks": p, "plan": kind, "gradient_bytes": grads}
        name = f"{p} GPUs: {kind}"
        if bucket is not None:
            params["bucket_bytes"] = bucket
            name += f", {_size(bucket)} buckets"
        extra = {**_timing_extra(plan), "buckets": plan["buckets"], "gemms": run["gemms"], "gemm_size": n,
                 "dtype": run["dtype"]}
        cases.append(Case(name, params, BUCKET_PLANS[kind], plan["samples_s"],
                          0.0 if kind == "all-reduces alone" else backward_flop,
                          0.0 if kind == "backward alone" else float(grads), check, timer=run["timer"], extra=extra))
    return cases


@experiment("multi_gpu.gradient_buckets",
            "A backward pass stood in for by 256 GEMMs of 2048³ (bf16), its 1 GiB of gradients all-reduced in buckets "
            "of 4 MiB to 1 GiB, each on a second stream as soon as its GEMMs have run; beside the backward alone "
            "and each bucket size's all-reduces alone.",
            min_gpus=2, ranks=RANKS, gradient_bytes=GIB, bucket_bytes=[4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, GIB],
            gemm_size=2048, gemms=256, samples=20)
def gradient_buckets(ranks: list[int], gradient_bytes: int, bucket_bytes: list[int], gemm_size: int, gemms: int,
                     samples: int) -> list[Case]:
    cases = []
    for p in ranks_that_fit(ranks, "multi_gpu.gradient_buckets"):
        run = launcher.gradient_buckets(p, gradient_bytes, bucket_bytes, gemm_size, gemms, "nccl", samples)
        cases += [experiments.require_passed(c) for c in bucket_cases(run)]
    cases[0].extra["machine"] = launcher.machine_manifest()
    return cases


def bucket_fit(result: Result, ranks: int) -> FittedLink:
    """α and B fitted to this run's all-reduces alone: each bucket size's time over its bucket count."""
    points = [(c.params["bucket_bytes"], c.median_s / c.extra["buckets"]) for c in result.cases
              if c.params["ranks"] == ranks and c.params["plan"] == "all-reduces alone"]
    return fit_alpha_beta(points, "all_reduce", ranks)


@beside_reference
def bucket_rows(result: Result, ranks: int, fit: FittedLink | None = None) -> list[dict]:
    """Each bucket size: the step measured (backward with its all-reduces) against the bucket model's, which
    takes the backward alone as measured and α and B from ``fit`` (default: fitted to this run's all-reduces
    alone); and the communication left exposed after the backward pass, measured and modelled."""
    fit = fit or bucket_fit(result, ranks)
    mine = [c for c in result.cases if c.params["ranks"] == ranks]
    backward = next(c for c in mine if c.params["plan"] == "backward alone").median_s
    rows = []
    for c in sorted((c for c in mine if c.params["plan"] == "backward with all-reduces"),
                    key=lambda c: c.params["bucket_bytes"]):
        b = c.params["bucket_bytes"]
        alone = next(o for o in mine if o.params["plan"] == "all-reduces alone" and o.params["bucket_bytes"] == b)
        plan = alpha_beta.gradient_buckets(c.params["gradient_bytes"], b, ranks, backward, fit.link_bytes_per_s,
                                      fit.step_latency_s)
        rows.append({"bucket": _size(b), "buckets": c.extra["buckets"], "all-reduces alone µs": alone.median_s * 1e6,
                     "step µs": c.median_s * 1e6, "model step µs": plan.step_s * 1e6,
                     "exposed µs": (c.median_s - backward) * 1e6, "model exposed µs": plan.exposed_s * 1e6,
                     "model latency overhead µs": plan.latency_overhead_s * 1e6})
    return rows


# --------------------------------------------------------------------------- for the notebook: the models alone

def worked_example(gpu: str = "h200", message_bytes: int = GIB, ranks: int = 8, step_latency_s: float = 5e-6) -> str:
    """The α–β model's all-reduce, ring and tree, spelled out with its inputs (analytic)."""
    link = gpu_spec(gpu).nvlink_per_direction_bytes_per_s
    lines = [f"{_size(message_bytes)} all-reduce on {ranks} × {gpu_spec(gpu).name}: B = {link / 1e9:.0f} GB/s each way "
             f"(datasheet), α = {step_latency_s * 1e6:g} µs a step (an assumption)"]
    for algorithm in ("ring", "tree"):
        c = alpha_beta.predict("all_reduce", message_bytes, ranks, link, step_latency_s, algorithm)
        lines.append(f"  {algorithm}: {c.steps} steps × α = {c.latency_s * 1e6:.1f} µs; {_size(c.bytes_sent_per_rank)} "
                     f"sent ÷ B = {c.bandwidth_s * 1e6:,.1f} µs; t = {c.seconds * 1e6:,.1f} µs; algbw "
                     f"{c.algbw_bytes_per_s / 1e9:.1f} GB/s, busbw {c.busbw_bytes_per_s / 1e9:.1f} GB/s; the terms are "
                     f"equal at {_size(c.crossover_bytes)}")
    return "\n".join(lines)


def tensor_parallel_plan_rows(step_latency_s: float, gpu: str = "h200", ranks: list[int] = RANKS,
                              model_name: str = "Llama 3 8B", prefill: tuple[int, int] = (1, 4096),
                              decode: tuple[int, int] = (16, 8192)) -> list[dict]:
    """Analytic: the tensor-parallel MLP's compute floor (notebook 12's atlas on ``gpu``'s datasheet), its
    all-reduce (the α–β model, the datasheet's NVLink and ``step_latency_s``), in turn and side by side."""
    spec_ = gpu_spec(gpu)
    rows = []
    for phase in (transformer.prefill(*prefill), transformer.decode(*decode)):
        for p in ranks:
            mlp = alpha_beta.tensor_parallel_mlp(MODELS[model_name], phase.rows, p)
            pred = alpha_beta.tensor_parallel_prediction(mlp, spec_, spec_.nvlink_per_direction_bytes_per_s,
                                                         step_latency_s)
            rows.append({"phase": phase.name, "GPUs": p, "all-reduce": _size(mlp.all_reduce_bytes),
                         "compute µs": pred.compute_s * 1e6, "all-reduce µs": pred.communication.seconds * 1e6,
                         "its larger term": pred.communication.dominant, "in turn µs": pred.serialized_s * 1e6,
                         "side by side µs": pred.overlapped_s * 1e6,
                         "all-reduce's share in turn": pred.communication_share})
    return rows


def bucket_plan_rows(backward_s: float, step_latency_s: float, link_bytes_per_s: float, ranks: int = 8,
                     gradient_bytes: int = GIB,
                     bucket_bytes: tuple[int, ...] = (MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, GIB)) -> list[dict]:
    """Analytic: the bucket model's step for each bucket size, its latency overhead and the exposed tail."""
    rows = []
    for b in bucket_bytes:
        plan = alpha_beta.gradient_buckets(gradient_bytes, b, ranks, backward_s, link_bytes_per_s, step_latency_s)
        rows.append({"bucket": _size(b), "buckets": plan.buckets, "all-reduces µs": plan.communication_s * 1e6,
                     "of which latency µs": plan.latency_overhead_s * 1e6, "exposed µs": plan.exposed_s * 1e6,
                     "step µs": plan.step_s * 1e6})
    return rows


# --------------------------------------------------------------------------- records: <gpu>-x<N>

def machine_slug(gpu_slug: str, gpus: int) -> str:
    """The record folder of a machine with ``gpus`` GPUs of one kind: ``h200-x8``."""
    return f"{gpu_slug}-x{gpus}"


def recorded_machines(gpu_slug: str, root: Path = evidence.RECORDED_DIR) -> list[str]:
    """The multi-GPU record folders of ``gpu_slug``, fewest GPUs first."""
    found = [(int(m.group(1)), name) for name in evidence.recorded_gpus(root)
             if (m := re.fullmatch(rf"{re.escape(gpu_slug)}-x(\d+)", name))]
    return [name for _, name in sorted(found)]


def replay_slug(root: Path = evidence.RECORDED_DIR) -> str:
    """The folder replay reads: ``COURSE_REPLAY_GPU`` with ``COURSE_REPLAY_GPUS`` GPUs, else the most recorded."""
    base = runtime.replay_gpu()
    wanted = os.environ.get("COURSE_REPLAY_GPUS")
    if wanted:
        return machine_slug(base, int(wanted))
    have = recorded_machines(base, root)
    if not have:
        raise NotRecorded(f"no multi-GPU run of the {base} is recorded yet (data/recorded/{base}-x<N>/): notebook "
                          "14's measurements need a machine with 2 to 8 GPUs. On one, record them with: "
                          "python -m course_lib.record multi_gpu.links multi_gpu.collectives ...")
    return have[-1]


def run(name: str, **params) -> Result:
    """A multi-GPU experiment: measured now on a machine with two or more GPUs; the recorded run otherwise
    (and, live on one GPU, a line that says what the measurement needs)."""
    resolved = experiments.resolve_params(name, **params)
    mode = runtime.mode()
    if mode == "render":
        return experiments.render(name, resolved)
    gpus = launcher.gpu_count() if mode == "live" else 0
    if gpus >= 2:
        result = experiments.run_live(name, resolved)
        result.machine.update(launcher.machine_manifest(), slug=machine_slug(result.machine["slug"], gpus))
        try:
            reference = replay_slug()
            result.reference = (experiments.replay(name, resolved, reference)
                                if reference != result.machine["slug"] else None)
        except NotRecorded:
            result.reference = None
        return result
    recorded = replay_slug()
    if mode == "live":
        print(f"This machine has {gpus} GPU{'s' * (gpus != 1)}: {name} measures between GPUs and needs 2 or more "
              f"(4 and 8 for the larger groups). Showing the run recorded on {recorded} instead.")
    return experiments.replay(name, resolved, recorded)
