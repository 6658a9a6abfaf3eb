"""Processes and collectives: the one place in the course that starts worker processes and runs NCCL
(or gloo) collectives through ``torch.distributed``.

``run_ranks`` starts one process per rank, makes a process group (``nccl`` on GPUs, rank r on GPU r;
``gloo`` on the CPU, which needs no GPU and runs on a laptop), runs a task function in every rank and
returns what each rank's task returned. Every process it starts gets ``NO_MULTICAST_ENV``, and NCCL's
algorithm and protocol where a case asks for them. A rank that fails ends the run with its error
(``RankFailed``); a run that outlasts its time limit, such as a collective that never completes, is
killed and ends with ``CollectiveTimeout``, never a notebook that hangs.

Processes come from a fork server that has imported torch once (the ``forkserver`` start method), so a
run starts in a fraction of a second after the first; the server has not touched CUDA, so its children
start with no CUDA state, as NCCL needs. A learner's function, defined in a notebook cell, is sent to
the ranks by value (``portable``: its code and the names it uses), since a cell's functions cannot be
imported by another process.

The tasks (the functions each rank runs):

- ``sweep``: one collective at a list of message sizes; each size checked against its exact expected
  values, then timed: on GPUs, CUDA events around blocks of back-to-back calls after a warm-up, every
  rank timing the same blocks after a barrier, a sample being the slowest rank's block over its calls;
  on gloo, ``perf_counter`` around the same blocks, labelled a CPU run (``GLOO_TIMER``).
- ``tensor_parallel_mlp``: a Llama MLP split over the ranks, its compute alone, its all-reduce alone, both in
  turn, and the all-reduce beside independent compute on another CUDA stream (with each stream's timeline).
- ``gradient_buckets``: a chain of GEMMs standing in for a backward pass, its gradients all-reduced in
  buckets on a second stream as they become ready.
- ``run_learner_all_reduce``: a learner's all-reduce in every rank at given sizes, with every byte each
  rank sends and receives counted by a wrapper around ``torch.distributed``'s point-to-point calls
  (``send``, ``recv``, ``isend``, ``irecv``, and so ``batch_isend_irecv``) and every collective it calls
  named; ``time_learner_all_reduce`` times it against ``dist.all_reduce``.

And in this process, on its GPUs: ``peer_copy`` (copies from one GPU to another, timed with events on the
source GPU, which is where PyTorch queues a copy between devices), ``topology`` (``nvidia-smi topo -m``)
and ``nccl_version``.
"""
from __future__ import annotations

import builtins
import importlib
import inspect
import marshal
import math
import os
import pickle
import queue as queue_errors
import socket
import subprocess
import time
import traceback
import types
from collections import Counter
from datetime import timedelta

from course_lib.core.timing import MIN_SAMPLES

# NVLink multicast (NVLS: NVLink SHARP in the NVSwitch) must stay off on the course's machines: NCCL uses
# it by default where the switches offer it, and PyTorch's symmetric memory and NVSHMEM can too; the hosts
# the course is lent do not allow multicast objects (cuMulticastCreate), so a process that tried would fail
# or take the machine's NVSwitch state with it. With these set, NCCL picks among ring and tree only, and
# the measurements are of the links the notebook models. Libraries read them when they initialize, which
# in a worker is after ``_rank_main`` has set them.
NO_MULTICAST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
BACKENDS = ("nccl", "gloo")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all")
NCCL_ALGOS = ("Ring", "Tree")
NCCL_PROTOS = ("LL", "LL128", "Simple")

START_LIMIT_S = 180.0          # importing torch and making the group: NCCL's set-up on 8 GPUs can take a while
TIME_LIMIT_S = 300.0
BLOCK_TARGET_S = 2e-3          # a timed block lasts about this long: many calls for a small message
MAX_CALLS_PER_BLOCK = 200
GPU_TIMER = ("CUDA events around blocks of back-to-back calls, every rank after a barrier; a sample is the "
             "slowest rank's block over its calls")
GLOO_TIMER = "perf_counter around blocks of calls, CPU processes over gloo (not a GPU measurement)"
BYTES_F32 = 4


class CollectiveTimeout(RuntimeError):
    """A run that outlasted its time limit: its processes were killed."""


class RankFailed(RuntimeError):
    """A rank's task raised; ``rank`` and ``detail`` (its error, last lines of its traceback) say which and why."""

    def __init__(self, rank: int, detail: str):
        super().__init__(f"rank {rank} failed: {detail}")
        self.rank, self.detail = rank, detail


class NeedsMoreGpus(RuntimeError):
    """This machine has fewer GPUs than the run needs."""


# --------------------------------------------------------------------------- the machine

