"""Bad input to the sparcoll backend: a clear RuntimeError on every rank, never a hang.

Run by run_torchrun.py with 2 ranks and a short SPARCOLL_DEADLINE_MS. Each case runs on every
rank; the group must still work afterwards (checked by an allreduce after each case). Exits 1
listing the cases that did not raise the expected message.
"""
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import sparcoll_torch  # noqa: F401  (registers the backend)
from sparcoll_torch import _C
from sparcoll_torch._rendezvous import store_address_and_token

failures = []


def expect(case, fragment, call, rank=None):
    """`call` must raise a RuntimeError containing `fragment` (or one of a tuple of them)."""
    rank = dist.get_rank() if rank is None else rank
    try:
        call()
    except RuntimeError as e:
        first = str(e).splitlines()[0]
        if any(f in str(e) for f in (fragment if isinstance(fragment, tuple) else (fragment,))):
            print(f"rank {rank}: {case}: ok: {first}", flush=True)
        else:
            failures.append(f"{case}: expected '{fragment}', got: {first}")
        return
    failures.append(f"{case}: no exception")


def still_works(case):
    t = torch.ones(8)
    dist.all_reduce(t)
    if t[0].item() != dist.get_world_size():
        failures.append(f"{case}: the group gave {t[0].item()} afterwards, not {dist.get_world_size()}")
    b = torch.full((3,), float(dist.get_rank() + 1))  # the collective thread's sequence too
    dist.broadcast(b, 0)
    if b[0].item() != 1.0:
        failures.append(f"{case}: broadcast gave {b[0].item()} afterwards, not 1.0")


def dropped_group_with_a_collective_in_flight(rank, world):
    """A group whose last reference goes while its collective still runs, its tensor held by
    the Work only: the group's destructor runs with the GIL held, and the completion thread
    needs the GIL to free that tensor. Neither may wait for the other (a hang, not an error)."""
    store = dist.PrefixStore("dropped_group/", dist.distributed_c10d._get_default_store())
    address, token = store_address_and_token(store, rank, world, timedelta(seconds=30))
    group = _C.create_process_group(rank, world, address, token)  # outside torch's group registry
    if rank == 1:
        time.sleep(0.5)  # so that rank 0's allreduce is still waiting when it drops the group
    group.allreduce([torch.ones(1 << 16)])  # neither the Work nor the tensor is kept
    del group
    print(f"rank {rank}: dropped group with a collective in flight: ok", flush=True)


def unreducible(n):
    """A tensor of a dtype no backend reduces (quantized uint8): torch passes it through as it is."""
    return torch.quantize_per_tensor(torch.ones(n), 0.1, 0, torch.quint8)


def recv_size_mismatch(rank):
    """Rank 0 sends 2 floats, rank 1 receives 3: only the recv fails."""
    if rank == 0:
        dist.send(torch.ones(2), dst=1, tag=6)
        raise RuntimeError("sent: the sender does not fail")
    dist.recv(torch.empty(3), src=0, tag=6)


def allreduce_options(op):
    opts = dist.AllreduceOptions()
    opts.reduceOp = op
    return opts


def reduce_options(root):
    opts = dist.ReduceOptions()
    opts.rootRank = root
    opts.reduceOp = dist.ReduceOp.SUM
    return opts


