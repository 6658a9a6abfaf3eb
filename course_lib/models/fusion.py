"""Fusion as a byte ledger: what HBM traffic a chain of elementwise ops pays run as separate
kernels, against the same chain run as one kernel.

Each separate kernel reads its inputs from HBM and writes its output back, so every intermediate
Z between two kernels crosses HBM twice (written by its producer, read by its consumer):

    Q_saved ≈ 2 · |Z| · b_Z        per intermediate the fused kernel keeps in registers

A pointwise map with c_f FLOPs per element, one read and one write of b bytes, has intensity
c_f / (2b): far left of any ridge, so its time is the bytes. Fusing k such ops keeps the bytes of one
and the FLOPs of all k, so the fused intensity is k · c_f / (2b) and grows until the compute roof binds.

Both plans are roofline lower bounds, max(F/C, Q/B): no launch overhead, caches, or the registers a
longer fused kernel holds (which can cost residency or spill and hand the saved bytes back). Fusion is
a hypothesis the numbers motivate and a measurement settles. Pure functions, no GPU.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from course_lib.core.hardware import BYTES_PER_ELEMENT, GpuSpec, gpu_spec
from course_lib.core.validate import whole_number
from course_lib.models import roofline

# GELU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). Around the tanh sit 8 multiplies and
# adds; the tanh is counted as 6 more (a hardware tanh.approx is one instruction, a software one a
# dozen or more). An estimate: any count from about 8 to 20 is defensible and the chain stays far
# below the ridge either way.
GELU_FLOP_PER_ELEMENT = 14.0


def _amount(name: str, value, *, zero_ok: bool) -> float:
    """A finite real ≥ 0 (or > 0), or a ValueError naming the parameter and what it may be."""
    ok = (not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
          and (value >= 0 if zero_ok else value > 0))
    if not ok:
        allowed = "a finite number ≥ 0 (0 for none)" if zero_ok else "a finite number > 0"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return float(value)


def _bytes_of(dtype: str) -> float:
    if dtype not in BYTES_PER_ELEMENT:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(BYTES_PER_ELEMENT)}")
    return BYTES_PER_ELEMENT[dtype]


# --------------------------------------------------------------------------- one intermediate

def tensor_bytes(elements: int, bytes_per_element: float) -> float:
    """|Z| · b_Z: the bytes of one tensor in HBM."""
    return whole_number("elements", elements) * _amount("bytes_per_element", bytes_per_element, zero_ok=False)


def materialization_bytes(elements: int, bytes_per_element: float) -> float:
    """2 · |Z| · b_Z: an intermediate written once by its producer and read once by its consumer."""
    return 2 * tensor_bytes(elements, bytes_per_element)


def round_trip_seconds(bytes_moved: float, bandwidth_bytes_per_s: float) -> float:
    """Q / B: the time those bytes take at full bandwidth, the most that removing them can save."""
    return (_amount("bytes_moved", bytes_moved, zero_ok=True)
            / _amount("bandwidth_bytes_per_s", bandwidth_bytes_per_s, zero_ok=False))


def pointwise_intensity(flop_per_element: float, bytes_per_element: float) -> float:
    """c_f / (2b): one element read and one written per c_f FLOPs."""
    return roofline.arithmetic_intensity(_amount("flop_per_element", flop_per_element, zero_ok=True),
                                         2 * _amount("bytes_per_element", bytes_per_element, zero_ok=False))


# --------------------------------------------------------------------------- ops and chains

@dataclass(frozen=True)
class Op:
    """One elementwise step, counted per element of the chain's tensor.

    It reads its predecessor's output (the chain's input for the first op) plus
    ``extra_in_bytes_per_element`` of its own inputs (a residual; a bias vector broadcast over rows is
    small enough to count as 0), and writes ``out_bytes_per_element``. A reduction over a row
    (``reduces=True``) writes one value per row, so its out bytes per element are b / row length.
    """

    name: str
    flop_per_element: float
    out_bytes_per_element: float
    extra_in_bytes_per_element: float = 0.0
    reduces: bool = False

    def __post_init__(self):
        where = f" (op {self.name!r})"
        for field, zero_ok in (("flop_per_element", True), ("out_bytes_per_element", False),
                               ("extra_in_bytes_per_element", True)):
            try:
                _amount(field, getattr(self, field), zero_ok=zero_ok)
            except ValueError as exc:
                raise ValueError(str(exc) + where) from None


@dataclass(frozen=True)
class Chain:
    """``ops`` applied in order to a tensor of ``elements`` elements of ``in_bytes_per_element`` each."""

    ops: tuple[Op, ...]
    elements: int
    in_bytes_per_element: float

    def __post_init__(self):
        object.__setattr__(self, "ops", tuple(self.ops))
        if not self.ops:
            raise ValueError("ops must hold at least one Op, got an empty chain")
        if not all(isinstance(op, Op) for op in self.ops):
            raise ValueError("ops must all be Op instances")
        whole_number("elements", self.elements)
        _amount("in_bytes_per_element", self.in_bytes_per_element, zero_ok=False)

    @property
    def flop(self) -> float:
        return self.elements * sum(op.flop_per_element for op in self.ops)


def _kernels(chain: Chain, fused: bool) -> list[tuple[Op, ...]]:
    """The ops each kernel runs. Unfused: one op a kernel. Fused: one kernel, except that the model
    ends a kernel after every reduction but the last op: a row's reduced value needs the whole row,
    which other blocks compute, so it goes through HBM. (Fused norms avoid this by giving each row to
    one block; this model keeps the simpler rule.)"""
    if not fused:
        return [(op,) for op in chain.ops]
    kernels, current = [], []
    for op in chain.ops:
        current.append(op)
        if op.reduces:
            kernels.append(tuple(current))
            current = []
    return [*kernels, tuple(current)] if current else kernels


def _hbm_bytes(chain: Chain, kernels: list[tuple[Op, ...]]) -> float:
    """Each kernel reads its first op's input and its ops' extra inputs, and writes its last op's output."""
    total, incoming = 0.0, chain.in_bytes_per_element
    for ops in kernels:
        total += incoming + sum(op.extra_in_bytes_per_element for op in ops) + ops[-1].out_bytes_per_element
        incoming = ops[-1].out_bytes_per_element
    return chain.elements * total


