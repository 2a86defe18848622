// The C++ API: a communicator over a group of ranks and its collectives.
//
// All ranks must issue the same collectives in the same order (as with MPI and NCCL).
// A communicator is used from one thread at a time; its progress runs on its own threads.
// Errors throw sparcoll::Error (status.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sparcoll/compression.hpp"
#include "sparcoll/options.hpp"
#include "sparcoll/status.hpp"
#include "sparcoll/types.hpp"

namespace sparcoll {

namespace detail {
class CommunicatorImpl;
struct RequestState;
struct Coalesced;
}  // namespace detail

// The source of a recv that takes a message from any rank (Communicator::recv).
inline constexpr int kAnySource = -1;

// Counters of one operation, for benchmarks and tests.
struct OpStats {
  std::uint64_t bytes_sent = 0;      // payload + headers this rank's worker sent
  std::uint64_t bytes_received = 0;  // payload + headers this rank's worker received
  std::uint64_t blocks_sent = 0;     // non-zero blocks this rank sent
  std::uint64_t blocks_received = 0; // result blocks received (globally non-zero blocks)
  Algorithm algorithm = Algorithm::from_options;  // the allreduce algorithm that ran (auto: its choice)
  // Compressed allreduce: the payload this rank sent, in 4-byte words (an index or an fp32
  // value is one word, as Ok-Topk's paper counts; narrower values count their bytes / 4), not
  // counting O(P) count/boundary exchanges or headers.
  std::uint64_t payload_words_sent = 0;
  std::uint64_t control_words_sent = 0;  // the count / boundary / threshold exchanges
  // Hybrid allreduce: the elements of the stripes that went the dense way (the rest went
  // block-sparse).
  std::uint64_t dense_elements = 0;
  // Hybrid allreduce: this call exchanged every rank's sampled stripe densities before planning;
  // false when it planned from the table its shape kept from an earlier call
  // (SPARCOLL_HYBRID_PLAN_REUSE; docs/algorithms.md, "Kept tables").
  bool densities_exchanged = false;
};

// Traffic through the transport since the communicator was created, all roles of this process
// together (a co-located rank is a worker and an aggregator); loopback messages are not counted.
struct TrafficStats {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
  // The transport's counters of these names (transport_counters(): dpdk's packets_sent,
  // packets_received, retransmitted, dropped_invalid, duplicates), zero where the transport has
  // none; kept here for programs written before transport_counters().
  std::uint64_t packets_sent = 0;
  std::uint64_t packets_received = 0;
  std::uint64_t packets_retransmitted = 0;  // resent after a loss or a timeout
  std::uint64_t packets_dropped_invalid = 0;  // failed validation (truncated, wrong job, hostile)
  std::uint64_t packets_duplicate = 0;        // arrived twice (a resend whose original arrived)
};

// One counter the transport keeps itself, summed over this process's channels: its name is the
// transport's, then a dot, then the counter's ("dpdk.retransmitted"); docs/transports.md lists
// each transport's. Cumulative; refreshed by the progress threads every few milliseconds and by
// the collective thread after each collective, so a read right after an operation may lag
// slightly behind.
struct TransportCounter {
  std::string name;
  std::uint64_t value = 0;
};

// The result of allreduce_sparse: the reduction of every rank's sparse vector, either sparse
// (the union of all ranks' indices, sorted, with their reduced values; an entry whose sum
// cancelled to 0 stays) or dense (every one of the dim values; dsar_split_allgather returns
// this when some index range of the result passed the break-even density). Reuse one object
// across calls: its vectors keep their capacity, so steady-state calls allocate nothing.
struct SparseResult {
  bool dense = false;
  std::size_t dim = 0;
  DataType dtype = DataType::f32;
  std::vector<std::int64_t> indices;  // sparse: sorted, strictly increasing; dense: empty
  std::vector<std::byte> values;      // nnz() elements of dtype, as bytes
  std::size_t nnz() const noexcept { return dense ? dim : indices.size(); }
  // The values as T (float for f32, std::uint16_t for f16/bf16, std::int32_t for i32).
  template <typename T>
  const T* values_as() const noexcept {
    return reinterpret_cast<const T*>(values.data());
  }
};

// A handle to a non-blocking collective. Move-only. Destroying an unfinished request waits for it.
class Request {
 public:
  Request() = default;
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  // Blocks until the operation is done; throws sparcoll::Error if it failed.
  void wait();
  // True when done (throws if it failed); never blocks.
  bool test();
  bool valid() const noexcept { return state_ != nullptr; }
  // Valid after completion.
  OpStats stats() const;