def gpu_count() -> int:
    """CUDA GPUs PyTorch sees here; 0 without torch or CUDA."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def require_gpus(needed: int, what: str) -> None:
    have = gpu_count()
    if have < needed:
        raise NeedsMoreGpus(f"{what} needs {needed} GPUs and this machine has {have}. Run it on a machine with "
                            f"{needed} or more (NVLink between them to measure NVLink), or replay the recorded run.")


def nccl_version() -> str | None:
    """The NCCL that PyTorch runs, as ``2.21.5``; None without it."""
    try:
        import torch

        v = torch.cuda.nccl.version()
    except Exception:   # no CUDA build of torch, or no NCCL in it
        return None
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def topology() -> str:
    """``nvidia-smi topo -m``: how each pair of GPUs is connected (NV18: 18 NVLinks; SYS: across the host)."""
    try:
        out = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi topo -m could not run here ({type(exc).__name__}: {exc})"
    return out.stdout if out.returncode == 0 else f"nvidia-smi topo -m failed: {out.stderr.strip()}"


def machine_manifest() -> dict:
    """What a multi-GPU record adds to the machine manifest: GPU count, topology, NCCL, the environment."""
    return {"gpu_count": gpu_count(), "topology": topology(), "nccl": nccl_version(),
            "environment": dict(NO_MULTICAST_ENV)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- starting the ranks

def _context():
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed"])
    return ctx


def _describe(exc: BaseException) -> str:
    tail = "".join(traceback.format_exception(exc)[-4:]).strip()
    return f"{type(exc).__name__}: {exc}\n{tail}"


def _rank_main(rank: int, world: int, port: int, backend: str, env: dict, task, args: tuple, results,
               group_timeout_s: float) -> None:
    os.environ.update(env)
    dist = None
    try:
        import torch
        import torch.distributed as dist

        device = {}
        if backend == "nccl":
            torch.cuda.set_device(rank)
            device = {"device_id": torch.device("cuda", rank)}    # NCCL's communicator made now, on this GPU
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=group_timeout_s), **device)
        results.put(("ready", rank, None))
        results.put(("done", rank, task(rank, world, *args)))
    except BaseException as exc:   # noqa: BLE001  (whatever a rank raises goes back to the parent)
        results.put(("error", rank, _describe(exc)))
    finally:
        if dist is not None and dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:   # noqa: BLE001  (a peer already gone; the parent has the answer)
                pass
        results.close()
        results.join_thread()


def _collect(procs, results, mailbox: dict, kind: str, deadline: float, limit_s: float, what: str) -> list:
    """Each rank's ``kind`` message, in rank order; RankFailed on an error or a rank that died silently,
    CollectiveTimeout past the deadline. Messages of other kinds wait in ``mailbox`` for their turn."""
    got = mailbox.setdefault(kind, {})
    silent_since: dict[int, float] = {}
    while len(got) < len(procs):
        try:
            msg_kind, rank, payload = results.get(timeout=0.1)
            if msg_kind == "error":
                raise RankFailed(rank, payload)
            mailbox.setdefault(msg_kind, {})[rank] = payload
            continue
        except queue_errors.Empty:
            pass
        now = time.monotonic()
        for rank, p in enumerate(procs):
            if rank not in got and p.exitcode is not None:
                # its last message may still be in the pipe: give it a moment before calling it dead
                if now - silent_since.setdefault(rank, now) > 2.0:
                    raise RankFailed(rank, f"its process ended (exit code {p.exitcode}) without an answer: killed, "
                                           "out of memory, or crashed in native code")
        if now > deadline:
            waiting = [r for r in range(len(procs)) if r not in got]
            raise CollectiveTimeout(
                f"{what}: ranks {waiting} gave no answer within {limit_s:g} s, so every rank was stopped. A "
                "collective or a send/recv that never completes does this: a deadlock (every rank waiting to "
                "send before any receives), a rank waiting for a message no rank sends, or ranks calling "
                "different collectives.")
    return [got[r] for r in range(len(procs))]


def run_ranks(task, world_size: int, backend: str, args: tuple = (), env: dict | None = None,
              time_limit_s: float = TIME_LIMIT_S, start_limit_s: float = START_LIMIT_S,
              what: str = "the run") -> list:
    """Run ``task(rank, world_size, *args)`` in ``world_size`` new processes joined in a process group;
    return each rank's answer, rank 0 first. ``task`` must be a module-level function (it is sent by
    reference); ``time_limit_s`` counts from the moment every rank has joined the group."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"the number of ranks must be a positive whole number, got {world_size!r}")
    if backend == "nccl":
        require_gpus(world_size, f"{what} on {world_size} ranks over NCCL")
    env = {**NO_MULTICAST_ENV, **(env or {})}
    ctx = _context()
    results = ctx.Queue()
    port = _free_port()
    # The group's own timeout outlasts ours, so a hung collective is reported by the parent, which says why.
    group_timeout_s = start_limit_s + time_limit_s + 60
    procs = [ctx.Process(target=_rank_main, daemon=True,
                         args=(rank, world_size, port, backend, env, task, args, results, group_timeout_s))
             for rank in range(world_size)]
    try:
        for p in procs:
            p.start()
        mailbox: dict = {}
        _collect(procs, results, mailbox, "ready", time.monotonic() + start_limit_s, start_limit_s,
                 f"{what}: joining the process group")
        answers = _collect(procs, results, mailbox, "done", time.monotonic() + time_limit_s, time_limit_s, what)
        for p in procs:                      # let them tear the group down cleanly
            p.join(timeout=10)
        return answers
    finally:
        started = [p for p in procs if p.pid is not None]
        for p in started:
            if p.is_alive():
                p.kill()
        for p in started:
            p.join(timeout=10)
        results.cancel_join_thread()
        results.close()


def _probe_task(rank: int, world: int) -> dict:
    """What a rank sees: its environment's NCCL and multicast settings, its backend, the group's size."""
    import torch.distributed as dist

    keys = [*NO_MULTICAST_ENV, "NCCL_ALGO", "NCCL_PROTO"]
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "backend": dist.get_backend(),
            "env": {k: os.environ.get(k) for k in keys}}


def probe(world_size: int, backend: str = "gloo", env: dict | None = None) -> list[dict]:
    """Each rank's view of its group and environment (what the tests check the launcher sets)."""
    return run_ranks(_probe_task, world_size, backend, env=env, time_limit_s=60, what="the probe")


# --------------------------------------------------------------------------- in a rank: device and timing

def _device(backend: str):
    import torch

    return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")


HOLD_FLOOR_S, HOLD_CEILING_S = 20e-6, 20e-3
_CYCLES_PER_S: dict = {}


