"""α-β (latency-bandwidth) cost model of sparcoll's block-sparse allreduce and the dense baselines.

Notation (see perf/model/README.md for the derivations):
  n workers, S tensor bytes, b block bytes (256 x 4), NB = S / b blocks, d = fraction of non-zero
  blocks per worker, u = union density (fraction of blocks non-zero on at least one worker),
  L lanes, F fusion (blocks per message), H = 64 header bytes, I = 8 index bytes per block,
  alpha = one-way latency per message (s), beta = s per byte of one link direction.

Two uses:
  - network(): the pure α-β model of a cluster with full-duplex links, for predictions;
  - local_*(): the same byte and message counts with the costs of one machine where every
    "link" is a CPU copy (shm, tcp loopback), for validation against sparcoll-perf here.
Only the Python standard library.
"""
import math

HEADER = 64  # bytes per message (docs/protocol.md)
INDEX = 8    # bytes per block index in a window or result


def union_density(d, n, pattern="random"):
    """Fraction of blocks non-zero on at least one of n workers, each with block density d."""
    d = min(max(d, 0.0), 1.0)
    if pattern == "random":      # independent random blocks per worker (OmniReduce's generator)
        return 1.0 - (1.0 - d) ** n
    if pattern == "overlap":     # every worker the same blocks
        return d
    if pattern == "disjoint":    # workers on disjoint blocks, as long as they fit
        return min(1.0, n * d)
    raise ValueError(f"unknown pattern {pattern}")


class Protocol:
    """Protocol geometry: block, lanes, fusion (sparcoll's defaults when the predictions in
    README.md were made; SPARCOLL_FUSION has been 32 since 2026-11-28)."""

    def __init__(self, block_bytes=1024, lanes=64, fusion=8):
        self.b, self.L, self.F = block_bytes, lanes, fusion

    def rounds(self, S, u, lanes=None):
        """Sequential round trips of one lane: every window carries up to F blocks."""
        L = lanes or self.L
        return 1 + math.ceil(u * (S / self.b) / L / self.F)

    def wire(self, blocks_bytes, messages):
        """Bytes on the wire for `blocks_bytes` of block payload in `messages` messages."""
        return blocks_bytes * (1 + INDEX / self.b) + HEADER * messages


def colocated_traffic(proto, n, S, d, u, lanes=None, remote=None):
    """Per rank, co-located aggregation (every rank aggregates 1/n of the lanes; needs lanes >= n).

    Worker side: sends its non-zero blocks of the (n-1)/n remote lanes, receives the union of those
    lanes. Aggregator side: receives the other n-1 workers' blocks of its 1/n of the lanes, sends
    the union of its lanes to the n-1 others. Own lanes go through an in-process loopback (free).
    `remote`: fraction of a worker's non-zero blocks on other ranks' lanes, (n-1)/n when blocks
    spread evenly over lanes; 0 for perf/lib/workload's "disjoint" pattern when n divides the
    lanes (rank r holds blocks r, r+n, ..., all on lanes it aggregates itself).
    Returns (sent_bytes, received_bytes, sent_messages, received_messages) per rank."""
    L = max(lanes or proto.L, n)
    NB = S / proto.b
    if remote is None:
        remote = (n - 1) / n
    w_msgs = L * (n - 1) / n + remote * d * NB / proto.F       # windows out (one per remote lane always)
    r_msgs = (L / n) * (n - 1) * (1 + u * NB / L / proto.F)   # results out to n-1 workers
    sent_payload = remote * d * S + (n - 1) / n * u * S
    sent = proto.wire(sent_payload, w_msgs + r_msgs)
    return sent, sent, w_msgs + r_msgs, w_msgs + r_msgs      # symmetric in expectation


def dedicated_traffic(proto, n, M, S, d, u, lanes=None):
    """M dedicated aggregators: (worker sent, worker received, aggregator sent, aggregator received)."""
    L = max(lanes or proto.L, M)
    NB = S / proto.b
    w_sent = proto.wire(d * S, L * (1 + d * NB / L / proto.F))
    w_recv = proto.wire(u * S, L * (1 + u * NB / L / proto.F))
    return w_sent, w_recv, n * w_recv / M, n * w_sent / M


# ---- network model (full-duplex links, one per node; no CPU costs) -------------------------
# alpha: one-way latency of a message (s); beta: s/byte of one link direction; g: gap between
# two messages on one port (s, 1 / message rate). The block-sparse exchange streams: lanes run
# in parallel, so a rank's link carries its bytes and messages back to back while each lane's
# rounds (window -> result) form a chain of round trips.

