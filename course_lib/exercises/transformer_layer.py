"""Notebook 12's exercise checks: predict a decode step's attention floor, and the batch at which a
decode projection turns compute-bound; each answer is held to the atlas (``models.transformer``)."""
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


def check_attention_floor(model: str, batch: int, context: int, answer_us) -> Verdict:
    """Exercise: the floor, in µs, of one decode step's grouped attention at ``batch`` × ``context``."""
    if answer_us is None:
        return Verdict("Not answered yet: replace None with your floor in µs.", False)
    want = attention_floor_s(model, batch, context) * 1e6
    rep = attention_floor_s(model, batch, context, replicated_kv=True) * 1e6
    if _close(answer_us, want, 0.05):
        return Verdict(f"Correct: {want:.1f} µs. The step reads each sequence's K and V once for the group, "
                       f"{batch} × {context:,} tokens × 8 KV heads × 128 × 2 (K and V) × 2 bytes, at the HBM's "
                       "bandwidth; Q and the output add next to nothing.", True)
    if _close(answer_us, rep, 0.05):
        return Verdict(f"That is the replicated cache's floor ({rep:.1f} µs): with grouped-query attention each KV "
                       "head is read once for its 4 query heads, not once per query head.", False)
    return Verdict(f"Not quite: {answer_us} µs. Count the bytes: K and V for every cached token of every KV head "
                   "of every sequence, 2 bytes an element; divide by the H200's HBM bandwidth.", False)


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
