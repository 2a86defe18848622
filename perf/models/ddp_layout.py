"""The order and buckets in which DistributedDataParallel sends a model's gradients.

DDP (torch 1.13) puts all gradients in one bucket for the first iteration, then rebuilds its
buckets in the order the gradients became ready during that first backward pass (roughly the
reverse of the forward pass), 1 MiB for the first bucket and 25 MiB for the others, each sparse
gradient alone. Rather than re-deriving that rule, ask DDP: wrap a copy of the model in a
one-process gloo group (a FileStore, no port), run two iterations and note what the
communication hook receives in the second.
"""
import copy
import os
import tempfile

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def ddp_buckets(model, batch, bucket_cap_mb=25):
    """List of buckets, each the list of parameter names in it, in DDP's order."""
    names = {p.data_ptr(): n for n, p in model.named_parameters()}
    seen = {}

    def hook(state, bucket):
        seen[bucket.index()] = [names[p.data_ptr()] for p in bucket.parameters()]
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())   # one process: nothing to exchange
        return fut

    with tempfile.TemporaryDirectory() as tmp:
        store = dist.FileStore(os.path.join(tmp, "store"), 1)
        group_was_there = dist.is_initialized()
        if not group_was_there:
            dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        try:
            m = copy.deepcopy(model)
            names = {p.data_ptr(): n for n, p in m.named_parameters()}
            ddp = DDP(m, bucket_cap_mb=bucket_cap_mb,
                      process_group=dist.new_group([0], backend="gloo") if group_was_there else None)
            ddp.register_comm_hook(None, hook)
            for _ in range(2):
                seen.clear()
                ddp(*batch).backward()
            del ddp, m
        finally:
            if not group_was_there:
                dist.destroy_process_group()
    return [seen[i] for i in sorted(seen)]
