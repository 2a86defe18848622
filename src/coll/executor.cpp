#include "coll/executor.hpp"

#include <cstring>

#include "common/log.hpp"
#include "engine/engine.hpp"
#include "engine/limits.hpp"

namespace sparcoll::coll {

Executor::Executor(transport::Channel* channel, std::uint32_t rank, std::uint32_t size, const Options& options,
                   bool yield_when_waiting, engine::Engine* engine)
    : peers_(channel, rank, size, yield_when_waiting),
      options_(options),
      engine_(engine),
      queue_(engine::op_slot_count(options.max_inflight)) {
  const std::uint32_t slots = engine::op_slot_count(options.max_inflight);
  for (std::uint32_t i = 0; i < slots; ++i) slots_.push_back(std::make_unique<CollOp>());
  thread_ = std::thread([this] { run(); });
}

Executor::~Executor() {
  drain();
  stop_.store(true, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_one();
  thread_.join();
}

CollOp& Executor::next_slot() {
  CollOp& op = *slots_[next_seq_ & (slots_.size() - 1)];
  while (op.busy.load(std::memory_order_acquire) != 0) op.busy.wait(1, std::memory_order_acquire);
  op.seq = next_seq_;
  return op;
}

void Executor::submit(CollOp& op) {
  ++next_seq_;
  op.busy.store(1, std::memory_order_relaxed);
  while (!queue_.push(&op)) std::this_thread::yield();  // cannot stay full: one entry per slot
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_one();
}

void Executor::drain() {
  for (auto& slot : slots_)
    while (slot->busy.load(std::memory_order_acquire) != 0) slot->busy.wait(1, std::memory_order_acquire);
}

void Executor::add_traffic(TrafficStats* total) const noexcept {
  total->bytes_sent += bytes_sent_.load(std::memory_order_relaxed);
  total->bytes_received += bytes_received_.load(std::memory_order_relaxed);
  total->messages_sent += messages_sent_.load(std::memory_order_relaxed);
  total->messages_received += messages_received_.load(std::memory_order_relaxed);
}

void Executor::run() {
  for (;;) {
    const std::uint32_t seen = wake_.load(std::memory_order_acquire);
    CollOp* op = nullptr;
    if (!queue_.pop(&op)) {
      if (stop_.load(std::memory_order_acquire)) return;
      wake_.wait(seen, std::memory_order_acquire);
      continue;
    }
    Status status;
    if (engine_->broken()) {
      status = Status(ErrorCode::broken, "an earlier failure broke this communicator: " + engine_->broken_status().to_string());
    } else {
      status = execute(*op);
      if (!status.ok()) {
        // Peers may be inside this collective still: tell them, so they fail it too.
        peers_.abort_all(status);
        const ErrorCode c = status.code();
        if (c == ErrorCode::invalid_argument || c == ErrorCode::mismatch || c == ErrorCode::unsupported)
          peers_.forget_failed();  // every rank fails this one; the next runs normally
        else
          engine_->break_with(status);  // a dead peer, a timeout, a corrupt message: streams are lost
      }
    }
    bytes_sent_.fetch_add(peers_.bytes_sent(), std::memory_order_relaxed);
    bytes_received_.fetch_add(peers_.bytes_received(), std::memory_order_relaxed);
    messages_sent_.fetch_add(peers_.messages_sent(), std::memory_order_relaxed);
    messages_received_.fetch_add(peers_.messages_received(), std::memory_order_relaxed);
    std::shared_ptr<detail::RequestState> request = std::move(op->request);
    request->stats = OpStats{peers_.bytes_sent(), peers_.bytes_received(), 0, 0, op->algo};
    if (op->kind == CollKind::compressed_allreduce) {
      request->stats.payload_words_sent = op->compressed.payload_words;
      request->stats.control_words_sent = op->compressed.control_words;
    }
    request->status = status;
    op->busy.store(0, std::memory_order_release);
    op->busy.notify_all();
    request->done.store(1, std::memory_order_release);
    request->done.notify_all();
  }
}

Status Executor::execute(CollOp& op) {
  const char* kind = "allreduce";
  switch (op.kind) {
    case CollKind::allreduce: kind = "allreduce"; break;
    case CollKind::broadcast: kind = "broadcast"; break;
    case CollKind::allgather: kind = "allgather"; break;
    case CollKind::reduce_scatter: kind = "reduce_scatter"; break;
    case CollKind::sparse_allreduce: kind = "allreduce_sparse"; break;
    case CollKind::compressed_allreduce: kind = "allreduce_compressed"; break;
  }
  peers_.begin(op.seq, std::string(kind) + " " + std::to_string(op.seq) + " (" + std::string(algorithm_name(op.algo)) + ")",
               op.deadline);
  if (!op.invalid.empty()) return Status(ErrorCode::invalid_argument, op.invalid);
  const std::size_t esize = dtype_size(op.dtype);
  switch (op.kind) {
    case CollKind::allreduce:
      if (op.count == 0) return Status();
      switch (op.algo) {
        case Algorithm::ring: return algo::ring_allreduce(peers_, op.send, op.recv, op.count, op.dtype, op.op, scratch_);
        case Algorithm::butterfly:
          return algo::butterfly_allreduce(peers_, op.send, op.recv, op.count, op.dtype, op.op, scratch_);
        default: break;
      }
      return Status(ErrorCode::unsupported, "allreduce algorithm " + std::string(algorithm_name(op.algo)) +
                                                " does not run on the collective thread");
    case CollKind::broadcast:
      if (op.count == 0) return Status();
      return algo::tree_broadcast(peers_, op.recv, op.count * esize, op.root);
    case CollKind::allgather:
      return algo::ring_allgather(peers_, op.send, op.recv, op.count * esize);
    case CollKind::reduce_scatter:
      return algo::ring_reduce_scatter(peers_, op.send, op.recv, op.count, op.dtype, op.op, scratch_);
    case CollKind::sparse_allreduce:
      break;
    case CollKind::compressed_allreduce:
      if (op.compressed.c.algo == CompressionAlgo::oktopk) return algo::oktopk_allreduce(peers_, op.compressed, compress_scratch_);
      return algo::topk_ef_allreduce(peers_, op.compressed, compress_scratch_, scratch_);
  }
  return Status(ErrorCode::unsupported, "this collective is not implemented on the collective thread");
}

}  // namespace sparcoll::coll
