"""sparcoll as a torch.distributed backend.

    import sparcoll_torch                     # registers the "sparcoll" backend
    torch.distributed.init_process_group("sparcoll")

Collectives: allreduce (SUM, AVG, MIN, MAX, PRODUCT on float32, float64, float16, bfloat16, int32,
int64, int16, int8, uint8, complex (SUM, AVG); several tensors per call; torch.sparse_coo), broadcast, allgather, allgather_coalesced, reduce_scatter,
reduce, gather, scatter, all_to_all (+ all_to_all_single), send/recv (tags, any source), barrier.
Every other operation raises RuntimeError naming it. See docs/pytorch.md.
"""
import torch.distributed as dist  # registers torch's ProcessGroup type, which _C returns

from . import _C
from ._destroy import install_destroy_hook
from ._rendezvous import release_store, store_address_and_token

BACKEND = "sparcoll"

__all__ = ["BACKEND", "transport"]


_store_of = {}  # live group -> its sparcoll store address


def _create_process_group(store, rank, size, timeout):
    """The creator torch.distributed calls for init_process_group("sparcoll") and new_group."""
    address, token = store_address_and_token(store, rank, size, timeout)
    try:
        pg = _C.create_process_group(rank, size, address, token, timeout.total_seconds())
    except BaseException:
        release_store(address)
        raise
    _store_of[pg] = address
    return pg


def _destroyed(pg):
    _C.shutdown(pg)
    release_store(_store_of.pop(pg, ""))


def transport(group=None):
    """The sparcoll transport a group runs on ("shm", "tcp", ...); the default group if None."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return _C.transport(pg)


if BACKEND.upper() not in dist.Backend._plugins:  # importing twice (reload) must not fail
    dist.Backend.register_backend(BACKEND, _create_process_group)
    install_destroy_hook(_C.is_sparcoll, _destroyed)
