"""Where a sparcoll group rendezvouses: its own store, announced through torch's store.

Group rank 0 picks a free port on the address its peers reach it by and publishes
"host:port" and a fresh job token under the group's prefix of torch's store (each group gets a
PrefixStore of its own); the others read them. So every group — the default one and each
new_group() — has its own sparcoll store and token, and none collides with torch's TCPStore on
MASTER_PORT. (Options::from_env's MASTER_ADDR:MASTER_PORT+1 would give every group the same port.)
SPARCOLL_STORE, if set, is used as given, by one group at a time.
"""
import os
import secrets
import socket

_ADDRESS_KEY = "sparcoll/store_address"
_TOKEN_KEY = "sparcoll/job_token"
_explicit_in_use = set()  # SPARCOLL_STORE values held by a live group of this process


def _reachable_host():
    """This host's address as seen from MASTER_ADDR's side (loopback on a single host)."""
    master = os.environ.get("MASTER_ADDR")
    if not master:
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((master, int(os.environ.get("MASTER_PORT") or 1)))  # UDP: no packet is sent
            return s.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())


def _free_port():
    # Released before sparcoll binds it: a small window, the same one torchrun's own free-port
    # choice has; sparcoll's store binds with SO_REUSEADDR.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def store_address_and_token(store, rank, size, timeout):
    token = os.environ.get("SPARCOLL_JOB_TOKEN", "")
    explicit = os.environ.get("SPARCOLL_STORE", "")
    if explicit:
        if explicit in _explicit_in_use:
            raise RuntimeError(
                f"sparcoll: SPARCOLL_STORE={explicit} is already used by another sparcoll process group of "
                "this process; unset SPARCOLL_STORE so that each group gets a store port of its own")
        _explicit_in_use.add(explicit)
        return explicit, token
    store.set_timeout(timeout)
    if rank == 0:
        store.set(_ADDRESS_KEY, f"{_reachable_host()}:{_free_port()}")
        store.set(_TOKEN_KEY, token or secrets.token_hex(16))
    try:
        address = store.get(_ADDRESS_KEY).decode()
        token = store.get(_TOKEN_KEY).decode()
    except RuntimeError as e:
        raise RuntimeError(f"sparcoll: rank {rank} of {size} did not get the group's store address from "
                           f"torch's store within {timeout} (is rank 0 running?): {e}") from e
    return address, token


def release_store(address):
    _explicit_in_use.discard(address)
