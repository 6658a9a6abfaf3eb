"""The operation atlas of one transformer decoder layer: every op's FLOPs, compulsory bytes, intensity
and roofline bound, at prefill (many query tokens) and at decode (one new token over a KV cache).

Conventions (the course's, as for GEMMs in ``roofline``): a multiply-add is 2 FLOPs; compulsory bytes
are each operand read once and each output written once at the HBM boundary, with perfect reuse
inside the op, so a bound is a floor, not a prediction of the bytes a kernel moves. Per op:

- GEMMs (``gemm``): C[M, N] = A[M, K] · W[K, N], M the tokens in flight (batch × query tokens).
  The Q, K and V projections are one GEMM, as are the MLP's gate and up projections.
- RMSNorm: 4 FLOPs an element (square, sum, scale, weight); reads the rows and the weight, writes the rows.
- RoPE: 3 FLOPs an element of Q and K (two multiplies and an add, the sines and cosines precomputed);
  their tables are not counted.
- Attention, fused (the score matrix never leaves the chip): 4 · S_q · S_k · d_h FLOPs a query head
  (Q·Kᵀ and P·V), halved when causal at prefill; reads Q and the K and V of ``kv_heads`` heads (the
  grouped path: each KV byte read once for its group of query heads) or of every query head
  (``replicated_kv``: the cache expanded to H_q heads, as a naive GQA does), writes O; at decode it
  also appends the new token's K and V to the cache.
- SiLU · up: 5 FLOPs an element (counting the exponential as one); reads gate and up, writes one.
- Residual adds: 1 FLOP an element; reads two rows, writes one.
- The output head (once per model, not per layer) projects the last token of each sequence only,
  as generation does.
"""
from __future__ import annotations

from dataclasses import dataclass

from course_lib.core.hardware import BYTES_PER_ELEMENT, GpuSpec
from course_lib.core.validate import grouped_heads, positives, whole_numbers
from course_lib.models.memory import sector_count
from course_lib.models.roofline import RooflineBound, gemm_compulsory_bytes, gemm_flop, time_lower_bound

PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class ModelShape:
    """A decoder layer's sizes: the model width, query and KV heads, head size, MLP width, vocabulary."""

    name: str
    d_model: int
    q_heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int
    layers: int

    def __post_init__(self):
        whole_numbers(d_model=self.d_model, q_heads=self.q_heads, kv_heads=self.kv_heads, head_dim=self.head_dim,
                      mlp=self.mlp, vocab=self.vocab, layers=self.layers)
        positives(d_model=self.d_model, q_heads=self.q_heads, kv_heads=self.kv_heads, head_dim=self.head_dim,
                  mlp=self.mlp, vocab=self.vocab, layers=self.layers)
        grouped_heads(self.q_heads, self.kv_heads)

    @property
    def group(self) -> int:
        """Query heads per KV head (1: multi-head attention; q_heads: multi-query attention)."""
        return self.q_heads // self.kv_heads

    @property
    def qkv_width(self) -> int:
        return (self.q_heads + 2 * self.kv_heads) * self.head_dim

    def layer_weights(self) -> int:
        """Parameters of one layer: Q, K, V and O projections, gate, up and down, two RMSNorm weights."""
        attn = self.d_model * self.qkv_width + self.q_heads * self.head_dim * self.d_model
        return attn + 3 * self.d_model * self.mlp + 2 * self.d_model

    def parameters(self, tied_embeddings: bool = False) -> int:
        """The whole model: every layer, the embedding, the final norm and the output head."""
        embed = self.vocab * self.d_model
        return self.layers * self.layer_weights() + embed * (1 if tied_embeddings else 2) + self.d_model

    def kv_bytes_per_token(self, dtype: str = "bf16") -> float:
        """The KV cache one token adds, over all layers: K and V of every KV head."""
        return self.layers * 2 * self.kv_heads * self.head_dim * BYTES_PER_ELEMENT[dtype]


# Llama 3 8B and 70B (Meta's model cards and configuration files).
LLAMA3_8B = ModelShape("Llama 3 8B", d_model=4096, q_heads=32, kv_heads=8, head_dim=128, mlp=14336, vocab=128256,
                       layers=32)
LLAMA3_70B = ModelShape("Llama 3 70B", d_model=8192, q_heads=64, kv_heads=8, head_dim=128, mlp=28672, vocab=128256,
                        layers=80)
MODELS = {m.name: m for m in (LLAMA3_8B, LLAMA3_70B)}


@dataclass(frozen=True)
class Phase:
    """``prefill``: ``batch`` sequences of ``tokens`` new tokens each, attending to themselves (causal).
    ``decode``: ``batch`` sequences of one new token each over ``context`` tokens already cached."""

    name: str
    batch: int
    tokens: int
    context: int

    def __post_init__(self):
        if self.name not in PHASES:
            raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {self.name!r}")
        whole_numbers(batch=self.batch, tokens=self.tokens, context=self.context)
        positives(batch=self.batch, tokens=self.tokens, context=self.context)
        if self.name == "decode" and self.tokens != 1:
            raise ValueError(f"decode adds one token per sequence; got tokens={self.tokens}")
        if self.name == "prefill" and self.context != self.tokens:
            raise ValueError("at prefill a sequence attends to its own tokens: context must equal tokens")

    @property
    def rows(self) -> int:
        """Tokens in flight: the M of every projection."""
        return self.batch * self.tokens