def _hold(seconds: float, device) -> None:
    """Keep the current stream busy for about ``seconds`` (``torch.cuda._sleep``, a spin kernel), so that
    the start event and the calls after it are queued before the GPU reaches them: the harness's hold
    (``core.timing``), here in a worker, where only PyTorch is loaded."""
    import torch

    if device not in _CYCLES_PER_S:        # the spin counts clock cycles: calibrate them once
        torch.cuda._sleep(1000)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(2_000_000)
        stop.record()
        stop.synchronize()
        _CYCLES_PER_S[device] = 2_000_000 / (start.elapsed_time(stop) * 1e-3)
    torch.cuda._sleep(int(seconds * _CYCLES_PER_S[device]))


def _block(fn, calls: int, device, hold_s: float = 0.0) -> tuple[float, float]:
    """(seconds per call, the host's seconds to issue the block) of ``calls`` back-to-back calls: CUDA
    events on a GPU, after a hold of ``hold_s``; perf_counter on the CPU (where a gloo call returns when
    it is done)."""
    import torch

    if device.type == "cuda":
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if hold_s:
            _hold(hold_s, device)
        t0 = time.perf_counter()
        start.record()
        for _ in range(calls):
            fn()
        issue = time.perf_counter() - t0
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1e-3 / calls, issue
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t0
    return elapsed / calls, elapsed


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _agreed_block(fn, device, target_s: float) -> tuple[int, float]:
    """(calls per block, hold before it), the same on every rank (the largest any rank wants), from a
    short trial block: enough calls to last ``target_s``, a hold twice as long as issuing them."""
    import torch
    import torch.distributed as dist

    fn()
    fn()
    _sync(device)
    per_call, issue = _block(fn, 3, device)
    calls = max(1, min(MAX_CALLS_PER_BLOCK, math.ceil(target_s / max(per_call, 1e-9))))
    hold_s = min(2 * issue / 3 * calls + HOLD_FLOOR_S, HOLD_CEILING_S) if device.type == "cuda" else 0.0
    agreed = torch.tensor([float(calls), hold_s], dtype=torch.float64, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    return int(agreed[0].item()), float(agreed[1].item())


def _timed_blocks(fn, samples: int, device, target_s: float = BLOCK_TARGET_S) -> dict:
    """``samples`` blocks of back-to-back calls, every rank starting each block after a barrier and the
    same hold. A block whose calls took the host longer to issue than the hold is counted late: the GPU
    may have waited for the host in it."""
    import torch.distributed as dist

    if samples < MIN_SAMPLES:
        raise ValueError(f"at least {MIN_SAMPLES} samples are needed for a median and spread, got {samples}")
    calls, hold_s = _agreed_block(fn, device, target_s)
    per_call, issue = [], []
    for _ in range(samples):
        _sync(device)
        dist.barrier()
        s, i = _block(fn, calls, device, hold_s)
        per_call.append(s)
        issue.append(i)
    late = sum(i > hold_s for i in issue) if device.type == "cuda" else 0
    return {"samples_s": per_call, "issue_s": issue, "calls_per_block": calls, "hold_s": hold_s, "late_blocks": late}


_SIDE_STREAMS: dict = {}   # one second stream per GPU, for the communication beside the compute


def _side_stream(device):
    import torch

    if device not in _SIDE_STREAMS:
        _SIDE_STREAMS[device] = torch.cuda.Stream(device)
    return _SIDE_STREAMS[device]


def slowest_rank(per_rank: list[list[float]]) -> list[float]:
    """Sample by sample, the slowest rank's time: a collective is done when its last rank is."""
    return [max(column) for column in zip(*per_rank)]


# --------------------------------------------------------------------------- collectives, swept

def element_count(collective: str, message_bytes: int, world_size: int) -> int:
    """float32 elements of a ``message_bytes`` message, nccl-tests' convention (the whole array: an
    all-gather's output, a reduce-scatter's input), rounded up so that every rank's share is whole."""
    if collective not in COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {collective!r}")
    count = max(1, math.ceil(message_bytes / BYTES_F32))
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        count = math.ceil(count / world_size) * world_size
    return count


def _prepare(collective: str, count: int, rank: int, world: int, device):
    """(a checked call's max abs error, the call to time): the check runs once on values whose every
    result is a small whole number, exact in float32; the timed call works on zeros, which stay zeros."""
    import torch
    import torch.distributed as dist

    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

    def phase(n: int, offset: int = 0):     # (i + offset) mod 7: a pattern that sums exactly
        return ((torch.arange(n, device=device) + offset) % 7).to(torch.float32)

    mine = float(rank + 1)
    ranks_sum = world * (world + 1) / 2
    share = count // world
    if collective == "all_reduce":
        got = phase(count) + mine
        dist.all_reduce(got)
        want = world * phase(count) + ranks_sum
        buf = torch.zeros(count, device=device)
        call = lambda: dist.all_reduce(buf)   # noqa: E731
    elif collective == "all_gather":
        got = torch.empty(count, device=device)
        all_gather(got, phase(share) + mine)
        want = torch.cat([phase(share) + s + 1 for s in range(world)])
        src, out = torch.zeros(share, device=device), torch.empty(count, device=device)
        call = lambda: all_gather(out, src)   # noqa: E731
    elif collective == "reduce_scatter":
        got = torch.empty(share, device=device)
        reduce_scatter(got, phase(count) + mine)
        want = world * phase(share, rank * share) + ranks_sum
        src, out = torch.zeros(count, device=device), torch.empty(share, device=device)
        call = lambda: reduce_scatter(out, src)   # noqa: E731
    elif collective == "broadcast":
        got = phase(count) + mine
        dist.broadcast(got, src=0)
        want = phase(count) + 1
        buf = torch.zeros(count, device=device)
        call = lambda: dist.broadcast(buf, src=0)   # noqa: E731
    elif collective == "reduce":
        got = phase(count) + mine
        dist.reduce(got, dst=0)
        want = world * phase(count) + ranks_sum if rank == 0 else got    # only the root's result is defined
        buf = torch.zeros(count, device=device)
        call = lambda: dist.reduce(buf, dst=0)   # noqa: E731
    else:   # all_to_all: rank r's chunk s goes to rank s
        got = torch.empty(count, device=device)
        dist.all_to_all_single(got, phase(count) + mine)
        want = torch.cat([phase(share, rank * share) + s + 1 for s in range(world)])
        src, out = torch.zeros(count, device=device), torch.empty(count, device=device)
        call = lambda: dist.all_to_all_single(out, src)   # noqa: E731
    return float((got - want).abs().max()), call


def _sweep_task(rank: int, world: int, backend: str, collective: str, sizes_bytes: list[int], samples: int) -> list:
    device = _device(backend)
    out = []
    for size in sizes_bytes:
        count = element_count(collective, size, world)
        err, call = _prepare(collective, count, rank, world, device)
        out.append({"requested_bytes": size, "bytes": count * BYTES_F32, "elements": count, "max_abs_err": err,
                    **_timed_blocks(call, samples, device)})
    return out


def sweep(collective: str, world_size: int, sizes_bytes: list[int], backend: str = "nccl", samples: int = 20,
          algo: str | None = None, proto: str | None = None, time_limit_s: float = TIME_LIMIT_S) -> list[dict]:
    """``collective`` on ``world_size`` ranks at each message size: per size the bytes moved (nccl-tests'
    convention), the check's largest error over the ranks (0 when right), each rank's samples and the
    slowest rank's (``samples_s``), the calls per block, and the timer. ``algo``/``proto``: NCCL_ALGO and
    NCCL_PROTO for this run (``None``: NCCL chooses)."""
    env = {}
    if algo is not None:
        if algo not in NCCL_ALGOS:
            raise ValueError(f"NCCL_ALGO must be one of {', '.join(NCCL_ALGOS)} here, got {algo!r}")
        env["NCCL_ALGO"] = algo
    if proto is not None:
        if proto not in NCCL_PROTOS:
            raise ValueError(f"NCCL_PROTO must be one of {', '.join(NCCL_PROTOS)}, got {proto!r}")
        env["NCCL_PROTO"] = proto
    per_rank = run_ranks(_sweep_task, world_size, backend, (backend, collective, list(sizes_bytes), samples), env,
                         time_limit_s, what=f"{collective} on {world_size} ranks")
    rows = []
    for i, first in enumerate(per_rank[0]):
        ranks = [r[i] for r in per_rank]
        rows.append({"collective": collective, "ranks": world_size, "backend": backend, "algo": algo, "proto": proto,
                     "requested_bytes": first["requested_bytes"], "bytes": first["bytes"],
                     "elements": first["elements"], "max_abs_err": max(r["max_abs_err"] for r in ranks),
                     "samples_s": slowest_rank([r["samples_s"] for r in ranks]),
                     "rank_samples_s": [r["samples_s"] for r in ranks],
                     "issue_s": slowest_rank([r["issue_s"] for r in ranks]),
                     "calls_per_block": first["calls_per_block"], "hold_s": first["hold_s"],
                     "late_blocks": max(r["late_blocks"] for r in ranks),
                     "timer": GPU_TIMER if backend == "nccl" else GLOO_TIMER})
    return rows


# --------------------------------------------------------------------------- tensor-parallel MLP

def _mlp_weights(rank: int, world: int, d_model: int, mlp: int, device, dtype, seed: int):
    """The full MLP's weights (the same on every rank: one seed) and this rank's shards."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    w_gate = torch.randn(d_model, mlp, device=device, generator=gen) / math.sqrt(d_model)
    w_up = torch.randn(d_model, mlp, device=device, generator=gen) / math.sqrt(d_model)
    w_down = torch.randn(mlp, d_model, device=device, generator=gen) / math.sqrt(mlp)
    width = mlp // world
    cols = slice(rank * width, (rank + 1) * width)
    shard_gate_up = torch.cat([w_gate[:, cols], w_up[:, cols]], dim=1).to(dtype).contiguous()
    shard_down = w_down[cols].to(dtype).contiguous()
    return (w_gate, w_up, w_down), shard_gate_up, shard_down, width


def _side_by_side(compute, communicate, device, events: list | None = None) -> None:
    """One overlapped step on a GPU: the all-reduce on a second stream beside the compute on the current
    one, the current stream waiting for both at the end. ``events``: a list to append the step's events to
    (start, all-reduce start and end, compute start and end), read once they have completed."""
    import torch

    main, side = torch.cuda.current_stream(device), _side_stream(device)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(5)] if events is not None else None
    if ev:
        ev[0].record(main)
    side.wait_stream(main)
    with torch.cuda.stream(side):
        if ev:
            ev[1].record(side)
        communicate()
        if ev:
            ev[2].record(side)
    if ev:
        ev[3].record(main)
    compute()
    if ev:
        ev[4].record(main)
    main.wait_stream(side)
    if ev:
        events.append(ev)


def _timelines(compute, communicate, device, samples: int, hold_s: float) -> list[dict]:
    """Single overlapped steps, each after a barrier and a hold: each stream's [start, end] in seconds from
    the step's start, read from events on the two streams (one GPU's clock, so they compare)."""
    import torch.distributed as dist

    out = []
    for _ in range(samples):
        _sync(device)
        dist.barrier()
        _hold(hold_s, device)
        events: list = []
        _side_by_side(compute, communicate, device, events)
        _sync(device)
        start, c0, c1, k0, k1 = events[0]
        out.append({"all_reduce": [start.elapsed_time(c0) * 1e-3, start.elapsed_time(c1) * 1e-3],
                    "compute": [start.elapsed_time(k0) * 1e-3, start.elapsed_time(k1) * 1e-3]})
    return out


def _tp_mlp_task(rank: int, world: int, backend: str, rows: int, d_model: int, mlp: int, samples: int,
                 seed: int) -> dict:
    import torch
    import torch.distributed as dist

    device = _device(backend)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    (w_gate, w_up, w_down), shard_gate_up, shard_down, width = _mlp_weights(rank, world, d_model, mlp, device,
                                                                             dtype, seed)
    x = (torch.randn(rows, d_model, device=device, generator=torch.Generator(device=device).manual_seed(seed + 1))
         .to(dtype))

    def compute():
        gate, up = (x @ shard_gate_up).split(width, dim=1)
        return (torch.nn.functional.silu(gate) * up) @ shard_down

    # The check: the partial sums, all-reduced, against the unsplit MLP in float32 on the same inputs.
    out = compute()
    dist.all_reduce(out)
    xf = x.float()
    want = (torch.nn.functional.silu(xf @ w_gate) * (xf @ w_up)) @ w_down
    err = float((out.float() - want).abs().max())
    tolerance = (2e-2 if dtype == torch.bfloat16 else 1e-4) * float(want.abs().max())
    del w_gate, w_up, w_down, want

    partial = compute()
    previous = torch.zeros_like(partial)    # the other micro-batch's partial sums: independent of this compute
    summed = torch.zeros_like(partial)      # zeros stay zeros however often they are all-reduced

    def serialized():
        dist.all_reduce(compute())

    def communicate():
        dist.all_reduce(previous)

    def overlapped():
        if device.type == "cuda":
            _side_by_side(compute, communicate, device)
            return
        work = dist.all_reduce(previous, async_op=True)    # gloo: its own thread, beside this one's compute
        compute()
        work.wait()

    cases = {"compute alone": _timed_blocks(compute, samples, device),
             "all-reduce alone": _timed_blocks(lambda: dist.all_reduce(summed), samples, device),
             "compute, then all-reduce": _timed_blocks(serialized, samples, device),
             "all-reduce beside independent compute": _timed_blocks(overlapped, samples, device)}
    if device.type == "cuda":
        hold_s = cases["all-reduce beside independent compute"]["hold_s"]
        cases["all-reduce beside independent compute"]["timelines"] = _timelines(compute, communicate, device,
                                                                                samples, hold_s)
    return {"max_abs_err": err, "tolerance": tolerance, "dtype": str(dtype).removeprefix("torch."),
            "all_reduce_bytes": partial.numel() * partial.element_size(), "cases": cases}


def tensor_parallel_mlp(world_size: int, rows: int, d_model: int, mlp: int, backend: str = "nccl",
                        samples: int = 20, seed: int = 0, time_limit_s: float = TIME_LIMIT_S) -> dict:
    """Notebook 12's MLP (``d_model`` → ``mlp`` gate and up → ``d_model``) for ``rows`` tokens, split over
    ``world_size`` ranks: the check against the unsplit MLP, then each of its four plans timed (per plan:
    the slowest rank's samples, each rank's, the calls per block; the overlapped plan's stream timelines
    from rank 0 on GPUs)."""
    if mlp % world_size:
        raise ValueError(f"an MLP {mlp:,} wide does not split evenly over {world_size} ranks")
    per_rank = run_ranks(_tp_mlp_task, world_size, backend, (backend, rows, d_model, mlp, samples, seed),
                         time_limit_s=time_limit_s, what=f"the tensor-parallel MLP on {world_size} ranks")
    first = per_rank[0]
    plans = {}
    for plan, timing in first["cases"].items():
        ranks = [r["cases"][plan] for r in per_rank]
        plans[plan] = {"samples_s": slowest_rank([t["samples_s"] for t in ranks]),
                       "rank_samples_s": [t["samples_s"] for t in ranks], "calls_per_block": timing["calls_per_block"],
                       "late_blocks": timing["late_blocks"], "timelines": timing.get("timelines")}
    return {"max_abs_err": max(r["max_abs_err"] for r in per_rank), "tolerance": first["tolerance"],
            "dtype": first["dtype"], "all_reduce_bytes": first["all_reduce_bytes"], "plans": plans,
            "ranks": world_size, "rows": rows, "d_model": d_model, "mlp": mlp,
            "timer": GPU_TIMER if backend == "nccl" else GLOO_TIMER}


# --------------------------------------------------------------------------- data-parallel gradient buckets

def ready_after_gemm(bucket: int, buckets: int, gemms: int) -> int:
    """The GEMM (1-based) after which bucket ``bucket`` (1-based) of ``buckets`` is ready: gradients come out
    of the backward pass at an even rate, so bucket k is whole once k/n of the GEMMs have run."""
    return max(1, math.ceil(bucket * gemms / buckets))


def _bucket_task(rank: int, world: int, backend: str, gradient_bytes: int, bucket_bytes: list[int], gemm_size: int,
                 gemms: int, samples: int) -> dict:
    import torch
    import torch.distributed as dist

    device = _device(backend)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    element = torch.empty((), dtype=dtype).element_size()
    gen = torch.Generator(device=device).manual_seed(rank)
    a = torch.randn(gemm_size, gemm_size, device=device, generator=gen).to(dtype)
    b = torch.randn(gemm_size, gemm_size, device=device, generator=gen).to(dtype) / gemm_size
    grads = torch.full((gradient_bytes // element,), float(rank + 1), dtype=dtype, device=device)
    dist.all_reduce(grads)
    want = world * (world + 1) / 2       # small whole numbers: exact in bf16
    err = float((grads.float() - want).abs().max())
    grads.zero_()

    def backward():
        for _ in range(gemms):
            torch.mm(a, b)

    def buckets_of(nbytes: int) -> list:
        step = nbytes // element
        return [grads[i:i + step] for i in range(0, grads.numel(), step)]

    def all_reduces(chunks) -> None:
        for chunk in chunks:
            dist.all_reduce(chunk)

    def overlapped(chunks) -> None:
        n = len(chunks)
        due = Counter(ready_after_gemm(k, n, gemms) for k in range(1, n + 1))
        launched = 0
        if device.type == "cuda":
            main, side = torch.cuda.current_stream(device), _side_stream(device)
            for g in range(1, gemms + 1):
                torch.mm(a, b)
                if due[g]:
                    side.wait_stream(main)
                    with torch.cuda.stream(side):
                        for chunk in chunks[launched:launched + due[g]]:
                            dist.all_reduce(chunk)
                    launched += due[g]
            main.wait_stream(side)
            return
        works = []
        for g in range(1, gemms + 1):
            torch.mm(a, b)
            works += [dist.all_reduce(chunk, async_op=True) for chunk in chunks[launched:launched + due[g]]]
            launched += due[g]
        for w in works:
            w.wait()

    cases = [{"plan": "backward alone", "bucket_bytes": None, **_timed_blocks(backward, samples, device)}]
    for nbytes in bucket_bytes:
        chunks = buckets_of(nbytes)
        cases.append({"plan": "all-reduces alone", "bucket_bytes": nbytes, "buckets": len(chunks),
                      **_timed_blocks(lambda c=chunks: all_reduces(c), samples, device)})
        cases.append({"plan": "backward with all-reduces", "bucket_bytes": nbytes, "buckets": len(chunks),
                      **_timed_blocks(lambda c=chunks: overlapped(c), samples, device)})
    return {"max_abs_err": err, "dtype": str(dtype).removeprefix("torch."), "element_bytes": element,
            "cases": cases}


def gradient_buckets(world_size: int, gradient_bytes: int, bucket_bytes: list[int], gemm_size: int, gemms: int,
                     backend: str = "nccl", samples: int = 20, time_limit_s: float = TIME_LIMIT_S) -> dict:
    """A backward pass (``gemms`` GEMMs of ``gemm_size``³) producing ``gradient_bytes`` of gradients, all-reduced
    in buckets of each size in ``bucket_bytes``: the backward alone, each bucket size's all-reduces alone, and
    both together with each bucket's all-reduce started on a second stream once its GEMMs have run."""
    for nbytes in bucket_bytes:
        if nbytes > gradient_bytes or gradient_bytes % nbytes:
            raise ValueError(f"bucket size {nbytes:,} B must divide the {gradient_bytes:,} B of gradients")
    per_rank = run_ranks(_bucket_task, world_size, backend,
                         (backend, gradient_bytes, list(bucket_bytes), gemm_size, gemms, samples),
                         time_limit_s=time_limit_s, what=f"gradient buckets on {world_size} ranks")
    first = per_rank[0]
    plans = [{"plan": case["plan"], "bucket_bytes": case["bucket_bytes"], "buckets": case.get("buckets"),
              "samples_s": slowest_rank([r["cases"][i]["samples_s"] for r in per_rank]),
              "rank_samples_s": [r["cases"][i]["samples_s"] for r in per_rank],
              "calls_per_block": case["calls_per_block"], "late_blocks": case["late_blocks"]}
             for i, case in enumerate(first["cases"])]
    return {"max_abs_err": max(r["max_abs_err"] for r in per_rank), "dtype": first["dtype"], "plans": plans,
            "ranks": world_size, "gradient_bytes": gradient_bytes, "gemm_size": gemm_size, "gemms": gemms,
            "timer": GPU_TIMER if backend == "nccl" else GLOO_TIMER}


