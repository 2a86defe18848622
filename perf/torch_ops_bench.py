#!/usr/bin/python3
"""Latency of torch.distributed operations on sparcoll against gloo, interleaved in one run.

    python3 python/tests/run_torchrun.py 2 perf/torch_ops_bench.py [--sizes 4096,262144,4194304]
        [--ops all_reduce,reduce,...] [--rounds 5] [--iters 20]

Every rank joins a sparcoll default group and a gloo group. For each operation and size (bytes
of float32 per rank; all_reduce and reduce of dense data, every element non-zero, so
block-sparse skipping gives sparcoll nothing), it alternates rounds: `iters` calls on sparcoll,
then `iters` on gloo, `rounds` times, and reports the median round's time per call for each and
their ratio (gloo / sparcoll: above 1 means sparcoll is faster). Rank 0 prints a markdown table,
the load average before and after, and the command. Each call waits for its result (blocking
calls, as training code makes them); send/recv is a ping-pong between ranks 0 and 1 (the time of
one round trip).
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import sparcoll_torch  # noqa: F401  (registers the backend)

OPS = ["all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "gather", "scatter",
       "all_to_all_single", "send_recv"]


def make_call(op, nbytes, rank, world, group):
    n = max(1, nbytes // 4)
    t = torch.randn(n) + 3.0  # no zeros: dense data
    if op == "all_reduce":
        return lambda: dist.all_reduce(t, group=group)
    if op == "reduce":
        return lambda: dist.reduce(t, dst=0, group=group)
    if op == "broadcast":
        return lambda: dist.broadcast(t, src=0, group=group)
    if op == "all_gather":
        outs = [torch.empty(n) for _ in range(world)]
        return lambda: dist.all_gather(outs, t, group=group)
    if op == "reduce_scatter":
        ins = [torch.randn(n) + 3.0 for _ in range(world)]
        out = torch.empty(n)
        return lambda: dist.reduce_scatter(out, ins, group=group)
    if op == "gather":
        outs = [torch.empty(n) for _ in range(world)] if rank == 0 else None
        return lambda: dist.gather(t, gather_list=outs, dst=0, group=group)
    if op == "scatter":
        ins = [torch.randn(n) for _ in range(world)] if rank == 0 else None
        out = torch.empty(n)
        return lambda: dist.scatter(out, scatter_list=ins, src=0, group=group)
    if op == "all_to_all_single":
        src = torch.randn(n * world)
        out = torch.empty(n * world)
        return lambda: dist.all_to_all_single(out, src, group=group)
    if op == "send_recv":
        buf = torch.empty(n)

        def ping_pong():
            if rank == 0:
                dist.send(t, dst=1, group=group)
                dist.recv(buf, src=1, group=group)
            elif rank == 1:
                dist.recv(buf, src=0, group=group)
                dist.send(t, dst=0, group=group)
        return ping_pong
    raise SystemExit(f"torch_ops_bench: unknown op {op} (one of {', '.join(OPS)})")


def timed_round(call, iters, group):
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        call()
    return (time.perf_counter() - start) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4096,262144,4194304")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    dist.init_process_group("sparcoll")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    groups = {"sparcoll": None, "gloo": gloo}
    load_before = os.getloadavg()
    rows = []
    for op in args.ops.split(","):
        for nbytes in (int(s) for s in args.sizes.split(",")):
            calls = {name: make_call(op, nbytes, rank, world, g) for name, g in groups.items()}
            live = []
            for name in groups:  # warm-up: connections, staging buffers; gloo lacks some ops
                try:
                    timed_round(calls[name], 2, groups[name])
                    live.append(name)
                except RuntimeError as e:
                    if "does not support" not in str(e):
                        raise
            times = {name: [] for name in live}
            for _ in range(args.rounds):
                for name in live:
                    times[name].append(timed_round(calls[name], args.iters, groups[name]))
            med = {name: statistics.median(v) for name, v in times.items()}
            rows.append((op, nbytes, med.get("sparcoll"), med.get("gloo")))
    load_after = os.getloadavg()
    if rank == 0:
        print(f"torch_ops_bench: {world} ranks, sparcoll transport {sparcoll_torch.transport()}, "
              f"{args.rounds} interleaved rounds of {args.iters} calls, median round; "
              f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
        print("| op | bytes per rank | sparcoll (us) | gloo (us) | gloo / sparcoll |")
        print("|---|---|---|---|---|")
        for op, nbytes, s, g in rows:
            if g is None:  # gloo has no such operation (torch 1.13: reduce_scatter)
                print(f"| {op} | {nbytes} | {s * 1e6:.0f} | not supported | - |")
            else:
                print(f"| {op} | {nbytes} | {s * 1e6:.0f} | {g * 1e6:.0f} | {g / s:.2f} |")
    dist.destroy_process_group(gloo)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