def sparse_colocated(alpha, beta, n, S, d, pattern="random", proto=None, lanes=None, g=0.0):
    proto = proto or Protocol()
    u = union_density(d, n, pattern)
    L = max(lanes or proto.L, n)
    sent, recv, ms, mr = colocated_traffic(proto, n, S, d, u, L)
    R = proto.rounds(S, u, L)
    return 2 * alpha + max(beta * max(sent, recv), g * max(ms, mr), 2 * alpha * (R - 1))


def sparse_dedicated(alpha, beta, n, M, S, d, pattern="random", proto=None, lanes=None, g=0.0):
    proto = proto or Protocol()
    u = union_density(d, n, pattern)
    L = max(lanes or proto.L, M)
    ws, wr, as_, ar = dedicated_traffic(proto, n, M, S, d, u, L)
    NB = S / proto.b
    w_msgs = L * (1 + u * NB / L / proto.F)        # results a worker receives (>= its windows)
    a_msgs = n * (L / M) * (1 + u * NB / L / proto.F)  # results an aggregator sends
    R = proto.rounds(S, u, L)
    return 2 * alpha + max(beta * max(ws, wr, as_, ar), g * max(w_msgs, a_msgs), 2 * alpha * (R - 1))


def ring(alpha, beta, n, S):
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * S * beta


def rabenseifner(alpha, beta, n, S):
    """Recursive halving + doubling; non-powers of two fold the extra ranks in (+2 full messages)."""
    p = 2 ** int(math.floor(math.log2(n)))
    extra = 0 if p == n else 2 * (alpha + S * beta)
    return 2 * math.log2(p) * alpha + 2 * (p - 1) / p * S * beta + extra


def lower_bound(alpha, beta, n, S, d, pattern="random"):
    """n nodes, no extra aggregator nodes. Latency: every result depends on remote inputs, so at
    least one hop (alpha; a single-port model would give ceil(log2 n) alpha, but ports here may
    send back to back). Bandwidth: each non-zero contribution beyond the first of a block must
    move once to be combined (n d - u block transfers per block), and every rank but the one
    holding the sum needs each union block ((n - 1) u); spread over n full-duplex links:
    S (d + (n - 2)/n u) per link. Dense (d = u = 1): 2 (n-1)/n S, the known bound."""
    u = union_density(d, n, pattern)
    return alpha + (d + (n - 2) / n * u) * S * beta


def generator_remote(proto, n, pattern):
    """Remote fraction of a worker's blocks for perf/lib/workload's patterns (see colocated_traffic)."""
    return 0.0 if pattern == "disjoint" and proto.L % n == 0 else None


# ---- this machine (every byte is a CPU copy; n processes share C cores) --------------------

def local_colocated(params, transport, n, S, d, pattern="random", proto=None, cores=2):
    """Predicted median time of one sparcoll-perf allreduce here, from parameters measured by
    microbenchmarks only (no allreduce of this size):
      params[transport]["alpha_op"][n]: time of a one-block allreduce on n ranks (fixed cost),
      params[transport]["beta"]:        s/byte, 64 KiB-message goodput of sparcoll-transport-bw,
      params[transport]["o"]:           s/message, 64-byte-message rate of sparcoll-transport-bw,
      params["local"]["t0"], ["t1"]:    s/byte of a 1-rank allreduce at density 0 and 1 (scan,
                                        loopback, copy into the output).
    T = alpha_op(n) + n t0 S + f(n) [ d (t1 - t0) S + beta (sent + received) + o (messages) ].
    The scan (t0) is memory-bound and already used the whole machine on one rank (TBB threads on
    every core), so n ranks scanning at once take n times as long. The rest runs on one progress
    thread per rank: f(n) = max(1, n / cores) when the ranks outnumber the cores. One thread per
    rank sends and receives, so a rank's copies add up (sent + received), unlike a full-duplex
    link."""
    proto = proto or Protocol()
    p = params[transport]
    u = union_density(d, n, pattern)
    sent, recv, ms, mr = colocated_traffic(proto, n, S, d, u, remote=generator_remote(proto, n, pattern))
    f = max(1.0, n / cores)
    loc = params["local"]
    work = d * (loc["t1"] - loc["t0"]) * S + p["beta"] * (sent + recv) + p["o"] * (ms + mr)
    return p["alpha_op"][str(n)] + n * loc["t0"] * S + f * work