# --------------------------------------------------------------------------- the ledger

@dataclass(frozen=True)
class Plan:
    """One way to run the chain: how many kernels, and its roofline bound."""

    launches: int
    bound: roofline.RooflineBound

    @property
    def bytes_moved(self) -> float:
        return self.bound.bytes_moved

    @property
    def flop(self) -> float:
        return self.bound.flop

    @property
    def intensity(self) -> float:
        return self.bound.intensity

    @property
    def seconds(self) -> float:
        return self.bound.seconds

    @property
    def binding_roof(self) -> str:
        return self.bound.binding_roof


@dataclass(frozen=True)
class Plans:
    """The unfused and fused plans of one chain on one GPU."""

    gpu: str
    dtype: str
    peak_flop_per_s: float
    bandwidth_bytes_per_s: float
    unfused: Plan
    fused: Plan

    @property
    def ridge(self) -> float:
        return roofline.ridge_point(self.peak_flop_per_s, self.bandwidth_bytes_per_s)

    @property
    def bytes_saved(self) -> float:
        """Q_saved: the HBM bytes of the intermediates the fused kernel no longer materializes."""
        return self.unfused.bytes_moved - self.fused.bytes_moved

    @property
    def seconds_saved(self) -> float:
        """Q_saved / B: the bandwidth-only time of the removed bytes."""
        return round_trip_seconds(self.bytes_saved, self.bandwidth_bytes_per_s)

    @property
    def speedup_bound(self) -> float:
        """Unfused bound over fused bound. Neither counts launch overhead, so for small tensors, where
        launches dominate, fusion can gain more than this; register pressure can make it gain less."""
        return self.unfused.seconds / self.fused.seconds