# --------------------------------------------------------------------------- copies between two GPUs

def peer_copy(src: int, dst: int, sizes_bytes: list[int], samples: int = 20) -> list[dict]:
    """Copies of each size from GPU ``src`` to GPU ``dst`` (PyTorch's ``copy_``, a peer copy over NVLink
    where the two GPUs have it), each checked byte for byte, then timed in blocks of back-to-back copies
    with CUDA events on the source GPU's stream, where PyTorch queues a copy between devices."""
    import torch

    require_gpus(max(src, dst) + 1, f"a copy from GPU {src} to GPU {dst}")
    out = []
    for size in sizes_bytes:
        gen = torch.Generator(device=f"cuda:{src}").manual_seed(size)
        a = torch.randint(0, 256, (size,), dtype=torch.uint8, device=f"cuda:{src}", generator=gen)
        b = torch.empty(size, dtype=torch.uint8, device=f"cuda:{dst}")
        b.copy_(a)
        torch.cuda.synchronize(dst)
        wrong = int((b.to(a.device) != a).sum())
        with torch.cuda.device(src):
            per_call, issue = _block(lambda: b.copy_(a), 3, a.device)
            calls = max(1, min(MAX_CALLS_PER_BLOCK, math.ceil(BLOCK_TARGET_S / max(per_call, 1e-9))))
            hold_s = min(2 * issue / 3 * calls + HOLD_FLOOR_S, HOLD_CEILING_S)
            timed = [_block(lambda: b.copy_(a), calls, a.device, hold_s) for _ in range(max(samples, MIN_SAMPLES))]
        out.append({"src": src, "dst": dst, "bytes": size, "wrong_bytes": wrong, "samples_s": [t for t, _ in timed],
                    "issue_s": [i for _, i in timed], "calls_per_block": calls, "hold_s": hold_s,
                    "late_blocks": sum(i > hold_s for _, i in timed),
                    "peer_access": torch.cuda.can_device_access_peer(src, dst)})
    return out