def prefill(batch: int, tokens: int) -> Phase:
    return Phase("prefill", batch, tokens, tokens)


def decode(batch: int, context: int) -> Phase:
    return Phase("decode", batch, 1, context)


@dataclass(frozen=True)
class Op:
    name: str
    kind: str                  # "gemm", "attention", "norm", "elementwise"
    flop: float
    bytes: float
    gemm_mnk: tuple[int, int, int] | None = None

    @property
    def intensity(self) -> float:
        return self.flop / self.bytes

    def bound(self, gpu: GpuSpec, dtype: str = "bf16") -> RooflineBound:
        """The roofline floor on ``gpu``: tensor-core peak for GEMMs and attention, the fp32 peak of
        the ordinary cores for the elementwise ops and norms (they do not run on tensor cores)."""
        peak = gpu.peak(dtype if self.kind in ("gemm", "attention") else "fp32")
        return time_lower_bound(self.flop, self.bytes, peak, gpu.hbm_bandwidth_bytes_per_s)


def gemm_op(name: str, m: int, n: int, k: int, bytes_per_element: float) -> Op:
    return Op(name, "gemm", gemm_flop(m, n, k), gemm_compulsory_bytes(m, n, k, bytes_per_element), (m, n, k))


def attention_op(shape: ModelShape, phase: Phase, b: float, replicated_kv: bool = False) -> Op:
    kv_heads = shape.q_heads if replicated_kv else shape.kv_heads
    sq, sk, dh = phase.tokens, phase.context, shape.head_dim
    flop = 4.0 * phase.batch * shape.q_heads * sq * sk * dh * (0.5 if phase.name == "prefill" else 1.0)
    q_and_o = 2 * phase.batch * shape.q_heads * sq * dh
    kv_read = 2 * phase.batch * kv_heads * sk * dh
    kv_append = 2 * phase.batch * shape.kv_heads * dh if phase.name == "decode" else 0
    label = "attention (K and V replicated per query head)" if replicated_kv else "attention (grouped K and V)"
    return Op(label, "attention", flop, b * (q_and_o + kv_read + kv_append))


def layer_ops(shape: ModelShape, phase: Phase, dtype: str = "bf16", replicated_kv: bool = False) -> list[Op]:
    """One decoder layer's ops, in order, at ``phase``."""
    b, t, d = BYTES_PER_ELEMENT[dtype], phase.rows, shape.d_model

    def pointwise(name: str, kind: str, flop_per_element: float, elements: int, reads: int, weights: int = 0) -> Op:
        return Op(name, kind, flop_per_element * elements, b * (elements * (reads + 1) + weights))

    rope_elements = t * (shape.q_heads + shape.kv_heads) * shape.head_dim
    return [
        pointwise("RMSNorm (attention)", "norm", 4, t * d, reads=1, weights=d),
        gemm_op("Q, K, V projection", t, shape.qkv_width, d, b),
        pointwise("RoPE on Q and K", "elementwise", 3, rope_elements, reads=1),
        attention_op(shape, phase, b, replicated_kv),
        gemm_op("output projection", t, d, shape.q_heads * shape.head_dim, b),
        pointwise("residual add (attention)", "elementwise", 1, t * d, reads=2),
        pointwise("RMSNorm (MLP)", "norm", 4, t * d, reads=1, weights=d),
        gemm_op("gate and up projections", t, 2 * shape.mlp, d, b),
        pointwise("SiLU(gate) · up", "elementwise", 5, t * shape.mlp, reads=2),
        gemm_op("down projection", t, d, shape.mlp, b),
        pointwise("residual add (MLP)", "elementwise", 1, t * d, reads=2),
    ]


def output_head(shape: ModelShape, phase: Phase, dtype: str = "bf16") -> Op:
    """The vocabulary projection of each sequence's last token (once per model)."""
    return gemm_op("output head (last token)", phase.batch, shape.vocab, shape.d_model, BYTES_PER_ELEMENT[dtype])


@dataclass(frozen=True)
class AtlasRow:
    op: Op
    bound: RooflineBound

    @property
    def seconds(self) -> float:
        return self.bound.seconds


def atlas(shape: ModelShape, phase: Phase, gpu: GpuSpec, dtype: str = "bf16",
          replicated_kv: bool = False) -> list[AtlasRow]:
    """Each op of one layer with its roofline floor on ``gpu``."""
    return [AtlasRow(op, op.bound(gpu, dtype)) for op in layer_ops(shape, phase, dtype, replicated_kv)]


