"""Attention's forward pass as numbers: the FLOPs of its two matrix products, the exponentials of its
softmax, the HBM bytes of a plan that materializes the score matrix against one that keeps it on chip
in tiles, and the three ceilings a kernel meets: the tensor cores, HBM, and the special-function unit
(MUFU) that computes the exponentials. Pure functions, no GPU.

Shapes: Q is (B, H_q, S_q, d); K and V are (B, H_kv, S_k, d) with H_q a multiple of H_kv (grouped-query
attention: query head h reads KV head h // (H_q / H_kv), as ``repeat_interleave`` expands them).

Causal masking (``causal=True``): query row i (0-based) sees key j iff j <= i + (S_k - S_q). The mask is
aligned to the bottom-right corner, as FlashAttention's is: the S_q queries are the last S_q tokens of a
sequence whose S_k keys are all cached, so the last query sees every key. With S_q == S_k it is the usual
j <= i. PyTorch's ``scaled_dot_product_attention(is_causal=True)`` aligns the mask to the top-left corner
instead (j <= i, whatever the lengths; ``torch.nn.attention.bias.causal_lower_right`` is its bottom-right
mask); the two agree when S_q == S_k, the only causal case the course times against it. With S_q > S_k
the first S_q - S_k rows see no key at all: their output is defined as zero (FlashAttention's choice).

Counting conventions (the course's): a multiply-add is 2 FLOPs, so S = Q·Kᵀ and O = P·V cost
2·d FLOPs each per visible (query, key) pair, 4·d together. A causal pass counts the pairs the mask
leaves visible exactly (S(S+1)/2 for a square mask), not half the square. The softmax takes one
exponential per visible pair (the online softmax adds one per row per key tile to rescale its running
sum, a term 1/block_n as large, left out here).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from course_lib.core.hardware import BYTES_PER_ELEMENT, GpuSpec, gpu_spec
from course_lib.core.validate import grouped_heads, whole_number
from course_lib.models.transformer import LLAMA3_8B, ModelShape

HEAD_DIMS = (64, 128)      # what the course's kernels are built for; the model itself takes any d


# --------------------------------------------------------------------------- the problem

@dataclass(frozen=True)
class AttentionShape:
    """One attention forward: ``batch`` sequences, ``q_heads`` query heads sharing ``kv_heads`` K and V
    heads, ``q_len`` queries over ``kv_len`` keys, head dimension ``head_dim``, causal or not."""

    batch: int
    q_heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    causal: bool

    def __post_init__(self):
        for name in ("batch", "q_heads", "kv_heads", "q_len", "kv_len", "head_dim"):
            whole_number(name, getattr(self, name))
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be True or False, got {self.causal!r}")
        grouped_heads(self.q_heads, self.kv_heads)

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.q_heads // self.kv_heads

    @property
    def heads(self) -> int:
        """(sequence, query head) pairs: B · H_q, the independent problems of one pass."""
        return self.batch * self.q_heads


def prefill_shape(batch: int, seq_len: int, head_dim: int | None = None, causal: bool = True,
                  model: ModelShape = LLAMA3_8B) -> AttentionShape:
    """A prefill's attention in ``model`` (Llama 3 8B: 32 query heads on 8 KV heads, d = 128): ``batch``
    sequences of ``seq_len`` tokens attending to themselves. ``head_dim`` overrides the model's, to ask
    the same question at d = 64."""
    return AttentionShape(batch, model.q_heads, model.kv_heads, seq_len, seq_len,
                          model.head_dim if head_dim is None else head_dim, causal)


def visible_keys(row: int, q_len: int, kv_len: int, causal: bool) -> int:
    """How many keys query ``row`` (0-based) sees: all ``kv_len``, or, causal, those j <= row + kv_len - q_len."""
    whole_number("q_len", q_len)
    whole_number("kv_len", kv_len)
    if isinstance(row, bool) or not isinstance(row, numbers.Integral) or not 0 <= row < q_len:
        raise ValueError(f"row must be a whole number from 0 to q_len - 1 = {q_len - 1}, got {row!r}")
    if not causal:
        return kv_len
    return min(kv_len, max(0, row + kv_len - q_len + 1))


def visible_pairs(q_len: int, kv_len: int, causal: bool) -> int:
    """(query, key) pairs the mask leaves visible in one head: q_len · kv_len, or, causal, the sum over
    rows of ``visible_keys``. Row i sees i + o + 1 keys (o = kv_len - q_len), from the first row that sees
    any up to the last, which sees all kv_len: the sum of the whole numbers from max(o, 0) + 1 to kv_len."""
    whole_number("q_len", q_len)
    whole_number("kv_len", kv_len)
    if not causal:
        return q_len * kv_len
    # The staircase climbs by one key a row up to kv_len; with o > 0 it starts at o + 1 keys, so the
    # steps 1 to o (o(o+1)/2 pairs) are not part of it. With o < 0 the first -o rows see nothing.
    o = max(kv_len - q_len, 0)
    return kv_len * (kv_len + 1) // 2 - o * (o + 1) // 2


def pairs(shape: AttentionShape) -> int:
    """Visible (query, key) pairs over the whole pass: B · H_q · ``visible_pairs``."""
    return shape.heads * visible_pairs(shape.q_len, shape.kv_len, shape.causal)


def flop(shape: AttentionShape) -> float:
    """4 · d FLOPs per visible pair: 2·d for its score (Q·Kᵀ), 2·d for its share of P·V. For a full mask
    that is the familiar 4 · B · H_q · S_q · S_k · d."""
    return 4.0 * shape.head_dim * pairs(shape)


def exp_count(shape: AttentionShape) -> int:
    """The softmax's exponentials: one per visible pair."""
    return pairs(shape)


