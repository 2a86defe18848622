// The object behind sparcoll::Communicator: membership, driver and engine of one communicator,
// and the calling-thread half of every collective (argument checks, bitmap scan, submission).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "coll/executor.hpp"
#include "membership/bootstrap.hpp"
#include "block_sparse/engine.hpp"
#include "sparcoll/communicator.hpp"
#include "transport/driver.hpp"

namespace sparcoll::detail {

class CommunicatorImpl : public std::enable_shared_from_this<CommunicatorImpl> {
 public:
  static Status create(const Options& options, std::shared_ptr<CommunicatorImpl>* out);
  ~CommunicatorImpl();

  // Block-sparse aggregation on the progress threads (what iallreduce runs for block_sparse).
  Status iallreduce_block_sparse(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                 std::shared_ptr<RequestState>* out);
  // caller_waits: the caller waits for the result before doing anything else (allreduce, not
  // iallreduce), so the collective may run in its thread whatever its size (see submit()).
  Status iallreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op, Algorithm algo,
                    std::shared_ptr<RequestState>* out, bool caller_waits = false);
  Status iallreduce_sparse(const std::int64_t* indices, const void* values, std::size_t nnz, std::size_t dim,
                           DataType dtype, ReduceOp op, SparseResult* result, Algorithm algo,
                           std::shared_ptr<RequestState>* out);
  Status ibroadcast(void* buffer, std::size_t count, DataType dtype, int root, std::shared_ptr<RequestState>* out);
  Status iallgather(const void* send, void* recv, std::size_t count, DataType dtype,
                    std::shared_ptr<RequestState>* out);
  Status ireduce_scatter(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                         std::shared_ptr<RequestState>* out);
  Status ireduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op, int root,
                 std::shared_ptr<RequestState>* out);
  Status igather(const void* send, void* recv, std::size_t count, DataType dtype, int root,
                 std::shared_ptr<RequestState>* out);
  Status iscatter(const void* send, void* recv, std::size_t count, DataType dtype, int root,
                  std::shared_ptr<RequestState>* out);
  Status iall_to_all(const void* send, const std::size_t* send_bytes, const std::size_t* send_offsets, void* recv,
                     const std::size_t* recv_bytes, const std::size_t* recv_offsets,
                     std::shared_ptr<RequestState>* out);
  Status isend(const void* data, std::size_t bytes, int peer, int tag, std::shared_ptr<RequestState>* out);
  Status irecv(void* data, std::size_t bytes, int peer, int tag, int* source, std::shared_ptr<RequestState>* out);
  Status iallreduce_compressed(std::uint64_t tensor_id, const float* grad, float* out, std::size_t count,
                               const Compression& c, std::shared_ptr<RequestState>* out_request);
  std::vector<float> compression_residual(std::uint64_t tensor_id) const;
  Status register_buffer(const void* buffer, std::size_t bytes);
  Status deregister_buffer(const void* buffer);
  // Waits for the request; returns its outcome.
  static Status wait(RequestState& request);

  const Options& options() const noexcept { return options_; }
  int rank() const noexcept { return options_.rank; }
  int size() const noexcept { return options_.world_size; }
  const std::string& transport() const noexcept { return membership_.transport; }
  block_sparse::Engine& engine() { return *engine_; }
  const block_sparse::Engine& engine() const { return *engine_; }
  membership::Membership& membership() { return membership_; }

  // Transport traffic of the block-sparse progress threads and the collective thread.
  TrafficStats traffic() const;
  // The transport's own counters, named "<transport>.<counter>".
  std::vector<TransportCounter> transport_counters() const;

  // Dedicated aggregator: serve until every worker has left.
  Status serve();

 private:
  CommunicatorImpl() = default;
  Status setup(const Options& options);
  // The algorithm an allreduce runs: `algo` resolved against options().algo and, for "auto",
  // the tensor's size.
  Algorithm resolve(Algorithm algo, const void* send, std::size_t count, DataType dtype, ReduceOp op);
  // `scan` false: the bitmap is sized and cleared, not filled (the hybrid scans only the stripes
  // its plan leaves block-sparse, on the collective thread).
  block_sparse::OpState& prepare_block_sparse(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                        const std::string& problem, bool scan = true);
  Status iallreduce_hybrid(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                           std::shared_ptr<RequestState>* out, bool caller_waits);
  // The algorithm an allreduce_sparse runs; sets *problem when `algo` is not a sparse one.
  Algorithm resolve_sparse(Algorithm algo, std::string* problem) const;
  // Hands a filled peer-to-peer collective to the collective thread, or runs it in the calling
  // thread (an allreduce, nothing queued ahead of it, and either small or caller_waits).
  // `problem` non-empty: this rank's arguments are bad; every rank then fails the collective
  // with "<what> <number><detail>: <problem>".
  Status submit(coll::CollOp& op, const char* what, const std::string& problem, std::shared_ptr<RequestState>* out,
                const std::string& detail = std::string(), ErrorCode code = ErrorCode::invalid_argument,
                bool caller_waits = false);
  Status check_usable(const char* what) const;
  // What is wrong with a rooted collective's root (not a rank of this communicator), or "".
  std::string check_root(int root) const;
  // The next collective slot, filled with what every collective has (the other fields are the
  // caller's to set); algo is ring, which the collectives other than allreduce ignore.
  coll::CollOp& fill_slot(coll::CollKind kind, const void* send, void* recv, std::size_t count, DataType dtype,
                          ReduceOp op = ReduceOp::sum, int root = 0);
  // What is wrong with a send's or recv's arguments, or "".
  std::string check_p2p(const void* data, std::size_t bytes, int peer, int tag, bool any_source_ok) const;
  Status submit_p2p(coll::CollKind kind, const void* send, void* recv, std::size_t bytes, int peer, int tag,
                    int* source, std::shared_ptr<RequestState>* out);
  void shutdown();

  Options options_;
  membership::Membership membership_;
  std::unique_ptr<transport::Driver> driver_;
  std::unique_ptr<block_sparse::Engine> engine_;
  std::unique_ptr<coll::Executor> executor_;  // workers only
  std::uint32_t next_op_id_ = 0;
  std::vector<std::uint64_t> signed_zero_;  // scratch for in-place scans (capacity reused)
  struct RegisteredBuffer {
    const std::byte* base = nullptr;
    std::size_t bytes = 0;
    transport::UserMemory memory;  // len 0 when the driver has no zero-copy for it
  };
  std::vector<RegisteredBuffer> registered_;  // few entries: searched once per operation
  bool joined_ = false;
  // Compressed allreduce: the state of every tensor id (compressed.hpp). The map is touched by
  // the calling thread only; the collective thread gets a tensor's (stable) address per call.
  std::unordered_map<std::uint64_t, std::unique_ptr<algo::CompressedTensor>> tensors_;
  std::uint64_t random_seed_ = 0;  // QSGD seed when Compression::seed is unset (drawn at setup)
};

}  // namespace sparcoll::detail