def ledger(chain: Chain, gpu: GpuSpec | str, dtype: str = "fp32") -> Plans:
    """Both plans of ``chain`` on ``gpu``: HBM bytes, launches, FLOPs, intensity and max(F/C, Q/B).

    C is the datasheet peak for ``dtype``, the math's precision, not the storage's. Elementwise code
    runs on CUDA cores, with 16-bit values widened to fp32, so the default is the fp32 peak; the
    tensor-core bf16 or fp8 peaks apply only to matrix multiplies. B is the HBM bandwidth.
    """
    g = gpu_spec(gpu)
    peak, bw = g.peak(dtype), g.hbm_bandwidth_bytes_per_s

    def plan(fused: bool) -> Plan:
        kernels = _kernels(chain, fused)
        return Plan(len(kernels), roofline.time_lower_bound(chain.flop, _hbm_bytes(chain, kernels), peak, bw))

    return Plans(g.name, dtype, peak, bw, plan(fused=False), plan(fused=True))


def compute_bound_chain_length(flop_per_op_element: float, bytes_per_element: float, gpu: GpuSpec | str,
                               dtype: str = "fp32") -> int:
    """The fewest k identical unary ops whose fused chain, at k · c / (2b) FLOP/byte, reaches the ridge."""
    flop = _amount("flop_per_op_element", flop_per_op_element, zero_ok=False)
    b = _amount("bytes_per_element", bytes_per_element, zero_ok=False)
    g = gpu_spec(gpu)
    return math.ceil(g.peak(dtype) * 2 * b / (flop * g.hbm_bandwidth_bytes_per_s))


# --------------------------------------------------------------------------- presets

def scale_bias_gelu_residual(elements: int, dtype: str = "bf16") -> Chain:
    """y = x_residual + GELU(a·x + bias): a typical epilogue after a projection. The bias vector is
    read once per row and counted as 0 bytes; the residual is a full tensor read by the last op."""
    b = _bytes_of(dtype)
    return Chain((Op("scale", 1.0, b), Op("bias", 1.0, b), Op("GELU", GELU_FLOP_PER_ELEMENT, b),
                  Op("residual add", 1.0, b, extra_in_bytes_per_element=b)), elements, b)


def elementwise_chain(k: int, elements: int, flop_per_op_element: float = 1.0, dtype: str = "fp32") -> Chain:
    """k identical unary ops, each reading and writing one ``dtype`` tensor."""
    b = _bytes_of(dtype)
    _amount("flop_per_op_element", flop_per_op_element, zero_ok=True)
    return Chain(tuple(Op(f"op {i + 1}", flop_per_op_element, b) for i in range(whole_number("k", k))), elements, b)


# --------------------------------------------------------------------------- attention's score matrix

def attention_bytes(seq_len: int, head_dim: int, batch_heads: int, bytes_per_element: float, fused: bool) -> float:
    """HBM bytes of one attention forward, per the ledger.

    Fused (one kernel, scores kept on chip): read Q, K, V and write O, 4·N·d·b a head. Naive (three
    kernels): S = Q·Kᵀ reads Q and K and writes the N x N scores; softmax reads S and writes P; P·V
    reads P and V and writes O: 4·N·d·b + 4·N²·b a head. The N² term is the trap: at N = 8192 and
    d = 64 it makes the naive plan 1 + N/d = 129 times the fused plan's bytes.
    """
    n, d = whole_number("seq_len", seq_len), whole_number("head_dim", head_dim)
    bh = whole_number("batch_heads", batch_heads)
    b = _amount("bytes_per_element", bytes_per_element, zero_ok=False)
    per_head = 4 * n * d * b + (0 if fused else 4 * n * n * b)
    return bh * per_head