def bidirectional_copy(first: int, second: int, size_bytes: int, samples: int = 20) -> dict:
    """Copies both ways at once, each direction on its own pair of streams (a copy between devices waits for
    the current streams of both, so the two directions need streams of their own to run together). Per
    sample: each direction's seconds per copy, timed on its source GPU."""
    import torch

    require_gpus(max(first, second) + 1, f"copies between GPUs {first} and {second}")
    bufs = {}
    for s, d in ((first, second), (second, first)):
        bufs[s] = (torch.randint(0, 256, (size_bytes,), dtype=torch.uint8, device=f"cuda:{s}"),
                   torch.empty(size_bytes, dtype=torch.uint8, device=f"cuda:{d}"))
    streams = {(s, d): (torch.cuda.Stream(s), torch.cuda.Stream(d)) for s, d in ((first, second), (second, first))}

    def enqueue(s: int, d: int, calls: int, hold_s: float):
        src_stream, dst_stream = streams[(s, d)]
        a, b = bufs[s]
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(src_stream):
            _hold(hold_s, a.device)         # both directions queued before either starts
            start.record(src_stream)
            with torch.cuda.stream(dst_stream):
                for _ in range(calls):
                    b.copy_(a)
            stop.record(src_stream)
        return start, stop

    wrong = 0
    for s in (first, second):
        a, b = bufs[s]
        b.copy_(a)
        wrong += int((b.to(a.device) != a).sum())
    calls, per_direction = 4, {f"{first}->{second}": [], f"{second}->{first}": []}
    for _ in range(max(samples, MIN_SAMPLES)):
        torch.cuda.synchronize(first)
        torch.cuda.synchronize(second)
        pairs = [enqueue(first, second, calls, 1e-3), enqueue(second, first, calls, 1e-3)]
        for key, (start, stop) in zip(per_direction, pairs):
            stop.synchronize()
            per_direction[key].append(start.elapsed_time(stop) * 1e-3 / calls)
    return {"bytes": size_bytes, "wrong_bytes": wrong, "calls_per_block": calls, "samples_s": per_direction}


