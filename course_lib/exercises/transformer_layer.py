"""Notebook 12's exercise checks: the context at which a decode step's attention reads as much as its
projections, and the batch at which a decode projection turns compute-bound; each answer is held to the
atlas (``models.transformer``)."""
from __future__ import annotations

from course_lib.core.hardware import spec
from course_lib.exercises.base import Verdict, _close
from course_lib.models import transformer
from course_lib.models.transformer import MODELS


def attention_floor_s(model: str, batch: int, context: int, gpu: str = "h200", replicated_kv: bool = False) -> float:
    """The roofline floor of one decode step's attention: its compulsory bytes at the GPU's bandwidth."""
    shape = MODELS[model]
    op = transformer.attention_op(shape, transformer.decode(batch, context), 2, replicated_kv)
    return op.bound(spec(gpu)).seconds


def attention_crossover(model: str, batch: int) -> tuple[float, float, float]:
    """At decode, ``batch`` sequences: (the four projections' compulsory MB, the bytes one more cached token
    adds to attention's, the context at which attention's floor equals the four projections' together).
    Every op here is memory-bound (checked), so floors equal where bytes do, on any GPU."""
    shape = MODELS[model]

    def ops(context):
        return transformer.layer_ops(shape, transformer.decode(batch, context))

    proj = sum(o.bytes for o in ops(1) if o.kind == "gemm")
    att1, att2 = (next(o for o in ops(c) if o.kind == "attention").bytes for c in (1, 2))
    per_token = att2 - att1
    crossover = 1 + (proj - att1) / per_token
    gpu = spec("h200")
    if any(op.bound(gpu).binding_roof != "memory" for op in ops(max(1, round(crossover)))
           if op.kind in ("gemm", "attention")):
        raise ValueError(f"at batch {batch} a projection or attention is compute-bound: floors do not follow bytes")
    return proj / 1e6, per_token, crossover


def check_attention_crossover(model: str, batch: int, projections_mb, bytes_per_token, crossover_tokens) -> Verdict:
    """Exercise: at decode, ``batch`` sequences, the four projections' compulsory MB, the bytes one more cached
    token adds to the step's attention, and the context at which attention's floor reaches the projections'.
    Each number is judged on its own, and the crossover also against the learner's own two numbers."""
    answers = (projections_mb, bytes_per_token, crossover_tokens)
    if any(a is None for a in answers):
        return Verdict("Not answered yet: replace each None with your number.", False)
    want = attention_crossover(model, batch)
    ok = [_close(got, w, rel) for got, w, rel in zip(answers, want, (0.02, 0.01, 0.03))]
    if all(ok):
        return Verdict(f"Correct: from about {want[2]:,.0f} cached tokens on, attention reads more than the four "
                       "projections' weights at every step. Both are memory-bound, so the crossover is a ratio of "
                       "bytes: the same on any GPU on which both stay memory-bound.", True)
    lines = ["projections' MB: " + ("right" if ok[0] else "not right. Add the MB of the four projections in the "
                                    "decode table above (weights and activations)."),
             "bytes a cached token adds: " + ("right" if ok[1] else "not right. One more token is one more K row "
                                              "and V row of every KV head, in every sequence of the batch."),
             "crossover: " + ("right" if ok[2] else "not right.")]
    if not ok[2]:
        try:
            follows = _close(crossover_tokens, float(projections_mb) * 1e6 / float(bytes_per_token), 0.03)
        except (TypeError, ValueError, ZeroDivisionError):
            follows = False
        lines[2] += (" It follows from your two numbers, so fix the one marked not right." if follows else
                     " Find the context at which the attention's bytes equal the projections' bytes.")
    return Verdict("Not quite:\n  " + "\n  ".join(lines), False)


def compute_bound_batch(model: str, op_name: str, context: int, gpu: str = "h200") -> int:
    """The smallest decode batch at which ``op_name`` (a GEMM) binds on the tensor cores, not on HBM."""
    shape = MODELS[model]
    for batch in range(1, 1 << 16):
        op = next(o for o in transformer.layer_ops(shape, transformer.decode(batch, context)) if o.name == op_name)
        if op.kind != "gemm":
            raise ValueError(f"{op_name} is not a GEMM")
        if op.bound(spec(gpu)).binding_roof == "compute":
            return batch
    raise ValueError(f"{op_name} stays memory-bound up to batch 65,535")


def check_compute_bound_batch(model: str, op_name: str, context: int, answer) -> Verdict:
    """Exercise: the smallest decode batch at which ``op_name`` becomes compute-bound on the H200."""
    if answer is None:
        return Verdict("Not answered yet: replace None with a batch size.", False)
    want = compute_bound_batch(model, op_name, context)
    if not isinstance(answer, int) or isinstance(answer, bool):
        return Verdict(f"Give a whole number of sequences, got {answer!r}.", False)
    if answer == want:
        op = next(o for o in transformer.layer_ops(MODELS[model], transformer.decode(want, context)) if o.name == op_name)
        gpu = spec("h200")
        ridge = gpu.peak("bf16") / gpu.hbm_bandwidth_bytes_per_s
        return Verdict(f"Correct: batch {want}. With the activations' bytes counted beside the weight's "
                       f"(2·(M·K + K·N + M·N)), its intensity there is {op.intensity:.1f} FLOP per byte, just past "
                       f"the H200's bf16 ridge of {ridge:.1f}; by the weight's bytes alone (M FLOPs a byte) it would "
                       "pass a few sequences earlier. Below it, a decode step's projections wait on the weights, "
                       "whatever the tensor cores could do.", True)
    direction = "smaller" if answer > want else "larger"
    return Verdict(f"Not quite: {answer}. The answer is {direction}. The GEMM's intensity is 2·M·N·K FLOPs over "
                   "2·(M·K + K·N + M·N) bytes, about M while the weight dominates them; find where it crosses the "
                   "ridge (peak ÷ bandwidth).", False)
