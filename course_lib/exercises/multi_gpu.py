"""Notebook 14's exercise: a ring all-reduce written from ``torch.distributed``'s point-to-point calls.

``check_ring_all_reduce(fn)`` runs ``fn`` in 2, 3 and 4 processes (gloo on the CPU by default: it runs on a
laptop with no GPU; ``backend="nccl"`` runs it on GPUs) at hostile sizes: one element, sizes that do not
divide by the number of ranks, and sizes that do. It is judged by what it does, never by its source:

- its result on every rank against the exact sum (the inputs are whole numbers float32 adds exactly);
- the traffic the launcher's wrapper counts around ``send``, ``recv``, ``isend`` and ``irecv``: a ring
  sends only to one neighbour, and each rank sends at most 2(p−1) chunks of ⌈n/p⌉ elements. An
  all-to-one reduce and a broadcast back is right, but its root sends to every rank and (p−1) times the
  data; a ring that stops after its reduce-scatter sends half a ring's bytes and leaves partial sums;
- the collectives it calls (none: the exercise is to write one);
- a time limit: a deadlock (every rank sending before any receives) is stopped and named.

``time_against_nccl`` then times the learner's ring beside ``dist.all_reduce`` on GPUs, with the α–β
model's bandwidth floor for the message.
"""
from __future__ import annotations

import math

from course_lib.core.hardware import BYTES_PER_ELEMENT, detect
from course_lib.exercises.base import Verdict
from course_lib.launch import collectives as launcher
from course_lib.models import collectives as model

WORLD_SIZES = (2, 3, 4)
SIZES = (1, 5, 12, 1001, 4096)        # elements: 1; not divisible by 2, 3 or 4 (5, 1001); divisible by each (12)
ELEMENT_BYTES = int(BYTES_PER_ELEMENT["fp32"])
TIME_LIMIT_S = 30.0


def ring_bound_bytes(elements: int, ranks: int) -> int:
    """The most a rank of a ring all-reduce sends: 2(p−1) messages, each one chunk of at most ⌈n/p⌉ elements."""
    return 2 * (ranks - 1) * math.ceil(elements / ranks) * ELEMENT_BYTES


def one_phase_bytes(elements: int, ranks: int) -> int:
    """The most a rank sends in one phase of the ring (a reduce-scatter, or an all-gather): p−1 chunks."""
    return (ranks - 1) * math.ceil(elements / ranks) * ELEMENT_BYTES


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' if n != 1 else ''}"


def _first_wrong(result: list[float], want: list[float]) -> int | None:
    return next((i for i, (g, w) in enumerate(zip(result, want)) if g != w), None)


def _wrong_results(reports: list[list[dict]], ranks: int) -> dict[int, list[tuple[int, int]]]:
    """{elements: [(rank, first wrong index), ...]} over every size where some rank's result is wrong."""
    out: dict[int, list[tuple[int, int]]] = {}
    for i, n in enumerate(r["elements"] for r in reports[0]):
        want = launcher.learner_expected(ranks, n)
        for rank, per_size in enumerate(reports):
            report = per_size[i]
            if report["shape"] != [n]:
                out.setdefault(n, []).append((rank, -1))
                continue
            bad = _first_wrong(report["result"], want)
            if bad is not None:
                out.setdefault(n, []).append((rank, bad))
    return out


def _wrong_verdict(reports: list[list[dict]], ranks: int, wrong: dict[int, list[tuple[int, int]]]) -> Verdict:
    sizes = [r["elements"] for r in reports[0]]
    n = max(wrong)
    i = sizes.index(n)
    rank, index = wrong[n][0]
    report = reports[rank][i]
    if index < 0:
        return Verdict(f"Not yet: with {ranks} ranks and {n:,} elements, rank {rank} returned a tensor of shape "
                       f"{tuple(report['shape'])}, not ({n},). Sum in place into the tensor you were given (or "
                       "return a tensor of its shape).", False)
    want = launcher.learner_expected(ranks, n)
    where = (f"with {ranks} ranks and {_plural(n, 'element')}, rank {rank}'s element {index} is {report['result'][index]:g}, "
             f"not the sum {want[index]:g}")
    divisible_right = all(m not in wrong for m in sizes if m % ranks == 0)
    if divisible_right and all(m % ranks for m in wrong):
        return Verdict(f"Not yet: an off-by-one chunk split. Every size that divides by {ranks} comes out right, and "
                       f"every size that does not is wrong ({', '.join(f'{m:,}' for m in sorted(wrong))} elements): "
                       f"{where}. The chunks must cover all n elements however n divides: the n mod p elements "
                       "left over by n // p belong in some chunk.", False)
    sent = max(sum(r[i]["sent"].values()) for r in reports)
    if 0 < sent <= one_phase_bytes(n, ranks):
        return Verdict(f"Not yet: the all-gather phase is missing. Each rank sent at most {sent:,} B, one phase of "
                       f"the ring ({_plural(ranks - 1, 'chunk')}), not two; {where}. After the reduce-scatter each rank holds "
                       "one chunk that is the full sum and partial sums elsewhere: the p−1 steps that pass the "
                       "finished chunks round the ring are still to do.", False)
    return Verdict(f"Not yet: {where}.", False)


