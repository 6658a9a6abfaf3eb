"""The cost of a collective between GPUs: the α–β model, ring and tree algorithms, and the algorithm
and bus bandwidths that nccl-tests reports.

The α–β model: a message goes round in ``steps`` hops, each paying a fixed latency α (launch, handshake,
the first byte's flight), and every rank pushes ``bytes sent per rank`` through its link at B bytes/s
in each direction (β = 1/B):

    t = steps · α  +  bytes sent per rank / B

The first term rules small messages, the second large ones; they are equal at the crossover size.

What each algorithm sends, per rank, for a message of S bytes on p ranks (S is the whole array, the
convention of nccl-tests: an all-gather's output, a reduce-scatter's input):

- ring all-reduce: a reduce-scatter then an all-gather round the ring, 2(p−1) steps, each moving
  one p-th of the data: 2(p−1)/p · S sent (and as much received) by every rank.
- ring all-gather, ring reduce-scatter: one of those two phases: p−1 steps, (p−1)/p · S.
- broadcast and reduce, pipelined along a chain (NCCL's ring): the root's link carries all S; the
  first byte takes p−1 hops to reach the last rank.
- all-to-all: every rank sends a p-th of its S to each of the p−1 others, p−1 exchanges.
- tree all-reduce: NCCL's double binary tree (NCCL 2.4; NVIDIA developer blog, S. Jeaugey, "Massively
  Scale Your Deep Learning Training with NCCL 2.4", 2019): a reduction up a binary tree and a broadcast
  down it, two trees each carrying half the data. The blog claims "full bandwidth" and logarithmic
  latency; the model takes both at their word: the ring's bandwidth term, 2(p−1)/p · S / B, which
  nccl-tests' PERFORMANCE.md shows is the floor of any all-reduce built on point-to-point sends, and
  2·⌊log2 p⌋ latencies (up the depth of a complete binary tree of p nodes, and down again). Counting
  the sends of an inner node that is a leaf in the other tree gives up to 2 · S a rank, p/(p−1)
  times the ring's (8/7 at p = 8): a first-order model leaves that out.

Algorithm bandwidth and bus bandwidth, as nccl-tests defines them (its doc/PERFORMANCE.md):
algbw = S / t; busbw = algbw × a factor per collective that makes it comparable with the link's
bandwidth whatever p is: all-reduce 2(n−1)/n, reduce-scatter, all-gather and all-to-all (n−1)/n,
broadcast and reduce 1. At α = 0 the model's busbw is the link bandwidth B for every collective.

Then two uses from the course: notebook 12's Llama MLP split over p GPUs by tensor parallelism
(column-parallel gate and up, row-parallel down, one all-reduce of its output), and data
parallelism's gradient buckets (bucket size against latency and overlap).
Pure functions, no GPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from course_lib.core.hardware import BYTES_PER_ELEMENT, GpuSpec
from course_lib.core.validate import non_negative, positive, whole_number
from course_lib.models import transformer

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")
ALGORITHMS = ("ring", "tree")


def _collective(name: str) -> str:
    if name not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {name!r}")
    return name


def bus_bandwidth_factor(collective: str, ranks: int) -> float:
    """nccl-tests' factor from algorithm to bus bandwidth (doc/PERFORMANCE.md, "Summary")."""
    n = whole_number("GPU count", ranks)
    factors = {"all_reduce": 2 * (n - 1) / n, "reduce_scatter": (n - 1) / n, "all_gather": (n - 1) / n,
               "all_to_all": (n - 1) / n, "broadcast": 1.0, "reduce": 1.0}
    return factors[_collective(collective)]


def steps(collective: str, ranks: int, algorithm: str = "ring") -> int:
    """Latencies paid one after another: hops round the ring (or up and down the tree)."""
    p, collective = whole_number("GPU count", ranks), _collective(collective)
    _check_algorithm(collective, algorithm)
    if p == 1:
        return 0
    if algorithm == "tree":
        return 2 * (p.bit_length() - 1)        # 2·⌊log2 p⌋: up a complete binary tree of p nodes and down
    return 2 * (p - 1) if collective == "all_reduce" else p - 1


def sent_fraction(collective: str, ranks: int) -> float:
    """Bytes the busiest rank sends (and receives), as a share of the message: the bandwidth term's S."""
    p, collective = whole_number("GPU count", ranks), _collective(collective)
    if p == 1:
        return 0.0
    if collective == "all_reduce":
        return 2 * (p - 1) / p
    if collective in ("broadcast", "reduce"):
        return 1.0
    return (p - 1) / p


def _check_algorithm(collective: str, algorithm: str) -> None:
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if algorithm == "tree" and collective != "all_reduce":
        raise ValueError(f"NCCL's tree algorithm runs all-reduce only; a {collective.replace('_', '-')} "
                         "goes round the ring")


