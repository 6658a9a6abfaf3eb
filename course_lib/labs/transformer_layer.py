"""Notebook 12's experiments: one decoder layer of a real model, predicted by the atlas
(``models.transformer``) and then measured.

* ``layer.memory_ceilings``: the read bandwidth of a working set served by L1, by L2 and by HBM
  (``kernels/memory_hierarchy.cu``): the hierarchical roofline's three ceilings, measured. The "L2" one is
  the partitioned read of a set that fits the L2; its loads go through L1 and each SM re-reads the same
  share every repetition, so L1 hits are not excluded from it (``scripts/probe_l2_ceiling.py`` tests that).
* ``layer.decode_attention``: one decode step's attention over a bf16 KV cache, Llama 3 8B's 32
  query heads on 8 KV heads, at several batches and context lengths: the course's grouped kernel
  (each KV byte read once per group), the same math over a cache replicated to 32 heads, the grouped
  kernel over a dimension-major cache, PyTorch's SDPA with ``enable_gqa`` and SDPA over K and V
  expanded by ``repeat_interleave``; one read of the cache as the floor. ncu counts the bytes.
* ``layer.ops``: every op of the layer at prefill and at decode in PyTorch (cuBLAS, SDPA with its
  kernel named, eager elementwise ops) and, on a Hopper GPU, the course's GEMM for the four projections
  (the plan notebook 10's dispatch picks for each shape: a rung, or split-K) and its decode attention; then
  the layer end to end:
  eager, as one CUDA graph, and through ``torch.compile``, each held and (the second protocol) back to back.
"""
from __future__ import annotations

import numpy as np

from course_lib.core import cuda
from course_lib.core.hardware import BYTES_PER_ELEMENT, detect, gpu_spec, slug
from course_lib.core.timing import GpuHold, benchmark, benchmark_interleaved
from course_lib.launch import decode_attention as decode
from course_lib.launch import hopper_gemm
from course_lib.launch.memory_hierarchy import bytes_read, full_grid, run_read
from course_lib.launch.operands import (bf16_bits, bf16_bits_to_float32, bf16_tolerance_rel, random_operand,
                                       to_bf16_bits, torch_view)
from course_lib.measure import experiments, profiler
from course_lib.measure.conditions import is_reference, protocol_cells
from course_lib.measure.evidence import Case, Check, NotRecorded
from course_lib.measure.experiments import beside_reference, check_close, experiment, require_passed
from course_lib.measure.profiler import kernels_launched, short_kernel_name
from course_lib.measure.target import Target
from course_lib.models import transformer
from course_lib.models.transformer import MODELS
from course_lib.models.transformer import decode as decode_phase
from course_lib.models.transformer import prefill as prefill_phase

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
BF16 = BYTES_PER_ELEMENT["bf16"]

# --------------------------------------------------------------------------- memory ceilings

L1_SETS = [4 * KIB, 16 * KIB, 64 * KIB, 128 * KIB, 192 * KIB]
SHARED_SETS = [MIB, 4 * MIB, 16 * MIB, 32 * MIB, 48 * MIB, 64 * MIB, 96 * MIB, 256 * MIB, GIB, 4 * GIB]


@experiment("layer.memory_ceilings",
            "Read bandwidth of a working set read over and over: every block reading the whole set "
            "(served by L1 when it fits) and the grid sharing one sweep (L2 when the set fits, else HBM).",
            per_block_sets=L1_SETS, shared_sets=SHARED_SETS, bytes_per_launch=4 * GIB, samples=20)
