"""Notebook 14's ring all-reduce exercise, run for real: 2, 3 and 4 CPU processes over gloo (no GPU needed).
A reference ring and a correct alternative are accepted; an all-to-one reduce and broadcast, a ring without its
all-gather, a deadlocking order, an off-by-one chunk split and a call of dist.all_reduce are each rejected with
a message that names the defect. Then the launcher itself: a gloo all-reduce sweep, its samples, and the
environment every worker gets."""
import torch
import torch.distributed as dist

from course_lib.exercises import multi_gpu as ex
from course_lib.launch import collectives as lc

FAST = 4.0     # seconds a check may run before it is called a deadlock: the correct ones take well under one


# --------------------------------------------------------------------------- the solutions

def reference_ring(tensor):
    """Reduce-scatter then all-gather round the ring, to the right; isend beside a blocking recv."""
    rank, p = dist.get_rank(), dist.get_world_size()
    chunks = list(tensor.tensor_split(p))
    right, left = (rank + 1) % p, (rank - 1) % p
    for step in range(p - 1):
        incoming = torch.empty_like(chunks[(rank - step - 1) % p])
        request = dist.isend(chunks[(rank - step) % p], right)
        dist.recv(incoming, left)
        request.wait()
        chunks[(rank - step - 1) % p] += incoming
    for step in range(p - 1):
        request = dist.isend(chunks[(rank - step + 1) % p], right)
        dist.recv(chunks[(rank - step) % p], left)
        request.wait()


def bounds(n, p):
    size = -(-n // p)
    return [(min(i * size, n), min((i + 1) * size, n)) for i in range(p)]


def leftward_ring(tensor):
    """A correct alternative: the ring turns the other way, chunks of ⌈n/p⌉ (the last ones short or empty),
    both directions of each step posted together with batch_isend_irecv, and the sum returned as a new tensor."""
    out = tensor.clone()
    rank, p = dist.get_rank(), dist.get_world_size()
    edges = bounds(out.numel(), p)
    left, right = (rank - 1) % p, (rank + 1) % p
    for step in range(p - 1):
        s0, s1 = edges[(rank + step) % p]
        r0, r1 = edges[(rank + step + 1) % p]
        incoming = torch.empty(r1 - r0)
        for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, out[s0:s1].contiguous(), left),
                                         dist.P2POp(dist.irecv, incoming, right)]):
            w.wait()
        out[r0:r1] += incoming
    for step in range(p - 1):
        s0, s1 = edges[(rank - 1 + step + p) % p]
        r0, r1 = edges[(rank + step) % p]
        incoming = torch.empty(r1 - r0)
        for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, out[s0:s1].contiguous(), left),
                                         dist.P2POp(dist.irecv, incoming, right)]):
            w.wait()
        out[r0:r1] = incoming
    return out


def all_to_one(tensor):
    """Right, but no ring: every rank sends its whole tensor to rank 0, which sends the sum back."""
    rank, p = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        incoming = torch.empty_like(tensor)
        for src in range(1, p):
            dist.recv(incoming, src)
            tensor += incoming
        for dst in range(1, p):
            dist.send(tensor, dst)
    else:
        dist.send(tensor, 0)
        dist.recv(tensor, 0)


def no_all_gather(tensor):
    """The reduce-scatter alone."""
    rank, p = dist.get_rank(), dist.get_world_size()
    chunks = list(tensor.tensor_split(p))
    for step in range(p - 1):
        incoming = torch.empty_like(chunks[(rank - step - 1) % p])
        request = dist.isend(chunks[(rank - step) % p], (rank + 1) % p)
        dist.recv(incoming, (rank - 1) % p)
        request.wait()
        chunks[(rank - step - 1) % p] += incoming


def deadlock(tensor):
    """Every rank sends (blocking) before it receives."""
    rank, p = dist.get_rank(), dist.get_world_size()
    chunks = list(tensor.tensor_split(p))
    for step in range(p - 1):
        incoming = torch.empty_like(chunks[(rank - step - 1) % p])
        dist.send(chunks[(rank - step) % p], (rank + 1) % p)
        dist.recv(incoming, (rank - 1) % p)
        chunks[(rank - step - 1) % p] += incoming


