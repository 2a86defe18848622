// c10d::ProcessGroup "sparcoll": torch.distributed collectives on a sparcoll::Communicator.
//
// Supported: allreduce (+ allreduce_coalesced; sum/avg/min/max/product; f32, f16, bf16, i32; several
// tensors per call, each reduced on its own; torch.sparse COO tensors), broadcast, allgather
// (+ _allgather_base, allgather_coalesced), reduce_scatter (+ _reduce_scatter_base), reduce,
// gather, scatter, alltoall (+ alltoall_base), send, recv (+ recvAnysource), barrier. Every other operation
// throws a RuntimeError naming it. Works are asynchronous: collectives are issued with
// sparcoll's non-blocking calls and completed by a CompletionQueue thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <sparcoll/communicator.hpp>

#include "byte_collectives.hpp"
#include "completion_queue.hpp"

namespace sparcoll_torch {

// A tensor as sparcoll reduces it (process_group.cpp).
struct Reducible;

class ProcessGroupSparcoll final : public c10d::ProcessGroup {
 public:
  // `store_address` and `job_token` come from the group's torch store (python/_rendezvous.py);
  // every other setting from SPARCOLL_* variables (Options::from_env). `timeout_s` (the group's
  // timeout, init_process_group / new_group) is every operation's deadline unless
  // SPARCOLL_DEADLINE_MS is set; 0 keeps sparcoll's default.
  ProcessGroupSparcoll(int rank, int size, const std::string& store_address, const std::string& job_token,
                       double timeout_s = 0.0);
  ~ProcessGroupSparcoll() override;

  const std::string getBackendName() const override { return "sparcoll"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>&,
                                                     std::vector<at::Tensor>&, const c10d::AllgatherOptions&) override;
  // The root's tensor is reduced in place; the others' are only read.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  // Any dtype (bytes); the output list on the root only, the input list on the root only.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  // Bytes of one tensor (any dtype) to or from one rank, with a tag; recvAnysource's Work
  // reports the sender (sourceRank). Matched per sender in order, as gloo does.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  // all_to_all_single (even or uneven row splits along dim 0) and all_to_all (lists), any dtype.
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;

  // Completes outstanding Works and leaves the sparcoll job (a collective: every rank calls it,
  // through torch.distributed.destroy_process_group). Later calls throw. Idempotent.
  void shutdown();
  std::string transport() const;

 private:
  // One collective call: the started operations, the tensors its Work reports as result(), and
  // what runs after every operation succeeded (copy results back into the caller's tensors).
  struct Issued {
    std::vector<Started> ops;
    std::vector<at::Tensor> outputs;
    std::shared_ptr<int> source;  // recv: who sent the message (Work::sourceRank), once done
  };
  // sparcoll keeps two sequences of collectives: block-sparse allreduce on the progress threads,
  // everything else (broadcast, allgather, reduce_scatter, the other allreduce algorithms) on the
  // collective thread. A rank whose input fails the checks aborts the same one its peers joined.
  // send and recv are in neither: only two ranks call them, and bad input fails them locally.
  enum class Sequence { block_sparse, collective, none };
  template <typename Prepare>
  c10::intrusive_ptr<c10d::Work> run(const char* op, c10d::OpType type, Sequence sequence, Prepare&& prepare);
  Issued issue_allreduce(const char* op, std::vector<at::Tensor>& tensors, const c10d::ReduceOp& reduce_op);
  Issued issue_sparse_allreduce(const char* op, at::Tensor& tensor, sparcoll::ReduceOp op_code);
  Started start_wide_sparse_allreduce(const at::Tensor& elements, const at::Tensor& values, std::int64_t numel,
                                      sparcoll::DataType dtype, sparcoll::ReduceOp code,
                                      std::shared_ptr<sparcoll::SparseResult> result, std::function<void()> write_back);
  // Dense tensors sparcoll reduces as they are (dtypes[i] each), in place.
  Issued issue_dense_allreduce(std::vector<at::Tensor>& tensors, const std::vector<sparcoll::DataType>& dtypes,
                               sparcoll::ReduceOp op_code);
  // Start byte_collectives.cpp's native calls and keep the tensors alive until they finished.
  Issued issue_allgather(const at::Tensor& input, std::vector<void*> recv, std::vector<at::Tensor> outputs);
  // `out` is the output as sparcoll reduces it (Reducible, process_group.cpp): `output` itself,
  // its float32 view, or a widened copy narrowed back into it when done.
  Issued issue_reduce_scatter(const at::Tensor& input, at::Tensor output, const Reducible& out,
                              sparcoll::ReduceOp op);
  Issued issue_recv(const char* op, std::vector<at::Tensor>& tensors, int src_rank, int tag);
  void abort_peers(Sequence sequence);

  mutable std::mutex mutex_;  // sparcoll::Communicator is used from one thread at a time
  std::unique_ptr<sparcoll::Communicator> comm_;  // null after shutdown()
  std::unique_ptr<CompletionQueue> completions_;
};

}  // namespace sparcoll_torch
