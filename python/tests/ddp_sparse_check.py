#!/usr/bin/python3
"""Sparse COO gradients through DDP on sparcoll equal gloo's (run under torchrun, any rank count).

Three sparse embedding tables (widths 16, 1 and 6, different sizes) and a dense
layer, wrapped twice in DistributedDataParallel from the same weights: on the sparcoll default
group and on a gloo group. Every rank runs the same batches through both (its own ids, with
duplicates, so the gradients arrive uncoalesced; on rank 1 one table gets no ids at all in one
step, an empty gradient) and compares every parameter's reduced gradient after backward:
bit for bit at 2 ranks (a sum of two addends does not depend on the order), within 1e-6
relative otherwise. Both models then take the same SGD step, so later steps check the path on
the weights the previous reduction produced. Exit status 1 on any difference.
"""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import sparcoll_torch  # noqa: F401  (registers the "sparcoll" backend)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList([nn.Embedding(5000, 16, sparse=True), nn.Embedding(300, 1, sparse=True),
                                     nn.Embedding(700, 6, sparse=True)])
        self.dense = nn.Linear(16 + 1 + 6, 1)

    def forward(self, ids):
        parts = []
        for t, i in zip(self.tables, ids):
            e = t(i)
            # A table without ids this step still takes part (zero contribution, empty gradient).
            parts.append(e.sum(0, keepdim=True).expand(8, -1) if e.shape[0] != 8 else e)
        return self.dense(torch.cat(parts, 1)).square().mean()


def batches(rank, steps):
    g = torch.Generator().manual_seed(100 + rank)
    out = []
    for s in range(steps):
        ids = [torch.randint(0, 40, (8,), generator=g) * 7 + rank,   # overlapping, with duplicates
               torch.randint(0, 300, (8,), generator=g),
               torch.randint(0, 700, (8,), generator=g)]
        if rank == 1 and s == 1:
            ids[2] = torch.empty(0, dtype=torch.long)
        out.append(ids)
    return out


def main():
    dist.init_process_group("sparcoll")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(1)
    base = Model()
    models = {}
    for name, group in (("sparcoll", None), ("gloo", gloo)):
        m = Model()
        m.load_state_dict(base.state_dict())
        models[name] = (m, DDP(m, process_group=group), torch.optim.SGD(m.parameters(), lr=0.1))
    failures = []
    for step, ids in enumerate(batches(rank, 4)):
        for name, (m, ddp, opt) in models.items():
            opt.zero_grad(set_to_none=True)
            ddp(ids).backward()
        pairs = zip(models["sparcoll"][0].named_parameters(), models["gloo"][0].parameters())
        for (pname, p), q in pairs:
            if p.grad.is_sparse != q.grad.is_sparse:
                failures.append(f"step {step} {pname}: layout {p.grad.layout} against gloo's {q.grad.layout}")
                continue
            a = p.grad.coalesce().to_dense() if p.grad.is_sparse else p.grad
            b = q.grad.coalesce().to_dense() if q.grad.is_sparse else q.grad
            same = torch.equal(a, b) if world == 2 else torch.allclose(a, b, rtol=1e-6, atol=1e-7)
            if not same:
                failures.append(f"step {step} {pname}: max |diff| {(a - b).abs().max().item():.3e}")
        for name, (m, ddp, opt) in models.items():
            opt.step()
    bad = torch.tensor([len(failures)])
    dist.all_reduce(bad, group=gloo)
    for f in failures:
        print(f"rank {rank}: DIFFERS: {f}", flush=True)
    if rank == 0:
        print(f"ddp_sparse_check: {world} ranks, 4 steps, 3 sparse tables + a dense layer: "
              f"{'gradients equal gloo' + chr(39) + 's' if bad.item() == 0 else 'DIFFERENCES on some rank'}"
              f" ({'bit for bit' if world == 2 else 'rtol 1e-6'})", flush=True)
    dist.destroy_process_group()
    return 0 if bad.item() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