def _traffic_verdict(reports: list[list[dict]], ranks: int) -> Verdict | None:
    """None if every rank sent only to one neighbour and no more than a ring does; else what it did instead."""
    neighbours = lambda r: {(r + 1) % ranks, (r - 1) % ranks}   # noqa: E731
    for i, n in enumerate(r["elements"] for r in reports[0]):
        for rank, per_size in enumerate(reports):
            sent = {int(peer): nbytes for peer, nbytes in per_size[i]["sent"].items()}
            total = sum(sent.values())
            if len(sent) > 1 or not set(sent) <= neighbours(rank):
                others = ", ".join(str(p) for p in sorted(sent))
                return Verdict(f"Not a ring yet: with {ranks} ranks and {_plural(n, 'element')} rank {rank} sent to rank(s) "
                               f"{others} ({total:,} B in all). The sums are right, but in a ring each rank sends only "
                               f"to its neighbour; a rank that sends to all the others is gathering the data in one "
                               f"place and broadcasting it back, which puts (p−1) times the data through one link.",
                               False)
            bound = ring_bound_bytes(n, ranks)
            if total > bound:
                return Verdict(f"Not a ring yet: with {ranks} ranks and {_plural(n, 'element')} rank {rank} sent {total:,} B; a "
                               f"ring's rank sends at most {bound:,} B (2(p−1) chunks of ⌈n/p⌉ elements). The sums "
                               "are right, but whole tensors, not p-th parts, are going round.", False)
    return None


def check_ring_all_reduce(fn, world_sizes=WORLD_SIZES, sizes=SIZES, backend: str = "gloo",
                          time_limit_s: float = TIME_LIMIT_S) -> Verdict:
    """Exercise: ``fn(tensor)`` sums ``tensor`` over all ranks in place (like ``dist.all_reduce``), by a ring
    of ``torch.distributed`` sends and receives. Run for real in ``world_sizes`` processes."""
    if fn is None:
        return Verdict("Not answered yet: write ring_all_reduce(tensor) and pass it in.", False)
    last = None
    for ranks in world_sizes:
        try:
            reports = launcher.run_learner_all_reduce(fn, ranks, list(sizes), backend, time_limit_s)
        except launcher.CollectiveTimeout:
            return Verdict(f"Not yet: a deadlock. On {ranks} ranks your all-reduce had not finished after "
                           f"{time_limit_s:g} s, so its processes were stopped. A blocking send waits for the receive "
                           "at the other end: if every rank sends before it receives, none ever receives. Post the "
                           "receive first with irecv, send with isend, or use batch_isend_irecv.", False)
        except launcher.RankFailed as exc:
            first_line = exc.detail.splitlines()[0]
            return Verdict(f"Not yet: on {ranks} ranks, rank {exc.rank} raised {first_line}", False)
        except (TypeError, ValueError) as exc:
            return Verdict(f"Your function cannot be run in the worker processes: {exc}", False)
        called = sorted({c for per_size in reports for r in per_size for c in r["collectives"]})
        if called:
            return Verdict(f"Not yet: your function calls dist.{', dist.'.join(called)}. The exercise is to build the "
                           "all-reduce itself from send and recv (or isend and irecv).", False)
        wrong = _wrong_results(reports, ranks)
        if wrong:
            return _wrong_verdict(reports, ranks, wrong)
        traffic = _traffic_verdict(reports, ranks)
        if traffic is not None:
            return traffic
        last = (ranks, reports)
    ranks, reports = last
    n = max(r["elements"] for r in reports[0])
    i = [r["elements"] for r in reports[0]].index(n)
    sent = max(sum(r[i]["sent"].values()) for r in reports)
    predicted = model.sent_fraction("all_reduce", ranks) * n * ELEMENT_BYTES
    uneven = "" if sent == predicted else " (chunks of unequal size make up the difference)"
    return Verdict(f"Correct: right on {', '.join(map(str, world_sizes))} ranks at {', '.join(f'{s:,}' for s in sizes)} "
                   f"elements, each rank sending only to its neighbour. At {n:,} elements on {ranks} ranks the busiest "
                   f"rank sent {sent:,} B: the model's 2(p−1)/p of the data is {predicted:,.0f} B{uneven}. Run over "
                   f"{backend}{' (CPU processes)' if backend == 'gloo' else ''}.", True)


def time_against_nccl(fn, ranks: int = 2, message_bytes: int = 256 << 20, samples: int = 20) -> list[dict]:
    """The learner's ring beside ``dist.all_reduce`` on ``ranks`` GPUs (NCCL), float32, with the model's
    bandwidth floor for the message (the ring's bytes at the datasheet's NVLink, no latency)."""
    timed = launcher.time_learner_all_reduce(fn, ranks, message_bytes, "nccl", samples)
    gpu = detect()
    link = gpu.spec.nvlink_per_direction_bytes_per_s if gpu and gpu.spec else None
    floor = model.predict("all_reduce", timed["bytes"], ranks, link, 0.0).seconds if link else None
    rows = []
    for plan in ("yours", "dist.all_reduce"):
        median = sorted(timed[plan])[len(timed[plan]) // 2]
        rows.append({"all-reduce": plan, "ranks": ranks, "MiB": timed["bytes"] / 2**20, "median µs": median * 1e6,
                     "busbw GB/s": model.link_bandwidth_from_busbw("all_reduce", ranks, timed["bytes"], median) / 1e9,
                     "÷ the model's floor": median / floor if floor else None})
    return rows