@dataclass(frozen=True)
class CollectiveCost:
    """The α–β model's answer for one collective of ``message_bytes`` on ``ranks`` GPUs."""

    collective: str
    algorithm: str
    ranks: int
    message_bytes: float
    link_bytes_per_s: float        # per GPU, per direction
    step_latency_s: float          # α
    steps: int
    bytes_sent_per_rank: float
    latency_s: float               # steps · α
    bandwidth_s: float             # bytes sent per rank / B

    @property
    def seconds(self) -> float:
        return self.latency_s + self.bandwidth_s

    @property
    def algbw_bytes_per_s(self) -> float | None:
        """nccl-tests' algorithm bandwidth, S / t; None on one GPU (nothing moves, no time to divide by)."""
        return self.message_bytes / self.seconds if self.seconds > 0 else None

    @property
    def busbw_bytes_per_s(self) -> float | None:
        """nccl-tests' bus bandwidth, algbw × the collective's factor: comparable with the link's B."""
        algbw = self.algbw_bytes_per_s
        return None if algbw is None else algbw * bus_bandwidth_factor(self.collective, self.ranks)

    @property
    def dominant(self) -> str:
        """Which term is larger: "latency" or "bandwidth" (or "nothing moves" on one GPU)."""
        if self.ranks == 1:
            return "nothing moves"
        return "latency" if self.latency_s > self.bandwidth_s else "bandwidth"

    @property
    def crossover_bytes(self) -> float | None:
        """The message size at which the two terms are equal: steps·α·B / (bytes sent per rank ÷ S).
        None on one GPU, and where α = 0 (the bandwidth term then rules every size)."""
        fraction = sent_fraction(self.collective, self.ranks)
        if self.ranks == 1 or self.step_latency_s == 0:
            return None
        return self.steps * self.step_latency_s * self.link_bytes_per_s / fraction


def predict(collective: str, message_bytes: float, ranks: int, link_bytes_per_s: float, step_latency_s: float,
            algorithm: str = "ring") -> CollectiveCost:
    """The α–β model's time of ``collective`` on ``ranks`` GPUs, each with ``link_bytes_per_s`` to the
    others in each direction and a latency ``step_latency_s`` (α) per step. One GPU moves nothing."""
    collective = _collective(collective)
    p = whole_number("GPU count", ranks)
    size = positive("message size", message_bytes, "bytes")
    bandwidth = positive("link bandwidth", link_bytes_per_s, "bytes/s")
    alpha = non_negative("latency per step", step_latency_s)
    _check_algorithm(collective, algorithm)
    n_steps = steps(collective, p, algorithm)
    sent = sent_fraction(collective, p) * size
    return CollectiveCost(collective, algorithm, p, size, bandwidth, alpha, n_steps, sent,
                          n_steps * alpha, sent / bandwidth)


def link_bandwidth_from_busbw(collective: str, ranks: int, message_bytes: float, seconds: float) -> float:
    """nccl-tests' bus bandwidth of a measured time: S / t × the collective's factor."""
    return (positive("message size", message_bytes, "bytes") / positive("time", seconds, "s")
            * bus_bandwidth_factor(collective, ranks))


# --------------------------------------------------------------------------- tensor parallelism

@dataclass(frozen=True)
class TensorParallelMlp:
    """One rank's share of a decoder layer's MLP split over ``ranks`` GPUs (Megatron-style): the gate and
    up projections split by columns (each rank computes mlp/p of the 2·mlp columns, no communication),
    SiLU(gate)·up on its own columns, the down projection split by rows (each rank multiplies its mlp/p
    rows of W_down and holds a partial sum of the whole output), then one all-reduce adds the partials."""

    model: str
    rows: int                      # tokens in flight, the M of every projection
    ranks: int
    dtype: str
    ops: tuple[transformer.Op, ...]   # one rank's ops, in order
    all_reduce_bytes: float        # rows × d_model × bytes per element

    @property
    def flop_per_rank(self) -> float:
        return sum(op.flop for op in self.ops)

    def compute_s(self, gpu: GpuSpec) -> float:
        """The rank's roofline floor (notebook 12's atlas: each op's bound on ``gpu``, summed)."""
        return sum(op.bound(gpu, self.dtype).seconds for op in self.ops)


def tensor_parallel_mlp(shape: transformer.ModelShape, rows: int, ranks: int,
                        dtype: str = "bf16") -> TensorParallelMlp:
    """The MLP of ``shape`` for ``rows`` tokens, split over ``ranks`` GPUs."""
    rows, p = whole_number("rows (tokens in flight)", rows), whole_number("GPU count", ranks)
    if dtype not in BYTES_PER_ELEMENT:
        raise ValueError(f"dtype must be one of {', '.join(BYTES_PER_ELEMENT)}, got {dtype!r}")
    if shape.mlp % p:
        raise ValueError(f"{shape.name}'s MLP is {shape.mlp:,} wide, which {p} GPUs cannot split evenly: "
                         "tensor parallelism gives each GPU the same number of columns")
    b, d, width = BYTES_PER_ELEMENT[dtype], shape.d_model, shape.mlp // p
    ops = (transformer.gemm_op("gate and up projections (this rank's columns)", rows, 2 * width, d, b),
           transformer.Op("SiLU(gate) · up (this rank's columns)", "elementwise", 5.0 * rows * width,
                          b * 3 * rows * width),
           transformer.gemm_op("down projection (this rank's rows, a partial sum)", rows, d, width, b))
    return TensorParallelMlp(shape.name, rows, p, dtype, ops, b * rows * d)