# --------------------------------------------------------------------------- a learner's function, sent by value

def _names_used(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_used(const)
    return names


def _resolvable(value) -> tuple[str, str] | None:
    """(module, qualified name) for an object another process can import by name, else None."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return (module, qualname) if obj is value else None


def _function_entry(fn: types.FunctionType) -> tuple:
    closure = None
    if fn.__closure__:
        try:
            closure = pickle.dumps([c.cell_contents for c in fn.__closure__])
        except Exception:   # noqa: BLE001  (any unpicklable capture)
            raise ValueError(f"{fn.__name__} uses variables of an enclosing function; define it at the top level "
                             "of a cell so that the worker processes can rebuild it") from None
    return ("function", marshal.dumps(fn.__code__), fn.__name__, pickle.dumps(fn.__defaults__),
            pickle.dumps(fn.__kwdefaults__), closure)


def portable(fn) -> dict:
    """``fn`` as data another Python process (the same interpreter) can rebuild: its code, and each global
    name it uses as a module to import, an object to look up by name, another function of the same module
    (sent the same way), or a value sent by pickle."""
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"expected a function defined with def, got {type(fn).__name__}")
    home, namespace = fn.__module__, {}

    def visit(f: types.FunctionType) -> None:
        for name in sorted(_names_used(f.__code__)):
            if name in namespace or name not in f.__globals__:
                continue
            value = f.__globals__[name]
            if isinstance(value, types.ModuleType):
                namespace[name] = ("module", value.__name__)
            elif isinstance(value, types.FunctionType) and value.__module__ == home:
                namespace[name] = _function_entry(value)
                visit(value)
            elif (where := _resolvable(value)) is not None:
                namespace[name] = ("ref", *where)
            else:
                try:
                    namespace[name] = ("value", pickle.dumps(value))
                except Exception:   # noqa: BLE001  (what pickle refuses varies)
                    raise ValueError(f"{f.__name__} uses {name!r} ({type(value).__name__}), which cannot be sent "
                                     "to the worker processes: create it inside the function instead") from None

    namespace[fn.__name__] = _function_entry(fn)
    visit(fn)
    return {"name": fn.__name__, "namespace": namespace}


def rebuild(blob: dict):
    """The function ``portable`` described, in this process (imports and look-ups happen now: after the
    counting wrapper is installed, so a learner's ``send`` is the counted one)."""
    scope = {"__builtins__": builtins, "__name__": "__learner__"}
    functions = []
    for name, entry in blob["namespace"].items():
        kind = entry[0]
        if kind == "module":
            scope[name] = importlib.import_module(entry[1])
        elif kind == "ref":
            obj = importlib.import_module(entry[1])
            for part in entry[2].split("."):
                obj = getattr(obj, part)
            scope[name] = obj
        elif kind == "value":
            scope[name] = pickle.loads(entry[1])
        else:
            functions.append((name, entry))
    for name, (_, code, fname, defaults, kwdefaults, closure) in functions:
        cells = tuple(types.CellType(v) for v in pickle.loads(closure)) if closure else None
        f = types.FunctionType(marshal.loads(code), scope, fname, pickle.loads(defaults), cells)
        f.__kwdefaults__ = pickle.loads(kwdefaults)
        scope[name] = f
    return scope[blob["name"]]


# --------------------------------------------------------------------------- counting point-to-point traffic

POINT_TO_POINT = {"send": ("sent", ("dst", "group_dst")), "isend": ("sent", ("dst", "group_dst")),
                  "recv": ("received", ("src", "group_src")), "irecv": ("received", ("src", "group_src"))}
# Collectives that move data: a learner's all-reduce written from send and recv calls none of them.
DATA_COLLECTIVES = ("all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor", "all_gather_single",
                    "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single", "all_to_all",
                    "all_to_all_single", "gather", "scatter", "all_gather_object", "broadcast_object_list")


class TrafficLog:
    """Bytes this rank sent to and received from each peer, its messages, and the collectives it called."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.inside = False
        self.sent, self.received = Counter(), Counter()
        self.messages_sent = 0
        self.collectives: list[str] = []

    def snapshot(self) -> dict:
        return {"sent": dict(self.sent), "received": dict(self.received), "messages_sent": self.messages_sent,
                "collectives": list(self.collectives)}


def install_traffic_log() -> TrafficLog:
    """Wrap ``torch.distributed``'s point-to-point calls and data collectives in this process so that each
    call is logged, then runs. Both the package and ``distributed_c10d`` get the wrappers: a P2POp checks
    its op against the module's own ``isend``, and a learner may import either."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    log = TrafficLog()

    def p2p(name: str, original):
        direction, peer_keys = POINT_TO_POINT[name]
        signature = inspect.signature(original)

        def logged(*args, **kwargs):
            if log.inside:                             # send is isend and a wait: count the outer call only
                return original(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            tensor = bound.arguments["tensor"]
            log.inside = True
            try:
                answer = original(*args, **kwargs)
            finally:
                log.inside = False
            peer = next((bound.arguments[k] for k in peer_keys if bound.arguments.get(k) is not None), None)
            if peer is None and name == "recv":
                peer = answer                          # a receive from any rank returns the sender
            nbytes = tensor.numel() * tensor.element_size()
            getattr(log, direction)[peer] += nbytes
            log.messages_sent += direction == "sent"
            return answer

        logged.__name__ = logged.__qualname__ = name
        return logged

    def collective(name: str, original):
        def logged(*args, **kwargs):
            if not log.inside:
                log.collectives.append(name)
            return original(*args, **kwargs)

        logged.__name__ = logged.__qualname__ = name
        return logged

    wrapped = {name: p2p(name, getattr(c10d, name)) for name in POINT_TO_POINT}
    wrapped |= {name: collective(name, getattr(c10d, name)) for name in DATA_COLLECTIVES if hasattr(c10d, name)}
    for name, fn in wrapped.items():
        setattr(c10d, name, fn)
        setattr(dist, name, fn)
    return log


def learner_input(rank: int, elements: int, device=None):
    """Rank ``rank``'s input to a learner's all-reduce: (i mod 251) + 256·(rank + 1), whole numbers whose
    sum over ranks float32 holds exactly (``learner_expected``)."""
    import torch

    return ((torch.arange(elements, device=device) % 251) + 256 * (rank + 1)).to(torch.float32)


def learner_expected(world_size: int, elements: int) -> list[float]:
    return [world_size * (i % 251) + 256 * world_size * (world_size + 1) / 2 for i in range(elements)]


def _learner_task(rank: int, world: int, backend: str, blob: dict, sizes: list[int]) -> list[dict]:
    import torch
    import torch.distributed as dist

    device = _device(backend)
    barrier = dist.barrier
    log = install_traffic_log()
    fn = rebuild(blob)
    reports = []
    for n in sizes:
        x = learner_input(rank, n, device)
        _sync(device)
        barrier()
        log.reset()
        t0 = time.perf_counter()
        try:
            answer = fn(x)
            _sync(device)
        except Exception as exc:
            raise RuntimeError(f"at {n:,} element{'s' * (n != 1)} on {world} ranks, "
                               f"{type(exc).__name__}: {exc}") from exc
        seconds = time.perf_counter() - t0
        got = answer if isinstance(answer, torch.Tensor) else x
        reports.append({"elements": n, "shape": list(got.shape), "result": got.detach().float().cpu().reshape(-1)
                        .tolist(), "seconds": seconds, **log.snapshot()})
    return reports


def run_learner_all_reduce(fn, world_size: int, sizes: list[int], backend: str = "gloo",
                           time_limit_s: float = 30.0) -> list[list[dict]]:
    """``fn(tensor)`` (an all-reduce that sums in place, or returns the sum) in ``world_size`` ranks at each
    size in ``sizes`` (elements), on ``learner_input``. Per rank, per size: its result, the bytes it sent to
    and received from each peer, its messages and the collectives it called."""
    return run_ranks(_learner_task, world_size, backend, (backend, portable(fn), list(sizes)),
                     time_limit_s=time_limit_s, what=f"your all-reduce on {world_size} ranks")


def _learner_timing_task(rank: int, world: int, backend: str, blob: dict, elements: int, samples: int) -> dict:
    import torch
    import torch.distributed as dist

    device = _device(backend)
    fn = rebuild(blob)
    yours, theirs = torch.zeros(elements, device=device), torch.zeros(elements, device=device)
    return {"yours": _timed_blocks(lambda: fn(yours), samples, device),
            "dist.all_reduce": _timed_blocks(lambda: dist.all_reduce(theirs), samples, device)}


def time_learner_all_reduce(fn, world_size: int, message_bytes: int, backend: str = "nccl", samples: int = 20,
                            time_limit_s: float = TIME_LIMIT_S) -> dict:
    """The learner's all-reduce and ``dist.all_reduce`` on the same float32 message (zeros, which stay zeros
    however often they are summed), each in blocks of calls: the slowest rank's samples of each."""
    elements = max(1, message_bytes // BYTES_F32)
    per_rank = run_ranks(_learner_timing_task, world_size, backend, (backend, portable(fn), elements, samples),
                         time_limit_s=time_limit_s, what=f"timing your all-reduce on {world_size} ranks")
    return {"bytes": elements * BYTES_F32, "ranks": world_size, "backend": backend,
            "timer": GPU_TIMER if backend == "nccl" else GLOO_TIMER,
            **{plan: slowest_rank([r[plan]["samples_s"] for r in per_rank]) for plan in per_rank[0]}}