def off_by_one(tensor):
    """Chunks of ⌊n/p⌋: the last n mod p elements belong to no chunk."""
    rank, p = dist.get_rank(), dist.get_world_size()
    size = tensor.numel() // p
    chunks = [tensor[i * size:(i + 1) * size] for i in range(p)]
    for step in range(p - 1):
        incoming = torch.empty_like(chunks[(rank - step - 1) % p])
        request = dist.isend(chunks[(rank - step) % p], (rank + 1) % p)
        dist.recv(incoming, (rank - 1) % p)
        request.wait()
        chunks[(rank - step - 1) % p] += incoming
    for step in range(p - 1):
        request = dist.isend(chunks[(rank - step + 1) % p], (rank + 1) % p)
        dist.recv(chunks[(rank - step) % p], (rank - 1) % p)
        request.wait()


def library(tensor):
    dist.all_reduce(tensor)


# --------------------------------------------------------------------------- the verdicts

def test_the_reference_ring_is_accepted():
    verdict = ex.check_ring_all_reduce(reference_ring, time_limit_s=FAST)
    assert verdict.correct, verdict
    assert verdict.startswith("Correct")


def test_a_leftward_ring_with_other_chunks_that_returns_its_sum_is_accepted():
    verdict = ex.check_ring_all_reduce(leftward_ring, time_limit_s=FAST)
    assert verdict.correct, verdict


def test_an_all_to_one_reduce_and_broadcast_is_right_but_not_a_ring():
    verdict = ex.check_ring_all_reduce(all_to_one, time_limit_s=FAST)
    assert not verdict.correct
    assert "Not a ring" in verdict and "rank 0 sent to rank(s) 1, 2" in verdict


def test_a_ring_without_its_all_gather_is_named():
    verdict = ex.check_ring_all_reduce(no_all_gather, time_limit_s=FAST)
    assert not verdict.correct and "all-gather phase is missing" in verdict


def test_a_deadlock_is_stopped_and_named():
    verdict = ex.check_ring_all_reduce(deadlock, world_sizes=(2,), time_limit_s=2.0)
    assert not verdict.correct and "deadlock" in verdict and "2 s" in verdict


def test_an_off_by_one_chunk_split_is_named():
    verdict = ex.check_ring_all_reduce(off_by_one, time_limit_s=FAST)
    assert not verdict.correct and "off-by-one chunk split" in verdict


def test_calling_the_library_s_all_reduce_is_refused():
    verdict = ex.check_ring_all_reduce(library, world_sizes=(2,), time_limit_s=FAST)
    assert not verdict.correct and "dist.all_reduce" in verdict


def test_no_answer_and_an_error_in_a_rank():
    assert not ex.check_ring_all_reduce(None).correct

    def raises(tensor):
        raise ValueError("chunk sizes do not add up")

    verdict = ex.check_ring_all_reduce(raises, world_sizes=(2,), time_limit_s=FAST)
    assert not verdict.correct and "ValueError: chunk sizes do not add up" in verdict and "rank" in verdict


def test_the_ring_bound_holds_for_every_correct_chunking():
    # 5 elements on 4 ranks: chunks of ⌈5/4⌉ = 2 are 2, 2, 1, 0; a rank skipping the empty one sends 2·5 elements
    # = 40 B, within 2·3·2·4 = 48 B; the all-to-one root sends 3·5·4 = 60 B.
    assert ex.ring_bound_bytes(5, 4) == 48 and 2 * 5 * 4 <= 48 < 3 * 5 * 4
    assert ex.one_phase_bytes(4096, 4) == 3 * 1024 * 4


# --------------------------------------------------------------------------- the launcher, with gloo

def test_a_gloo_all_reduce_sweep_is_checked_and_timed():
    rows = lc.sweep("all_reduce", 2, [8, 4096], backend="gloo", samples=20)
    assert [r["bytes"] for r in rows] == [8, 4096]
    for r in rows:
        assert r["max_abs_err"] == 0.0
        assert len(r["samples_s"]) == 20 and all(s > 0 for s in r["samples_s"])
        assert len(r["rank_samples_s"]) == 2
        assert r["samples_s"] == [max(a, b) for a, b in zip(*r["rank_samples_s"])]
        assert "gloo" in r["timer"] and "not a GPU measurement" in r["timer"]


def test_every_worker_gets_the_no_multicast_environment_and_the_case_s_nccl_settings():
    seen = lc.probe(2, env={"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"})
    assert [s["rank"] for s in seen] == [0, 1] and {s["world_size"] for s in seen} == {2}
    for s in seen:
        assert s["env"]["NCCL_NVLS_ENABLE"] == "0"
        assert s["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
        assert s["env"]["NVSHMEM_DISABLE_NVLS"] == "1"
        assert (s["env"]["NCCL_ALGO"], s["env"]["NCCL_PROTO"]) == ("Ring", "Simple")
