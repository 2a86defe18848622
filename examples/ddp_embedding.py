#!/usr/bin/python3
"""A recommendation-style model trained with DDP on sparcoll, checked against gloo.

    torchrun --nproc_per_node 4 examples/ddp_embedding.py            # Debian: --redirects 1 --tee 1

Model: a large nn.EmbeddingBag (item ids -> 16 floats, summed per bag) and a small MLP that
predicts a click. Data: generated per rank and step — bags of item ids drawn with a Zipf-like
skew, clicks from a hidden "true" model — so each step touches a few thousand rows of the
table and its gradient is mostly zero: torch.sparse COO with --grad sparse (the default,
EmbeddingBag(sparse=True)), a dense tensor of mostly-zero blocks with --grad dense.

The same model (same initial weights, same batches) is trained twice in one launch: on the
default group (backend "sparcoll") and on a gloo group (new_group(backend="gloo")). Every rank
compares the two loss curves; the launch fails unless they agree within --rtol / --atol (the
backends sum in different orders, so the curves are close, not bitwise equal). Rank 0 prints
both curves and the time per step of both backends side by side.
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import sparcoll_torch  # noqa: F401  (registers the "sparcoll" backend)
except ImportError as e:
    sys.exit(f"ddp_embedding: cannot import sparcoll_torch ({e}); build with meson (python/) and set "
             "PYTHONPATH=build/python, or meson install")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=60, help="training steps per backend")
    p.add_argument("--warmup", type=int, default=5, help="first steps left out of the time per step")
    p.add_argument("--items", type=int, default=200_000, help="rows of the embedding table")
    p.add_argument("--dim", type=int, default=16, help="embedding width")
    p.add_argument("--batch", type=int, default=256, help="bags per rank and step")
    p.add_argument("--bag", type=int, default=8, help="item ids per bag")
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--grad", choices=["sparse", "dense"], default="sparse",
                   help="embedding gradient: torch.sparse COO (EmbeddingBag(sparse=True)) or dense")
    p.add_argument("--rtol", type=float, default=1e-3, help="allowed relative loss difference")
    p.add_argument("--atol", type=float, default=1e-5, help="allowed absolute loss difference")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


class ClickModel(nn.Module):
    def __init__(self, items, dim, sparse):
        super().__init__()
        self.embedding = nn.EmbeddingBag(items, dim, mode="sum", sparse=sparse)
        self.mlp = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, ids, offsets):
        return self.mlp(self.embedding(ids, offsets)).squeeze(1)


def make_batches(args, rank):
    """Every step's (ids, offsets, clicks) for this rank; identical for both backends."""
    truth = torch.Generator().manual_seed(args.seed)  # the hidden model, shared by all ranks
    true_item = torch.randn(args.items, generator=truth)
    g = torch.Generator().manual_seed(args.seed * 1000 + rank + 1)
    batches = []
    for _ in range(args.steps):
        # Zipf-like popularity: a few items appear in most bags, the tail rarely.
        u = torch.rand(args.batch * args.bag, generator=g)
        ids = (args.items * u.pow(3)).long().clamp_(max=args.items - 1)
        offsets = torch.arange(0, args.batch * args.bag, args.bag)
        score = true_item[ids].view(args.batch, args.bag).sum(1) / math.sqrt(args.bag)
        clicks = (torch.rand(args.batch, generator=g) < torch.sigmoid(score)).float()
        batches.append((ids, offsets, clicks))
    return batches


def train(args, group, batches, initial_state):
    model = ClickModel(args.items, args.dim, args.grad == "sparse")
    model.load_state_dict(initial_state)
    ddp = DDP(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    loss_fn = nn.BCEWithLogitsLoss()
    losses, times = [], []
    for ids, offsets, clicks in batches:
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(ids, offsets), clicks)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    dist.barrier(group=group)
    return losses, times


def main():
    args = parse_args()
    if args.steps <= args.warmup:
        sys.exit(f"ddp_embedding: --steps {args.steps} must exceed --warmup {args.warmup}")
    torch.set_num_threads(1)  # several ranks share the host's cores
    dist.init_process_group("sparcoll")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")

    torch.manual_seed(args.seed)
    initial_state = ClickModel(args.items, args.dim, False).state_dict()
    batches = make_batches(args, rank)

    runs = {}
    for name, group in (("gloo", gloo), ("sparcoll", None)):
        runs[name] = train(args, group, batches, initial_state)
    (ref, ref_t), (got, got_t) = runs["gloo"], runs["sparcoll"]

    worst = max(abs(a - b) - (args.atol + args.rtol * abs(a)) for a, b in zip(ref, got))
    agree = worst <= 0
    if rank == 0:
        print(f"ddp_embedding: {world} ranks, EmbeddingBag {args.items}x{args.dim} ({args.grad} gradient), "
              f"{args.batch} bags of {args.bag} per rank, {args.steps} steps; "
              f"sparcoll transport {sparcoll_torch.transport()}")
        print(f"{'step':>5} {'loss gloo':>12} {'loss sparcoll':>14} {'|diff|':>10}")
        for i, (a, b) in enumerate(zip(ref, got)):
            if i < 5 or i % 10 == 9 or i == len(ref) - 1:
                print(f"{i:>5} {a:>12.6f} {b:>14.6f} {abs(a - b):>10.2e}")
        ms = {n: 1000 * statistics.median(t[args.warmup:]) for n, (_, t) in runs.items()}
        print(f"time per step (median of steps {args.warmup}..{args.steps - 1}, rank 0): "
              f"gloo {ms['gloo']:.2f} ms, sparcoll {ms['sparcoll']:.2f} ms")
    # Every rank checks its own curve; agreement is then shared so that all ranks exit alike.
    flag = torch.tensor([0 if agree else 1], dtype=torch.int32)
    dist.all_reduce(flag, group=gloo)
    if rank == 0:
        verdict = "match" if flag.item() == 0 else "DIFFER"
        print(f"loss curves {verdict} within rtol {args.rtol:g}, atol {args.atol:g} on every rank")
    dist.destroy_process_group()
    return 0 if flag.item() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