@dataclass(frozen=True)
class OverlapBound:
    """Two independent ops on two streams: what overlapping them can at best give.

    Run one after the other they take ``serial_s``. Together they still share one GPU's roofs: their FLOPs
    on the compute roofs and their bytes on HBM (``shared_floor_s``), and neither finishes before it would
    alone. So two streams take at least ``overlapped_s`` = max(the longer op, the shared floor): two ops
    that each fill the GPU (both near a roof) gain little; an op that leaves the GPU idle (too few blocks,
    or latency-bound) can hide another."""
    alone_s: tuple[float, float]
    serial_s: float
    shared_floor_s: float
    overlapped_s: float

    @property
    def best_gain(self) -> float:
        """The largest speed-up two streams can give over one: serial time over the overlapped floor."""
        return self.serial_s / self.overlapped_s

    @property
    def limiter(self) -> str:
        longer = max(self.alone_s)
        return "the longer op alone" if longer >= self.shared_floor_s else "the shared roofs"


def overlap_bound(a: Op, b: Op, a_seconds: float, b_seconds: float, gpu: GpuSpec, dtype: str = "bf16") -> OverlapBound:
    """``OverlapBound`` of ops ``a`` and ``b``, which take ``a_seconds`` and ``b_seconds`` alone (measured, or
    their floors): the shared floor adds their compute times on their own roofs and their bytes on HBM."""
    positives(a_seconds=a_seconds, b_seconds=b_seconds)
    ra, rb = a.bound(gpu, dtype), b.bound(gpu, dtype)
    shared = max(ra.compute_seconds + rb.compute_seconds, (a.bytes + b.bytes) / gpu.hbm_bandwidth_bytes_per_s)
    return OverlapBound((a_seconds, b_seconds), a_seconds + b_seconds, shared, max(a_seconds, b_seconds, shared))


def time_shares(rows: list[AtlasRow]) -> list[float]:
    """Each op's share of the layer's summed floors: where time must go, at the least."""
    total = sum(r.seconds for r in rows)
    return [r.seconds / total for r in rows]


# --------------------------------------------------------------------------- the KV cache's lane mapping

KV_LAYOUTS = ("token-major", "dimension-major")
LANES_PER_TOKEN = 16      # the course's decode kernel: lanes 0-15 one token, 16-31 the next
DIMS_PER_LANE = 8


def kv_warp_loads(layout: str, context: int, token: int = 0, head_dim: int = 128,
                  dtype: str = "bf16") -> list[tuple[list[int], int]]:
    """The load instructions one warp issues for one token pair (``token``, ``token`` + 1) of one KV
    head's K (or V) cache, as the course's decode kernel maps lanes: each as (the 32 lanes' byte
    addresses from the head's start, bytes a lane loads). Lane l holds dimensions 8·(l mod 16) to
    8·(l mod 16) + 7 of token ``token`` + l // 16. Token-major ([T, d_h], a token's row contiguous):
    one 16-byte load a lane. Dimension-major ([d_h, T]): eight 2-byte loads a lane, one dimension each,
    2·T bytes apart."""
    if layout not in KV_LAYOUTS:
        raise ValueError(f"layout must be one of {KV_LAYOUTS}, got {layout!r}")
    whole_numbers(context=context, head_dim=head_dim)
    positives(context=context, head_dim=head_dim)
    if not isinstance(token, int) or isinstance(token, bool):
        raise ValueError(f"token must be a whole number, got {token!r}")
    if head_dim != LANES_PER_TOKEN * DIMS_PER_LANE:
        raise ValueError(f"the lane mapping covers a head of {LANES_PER_TOKEN * DIMS_PER_LANE} dimensions, got {head_dim}")
    if not 0 <= token < context - 1:
        raise ValueError(f"a token pair needs token + 1 < context = {context}, got token = {token}")
    b = int(BYTES_PER_ELEMENT[dtype])
    lanes = [(token + lane // LANES_PER_TOKEN, DIMS_PER_LANE * (lane % LANES_PER_TOKEN)) for lane in range(32)]
    if layout == "token-major":
        return [([(t * head_dim + d0) * b for t, d0 in lanes], DIMS_PER_LANE * b)]
    return [([((d0 + j) * context + t) * b for t, d0 in lanes], b) for j in range(DIMS_PER_LANE)]


@dataclass(frozen=True)
class KvReadModel:
    layout: str
    instructions: int          # load instructions a warp issues for a token pair
    sectors: int               # 32-byte sectors those instructions touch, summed over instructions
    useful_bytes: int          # the pair's K (or V) bytes

    @property
    def sectors_per_instruction(self) -> float:
        return self.sectors / self.instructions

    @property
    def fetched_over_useful(self) -> float:
        """Bytes the L1 must deliver (sectors × 32) over the bytes the math needs."""
        return self.sectors * 32 / self.useful_bytes


def kv_read_model(layout: str, context: int = 8192, head_dim: int = 128, dtype: str = "bf16") -> KvReadModel:
    """The sector model (notebook 04) of one token pair's K read in ``layout``: instructions, sectors,
    and sectors delivered per useful byte."""
    loads = kv_warp_loads(layout, context, 0, head_dim, dtype)
    sectors = sum(sector_count(addresses, size).n_sectors for addresses, size in loads)
    return KvReadModel(layout, len(loads), sectors, 2 * head_dim * int(BYTES_PER_ELEMENT[dtype]))