 private:
  friend class detail::CommunicatorImpl;
  friend class Communicator;
  Request(std::shared_ptr<detail::CommunicatorImpl> comm, std::shared_ptr<detail::RequestState> state)
      : comm_(std::move(comm)), state_(std::move(state)) {}
  // Waits for the operation and, for a coalesced one, finishes it; never throws.
  void settle() noexcept;
  // A coalesced call's last step once its collective is done (communicator_coalesced.cpp): the
  // check that every rank named the same buffers, then the copy out of the packed buffer.
  Status finish_coalesced(const Status& collective);
  std::shared_ptr<detail::CommunicatorImpl> comm_;
  std::shared_ptr<detail::RequestState> state_;
  std::shared_ptr<detail::Coalesced> coalesced_;  // set for allreduce_coalesced and allgather_coalesced
};

class Communicator {
 public:
  // Joins the group described by `options` (rendezvous, connections). Blocks until every rank
  // (and every dedicated aggregator) has joined, or throws after options.connect_timeout_ms.
  explicit Communicator(const Options& options);
  static Communicator from_env() { return Communicator(Options::from_env()); }
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

  int rank() const noexcept;
  int size() const noexcept;
  const Options& options() const noexcept;
  std::string transport_name() const;

  // recv = reduce(send over all ranks). In place when send == recv. `count` elements of `dtype`.
  // f64 and i64 reduce on ring, butterfly or recursive_doubling only (auto picks among them);
  // another algorithm named for them fails with invalid_argument on every rank.
  // Runs options().algo (SPARCOLL_ALGO; default auto: block recursive doubling for small tensors,
  // the hybrid of block-sparse and dense stripes for the rest, docs/algorithms.md). Returns what ran
  // (OpStats::algorithm) and its traffic. With nothing else in flight, a collective the caller
  // waits for runs in the calling thread (docs/architecture.md), so it costs no thread hand-off.
  OpStats allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op);
  // Non-blocking; buffers must stay valid until the request completes. Up to
  // options.max_inflight operations (rounded up to a power of two) run at once; more wait for a
  // free slot inside the call.
  Request iallreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op);
  // The same with the algorithm named per call (Algorithm::from_options = options().algo). Every
  // rank must name the same one. Block-sparse runs on the progress threads; the others on the
  // communicator's collective thread, one after another in call order.
  OpStats allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op, Algorithm algo);
  Request iallreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op, Algorithm algo);

  // Sparse allreduce (SparCML; docs/algorithms.md): each rank gives `nnz` entries of a vector of
  // `dim` elements, indices[k] with value values[k] (nnz values of dtype); an index a rank does
  // not give counts as 0 there (min and max included). Indices are int64 as torch COO tensors
  // hold them; they must be strictly increasing (sorted, no duplicates), in [0, dim), with
  // nnz <= dim <= 2^32 (they travel as u32). Bad input fails the call on this rank with an
  // error naming the offending position and value, and on every other rank too (no hang).
  // `algo` is ssar_recursive_doubling, ssar_split_allgather or dsar_split_allgather;
  // from_options takes options().algo when it is one of those, else (like auto_select)
  // dsar_split_allgather. Every rank must name the same one and the same dim, dtype and op.
  // *result is filled by the time the request completes (unspecified if it fails); the input
  // arrays may be reused as soon as the call returns (they are copied into the op).
  void allreduce_sparse(const std::int64_t* indices, const void* values, std::size_t nnz, std::size_t dim,
                        DataType dtype, ReduceOp op, SparseResult* result, Algorithm algo = Algorithm::from_options);
  Request iallreduce_sparse(const std::int64_t* indices, const void* values, std::size_t nnz, std::size_t dim,
                            DataType dtype, ReduceOp op, SparseResult* result,
                            Algorithm algo = Algorithm::from_options);

  // buffer (count elements) on every rank = buffer on `root`.
  void broadcast(void* buffer, std::size_t count, DataType dtype, int root);
  Request ibroadcast(void* buffer, std::size_t count, DataType dtype, int root);
  // recv (size() * count elements) = every rank's send (count elements), in rank order. In
  // place when send == recv + rank() * count elements.
  void allgather(const void* send, void* recv, std::size_t count, DataType dtype);
  Request iallgather(const void* send, void* recv, std::size_t count, DataType dtype);
  // recv (count elements) = reduce over ranks of elements [rank()*count, (rank()+1)*count) of
  // send (size() * count elements).
  void reduce_scatter(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op);
  Request ireduce_scatter(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op);

  // Rooted collectives. Every rank must name the same root, count, dtype (and op); a rank that
  // names another fails the call on every rank with `mismatch`, and no rank returns success
  // unless every rank took part alike. The root's buffers (reduce's and gather's recv,
  // scatter's send) are only read or written on the root and may be null elsewhere.
  //
  // recv (count elements, on `root`) = reduce(send over all ranks). In place when send == recv
  // on the root. A reduce-scatter ring, then each rank's reduced chunk to the root.
  void reduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op, int root);
  Request ireduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op, int root);
  // recv (size() * count elements, on `root`) = every rank's send (count elements), in rank
  // order. In place when send == recv + root * count elements on the root.
  void gather(const void* send, void* recv, std::size_t count, DataType dtype, int root);
  Request igather(const void* send, void* recv, std::size_t count, DataType dtype, int root);
  // recv (count elements) on rank p = elements [p * count, (p + 1) * count) of send (size() *
  // count elements, on `root`). In place when recv == send + root * count elements on the root.
  void scatter(const void* send, void* recv, std::size_t count, DataType dtype, int root);
  Request iscatter(const void* send, void* recv, std::size_t count, DataType dtype, int root);

  // Every rank's piece for every other rank: rank p receives bytes [p * bytes_per_rank, (p + 1) *
  // bytes_per_rank) of every rank's send, in rank order in its recv (size() * bytes_per_rank
  // bytes each). Moves bytes (any element type). send and recv must not overlap.
  void all_to_all(const void* send, void* recv, std::size_t bytes_per_rank);
  Request iall_to_all(const void* send, void* recv, std::size_t bytes_per_rank);
  // Uneven pieces: send_bytes[p] bytes at send + send_offsets[p] go to rank p, and
  // recv_bytes[p] bytes from rank p land at recv + recv_offsets[p] (each array size() long,
  // copied by the call). A rank's recv_bytes[p] must be rank p's send_bytes[this rank] (else
  // `mismatch`), and send_bytes[rank()] == recv_bytes[rank()].
  void all_to_all_v(const void* send, const std::size_t* send_bytes, const std::size_t* send_offsets, void* recv,
                    const std::size_t* recv_bytes, const std::size_t* recv_offsets);
  Request iall_to_all_v(const void* send, const std::size_t* send_bytes, const std::size_t* send_offsets, void* recv,
                        const std::size_t* recv_bytes, const std::size_t* recv_offsets);

  // Point to point, outside collectives (only the two ranks call them): `bytes` bytes to or
  // from rank `peer` with a tag (>= 0). A recv takes the first message from `peer` (or, with
  // kAnySource, from any rank) with its tag; each sender's messages are taken in the order it
  // sent them. The message's size must be the recv's (else the recv fails with `mismatch`). A
  // send completes once the transport has its bytes (its buffer is free again), a recv once the
  // message is in `data`; *source (when not null) is then who sent it. Both fail with `timeout`
  // after options.deadline_ms. Bad arguments throw at once, on this rank only. Pending ones do
  // not hold up collectives issued after them.
  void send(const void* data, std::size_t bytes, int peer, int tag);
  Request isend(const void* data, std::size_t bytes, int peer, int tag);
  void recv(void* data, std::size_t bytes, int peer, int tag, int* source = nullptr);
  Request irecv(void* data, std::size_t bytes, int peer, int tag, int* source = nullptr);

  // Several buffers of one dtype in one collective (PyTorch's allreduce_coalesced and
  // allgather_coalesced): buffer i holds counts[i] elements (n buffers; counts may be 0). The
  // send buffers are packed back to back into one buffer when the call returns (they may be
  // reused at once), one collective moves it, and the results are copied out into the recv
  // buffers when the request is waited for or tested finished. Every rank must give the same n
  // and counts: counts that differ (even with the same total) fail the call on every rank with
  // `mismatch`, and a bad argument on one rank (a null array, or a null buffer with a non-zero
  // count) fails it on every rank with invalid_argument; the recv buffers are then untouched.
  //
  // recv[i] = reduce(send[i] over all ranks), counts[i] elements; in place when send[i] ==
  // recv[i]. Runs one allreduce of the packed buffer with options().algo (auto: by its size and
  // density, like allreduce), so several sparse tensors go block-sparse together.
  OpStats allreduce_coalesced(const void* const* send, void* const* recv, const std::size_t* counts, std::size_t n,
                              DataType dtype, ReduceOp op);
  Request iallreduce_coalesced(const void* const* send, void* const* recv, const std::size_t* counts,
                               std::size_t n, DataType dtype, ReduceOp op);
  // recv[i] (size() * counts[i] elements) = every rank's send[i], in rank order. One allgather.
  void allgather_coalesced(const void* const* send, void* const* recv, const std::size_t* counts, std::size_t n,
                           DataType dtype);
  Request iallgather_coalesced(const void* const* send, void* const* recv, const std::size_t* counts,
                               std::size_t n, DataType dtype);

  // Compressed allreduce of an fp32 gradient (compression.hpp, docs/algorithms.md): out (count
  // fp32) = sum (or mean, c.op) over ranks of what each rank sent, identical on every rank.
  // With error feedback the communicator keeps a residual per `tensor_id` (created at the first
  // call, count values); a later call with the same id and another count is invalid_argument
  // naming both sizes. Bad arguments (k = 0 or k > count, a bad format or parameter) fail the
  // call on every rank with invalid_argument. Runs on the collective thread in call order.
  // grad and out may be the same buffer.
  void allreduce_compressed(std::uint64_t tensor_id, const float* grad, float* out, std::size_t count,
                            const Compression& c);
  Request iallreduce_compressed(std::uint64_t tensor_id, const float* grad, float* out, std::size_t count,
                                const Compression& c);
  // A copy of the residual of `tensor_id` (empty if unknown). Only while no compressed call on
  // that id is running (for tests and checkpoints).
  std::vector<float> compression_residual(std::uint64_t tensor_id) const;

  // Every rank waits until every rank has called barrier().
  void barrier();

  // Zero-copy sends from a buffer the application keeps (e.g. a gradient bucket): registers
  // [buffer, buffer + bytes) with the transport once (the rdma driver registers it with the NIC,
  // pinning it), and allreduce calls whose send range lies inside it read blocks straight from
  // it instead of copying them into the transport's staging memory. Other transports accept
  // the call and keep copying. If registration fails (e.g. the locked-memory limit) sends copy
  // and a warning says why. Throws sparcoll::Error for a null or empty or overlapping range.
  void register_buffer(const void* buffer, std::size_t bytes);
  // Unregisters a buffer given to register_buffer, before it is freed; throws if it was not
  // registered or an operation using it is still running.
  void deregister_buffer(const void* buffer);

  // Cumulative transport traffic of this process (see TrafficStats).
  TrafficStats traffic() const;
  // The transport's own counters (see TransportCounter), in the order the transport reports
  // them; empty for a transport that keeps none (shm, tcp, rdma today).
  std::vector<TransportCounter> transport_counters() const;

 private:
  std::shared_ptr<detail::CommunicatorImpl> impl_;
};

// Runs a dedicated aggregator process until every worker has said goodbye (used by
// `sparcoll-aggregator`). Throws sparcoll::Error on failure.
void run_aggregator(const Options& options);

}  // namespace sparcoll