def main():
    dist.init_process_group("sparcoll")
    rank, world = dist.get_rank(), dist.get_world_size()
    pg = dist.distributed_c10d._get_default_group()
    cases = [
        ("reduce dtype", "has dtype QUInt8", lambda: dist.reduce(unreducible(2), 0)),
        ("reduce root not a rank", f"root rank {world} is not a rank of this group",
         lambda: pg.reduce([torch.ones(2)], reduce_options(world)).wait()),
        # Rooted collectives, bad input on the root only: its own message, an abort elsewhere.
        ("gather output list on the root",
         "needs one per rank" if rank == 0 else "that rank's input failed the backend's checks",
         lambda: dist.gather(torch.ones(2), [torch.ones(2)] if rank == 0 else None, dst=0)),
        ("scatter input shape on the root",
         "input tensor 0 has 3 elements, 2 expected" if rank == 1 else "that rank's input failed the backend's checks",
         lambda: dist.scatter(torch.empty(2), [torch.ones(3) for _ in range(world)] if rank == 1 else None, src=1)),
        # The ranks name different roots, or different sizes: a mismatch on every rank.
        ("reduce roots differ across ranks", ("root differs across ranks", "failed it"),
         lambda: dist.reduce(torch.ones(4), dst=rank)),
        ("gather sizes differ across ranks", ("differ across ranks", "failed it"),
         lambda: dist.gather(torch.ones(3 + rank), [torch.empty(3) for _ in range(world)] if rank == 0 else None,
                             dst=0)),
        ("scatter sizes differ across ranks", ("differ across ranks", "failed it"),
         lambda: dist.scatter(torch.empty(3 + rank), [torch.ones(3) for _ in range(world)] if rank == 0 else None,
                              src=0)),
        # send and recv fail on the rank that calls them; nobody else is waiting in a collective.
        ("send to a rank that is not one", "send: peer 5 is not a rank",
         lambda: pg.send([torch.ones(2)], 5, 0).wait()),
        ("recv size differs from the send's",
         "rank 0 sent 8 bytes, this rank receives 12" if rank == 1 else "the sender does not fail",
         lambda: recv_size_mismatch(rank)),
        ("all_to_all_single splits", "the split sizes of the input tensor add up to 3 rows, it has 4",
         lambda: dist.all_to_all_single(torch.empty(4), torch.ones(4), output_split_sizes=[2] * world,
                                        input_split_sizes=[1, 2] + [0] * (world - 2))),
        ("all_to_all_single uneven rows", f"has 5 rows (dim 0), which do not split equally across {world} ranks",
         lambda: dist.all_to_all_single(torch.empty(5), torch.ones(5))),
        ("all_to_all sizes differ across ranks", ("differ across ranks", "failed it"),
         lambda: dist.all_to_all_single(torch.empty(world * (2 + rank)), torch.ones(world * (2 + rank)))),
        ("non-contiguous", "is not contiguous", lambda: dist.all_reduce(torch.ones(4, 6).t())),
        ("non-contiguous broadcast", "is not contiguous", lambda: dist.broadcast(torch.ones(4, 6)[:, 1], 0)),
        ("dtype", "has dtype QUInt8", lambda: dist.all_reduce(unreducible(4))),
        ("dtype of reduce_scatter", "has dtype QUInt8",
         lambda: dist.reduce_scatter(unreducible(2),
                                     [unreducible(2) for _ in range(world)])),
        # Past torch's own check (dist.all_reduce refuses it first), straight to the backend.
        ("bool AVG", "is torch.bool, which does not reduce with AVG",
         lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG)),
        ("complex MAX", "torch.complex64, which reduces with SUM and AVG only",
         lambda: pg.allreduce([torch.ones(4, dtype=torch.complex64)], allreduce_options(dist.ReduceOp.MAX)).wait()),
        ("bitwise op on floats", "op bxor is bitwise: it takes i32 or i64, not f32",
         lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BXOR)),
        ("layout sparse_csr", "has layout torch.sparse_csr",
         lambda: pg.allreduce([torch.eye(3).to_sparse_csr()]).wait()),
        # torch 1.13 registers c10d kernels for CPU and CUDA only: other devices stop in its
        # dispatcher (NotImplementedError, a RuntimeError); CUDA tensors reach the backend's check.
        ("device meta", "Could not run 'c10d::allreduce_'",
         lambda: pg.allreduce([torch.ones(4, device="meta")]).wait()),
        ("sparse with MAX", "sparse_coo tensors reduce with SUM or AVG only",
         lambda: dist.all_reduce(torch.eye(3).to_sparse(), op=dist.ReduceOp.MAX)),
        ("allgather output list", "needs one per rank",
         lambda: dist.all_gather([torch.empty(2)], torch.ones(2))),
        ("allgather output shape", "has 3 elements, 2 expected",
         lambda: dist.all_gather([torch.empty(3) for _ in range(world)], torch.ones(2))),
        ("allgather_coalesced output lists", "needs one per rank",
         lambda: dist.all_gather_coalesced([[torch.empty(2)]], [torch.ones(2)])),
        ("allgather_coalesced list length", "output list 1 has 1 tensors, the input list 2",
         lambda: dist.all_gather_coalesced([[torch.empty(2), torch.empty(2)], [torch.empty(2)]],
                                           [torch.ones(2), torch.ones(2)])),
        ("allgather_coalesced output shape", "output list 0 tensor 0 has 3 elements, 2 expected",
         lambda: dist.all_gather_coalesced([[torch.empty(3)] for _ in range(world)], [torch.ones(2)])),
        # Ranks disagree: sparcoll's op-level checks fail the collective on every rank.
        ("mismatched shapes", "mismatch", lambda: dist.all_reduce(torch.ones(100 + 300 * rank))),
        # Bad input on one rank only: that rank's own message, an abort on the others.
        ("bad dtype on rank 1 only",
         "has dtype QUInt8" if rank == 1 else "that rank's input failed the backend's checks",
         lambda: dist.all_reduce(unreducible(4) if rank == 1 else torch.ones(4))),
        # The same on the collective thread (broadcast, allgather, reduce_scatter run there).
        # The bad rank is the root: a root with good input may finish sending before a
        # receiver's abort arrives (it then returns normally), a receiver always waits for it.
        ("non-contiguous broadcast on the root only",
         "is not contiguous" if rank == 1 else "that rank's input failed the backend's checks",
         lambda: dist.broadcast(torch.ones(4, 6)[:, 1] if rank == 1 else torch.ones(4), 1)),
        ("reduce_scatter dtype on rank 0 only",
         "has dtype QUInt8" if rank == 0 else "that rank's input failed the backend's checks",
         lambda: dist.reduce_scatter(unreducible(2) if rank == 0 else torch.ones(2),
                                     [unreducible(2) if rank == 0 else torch.ones(2)
                                      for _ in range(world)])),
        # 64-bit sparse values go another way (every rank's pairs to every rank): a rank whose
        # dtype differs runs another collective, which every rank names.
        ("sparse dtypes differ across ranks", ("differ across ranks",),
         lambda: dist.all_reduce(torch.eye(4, dtype=torch.float64 if rank == 1 else torch.float32).to_sparse())),
        ("sparse int64 AVG", "AVG of int64 values is refused",
         lambda: dist.all_reduce(torch.eye(4, dtype=torch.int64).to_sparse(), op=dist.ReduceOp.AVG)),
        ("sparse shapes differ across ranks", ("allreduce_sparse", "failed it", "differ"),
         lambda: dist.all_reduce(torch.eye(4 + rank).to_sparse())),
        # Each rank sees the other's size first or the other's abort first, whichever comes.
        ("mismatched allgather sizes", ("differ across ranks", "failed it"),
         lambda: dist.all_gather([torch.empty(10 + 30 * rank) for _ in range(world)], torch.ones(10 + 30 * rank))),
    ]
    for case, fragment, call in cases:
        expect(case, fragment, call)
        still_works(case)

    dropped_group_with_a_collective_in_flight(rank, world)

    # A second sparcoll group next to the default one: its own communicator and store.
    second = dist.new_group(backend="sparcoll")
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t, group=second)
    if t[0].item() != world * (world + 1) / 2:
        failures.append(f"second group: got {t[0].item()}")
    dist.destroy_process_group(second)
    expect("second group after destroy", "destroyed", lambda: second.allreduce([torch.ones(2)]).wait())
    still_works("default group after destroying the second")

    # The group's timeout is each operation's deadline (SPARCOLL_DEADLINE_MS unset): a recv
    # nobody sends to fails after it, and only that recv.
    saved = os.environ.pop("SPARCOLL_DEADLINE_MS", None)
    quick = dist.new_group(backend="sparcoll", timeout=timedelta(seconds=1))
    if saved is not None:
        os.environ["SPARCOLL_DEADLINE_MS"] = saved
    if rank == 0:
        start = time.monotonic()
        expect("recv past the group's timeout", "deadline passed",
               lambda: dist.recv(torch.empty(2), src=1, tag=77, group=quick))
        if time.monotonic() - start > 5:
            failures.append(f"recv past the group's timeout took {time.monotonic() - start:.1f} s, the timeout is 1 s")
    dist.barrier()  # the default group: its deadline is long enough for rank 0 to come back
    dist.destroy_process_group(quick)

    dist.destroy_process_group()
    expect("default group after destroy", "destroyed", lambda: pg.allreduce([torch.ones(2)]).wait(), rank)

    for f in failures:
        print(f"rank {rank}: FAILED {f}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