# --------------------------------------------------------------------------- bytes of the two plans

def _b(bytes_per_element: float) -> float:
    ok = (not isinstance(bytes_per_element, bool) and isinstance(bytes_per_element, numbers.Real)
          and math.isfinite(bytes_per_element) and bytes_per_element > 0)
    if not ok:
        raise ValueError(f"bytes_per_element must be a finite number > 0, got {bytes_per_element!r}")
    return float(bytes_per_element)


def compulsory_bytes(shape: AttentionShape, bytes_per_element: float = BYTES_PER_ELEMENT["bf16"]) -> float:
    """Each tensor crossing HBM once: Q read and O written (B·H_q·S_q·d each), K and V read once per KV
    head (B·H_kv·S_k·d each). The floor any plan pays."""
    b = _b(bytes_per_element)
    return b * (2 * shape.heads * shape.q_len * shape.head_dim
                + 2 * shape.batch * shape.kv_heads * shape.kv_len * shape.head_dim)


def materialized_bytes(shape: AttentionShape, bytes_per_element: float = BYTES_PER_ELEMENT["bf16"]) -> float:
    """Notebook 08's ledger of the three-kernel plan: S = Q·Kᵀ reads Q and K and writes the S_q x S_k scores;
    softmax reads S and writes P; P·V reads P and V and writes O. Per query head: 2·S_q·d·b for Q and O,
    2·S_k·d·b for K and V (each query head's matmul reads its K and V), 4·S_q·S_k·b for the score matrix
    written and read twice over. A causal mask does not shrink it: the whole matrix is written, then
    masked. With S_q = S_k and one KV head per query head this is ``fusion.attention_bytes(fused=False)``."""
    b = _b(bytes_per_element)
    sq, sk, d = shape.q_len, shape.kv_len, shape.head_dim
    return b * shape.heads * (2 * sq * d + 2 * sk * d + 4 * sq * sk)