@dataclass(frozen=True)
class OverlapPrediction:
    """Compute and communication of one tensor-parallel MLP, run one after the other or side by side."""

    compute_s: float
    communication: CollectiveCost

    @property
    def serialized_s(self) -> float:
        return self.compute_s + self.communication.seconds

    @property
    def overlapped_s(self) -> float:
        """With independent compute beside the all-reduce (another micro-batch, the next layer's
        weights), the longer of the two: the ideal that sharing SMs and memory keeps a step from."""
        return max(self.compute_s, self.communication.seconds)

    @property
    def communication_share(self) -> float:
        """The all-reduce's share of the serialized time."""
        return self.communication.seconds / self.serialized_s


def tensor_parallel_prediction(mlp: TensorParallelMlp, gpu: GpuSpec, link_bytes_per_s: float,
                               step_latency_s: float, algorithm: str = "ring") -> OverlapPrediction:
    comm = predict("all_reduce", mlp.all_reduce_bytes, mlp.ranks, link_bytes_per_s, step_latency_s, algorithm)
    return OverlapPrediction(mlp.compute_s(gpu), comm)


# --------------------------------------------------------------------------- data-parallel gradient buckets

@dataclass(frozen=True)
class BucketPlan:
    """A backward pass that produces ``gradient_bytes`` of gradients at an even rate over ``backward_s``,
    all-reduced in buckets of ``bucket_bytes`` (the last one what is left) on one communication stream,
    one bucket after another, each started as soon as its gradients exist and the previous one is done."""

    gradient_bytes: float
    bucket_bytes: float
    ranks: int
    backward_s: float
    full_bucket: CollectiveCost
    last_bucket: CollectiveCost
    buckets: int

    @property
    def communication_s(self) -> float:
        return (self.buckets - 1) * self.full_bucket.seconds + self.last_bucket.seconds

    @property
    def latency_overhead_s(self) -> float:
        """The latency terms alone: what many small buckets pay that one big all-reduce would not."""
        return (self.buckets - 1) * self.full_bucket.latency_s + self.last_bucket.latency_s

    @property
    def finish_s(self) -> float:
        """When the last bucket's all-reduce ends, from the start of the backward pass.

        Bucket k (of n) is ready at backward_s · k·b/G (the last at backward_s) and starts when it is
        ready and the stream is free, so the stream finishes at the latest of ready_k plus the time of
        buckets k..n, over k. With equal buckets that is linear in k, so its largest value is at k = 1,
        k = n − 1 or k = n: the closed form, which holds for millions of buckets."""
        n, t, last = self.buckets, self.full_bucket.seconds, self.last_bucket.seconds
        candidates = [self.backward_s + last]                              # k = n
        for k in {1, n - 1}:
            if 1 <= k < n:
                ready = self.backward_s * k * self.bucket_bytes / self.gradient_bytes
                candidates.append(ready + (n - k) * t + last)
        return max(candidates)

    @property
    def exposed_s(self) -> float:
        """Communication left after the backward pass ends: what the step waits for."""
        return self.finish_s - self.backward_s

    @property
    def step_s(self) -> float:
        return self.finish_s


def gradient_buckets(gradient_bytes: float, bucket_bytes: float, ranks: int, backward_s: float,
                     link_bytes_per_s: float, step_latency_s: float, algorithm: str = "ring") -> BucketPlan:
    """Data parallelism's gradient all-reduce in buckets, overlapped with the backward pass."""
    grads = positive("gradient size", gradient_bytes, "bytes")
    bucket = positive("bucket size", bucket_bytes, "bytes")
    backward = positive("backward time", backward_s, "s")
    p = whole_number("GPU count", ranks)
    if bucket > grads:
        raise ValueError(f"a bucket of {bucket:,.0f} bytes is larger than all {grads:,.0f} bytes of gradients: "
                         "choose a bucket no larger than the gradients (one bucket: the whole of them)")
    n = math.ceil(grads / bucket)
    left = grads - (n - 1) * bucket

    def cost(nbytes: float) -> CollectiveCost:
        return predict("all_reduce", nbytes, p, link_bytes_per_s, step_latency_s, algorithm)

    return BucketPlan(grads, bucket, p, backward, cost(bucket), cost(left), n)
