#include "coll/executor.hpp"

#include <cstring>
#include <thread>

#include "block/reduce.hpp"
#include "common/failure_scope.hpp"
#include "common/log.hpp"
#include "p2p/drive.hpp"
#include "block_sparse/engine.hpp"
#include "block_sparse/limits.hpp"

namespace sparcoll::coll {

Executor::Executor(transport::Channel* channel, std::uint32_t rank, std::uint32_t size, const Options& options,
                   bool yield_when_waiting, block_sparse::Engine* engine)
    : peers_(channel, rank, size, yield_when_waiting),
      options_(options),
      engine_(engine),
      slots_(options.max_inflight),
      queue_(slots_.size()),
      plan_reuse_(options.hybrid_plan_reuse),
      loop_(*this, options.idle_spin_us, yield_when_waiting, /*event_mode=*/false) {
  any_thread_ = channel != nullptr && channel->any_thread();
  loop_.start("sc-collective");
}

Executor::~Executor() {
  drain();
  loop_.stop();
}

CollOp& Executor::next_slot() {
  CollOp& op = slots_.wait_free(next_slot_);
  op.seq = next_seq_;
  return op;
}

void Executor::submit(CollOp& op) {
  ++next_slot_;
  if (!is_p2p(op.kind)) ++next_seq_;
  op.busy.store(1, std::memory_order_relaxed);
  while (!queue_.push(&op)) std::this_thread::yield();  // cannot stay full: one entry per slot
  loop_.notify();
}

void Executor::drain() { slots_.wait_all_free(); }

void Executor::add_traffic(TrafficStats* total) const noexcept {
  total->bytes_sent += bytes_sent_.load(std::memory_order_relaxed) + p2p_bytes_sent_.load(std::memory_order_relaxed);
  total->bytes_received +=
      bytes_received_.load(std::memory_order_relaxed) + p2p_bytes_received_.load(std::memory_order_relaxed);
  total->messages_sent +=
      messages_sent_.load(std::memory_order_relaxed) + p2p_messages_sent_.load(std::memory_order_relaxed);
  total->messages_received +=
      messages_received_.load(std::memory_order_relaxed) + p2p_messages_received_.load(std::memory_order_relaxed);
}

bool Executor::can_run_here() const {
  return any_thread_ && slots_.all_free();
}

void Executor::run_here(CollOp& op) {
  ++next_slot_;
  ++next_seq_;
  op.busy.store(1, std::memory_order_relaxed);
  // The collective thread holds peers_ only while it polls between collectives (nothing is
  // queued, so it runs nothing): that ends within one poll.
  while (!take_peers(kCallingThread)) std::this_thread::yield();
  const Status status = run_one(op);
  ran_here_.fetch_add(1, std::memory_order_release);
  complete(op, status);  // reads peers_' counters: before letting go of it
  release_peers();
}

bool Executor::step() {
  if (current_ == nullptr) {
    // While the calling thread runs collectives itself (run_here), it drives the channel: this
    // thread sleeps instead of spinning beside it (on 2 cores a spinning thread here cost the
    // caller's collective 80 us), and a submission wakes it.
    const std::uint32_t ran_here = ran_here_.load(std::memory_order_acquire);
    const bool caller_drives =
        (ran_here != ran_here_seen_ || peers_owner_.load(std::memory_order_acquire) == kCallingThread) &&
        queue_.empty();
    if (caller_drives || !take_peers(kCollectiveThread)) {  // (or the calling thread took it since)
      ran_here_seen_ = ran_here;
      idle_ = runtime::Idle{runtime::Waiting::caller_drives, nullptr};
      return false;
    }
  }
  bool moved = true;
  CollOp* op = nullptr;
  if (current_ != nullptr) {
    moved = step_collective();
  } else if (queue_.pop(&op)) {
    if (is_p2p(op->kind))
      post_p2p(*op);
    else
      start_collective(*op);
  } else {
    // Idle, the channel is still served: a packet transport's peers wait for this rank's
    // acknowledgements of the last collective (they cannot finish it without them), and a
    // faster peer's fragments of the next one are stashed.
    moved = peers_.poll_idle();
    if (moved || peers_.mailbox().busy()) publish_p2p_traffic();
  }
  // What an empty round waits for, read while this thread still owns peers_: a running
  // collective waits for its peers (or for its block-sparse half); between collectives a pending
  // send or recv expects its peer soon (a ping-pong, a pipeline stage); else only a packet
  // transport's peers need this thread before the next submission (acknowledgements).
  if (current_ != nullptr)
    idle_ = peers_.idle();
  else if (peers_.mailbox().busy())
    idle_ = runtime::Idle{runtime::Waiting::reply_expected, nullptr};
  else
    idle_ = runtime::Idle{peers_.acknowledges_when_polled() ? runtime::Waiting::nothing : runtime::Waiting::submission,
                          nullptr};
  // The channel is the calling thread's to take only between collectives.
  if (current_ == nullptr) release_peers();
  return moved;
}

runtime::Idle Executor::idle() { return idle_; }

void Executor::stopped() {
  // Nobody will send what a pending recv waits for, nor take a pending send, any more.
  while (!take_peers(kCollectiveThread)) std::this_thread::yield();
  peers_.mailbox().fail_all(Status(ErrorCode::broken, "the communicator was destroyed before it finished"));
  release_peers();
}

void Executor::start_collective(CollOp& op) {
  current_ = &op;
  if (engine_->broken()) {
    finish_collective(Status(ErrorCode::broken,
                             "an earlier failure broke this communicator: " + engine_->broken_status().to_string()));
    return;
  }
  try {
    task_.emplace(execute(op));
  } catch (const std::bad_alloc&) {  // its first frame
    finish_collective(handle_failure(op, out_of_memory(op)));
    return;
  }
  task_->start();
  if (task_->done()) finish_task();
}

// One round of the running collective: resume it if what it awaits has happened, else one pass
// over the channel for it.
bool Executor::step_collective() {
  bool moved = true;
  if (peers_.ready())
    peers_.resume();
  else
    moved = peers_.progress();
  if (task_->done()) finish_task();
  return moved;
}

void Executor::finish_task() {
  Status status;
  try {
    status = task_->result();
  } catch (const std::bad_alloc&) {
    status = out_of_memory(*current_);
  }
  task_.reset();
  finish_collective(handle_failure(*current_, status));
}

void Executor::finish_collective(const Status& status) {
  CollOp& op = *current_;
  current_ = nullptr;
  complete(op, status);
}

void Executor::post_p2p(CollOp& op) {
  std::shared_ptr<detail::RequestState> request = std::move(op.request);
  request->stats = OpStats{};
  const Status broken = engine_->broken() ? Status(ErrorCode::broken, "an earlier failure broke this communicator: " +
                                                                          engine_->broken_status().to_string())
                                          : Status();
  const auto peer = static_cast<std::uint32_t>(op.peer);
  if (!broken.ok()) {
    detail::complete(*request, broken);
  } else if (op.kind == CollKind::send) {
    peers_.mailbox().post_send(peer, op.tag, op.send, op.count, std::move(request), op.deadline);
  } else {
    peers_.mailbox().post_recv(op.peer, op.tag, op.recv, op.count, op.source, std::move(request), op.deadline);
  }
  detail::release_slot(op.busy);
  publish_p2p_traffic();
}

void Executor::publish_p2p_traffic() noexcept {
  const Mailbox& m = peers_.mailbox();
  p2p_bytes_sent_.store(m.bytes_sent(), std::memory_order_relaxed);
  p2p_bytes_received_.store(m.bytes_received(), std::memory_order_relaxed);
  p2p_messages_sent_.store(m.messages_sent(), std::memory_order_relaxed);
  p2p_messages_received_.store(m.messages_received(), std::memory_order_relaxed);
}

Status Executor::run_one(CollOp& op) {
  if (engine_->broken())
    return Status(ErrorCode::broken, "an earlier failure broke this communicator: " + engine_->broken_status().to_string());
  Status status;
  try {
    Task task = execute(op);
    status = p2p::drive(peers_, task);
  } catch (const std::bad_alloc&) {
    status = out_of_memory(op);
  }
  return handle_failure(op, status);
}

// The algorithm's buffers for this count: a local failure, told to every peer (below) like a
// bad argument, not a crash of this thread nor a wait for the deadline.
Status Executor::out_of_memory(const CollOp& op) const {
  return Status(ErrorCode::no_resource, peers_.what() + ": rank " + std::to_string(peers_.rank()) +
                                            " is out of memory for its buffers (count " + std::to_string(op.count) +
                                            ")");
}

Status Executor::handle_failure(const CollOp& op, Status status) {
  if (status.ok()) return status;
  // Peers may be inside this collective still: tell them, so they fail it too.
  peers_.abort_all(status);
  if (op.kind == CollKind::hybrid_allreduce) plan_reuse_.forget_all();  // every rank fails it alike
  const ErrorCode c = status.code();
  if (fails_only_the_collective(c))
    peers_.forget_failed();  // every rank fails this one; the next runs normally
  else
    engine_->break_with(status);  // a dead peer, a timeout, a corrupt message: streams are lost
  return status;
}

void Executor::complete(CollOp& op, const Status& status) {
  bytes_sent_.fetch_add(peers_.bytes_sent(), std::memory_order_relaxed);
  bytes_received_.fetch_add(peers_.bytes_received(), std::memory_order_relaxed);
  messages_sent_.fetch_add(peers_.messages_sent(), std::memory_order_relaxed);
  messages_received_.fetch_add(peers_.messages_received(), std::memory_order_relaxed);
  // The channel's own counters are cumulative; read here, by the thread that drives it.
  channel_counters_.publish(peers_.channel_counters());
  std::shared_ptr<detail::RequestState> request = std::move(op.request);
  request->stats = OpStats{peers_.bytes_sent(), peers_.bytes_received(), 0, 0, op.algo};
  if (op.kind == CollKind::hybrid_allreduce) {
    release_unused_sparse_part(op);
    request->stats.bytes_sent += hybrid_stats_.bytes_sent;
    request->stats.bytes_received += hybrid_stats_.bytes_received;
    request->stats.blocks_sent = hybrid_stats_.blocks_sent;
    request->stats.blocks_received = hybrid_stats_.blocks_received;
    request->stats.dense_elements = hybrid_stats_.dense_elements;
    request->stats.densities_exchanged = hybrid_stats_.densities_exchanged;
    hybrid_stats_ = OpStats{};
  }
  if (op.kind == CollKind::compressed_allreduce) {
    request->stats.payload_words_sent = op.compressed.payload_words;
    request->stats.control_words_sent = op.compressed.control_words;
  }
  detail::release_slot(op.busy);
  detail::complete(*request, status);
}

Task Executor::execute(CollOp& op) {
  const char* kind = "allreduce";
  switch (op.kind) {
    case CollKind::allreduce: kind = "allreduce"; break;
    case CollKind::broadcast: kind = "broadcast"; break;
    case CollKind::allgather: kind = "allgather"; break;
    case CollKind::reduce_scatter: kind = "reduce_scatter"; break;
    case CollKind::sparse_allreduce: kind = "allreduce_sparse"; break;
    case CollKind::compressed_allreduce: kind = "allreduce_compressed"; break;
    case CollKind::hybrid_allreduce: kind = "allreduce op"; break;
    case CollKind::reduce: kind = "reduce"; break;
    case CollKind::gather: kind = "gather"; break;
    case CollKind::scatter: kind = "scatter"; break;
    case CollKind::all_to_all: kind = "all_to_all"; break;
    case CollKind::send:
    case CollKind::recv: co_return Status(ErrorCode::internal, "send and recv go to the mailbox, not execute()");
  }
  // Errors name the algorithm that really runs (broadcast is a binomial tree whatever op.algo says).
  const std::string_view algo = op.kind == CollKind::broadcast ? std::string_view("binomial tree")
                                : op.kind == CollKind::gather || op.kind == CollKind::scatter ||
                                        op.kind == CollKind::all_to_all
                                    ? std::string_view("direct")
                                    : algorithm_name(op.algo);
  // What every rank must agree on: only the fields this kind uses (a slot's others are stale).
  const bool reduces = op.kind != CollKind::broadcast && op.kind != CollKind::allgather &&
                       op.kind != CollKind::compressed_allreduce && op.kind != CollKind::gather &&
                       op.kind != CollKind::scatter && op.kind != CollKind::all_to_all;
  const bool rooted = op.kind == CollKind::broadcast || op.kind == CollKind::reduce || op.kind == CollKind::gather ||
                      op.kind == CollKind::scatter;
  const bool has_algo = op.kind == CollKind::allreduce || op.kind == CollKind::sparse_allreduce;
  // A hybrid allreduce plans from what its shape keeps or exchanges (algo/plan_reuse.hpp): every
  // rank decides alike, and the signature says which, so ranks that ever disagreed (one failed a
  // collective the others finished) fail at the first message instead of at their deadline.
  const algo::KeptPlan kept = op.kind == CollKind::hybrid_allreduce ? kept_plan(op) : algo::KeptPlan{};
  const std::uint32_t signature = collective_signature(
      static_cast<std::uint8_t>(op.kind),
      has_algo ? static_cast<std::uint8_t>(op.algo) : static_cast<std::uint8_t>(kept.kept() ? 1 : 0),
      op.kind == CollKind::compressed_allreduce || op.kind == CollKind::all_to_all ? 0
                                                                                 : static_cast<std::uint8_t>(op.dtype),
      reduces ? static_cast<std::uint8_t>(op.op) : 0);
  peers_.begin(op.seq, kind, algo, op.deadline, signature, rooted ? op.root : 0);
  if (!op.invalid.empty()) co_return Status(op.invalid_code, op.invalid);
  const std::size_t esize = dtype_size(op.dtype);
  // A count of 0 still runs the algorithm (empty messages): a rank that skipped it would leave
  // peers whose count differs waiting until their deadline instead of failing with `mismatch`.
  switch (op.kind) {
    case CollKind::allreduce:
      if (op.dtype == DataType::i32 && op.op == ReduceOp::avg)
        co_return co_await exact_i32_avg(op.algo, op.send, op.recv, op.count);
      co_return co_await allreduce(op.algo, op.send, op.recv, op.count, op.dtype, op.op);
    case CollKind::broadcast:
      co_return co_await algo::tree_broadcast(peers_, op.recv, op.count * esize, op.root);
    case CollKind::reduce:
      if (op.dtype == DataType::i32 && op.op == ReduceOp::avg) co_return co_await exact_i32_avg_reduce(op);
      co_return co_await algo::ring_reduce(peers_, op.send, op.recv, op.count, op.dtype, op.op, op.root, scratch_);
    case CollKind::gather:
      co_return co_await algo::direct_gather(peers_, op.send, op.recv, op.count * esize, op.root);
    case CollKind::scatter:
      co_return co_await algo::direct_scatter(peers_, op.send, op.recv, op.count * esize, op.root, scratch_);
    case CollKind::allgather:
      co_return co_await algo::ring_allgather(peers_, op.send, op.recv, op.count * esize);
    case CollKind::reduce_scatter:
      co_return co_await algo::ring_reduce_scatter(peers_, op.send, op.recv, op.count, op.dtype, op.op, scratch_);
    case CollKind::sparse_allreduce:
      co_return co_await algo::sparse_allreduce(peers_, op.algo, op.sparse.entries, op.sparse.dim, op.dtype, op.op,
                                                op.sparse.result, scratch_);
    case CollKind::hybrid_allreduce:
      co_return co_await hybrid_allreduce(op, kept);
    case CollKind::all_to_all:
      co_return co_await algo::direct_all_to_all(peers_, static_cast<const std::byte*>(op.send), op.send_bytes.data(),
                                                 op.send_offsets.data(), static_cast<std::byte*>(op.recv),
                                                 op.recv_bytes.data(), op.recv_offsets.data());
    case CollKind::send:
    case CollKind::recv:
      break;  // never here: the kind switch above returned
    case CollKind::compressed_allreduce:
      if (op.compressed.c.algo == CompressionAlgo::oktopk)
        co_return co_await algo::oktopk_allreduce(peers_, op.compressed, compress_scratch_);
      co_return co_await algo::topk_ef_allreduce(peers_, op.compressed, compress_scratch_, scratch_);
  }
  // Only a CollKind value outside the enum gets here (every kind returns above).
  co_return Status(ErrorCode::internal, "collective kind " + std::to_string(static_cast<int>(op.kind)) + " is unknown");
}

Task Executor::allreduce(Algorithm algo, const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op) {
  switch (algo) {
    case Algorithm::ring:
      co_return co_await algo::ring_allreduce(peers_, send, recv, count, dtype, op, options_.ring_segment_bytes,
                                              scratch_);
    case Algorithm::butterfly:
      co_return co_await algo::butterfly_allreduce(peers_, send, recv, count, dtype, op, scratch_);
    case Algorithm::recursive_doubling:
      co_return co_await algo::recursive_doubling_allreduce(peers_, send, recv, count, dtype, op, scratch_);
    case Algorithm::block_recursive_doubling:
      co_return co_await algo::block_recursive_doubling_allreduce(peers_, send, recv, count, dtype, op,
                                                                  options_.block_elems, scratch_);
    case Algorithm::direct:
      if (peers_.size() > 1 && !peers_.reads_peer_memory())
        co_return Status(ErrorCode::unsupported,
                         peers_.what() +
                             ": the direct algorithm reads peers' memory in place, which only the "
                             "shm transport does (and not with SPARCOLL_SHM_PEER_READS=off)");
      co_return co_await algo::direct_allreduce(peers_, send, recv, count, dtype, op, scratch_);
    case Algorithm::ssar_recursive_doubling:
    case Algorithm::ssar_split_allgather:
    case Algorithm::dsar_split_allgather:
      co_return co_await algo::sparse_allreduce_dense(peers_, algo, send, recv, count, dtype, op, scratch_);
    default: break;
  }
  co_return Status(ErrorCode::unsupported,
                   "allreduce algorithm " + std::string(algorithm_name(algo)) + " does not run on the collective thread");
}

// The algorithms' messages carry 32-bit partial sums, which an i32 average overflows
// (avg(INT32_MAX, INT32_MAX) was -1): they sum the values' 16-bit halves instead, each sum
// exact below 32768 ranks, and the average is taken from those in 64 bits. Twice the data, for
// an op that is rare on integers; zeros stay zeros, so the sparse algorithms keep their sparsity.
Task Executor::exact_i32_avg(Algorithm algo, const void* send, void* recv, std::size_t count) {
  if (peers_.size() >= 32768)
    co_return Status(ErrorCode::unsupported, peers_.what() + ": i32 avg is exact below 32768 ranks, this job has " +
                                                 std::to_string(peers_.size()));
  halves_.resize(2 * count);
  std::int32_t* hi = halves_.data();
  std::int32_t* lo = hi + count;
  block::i32_split_halves(static_cast<const std::int32_t*>(send), count, hi, lo);
  // The sparse algorithms index with u32: twice a count near 2^32 goes the dense way.
  const bool sparse = algo != Algorithm::ring && algo != Algorithm::butterfly && algo != Algorithm::direct &&
                      algo != Algorithm::recursive_doubling;
  if (sparse && 2 * count > (std::uint64_t{1} << 32)) algo = Algorithm::ring;
  Status s = co_await allreduce(algo, hi, hi, 2 * count, DataType::i32, ReduceOp::sum);
  if (s.ok()) block::i32_avg_from_halves(hi, lo, count, peers_.size(), static_cast<std::int32_t*>(recv));
  co_return s;
}

// reduce's i32 avg: the same halves, summed to the root only.
Task Executor::exact_i32_avg_reduce(const CollOp& op) {
  if (peers_.size() >= 32768)
    co_return Status(ErrorCode::unsupported, peers_.what() + ": i32 avg is exact below 32768 ranks, this job has " +
                                                 std::to_string(peers_.size()));
  halves_.resize(2 * op.count);
  std::int32_t* hi = halves_.data();
  std::int32_t* lo = hi + op.count;
  block::i32_split_halves(static_cast<const std::int32_t*>(op.send), op.count, hi, lo);
  Status s = co_await algo::ring_reduce(peers_, hi, hi, 2 * op.count, DataType::i32, ReduceOp::sum, op.root, scratch_);
  if (s.ok() && peers_.rank() == op.root)
    block::i32_avg_from_halves(hi, lo, op.count, peers_.size(), static_cast<std::int32_t*>(op.recv));
  co_return s;
}

}  // namespace sparcoll::coll
