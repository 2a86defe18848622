"""Calls back when torch.distributed.destroy_process_group() drops a sparcoll group.

torch 1.13 has no hook for this: destroy_process_group only forgets the group, so without it the
communicator (its threads, its store port) would live until garbage collection, and a Python
reference to the group would keep working after destroy. The wrapper hands every sparcoll group
the original call removed to `on_destroyed`, which shuts it down; a later use of it raises
"used after destroy" (csrc/process_group.cpp).
"""
import functools

import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d


def install_destroy_hook(is_ours, on_destroyed):
    original = c10d.destroy_process_group

    @functools.wraps(original)
    def destroy_process_group(group=None):
        before = [pg for pg in c10d._pg_map if is_ours(pg)]
        original(group)
        for pg in before:
            if pg not in c10d._pg_map:
                on_destroyed(pg)

    c10d.destroy_process_group = destroy_process_group
    dist.destroy_process_group = destroy_process_group