def memory_ceilings(per_block_sets: list[int], shared_sets: list[int], bytes_per_launch: int,
                    samples: int) -> list[Case]:
    import cupy

    blocks = full_grid(detect().sm_count)
    sink = cupy.zeros(1, cupy.uint32)
    cases = []
    for kind, sets in (("per block", per_block_sets), ("partitioned", shared_sets)):
        for set_bytes in sets:
            buf = cupy.random.default_rng(set_bytes).integers(0, 2**32, set_bytes // 4, dtype=cupy.uint64)
            buf = buf.astype(cupy.uint32)
            reps = max(1, round(bytes_per_launch / bytes_read(kind, set_bytes, 1, blocks)))
            # The check: every word read once a sweep. The XOR of all threads' reads is the set's (read by
            # an odd number of blocks, for the per-block kernel, so that the copies do not cancel).
            want = int(np.bitwise_xor.reduce(cupy.asnumpy(buf)))
            sink.fill(0)
            run_read(kind, buf, 1, blocks | 1, sink, check=True)
            got = int(sink[0])
            check = Check("XOR of the set, computed on the host", float(got != want), 0.0).to_json()
            t = benchmark(lambda: run_read(kind, buf, reps, blocks, sink), samples)
            cases.append(require_passed(Case(
                f"{kind}, {set_bytes} B", {"kind": kind, "set_bytes": set_bytes}, f"memory_hierarchy.{kind}", t,
                0.0, float(bytes_read(kind, set_bytes, reps, blocks)), check,
                {"grid": [blocks], "block": [256], "dynamic_smem_bytes": 0},
                extra={"reps": reps})))
    return cases


def ceilings(result) -> dict[str, float]:
    """The three ceilings in bytes/s: L1, the best per-block read of a set that fits every SM's L1
    (64 KiB or less); L2, the best shared read of a set at most half the L2 (L1 hits not excluded: each
    SM re-reads the same share of it); HBM, the median shared read of a set at least 16 times the L2
    (no reuse possible)."""
    l2 = result.machine["l2_bytes"]
    per_block = [c for c in result.cases if c.params["kind"] == "per block" and c.params["set_bytes"] <= 64 * KIB]
    in_l2 = [c for c in result.cases if c.params["kind"] == "partitioned" and c.params["set_bytes"] <= l2 // 2]
    beyond = [c for c in result.cases if c.params["kind"] == "partitioned" and c.params["set_bytes"] >= 16 * l2]
    if not (per_block and in_l2 and beyond):
        raise ValueError("this run has no set for one of the three levels; run layer.memory_ceilings with "
                         "sets up to 64 KiB, up to half the L2 and at least 16 times the L2")
    return {"L1": max(c.bandwidth_bytes_per_s for c in per_block),
            "L2": max(c.bandwidth_bytes_per_s for c in in_l2),
            "HBM": float(np.median([c.bandwidth_bytes_per_s for c in beyond]))}


@beside_reference
def ceiling_rows(result) -> list[dict]:
    return [{"read": c.params["kind"], "working set": _size(c.params["set_bytes"]),
             "bytes a launch": _size(int(c.bytes)), "median µs": c.median_s * 1e6,
             "TB/s": c.bandwidth_bytes_per_s / 1e12} for c in result.cases]


def _size(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


# --------------------------------------------------------------------------- decode attention

GROUPED = "course, grouped (each KV head read once for its 4 query heads)"
REPLICATED = "course, KV replicated to 32 heads"
DIM_MAJOR = "course, grouped, dimension-major cache"
SDPA_GQA = "PyTorch SDPA, enable_gqa=True"
SDPA_EXPANDED = "PyTorch SDPA on repeat_interleave'd K and V"
CACHE_READ = "one read of the K and V cache (the floor)"
DECODE_PLANS = (CACHE_READ, GROUPED, REPLICATED, DIM_MAJOR, SDPA_GQA, SDPA_EXPANDED)
# The tables' short names for the plans (the notebook's list of plans is their legend); the cases keep the long ones.
SHORT = {CACHE_READ: "cache read", GROUPED: "grouped", REPLICATED: "replicated", DIM_MAJOR: "dim-major",
         SDPA_GQA: "SDPA-GQA", SDPA_EXPANDED: "SDPA-expanded"}
DECODE_METRICS = ["dram__bytes_read.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
                  "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
                  "gpu__time_duration.sum", "smsp__issue_active.avg.pct_of_peak_sustained_active",
                  "smsp__inst_executed.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed"]


class _DecodeOperands:
    """Q, one K-and-V allocation (K and V its two halves, so one launch can read both), the
    replicated and dimension-major copies, and their torch views."""

    def __init__(self, shape: transformer.ModelShape, batch: int, context: int, seed: int):
        import cupy
        import torch

        g, hkv, d = shape.group, shape.kv_heads, decode.HEAD_DIM
        self.group = g
        self.q = to_bf16_bits(random_operand((batch, hkv * g, d), seed) * 2)
        self.kv = to_bf16_bits(random_operand((2, batch, hkv, context, d), seed + 1) * 2)
        self.k, self.v = self.kv[0], self.kv[1]
        self.k_rep, self.v_rep = (cupy.ascontiguousarray(cupy.repeat(x, g, axis=1)) for x in (self.k, self.v))
        self.k_dm, self.v_dm = (cupy.ascontiguousarray(x.transpose(0, 1, 3, 2)) for x in (self.k, self.v))
        self.out = cupy.full(self.q.shape, 0xFFFF, dtype=cupy.uint16)
        self.tq = torch_view(self.q).view(batch, hkv * g, 1, d)
        self.tk, self.tv = torch_view(self.k), torch_view(self.v)
        self.torch = torch

    def plans(self, sink, blocks: int) -> dict:
        import torch.nn.functional as F

        g, o = self.group, self.out
        return {
            CACHE_READ: lambda: run_read("partitioned", self.kv, 1, blocks, sink),
            GROUPED: lambda: decode.run_decode(self.q, self.k, self.v, o, g),
            REPLICATED: lambda: decode.run_decode(self.q, self.k_rep, self.v_rep, o, 1),
            DIM_MAJOR: lambda: decode.run_decode(self.q, self.k_dm, self.v_dm, o, g, "dimension-major"),
            SDPA_GQA: lambda: F.scaled_dot_product_attention(self.tq, self.tk, self.tv, enable_gqa=True),
            SDPA_EXPANDED: lambda: F.scaled_dot_product_attention(
                self.tq, self.tk.repeat_interleave(g, 1), self.tv.repeat_interleave(g, 1)),
        }


def _decode_output(plan: str, result, ops: _DecodeOperands):
    """A plan's output as float32 CuPy [B, Hq, 128] (the course's kernels write ``ops.out``)."""
    import cupy

    if not hasattr(result, "float"):   # a course kernel: it wrote ops.out (and returned its splits)
        return bf16_bits_to_float32(ops.out)
    return cupy.asarray(result.float().reshape(ops.q.shape))


def plan_bytes(shape: transformer.ModelShape, batch: int, context: int, plan: str) -> float:
    """The bytes a plan must move by its own data layout (the model's, not ncu's): the grouped floor;
    the replicated cache's; and for the expanding plan its copies too (read K and V, write them
    four times over, read those)."""
    phase = decode_phase(batch, context)
    grouped = transformer.attention_op(shape, phase, BF16).bytes
    replicated = transformer.attention_op(shape, phase, BF16, replicated_kv=True).bytes
    kv = 2 * batch * shape.kv_heads * context * shape.head_dim * BF16
    if plan == CACHE_READ:
        return float(kv)
    if plan == REPLICATED:
        return replicated
    if plan == SDPA_EXPANDED:
        return replicated + kv + shape.group * kv
    return grouped


def profile_decode(model: str, batch: int, context: int) -> None:
    """Each course kernel once: what ncu profiles (its ``^decode_`` filter leaves out the set-up)."""
    import cupy

    ops = _DecodeOperands(MODELS[model], batch, context, 7)
    plans = ops.plans(cupy.zeros(1, cupy.uint32), full_grid(detect().sm_count))
    for plan in PROFILED_PLANS:
        plans[plan]()
    cupy.cuda.Device().synchronize()


PROFILED_PLANS = (GROUPED, REPLICATED, DIM_MAJOR)
PROFILED_KERNELS = r"^decode_"


def _attach_decode_profile(cases: dict, model: str, batch: int, context: int) -> None:
    """ncu's counters for the course's three plans, each a partial kernel and the combine, summed."""
    expected = [decode.kernel_for(4), "decode_combine", "decode_replicated", "decode_combine",
                decode.kernel_for(4, "dimension-major"), "decode_combine"]
    try:
        profiles = profiler.ncu_metrics(Target(profile_decode, (model, batch, context)), DECODE_METRICS,
                                        PROFILED_KERNELS)
        if [p.function for p in profiles] != expected:
            raise profiler.ProfilerUnavailable(f"ncu profiled {[p.function for p in profiles]}, expected {expected}")
    except profiler.ProfilerUnavailable as exc:
        for plan in PROFILED_PLANS:
            cases[plan].extra["ncu_unavailable"] = str(exc)
        return
    for i, plan in enumerate(PROFILED_PLANS):
        launches = profiles[2 * i:2 * i + 2]
        cases[plan].extra["ncu"] = {m: sum(p.metrics[m] for p in launches) for m in DECODE_METRICS}
        cases[plan].extra["ncu_kernels"] = [p.function for p in launches]
        cases[plan].extra["ncu_command"] = profiler.command_line(DECODE_METRICS, PROFILED_KERNELS)


@experiment("layer.decode_attention",
            "One decode step's attention (32 query heads on 8 KV heads, bf16) over the KV cache: the course's "
            "grouped kernel, the same over a replicated or a dimension-major cache, PyTorch SDPA with enable_gqa "
            "and over repeat_interleave'd K and V, beside one read of the cache; all timed call by call in turn.",
            model="Llama 3 8B", batches=[1, 8, 32], contexts=[1024, 8192, 32768], samples=20,
            profiled=[8, 8192])
def decode_attention(model: str, batches: list[int], contexts: list[int], samples: int,
                     profiled: list[int]) -> list[Case]:
    import cupy
    import torch

    shape = MODELS[model]
    sms = detect().sm_count
    blocks = full_grid(sms)
    sink = cupy.zeros(1, cupy.uint32)
    cases = []
    for batch in batches:
        for context in contexts:
            ops = _DecodeOperands(shape, batch, context, 3)
            plans = ops.plans(sink, blocks)
            # Checked on the first two sequences against float64 (the whole batch's reference would not fit).
            checked = min(batch, 2)
            want = decode.reference(ops.q[:checked], ops.k[:checked], ops.v[:checked])
            tol = decode.tolerance(want)
            checks, kernels = {}, {}
            for plan, fn in plans.items():
                if plan == CACHE_READ:
                    checks[plan] = Check("none: the read's result is discarded", 0.0, 0.0).to_json()
                    continue
                ops.out.fill(0xFFFF)
                got = _decode_output(plan, fn(), ops)[:checked]
                checks[plan] = check_close(got, want, "float64 attention of the same bf16 inputs", 0.0, tol)
            times = benchmark_interleaved(list(plans.values()), samples, references=[
                i for i, p in enumerate(plans) if p.startswith("PyTorch")])
            for plan, fn in plans.items():
                if plan.startswith("PyTorch"):
                    kernels[plan] = kernels_launched(fn)
            phase = decode_phase(batch, context)
            flop = transformer.attention_op(shape, phase, BF16).flop
            by_plan = {}
            for (plan, _), t in zip(plans.items(), times):
                extra = {"floor_bytes": transformer.attention_op(shape, phase, BF16).bytes,
                         "replicated_bytes": transformer.attention_op(shape, phase, BF16, replicated_kv=True).bytes}
                if plan in kernels:
                    extra["kernels"] = kernels[plan]
                if plan in (GROUPED, REPLICATED, DIM_MAJOR):   # the replicated cache has a KV head per query head
                    heads = shape.q_heads if plan == REPLICATED else shape.kv_heads
                    extra["splits"] = decode.splits_for(batch, heads, context, sms)
                case = Case(f"batch {batch}, context {context}: {plan}",
                            {"batch": batch, "context": context, "plan": plan},
                            plan, t, 0.0 if plan == CACHE_READ else flop, plan_bytes(shape, batch, context, plan),
                            checks[plan], extra=extra)
                by_plan[plan] = require_passed(case)
                cases.append(case)
            if [batch, context] == profiled:
                _attach_decode_profile(by_plan, model, batch, context)
            del ops, plans
            cupy.get_default_memory_pool().free_all_blocks()
            torch.cuda.empty_cache()
    return cases


def _decode_by(result) -> dict:
    return {(c.params["batch"], c.params["context"], c.params["plan"]): c for c in result.cases}


@beside_reference
def decode_rows(result) -> list[dict]:
    """Per batch and context: each plan's µs, and its time over one read of the cache (the floor)."""
    cases = _decode_by(result)
    rows = []
    for batch, context in sorted({(c.params["batch"], c.params["context"]) for c in result.cases}):
        floor = cases[(batch, context, CACHE_READ)]
        row = {"batch": batch, "context": context, "KV cache MiB": floor.bytes / MIB,
               "cache read µs": floor.median_s * 1e6}
        for plan in DECODE_PLANS[1:]:
            c = cases.get((batch, context, plan))
            if c is not None:
                row[f"{SHORT[plan]} µs"] = c.median_s * 1e6
                row[f"{SHORT[plan]} ÷ floor"] = c.median_s / floor.median_s
        rows.append(row)
    return rows


@beside_reference
def decode_byte_rows(result) -> list[dict]:
    """At the profiled size: ncu's DRAM bytes and L1 sectors per request for each plan, beside the
    grouped and replicated models' bytes."""
    rows = []
    for c in result.cases:
        if "ncu" not in c.extra:
            continue
        m = c.extra["ncu"]
        rows.append({"plan": SHORT[c.params["plan"]],
                     "DRAM bytes read (ncu) MiB": m["dram__bytes_read.sum"] / MIB,
                     "grouped model MiB": c.extra["floor_bytes"] / MIB,
                     "replicated model MiB": c.extra["replicated_bytes"] / MIB,
                     "read ÷ grouped model": m["dram__bytes_read.sum"] / c.extra["floor_bytes"],
                     "L1 load requests M": m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] / 1e6,
                     "L1 sectors M": m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] / 1e6,
                     "L1 sectors per request": (m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
                                                / max(1.0, m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"])),
                     "L2 sectors read (from L1) M": m["lts__t_sectors_srcunit_tex_op_read.sum"] / 1e6,
                     "issue slots used %": m.get("smsp__issue_active.avg.pct_of_peak_sustained_active"),
                     "warp instructions M": m.get("smsp__inst_executed.sum", 0) / 1e6,
                     "DRAM % of peak": m.get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                     "kernels": ", ".join(c.extra.get("ncu_kernels", []))[:120]})
    return rows


# --------------------------------------------------------------------------- the layer, op by op

OP_NAMES = [op.name for op in transformer.layer_ops(transformer.LLAMA3_8B, prefill_phase(1, 1))]
LAYER_EAGER = "the layer, eager PyTorch"
LAYER_GRAPH = "the layer, eager PyTorch as one CUDA graph"
LAYER_COMPILED = "the layer, torch.compile"
SUM_OF_OPS = "sum of the PyTorch ops timed alone"


class _Layer:
    """One decoder layer's weights (random, bf16) and its forward pass as PyTorch ops, at prefill
    (``batch`` sequences of ``tokens``) or decode (one token over ``context`` cached tokens)."""

    def __init__(self, shape: transformer.ModelShape, phase: transformer.Phase, seed: int):
        import torch

        self.shape, self.phase, self.torch = shape, phase, torch
        gen = torch.Generator(device="cuda").manual_seed(seed)
        d, w = shape.d_model, shape.qkv_width

        def weight(*size, scale=0.02):
            return (torch.randn(*size, device="cuda", generator=gen, dtype=torch.float32) * scale).to(torch.bfloat16)

        self.w_qkv, self.w_o = weight(w, d), weight(d, shape.q_heads * shape.head_dim)
        self.w_gu, self.w_down = weight(2 * shape.mlp, d), weight(d, shape.mlp)
        self.norm1, self.norm2 = (1 + weight(d, scale=0.1)).contiguous(), (1 + weight(d, scale=0.1)).contiguous()
        rows = phase.rows
        self.x = weight(rows, d, scale=1.0)
        pos = torch.arange(phase.context - phase.tokens, phase.context, device="cuda", dtype=torch.float32)
        pos = pos.repeat(phase.batch)
        inv = 1.0 / (500000.0 ** (torch.arange(0, shape.head_dim, 2, device="cuda", dtype=torch.float32) / shape.head_dim))
        ang = torch.outer(pos, inv)
        self.cos = torch.cat([ang.cos(), ang.cos()], -1).to(torch.bfloat16)[:, None, :]
        self.sin = torch.cat([ang.sin(), ang.sin()], -1).to(torch.bfloat16)[:, None, :]
        if phase.name == "decode":
            cache = (phase.batch, shape.kv_heads, phase.context + 1, shape.head_dim)
            self.cache_k, self.cache_v = weight(*cache, scale=1.0), weight(*cache, scale=1.0)

    # the ops, each a function of the tensors the one before produced
    def rmsnorm(self, x, w):
        return self.torch.nn.functional.rms_norm(x, (self.shape.d_model,), w, 1e-5)

    def qkv(self, h):
        return self.torch.nn.functional.linear(h, self.w_qkv)

    def rope(self, qkv):
        s = self.shape
        q, k, v = qkv.split([s.q_heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], -1)
        q = q.view(-1, s.q_heads, s.head_dim)
        k = k.view(-1, s.kv_heads, s.head_dim)

        def rotate(x):
            x1, x2 = x.chunk(2, -1)
            return x * self.cos + self.torch.cat([-x2, x1], -1) * self.sin

        return rotate(q), rotate(k), v.reshape(-1, s.kv_heads, s.head_dim)

    def attention(self, q, k, v):
        F, s, p = self.torch.nn.functional, self.shape, self.phase
        if p.name == "prefill":
            qh = q.view(p.batch, p.tokens, s.q_heads, s.head_dim).transpose(1, 2)
            kh = k.view(p.batch, p.tokens, s.kv_heads, s.head_dim).transpose(1, 2)
            vh = v.view(p.batch, p.tokens, s.kv_heads, s.head_dim).transpose(1, 2)
            o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, enable_gqa=True)
            return o.transpose(1, 2).reshape(p.rows, s.q_heads * s.head_dim)
        self.cache_k[:, :, p.context] = k.view(p.batch, s.kv_heads, s.head_dim)
        self.cache_v[:, :, p.context] = v.view(p.batch, s.kv_heads, s.head_dim)
        o = F.scaled_dot_product_attention(q.view(p.batch, s.q_heads, 1, s.head_dim), self.cache_k, self.cache_v,
                                           enable_gqa=True)
        return o.reshape(p.rows, s.q_heads * s.head_dim)

    def out_proj(self, o):
        return self.torch.nn.functional.linear(o, self.w_o)

    def gate_up(self, h):
        return self.torch.nn.functional.linear(h, self.w_gu)

    def silu_mul(self, gu):
        g, u = gu.chunk(2, -1)
        return self.torch.nn.functional.silu(g) * u

    def down(self, a):
        return self.torch.nn.functional.linear(a, self.w_down)

    def forward(self, x):
        h = self.rmsnorm(x, self.norm1)
        q, k, v = self.rope(self.qkv(h))
        x = x + self.out_proj(self.attention(q, k, v))
        h = self.rmsnorm(x, self.norm2)
        return x + self.down(self.silu_mul(self.gate_up(h)))

    def op_calls(self) -> list[tuple[str, object]]:
        """Each op of ``layer_ops``'s list as a call on the inputs one forward pass gives it."""
        x = self.x
        h = self.rmsnorm(x, self.norm1)
        qkv = self.qkv(h)
        q, k, v = self.rope(qkv)
        o = self.attention(q, k, v)
        proj = self.out_proj(o)
        x2 = x + proj
        h2 = self.rmsnorm(x2, self.norm2)
        gu = self.gate_up(h2)
        a = self.silu_mul(gu)
        dn = self.down(a)
        calls = [lambda: self.rmsnorm(x, self.norm1), lambda: self.qkv(h), lambda: self.rope(qkv),
                 lambda: self.attention(q, k, v), lambda: self.out_proj(o), lambda: x + proj,
                 lambda: self.rmsnorm(x2, self.norm2), lambda: self.gate_up(h2), lambda: self.silu_mul(gu),
                 lambda: self.down(a), lambda: x2 + dn]
        return list(zip(OP_NAMES, calls))


def gemm_calibration() -> dict[str, float] | None:
    """The dispatch's measured input: each Hopper rung's seconds per output tile and K slice, from the
    recorded ``hopper.ladder`` on this GPU if it has one, else on the H200 (a plan chosen from another
    Hopper's calibration is still correct, only perhaps not the fastest); None off Hopper."""
    if str(detect().compute_capability) != hopper_gemm.HOPPER_CC:
        return None
    resolved = experiments.resolve_params("hopper.ladder")
    try:
        ladder = experiments.replay("hopper.ladder", resolved, slug(detect().name))
    except NotRecorded:
        ladder = experiments.replay("hopper.ladder", resolved, "h200")
    return hopper_gemm.seconds_per_tile_k_block(ladder, sm_count=ladder.machine["sm_count"])


def _course_gemm(layer: _Layer, name: str, per_tile_k_block: dict[str, float] | None):
    """The course's GEMM for one projection, as notebook 10's dispatch picks it for the shape (a rung, or
    split-K where the output tiles cannot fill the SMs): (plan, the model's time for it, call, output,
    reference, PyTorch's call), or None off Hopper. y = x·Wᵀ with x the op's input and W torch.nn.Linear's
    [out, in] weight."""
    import torch

    if per_tile_k_block is None:
        return None
    phase, d = layer.phase, layer.shape.d_model
    weights = {"Q, K, V projection": (layer.w_qkv, d), "output projection": (layer.w_o, layer.shape.q_heads * 128),
               "gate and up projections": (layer.w_gu, d), "down projection": (layer.w_down, layer.shape.mlp)}
    if name not in weights:
        return None
    w, k = weights[name]
    a = (torch.randn(phase.rows, k, device="cuda") * 0.5).to(torch.bfloat16)
    a_bits, w_bits = bf16_bits(a), bf16_bits(w)
    c_bits = hopper_gemm.nan_output(phase.rows, w.shape[0])
    info = detect()
    m, n, sms = phase.rows, w.shape[0], info.sm_count
    gpu = info.name if info.spec is not None else "h200"   # split-K's HBM term: this GPU's datasheet, if listed
    plan = hopper_gemm.dispatch(m, n, k, per_tile_k_block, sm_count=sms, gpu=gpu)
    return (plan, hopper_gemm.predicted_seconds(plan, m, n, k, per_tile_k_block, sms, gpu),
            lambda: hopper_gemm.run_plan(plan, a_bits, w_bits, c_bits), c_bits,
            torch.nn.functional.linear(a, w), lambda: torch.nn.functional.linear(a, w))


def _time_layer(layer: _Layer, samples: int, compile_layer: bool) -> dict:
    """The layer end to end: eager, one CUDA graph of the eager layer, and torch.compile's."""
    import torch

    x = layer.x
    out = {LAYER_EAGER: (benchmark(lambda: layer.forward(x), samples, reference=True), kernels_launched(
        lambda: layer.forward(x)))}
    static_x = x.clone()
    layer.forward(static_x)   # warm every kernel before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = layer.forward(static_x)
    graph.replay()
    torch.cuda.synchronize()
    want = layer.forward(x)
    if not torch.allclose(static_out.float(), want.float(), rtol=0, atol=1e-2 * float(want.abs().max())):
        raise AssertionError("the CUDA graph of the layer does not reproduce the eager layer")
    out[LAYER_GRAPH] = (benchmark(graph.replay, samples, reference=True), ["one graph launch"])
    if compile_layer:
        try:
            compiled = torch.compile(layer.forward, dynamic=False)
            got = compiled(x)
            if not torch.allclose(got.float(), want.float(), rtol=0, atol=2e-2 * float(want.abs().max())):
                raise AssertionError("torch.compile's layer differs from the eager layer")
            out[LAYER_COMPILED] = (benchmark(lambda: compiled(x), samples, reference=True),
                                   kernels_launched(lambda: compiled(x)))
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001  (a compile failure is a finding to record, not a crash)
            out[LAYER_COMPILED] = (None, [f"torch.compile failed: {type(exc).__name__}: {str(exc)[:200]}"])
    return out


@experiment("layer.ops",
            "One Llama 3 8B decoder layer in bf16, op by op at prefill and at decode: PyTorch's kernels (cuBLAS, "
            "SDPA, eager elementwise ops), the course's GEMM and decode attention where the GPU runs them; then "
            "the layer end to end, eager, as one CUDA graph, and through torch.compile.",
            model="Llama 3 8B", prefill=[1, 4096], decode=[16, 8192], samples=20, compile_layer=True)
def layer_ops(model: str, prefill: list[int], decode: list[int], samples: int, compile_layer: bool) -> list[Case]:
    import cupy

    shape = MODELS[model]
    cases, calibration = [], gemm_calibration()
    for phase in (prefill_phase(*prefill), decode_phase(*decode)):
        layer = _Layer(shape, phase, 1)
        atlas = {row.op.name: row for row in transformer.atlas(shape, phase, gpu_spec(detect().name))}
        params = {"phase": phase.name, "batch": phase.batch, "tokens": phase.tokens, "context": phase.context}
        for name, call in layer.op_calls():
            op = atlas[name].op
            plans = {"PyTorch": call}
            course, check, dispatched = _course_gemm(layer, name, calibration), None, {}
            if course is not None:
                plan, model_s, fn, c_bits, want, torch_call = course
                fn()
                got = bf16_bits_to_float32(c_bits)
                check = check_close(got, cupy.asarray(want.float()), "cuBLAS (torch.nn.functional.linear)",
                                    bf16_tolerance_rel())
                plans = {"PyTorch": torch_call, f"course GEMM ({plan.label}, notebook 10's dispatch)": fn}
                dispatched = {"dispatch": plan.label, "dispatch_model_s": model_s}
            if name.startswith("attention") and phase.name == "decode":
                plans["course decode attention (grouped)"] = _course_decode_call(layer)
            times = benchmark_interleaved(list(plans.values()), samples, references=[0])
            for (label, fn), t in zip(plans.items(), times):
                extra = {"bound_s": atlas[name].seconds, "bound_kind": atlas[name].bound.binding_roof}
                if label == "PyTorch":
                    extra["kernels"] = kernels_launched(fn)
                elif label.startswith("course GEMM"):
                    extra.update(dispatched)
                c = Case(f"{phase.name}: {name}: {label}", {**params, "op": name, "plan": label}, label, t,
                         op.flop, op.bytes,
                         check if label.startswith("course GEMM") else _ok(label), extra=extra)
                cases.append(require_passed(c))
        layer_flop = sum(r.op.flop for r in atlas.values())
        layer_bytes = sum(r.op.bytes for r in atlas.values())
        bound = sum(r.seconds for r in atlas.values())
        for label, (t, kernels) in _time_layer(layer, samples, compile_layer).items():
            extra = {"bound_s": bound, "kernels_launched": len(kernels), "kernel_names": sorted(set(kernels))[:40]}
            if t is None:
                extra["unavailable"] = kernels[0]
                continue
            cases.append(Case(f"{phase.name}: {label}", {**params, "op": "layer", "plan": label}, label, t,
                              layer_flop, layer_bytes, _ok(label), extra=extra))
        del layer
    return cases


# --------------------------------------------------------------------------- two ops on two streams

STREAM_PLANS = ("A alone", "B alone", "A then B, one stream", "A and B, two streams")


def _mlp(layer: _Layer, x):
    """The layer's MLP block on rows ``x``: RMSNorm, gate and up, SiLU · up, down, residual."""
    return x + layer.down(layer.silu_mul(layer.gate_up(layer.rmsnorm(x, layer.norm2))))


def _attention_call(layer: _Layer):
    """The layer's attention (SDPA) on the Q, K and V one forward pass gives it, as a call."""
    q, k, v = layer.rope(layer.qkv(layer.rmsnorm(layer.x, layer.norm1)))
    return lambda: layer.attention(q, k, v)


def stream_pairs(shape: transformer.ModelShape, decode_batch: int, context: int, prefill_tokens: int,
                 chunk_tokens: int) -> list[tuple[str, transformer.Phase, str, transformer.Phase, str]]:
    """(pair, A's phase, A's op, B's phase, B's op) for each pair of independent ops the experiment overlaps:
    two decode micro-batches (one's attention, the other's MLP), two prefill sequences (likewise), and a
    decode step's attention beside the MLP of a prefill chunk (what chunked-prefill serving runs together)."""
    half = decode_batch // 2
    return [
        (f"decode: attention of {half} sequences ∥ MLP of {half} others", decode_phase(half, context), "attention",
         decode_phase(half, context), "MLP"),
        (f"prefill: one sequence's attention ∥ another's MLP ({prefill_tokens} tokens each)",
         prefill_phase(1, prefill_tokens), "attention", prefill_phase(1, prefill_tokens), "MLP"),
        (f"decode attention ({decode_batch} × {context}) ∥ MLP of a {chunk_tokens}-token prefill chunk",
         decode_phase(decode_batch, context), "attention", prefill_phase(1, chunk_tokens), "MLP"),
    ]


def _op_model(shape: transformer.ModelShape, phase: transformer.Phase, op: str) -> transformer.Op:
    """The atlas's op (attention), or the MLP block's ops summed into one."""
    ops = transformer.layer_ops(shape, phase)
    if op == "attention":
        return next(o for o in ops if o.kind == "attention")
    mlp = ops[ops.index(next(o for o in ops if o.name == "RMSNorm (MLP)")):]
    return transformer.Op("MLP", "gemm", sum(o.flop for o in mlp), sum(o.bytes for o in mlp))


def _on_streams(a, b):
    """A call that runs ``a`` on one side stream and ``b`` on another, both after the current stream's work,
    the current stream waiting for both (what the harness's events, on the current stream, time); the
    streams; and the outputs of the last call, {"a": ..., "b": ...}."""
    import torch

    s1, s2, outs = torch.cuda.Stream(), torch.cuda.Stream(), {}

    def both():
        here = torch.cuda.current_stream()
        s1.wait_stream(here)
        s2.wait_stream(here)
        with torch.cuda.stream(s1):
            outs["a"] = a()
        with torch.cuda.stream(s2):
            outs["b"] = b()
        here.wait_stream(s1)
        here.wait_stream(s2)
    return both, (s1, s2), outs


def _timeline(a, b, streams, hold_s: float = 2e-3) -> dict:
    """One traced run on two streams: when A's and B's work started and ended on the GPU, µs from the
    common start, with the GPU held first so the host's launches are all queued before either starts."""
    import torch

    s1, s2 = streams
    here = torch.cuda.current_stream()
    ev = {k: torch.cuda.Event(enable_timing=True) for k in ("start", "a0", "a1", "b0", "b1")}
    GpuHold()(hold_s)
    ev["start"].record(here)
    s1.wait_stream(here)
    s2.wait_stream(here)
    with torch.cuda.stream(s1):
        ev["a0"].record(s1)
        a()
        ev["a1"].record(s1)
    with torch.cuda.stream(s2):
        ev["b0"].record(s2)
        b()
        ev["b1"].record(s2)
    here.wait_stream(s1)
    here.wait_stream(s2)
    torch.cuda.synchronize()
    at = {k: 1e3 * ev["start"].elapsed_time(ev[k]) for k in ("a0", "a1", "b0", "b1")}
    return {"A": [at["a0"], at["a1"]], "B": [at["b0"], at["b1"]]}


@experiment("layer.streams",
            "Two independent ops of Llama 3 8B layers on two CUDA streams, against the same two on one stream and "
            "each alone: two decode micro-batches (one's attention beside the other's MLP), two prefill sequences, "
            "and a decode step's attention beside a prefill chunk's MLP; with one traced run's timeline.",
            model="Llama 3 8B", decode_batch=16, context=8192, prefill_tokens=4096, chunk_tokens=512, samples=20)
def layer_streams(model: str, decode_batch: int, context: int, prefill_tokens: int, chunk_tokens: int,
                  samples: int) -> list[Case]:
    import cupy
    import torch

    shape, cases = MODELS[model], []
    gpu = gpu_spec(detect().name)
    for seed, (pair, phase_a, op_a, phase_b, op_b) in enumerate(
            stream_pairs(shape, decode_batch, context, prefill_tokens, chunk_tokens)):
        layer_a, layer_b = _Layer(shape, phase_a, 10 + 2 * seed), _Layer(shape, phase_b, 11 + 2 * seed)
        calls = {"attention": lambda layer: _attention_call(layer), "MLP": lambda layer: (lambda: _mlp(layer, layer.x))}
        a, b = calls[op_a](layer_a), calls[op_b](layer_b)
        want_a, want_b = a(), b()

        def serial():
            a()
            b()
        both, streams, outs = _on_streams(a, b)
        both()
        torch.cuda.synchronize()
        err = max(float((outs["a"].float() - want_a.float()).abs().max()), float((outs["b"].float() - want_b.float()).abs().max()))
        scale = max(float(want_a.float().abs().max()), float(want_b.float().abs().max()))
        check = Check("the same ops on one stream", err, 1e-2 * scale).to_json()
        times = benchmark_interleaved([a, b, serial, both], samples)
        model_a, model_b = _op_model(shape, phase_a, op_a), _op_model(shape, phase_b, op_b)
        bound = transformer.overlap_bound(model_a, model_b, times[0].median_s, times[1].median_s, gpu)
        params = {"pair": pair}
        for plan, t in zip(STREAM_PLANS, times):
            flop = (model_a.flop if "A" in plan else 0) + (model_b.flop if "B" in plan else 0)
            nbytes = (model_a.bytes if "A" in plan else 0) + (model_b.bytes if "B" in plan else 0)
            extra = {"A": f"{op_a} ({phase_a.name}, batch {phase_a.batch})", "B": f"{op_b} ({phase_b.name}, "
                     f"{phase_b.rows} rows)", "floor_s": {"A alone": model_a.bound(gpu).seconds,
                                                          "B alone": model_b.bound(gpu).seconds}.get(plan),
                     "shared_floor_s": bound.shared_floor_s, "overlapped_bound_s": bound.overlapped_s}
            if plan == "A and B, two streams":
                extra["timeline_us"] = _timeline(a, b, streams)
            cases.append(require_passed(Case(f"{pair}: {plan}", {**params, "plan": plan}, "PyTorch (cuBLAS, SDPA)",
                                             t, flop, nbytes, check, extra=extra)))
        del layer_a, layer_b
        torch.cuda.empty_cache()
        cupy.get_default_memory_pool().free_all_blocks()
    return cases


@beside_reference
def stream_rows(result) -> list[dict]:
    """Per pair: each op alone, the two on one stream and on two, against what overlapping can at best give
    (the longer op alone, or both on the shared roofs)."""
    rows = []
    for pair in dict.fromkeys(c.params["pair"] for c in result.cases):
        by = {c.params["plan"]: c for c in result.cases if c.params["pair"] == pair}
        a, b, serial, both = (by[p] for p in STREAM_PLANS)
        best = max(a.median_s, b.median_s, a.extra["shared_floor_s"])
        rows.append({"pair": pair, "A alone µs": a.median_s * 1e6, "B alone µs": b.median_s * 1e6,
                     "one stream µs": serial.median_s * 1e6, "two streams µs": both.median_s * 1e6,
                     "best two streams can do µs": best * 1e6,
                     "gain from two streams": serial.median_s / both.median_s,
                     "most it could be": serial.median_s / best})
    return rows


def _ok(label: str) -> dict:
    return Check(f"{label} is the reference", 0.0, 0.0).to_json()


def _course_decode_call(layer: _Layer):
    """The course's grouped decode kernel over the layer's cache (its first ``context`` tokens),
    checked against SDPA's output before it is timed."""
    import cupy
    import torch

    p, s = layer.phase, layer.shape
    q = (torch.randn(p.batch, s.q_heads, s.head_dim, device="cuda")).to(torch.bfloat16)
    k, v = layer.cache_k[:, :, :p.context].contiguous(), layer.cache_v[:, :, :p.context].contiguous()
    q_bits, k_bits, v_bits = bf16_bits(q), bf16_bits(k), bf16_bits(v)
    out = cupy.full(q_bits.shape, 0xFFFF, dtype=cupy.uint16)
    want = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)[:, :, 0]
    decode.run_decode(q_bits, k_bits, v_bits, out, s.group)
    err = float(cupy.abs(bf16_bits_to_float32(out) - cupy.asarray(want.float())).max())
    if not err <= 2.0 ** -6 * float(want.abs().max()) + 2e-3:
        raise AssertionError(f"the course's decode attention differs from SDPA by {err:.3g} at the layer's size")
    return lambda: decode.run_decode(q_bits, k_bits, v_bits, out, s.group)


def _layer_by(result) -> dict:
    return {(c.params["phase"], c.params["op"], c.params["plan"]): c for c in result.cases}


@beside_reference
def op_rows(result) -> list[dict]:
    """The reconciliation: each op's roofline floor (the atlas), PyTorch's time, the course's where it
    ran, and the share of the layer's measured op time it takes."""
    rows = []
    for phase in ("prefill", "decode"):
        ops = [c for c in result.cases if c.params["phase"] == phase and c.params["op"] != "layer"]
        total = sum(c.median_s for c in ops if c.params["plan"] == "PyTorch")
        for c in ops:
            if c.params["plan"] != "PyTorch":
                continue
            course = [o for o in ops if o.params["op"] == c.params["op"] and o.params["plan"] != "PyTorch"]
            rows.append({"phase": phase, "op": c.params["op"], "bound by": c.extra["bound_kind"],
                         "floor µs": c.extra["bound_s"] * 1e6, "PyTorch µs": c.median_s * 1e6,
                         "PyTorch ÷ floor": c.median_s / c.extra["bound_s"],
                         "share of the ops' time": c.median_s / total,
                         "course kernel": course[0].params["plan"].removeprefix("course ") if course else None,
                         "course µs": course[0].median_s * 1e6 if course else None,
                         "PyTorch kernels": len(c.extra.get("kernels", [])),
                         "PyTorch's two protocols": _protocols(c)})
    return rows


def _protocols(case) -> str | None:
    """A library timing's two protocols (held calls, blocks of back-to-back calls): whether they agreed."""
    if not is_reference(case):
        return None
    verdict = protocol_cells(case)["protocols"]
    return verdict + (" at the power cap" if case.power_limited else "")


@beside_reference
def layer_rows(result) -> list[dict]:
    """The layer end to end at each phase: eager, graph, compiled, and the sum of its ops timed alone."""
    rows = []
    for phase in ("prefill", "decode"):
        layer = [c for c in result.cases if c.params["phase"] == phase and c.params["op"] == "layer"]
        ops = [c for c in result.cases if c.params["phase"] == phase and c.params["op"] != "layer"
               and c.params["plan"] == "PyTorch"]
        for c in layer:
            row = {"phase": phase, "plan": c.params["plan"], "held µs": c.median_s * 1e6,
                   "held ÷ the atlas floor": c.median_s / c.extra["bound_s"],
                   "back to back µs": None, "back to back ÷ the atlas floor": None, "protocols": None,
                   "kernels launched": c.extra.get("kernels_launched")}
            if is_reference(c):
                cells = protocol_cells(c)
                row["back to back µs"] = cells["back-to-back µs"]
                row["back to back ÷ the atlas floor"] = cells["back-to-back µs"] * 1e-6 / c.extra["bound_s"]
                row["protocols"] = _protocols(c)
            rows.append(row)
        if layer and ops:
            total = sum(c.median_s for c in ops)
            rows.append({"phase": phase, "plan": SUM_OF_OPS, "held µs": total * 1e6,
                         "held ÷ the atlas floor": total / layer[0].extra["bound_s"],
                         "kernels launched": sum(len(c.extra.get("kernels", [])) for c in ops)})
    return rows


def layer_back_to_back_s(case) -> float:
    """A layer case's back-to-back median (seconds a layer): the blocks of the attempt whose held timing it kept."""
    return protocol_cells(case)["back-to-back µs"] * 1e-6


def sdpa_backends(result) -> dict[str, list[str]]:
    """The kernels SDPA launched for each attention case: which backend PyTorch picked."""
    return {c.name: c.extra["kernels"] for c in result.cases
            if "kernels" in c.extra and ("attention" in c.params.get("op", "") or "SDPA" in c.params["plan"])}


def floors_per_op(result) -> dict:
    """The atlas's floor for each recorded op (seconds), for figures."""
    return {(c.params["phase"], c.params["op"]): c.extra["bound_s"] for c in result.cases if "bound_s" in c.extra}


OP_LABELS = {"RMSNorm (attention)": "RMSNorm", "Q, K, V projection": "QKV", "RoPE on Q and K": "RoPE",
             "attention (grouped K and V)": "attention", "output projection": "out",
             "residual add (attention)": "residual add", "RMSNorm (MLP)": "RMSNorm",
             "gate and up projections": "gate·up", "SiLU(gate) · up": "SiLU·up", "down projection": "down",
             "residual add (MLP)": "residual add"}
LEVEL_LABELS = {"L1": "L1 (per-block read)", "L2": "L2? (partitioned read, L1 hits not excluded)",
                "HBM": "HBM (partitioned read)"}


def _label_clusters(points: list[tuple[float, float, str]], near: float = 0.15) -> list[tuple[float, float, str]]:
    """Points closer than ``near`` decades on both axes share one label (names joined, each once), so the
    labels of ops that land together do not print over each other."""
    clusters: list[list[tuple[float, float, str]]] = []
    for x, y, name in sorted(points):
        for cl in clusters:
            if any(abs(np.log10(x / cx)) < near and abs(np.log10(y / cy)) < near for cx, cy, _ in cl):
                cl.append((x, y, name))
                break
        else:
            clusters.append([(x, y, name)])
    return [(max(x for x, _, _ in cl), max(y for _, y, _ in cl), "/".join(dict.fromkeys(n for *_, n in cl))) for cl in clusters]


def hierarchy_figure(ceiling_result, layer_result):
    """The measured read ceilings and the datasheet bf16 peak, with each op of the layer at its compulsory
    (HBM) intensity and measured speed (PyTorch's plan): one intensity per op, not one per level."""
    import matplotlib.pyplot as plt

    levels = ceilings(ceiling_result)
    peak = gpu_spec(layer_result.gpu).peak("bf16")
    fig, ax = plt.subplots(figsize=(8.5, 5))
    xs = np.logspace(-1.3, 4, 300)
    for (name, bw), style in zip(levels.items(), ("-", "--", ":")):
        ax.plot(xs, np.minimum(peak, xs * bw) / 1e12, "k" + style, lw=1,
                label=f"{LEVEL_LABELS[name]}: measured {bw / 1e12:.1f} TB/s")
    ax.axhline(peak / 1e12, color="grey", lw=0.8)
    for phase, marker in (("prefill", "o"), ("decode", "s")):
        pts = [c for c in layer_result.cases if c.params["phase"] == phase and c.params["plan"] == "PyTorch"]
        ax.plot([c.flop / c.bytes for c in pts], [c.flop_per_s / 1e12 for c in pts], marker, ls="none",
                label=f"{phase} ops (PyTorch, measured)")
        named = [(c.flop / c.bytes, c.flop_per_s / 1e12, OP_LABELS.get(c.params["op"], c.params["op"][:18]))
                 for c in pts]
        for x, y, text in _label_clusters(named):
            ax.annotate(text, (x, y), fontsize=6, textcoords="offset points", xytext=(6, -2))
    ax.set(xscale="log", yscale="log", xlabel="FLOP per compulsory (HBM) byte", ylabel="TFLOP/s",
           title=f"one Llama 3 8B layer, each op at its compulsory (HBM) intensity; bf16 peak "
                 f"{peak / 1e12:.0f} TFLOP/s (datasheet)")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{ceiling_result.provenance}; {layer_result.provenance}", fontsize=8)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- for the notebook

def atlas_rows(phase: transformer.Phase, gpu: str = "h200", model: str = "Llama 3 8B",
               replicated_kv: bool = False) -> list[dict]:
    """The atlas (analytic) of one layer at ``phase``: each op's FLOPs, bytes, intensity, floor and share; then
    the output head, which runs once per model, not per layer (outside the layer's shares)."""
    shape, spec_ = MODELS[model], gpu_spec(gpu)
    rows = transformer.atlas(shape, phase, spec_, "bf16", replicated_kv)
    head = transformer.output_head(shape, phase)
    shares = transformer.time_shares(rows)

    def row(op, bound, share) -> dict:
        return {"op": op.name, "GFLOP": op.flop / 1e9, "MB": op.bytes / 1e6, "FLOP per byte": op.intensity,
                "floor µs": bound.seconds * 1e6, "bound by": bound.binding_roof, "share of the floor": share}

    return ([row(r.op, r.bound, share) for r, share in zip(rows, shares)]
            + [row(head, head.bound(spec_), "once per model")])


def decode_loop_source() -> str:
    """The decode kernel's token loop, from its source: the lane mapping and the running softmax."""
    text = cuda.source(decode.FAMILY)
    start, end = text.index("    // Token pairs:"), text.index("    // Merge the block's")
    return text[start:end].rstrip()


def decode_kernels(result, batch: int, context: int) -> dict[str, list[str]]:
    """The kernels each PyTorch plan launched at one size: which SDPA backend ran, and the copies."""
    return {c.params["plan"]: [short_kernel_name(k)[:70] for k in c.extra["kernels"]] for c in result.cases
            if c.params["batch"] == batch and c.params["context"] == context and "kernels" in c.extra}