def query_tiles(q_len: int, block_m: int) -> int:
    """Query tiles of ``block_m`` rows over ``q_len`` queries (the last one partial if it does not divide)."""
    return -(-whole_number("q_len", q_len) // whole_number("block_m", block_m))


def keys_read_per_head(q_len: int, kv_len: int, block_m: int, causal: bool) -> int:
    """Keys a tiled kernel reads from K (and as many from V) for one query head: each query tile streams
    every key its last row sees (its earlier rows see fewer, and are masked within the tiles they share).
    Whole key tiles past a partial one are not read, so no rounding to a key tile is counted."""
    tiles = query_tiles(q_len, block_m)
    return sum(visible_keys(min((t + 1) * block_m, q_len) - 1, q_len, kv_len, causal) for t in range(tiles))


def tiled_bytes(shape: AttentionShape, block_m: int = 128,
                bytes_per_element: float = BYTES_PER_ELEMENT["bf16"]) -> float:
    """The tiled plan's HBM bytes if no re-read hits a cache: Q read once and O written once, and K and V
    read again by every query tile of every query head (``keys_read_per_head``). The scores never leave the
    chip. For a full mask the K and V term is 2·S_k·d·b per query tile, so the plan's intensity is about
    4·S_q·S_k·d / (2·S_k·d·b·S_q/block_m) = 2·block_m / b FLOP per byte: set by the tile height, not by the
    sequence. What the L2 serves of these re-reads (the query tiles of one head, and the heads of one KV
    group, read the same K and V) brings the bytes down toward ``compulsory_bytes``."""
    b = _b(bytes_per_element)
    keys = keys_read_per_head(shape.q_len, shape.kv_len, block_m, shape.causal)
    return b * (2 * shape.heads * shape.q_len * shape.head_dim + 2 * shape.heads * keys * shape.head_dim)


def tile_pairs(q_len: int, kv_len: int, block_m: int, block_n: int, causal: bool) -> int:
    """Pairs the tensor cores compute in a kernel that skips only whole tiles: every (query tile, key tile)
    holding at least one visible pair is computed in full, block_m x block_n, its hidden pairs masked
    afterwards. Against ``visible_pairs``, the diagonal's waste (and the tails' padding)."""
    whole_number("block_n", block_n)
    total = 0
    for t in range(query_tiles(q_len, block_m)):
        last_row = min((t + 1) * block_m, q_len) - 1
        keys = visible_keys(last_row, q_len, kv_len, causal)
        total += block_m * block_n * -(-keys // block_n)
    return total


# --------------------------------------------------------------------------- the three ceilings

def exp_results_per_s(gpu: GpuSpec | str) -> float:
    """The chip's rate of exponentials: special-function results per clock per SM (the CUDA programming
    guide's throughput table, in the spec table) x SMs x boost clock. An ``exp2`` is one MUFU result; the
    scale and log2(e) fold into the FMA before it."""
    g = gpu_spec(gpu)
    if g.sfu_results_per_clock_per_sm is None or g.boost_clock_mhz is None:
        raise ValueError(f"the spec table has no special-function rate or no boost clock for {g.name}, "
                         "so its exponential ceiling cannot be computed")
    return g.sfu_results_per_clock_per_sm * g.sm_count * g.boost_clock_mhz * 1e6


def exp_over_tensor(head_dim: int, gpu: GpuSpec | str, dtype: str = "bf16") -> float:
    """The exponential's time over the matrix products' time, per visible pair: (1 / exp rate) over
    (4·d / tensor peak) = peak / (4 · d · exp rate). Independent of the shape: it falls as d grows."""
    g = gpu_spec(gpu)
    return g.peak(dtype) / (4 * whole_number("head_dim", head_dim) * exp_results_per_s(g))


def balanced_head_dim(gpu: GpuSpec | str, dtype: str = "bf16") -> float:
    """The head dimension at which the exponentials take as long as the matrix products: peak / (4 · exp
    rate). Below it the MUFU is the slower unit."""
    g = gpu_spec(gpu)
    return g.peak(dtype) / (4 * exp_results_per_s(g))


ROOFS = ("tensor cores", "HBM", "exponentials (MUFU)")


@dataclass(frozen=True)
class Ceilings:
    """One pass's three floors on one GPU, each the time its unit needs alone at its datasheet rate."""

    gpu: str
    shape: AttentionShape
    flop: float
    exps: int
    compulsory_bytes: float
    tiled_bytes: float
    block_m: int
    tensor_s: float              # flop / bf16 tensor peak
    memory_s: float              # compulsory bytes / HBM bandwidth
    memory_tiled_s: float        # tiled bytes, no re-read cached / HBM bandwidth
    exp_s: float                 # exponentials / MUFU rate

    @property
    def by_roof(self) -> dict[str, float]:
        return dict(zip(ROOFS, (self.tensor_s, self.memory_s, self.exp_s)))

    @property
    def seconds(self) -> float:
        """The floor: the slowest unit, every unit overlapped with the others."""
        return max(self.by_roof.values())

    @property
    def binding(self) -> str:
        return max(self.by_roof, key=self.by_roof.get)

    @property
    def serial_s(self) -> float:
        """Tensor time plus exponential time: a kernel whose softmax never overlaps its matrix products
        (each warp waits for its own exponentials before its next MMA, and no other warp fills the gap)."""
        return self.tensor_s + self.exp_s

    @property
    def serial_fraction_of_peak(self) -> float:
        """The share of the tensor peak that kernel can reach: tensor / (tensor + exp)."""
        return self.tensor_s / self.serial_s

    @property
    def tiled_memory_binds(self) -> bool:
        """Whether the tiled plan's bytes, with no re-read cached, would take longer than the tensor cores."""
        return self.memory_tiled_s > self.tensor_s


def ceilings(shape: AttentionShape, gpu: GpuSpec | str, block_m: int = 128, dtype: str = "bf16") -> Ceilings:
    """The tensor-core, memory and exponential floors of ``shape`` on ``gpu`` (datasheet figures from the
    spec table): which binds, and by how much. ``block_m``: the query tile height of the tiled plan."""
    g = gpu_spec(gpu)
    b = BYTES_PER_ELEMENT[dtype]
    f, exps = flop(shape), exp_count(shape)
    comp, tiled = compulsory_bytes(shape, b), tiled_bytes(shape, block_m, b)
    bw = g.hbm_bandwidth_bytes_per_s
    return Ceilings(g.name, shape, f, exps, comp, tiled, block_m, f / g.peak(dtype), comp / bw, tiled / bw,
                    exps / exp_results_per_s(g))


# --------------------------------------------------------------------------- online softmax on one row

@dataclass(frozen=True)
class TileStep:
    """One key tile of the online softmax on one query row: what the running state was and became.

    m: the running maximum of the scores seen; l: the running sum of exp(s - m); acc: the running sum of
    exp(s - m) · v, a vector of V's width. On a new maximum the old l and acc were scaled by the old m, so
    both are rescaled by exp(m_old - m_new) before this tile's terms are added."""

    first_key: int
    scores: tuple[float, ...]
    tile_max: float
    m_old: float
    m_new: float
    rescale: float                 # exp(m_old - m_new): 0 on the first tile (m_old = -inf), 1 if the max held
    p: tuple[float, ...]           # exp(s - m_new) for each key of the tile
    l_old: float
    l_new: float
    acc_old: tuple[float, ...]
    acc_new: tuple[float, ...]


@dataclass(frozen=True)
class OnlineSoftmaxRow:
    steps: tuple[TileStep, ...]
    output: tuple[float, ...]      # acc / l after the last tile: softmax(scores) · V

    @property
    def row_max(self) -> float:
        return self.steps[-1].m_new

    @property
    def row_sum(self) -> float:
        """Σ exp(s - row_max) over every key."""
        return self.steps[-1].l_new


def _row_inputs(scores, values) -> tuple[tuple[float, ...], tuple[tuple[float, ...], ...]]:
    s = tuple(float(x) for x in scores)
    if not s:
        raise ValueError("scores must hold at least one key's score, got none")
    if any(math.isnan(x) or x == math.inf for x in s):
        raise ValueError("scores must be finite numbers (or -inf for a masked key)")
    v = tuple(tuple(float(x) for x in row) for row in values)
    if len(v) != len(s):
        raise ValueError(f"values must hold one row per key: {len(s)} scores but {len(v)} rows of V")
    width = len(v[0])
    if width == 0 or any(len(row) != width for row in v):
        raise ValueError("every row of values must have the same, non-zero length (V's width)")
    if any(not math.isfinite(x) for row in v for x in row):
        raise ValueError("values must be finite numbers")
    return s, v


def online_softmax_row(scores, values, tile: int) -> OnlineSoftmaxRow:
    """softmax(scores) · values for one query row, computed tile by tile as a FlashAttention kernel does:
    only one tile of scores exists at a time, and the row's maximum is not known until the last one.

    For each tile: m_new = max(m_old, max(tile)); rescale = exp(m_old - m_new); p = exp(s - m_new);
    l_new = l_old · rescale + Σ p; acc_new = acc_old · rescale + Σ p_j · v_j. The output is acc / l.
    A key scored -inf is masked (p = 0); a tile whose keys are all masked while m is still -inf leaves
    the state as it was. Every intermediate is returned, so a notebook can print the row with numbers."""
    s, v = _row_inputs(scores, values)
    whole_number("tile", tile)
    width = len(v[0])
    m, l_sum, acc = -math.inf, 0.0, (0.0,) * width
    steps = []
    for start in range(0, len(s), tile):
        chunk = s[start:start + tile]
        tile_max = max(chunk)
        m_new = max(m, tile_max)
        if m_new == -math.inf:       # nothing visible yet: exp(-inf - (-inf)) is undefined, and nothing changes
            rescale, p = 1.0, (0.0,) * len(chunk)
        else:
            rescale = math.exp(m - m_new)
            p = tuple(math.exp(x - m_new) for x in chunk)
        l_new = l_sum * rescale + sum(p)
        acc_new = tuple(a * rescale + sum(pj * v[start + j][c] for j, pj in enumerate(p)) for c, a in enumerate(acc))
        steps.append(TileStep(start, chunk, tile_max, m, m_new, rescale, p, l_sum, l_new, acc, acc_new))
        m, l_sum, acc = m_new, l_new, acc_new
    if l_sum == 0.0:
        raise ValueError("every key is masked (-inf): the row's softmax is undefined")
    return OnlineSoftmaxRow(tuple(steps), tuple(a / l_sum for a in acc))


def softmax_row(scores, values) -> tuple[float, ...]:
    """softmax(scores) · values computed directly: the row's maximum first, then one pass. What the online
    recurrence must equal."""
    s, v = _row_inputs(scores, values)
    m = max(s)
    if m == -math.inf:
        raise ValueError("every key is masked (-inf): the row's softmax is undefined")
    p = [math.exp(x - m) for x in s]
    total = sum(p)
    return tuple(sum(pj * v[j][c] for j, pj in enumerate(p)) / total for c in range(len(v[0])))
