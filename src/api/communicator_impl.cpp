#include "api/communicator_impl.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "algo/auto_choice.hpp"
#include "algo/hybrid_plan.hpp"
#include "block/bitmap.hpp"
#include "block/reduce.hpp"
#include "common/log.hpp"
#include "block_sparse/limits.hpp"
#include "block_sparse/op_scan.hpp"
#include "membership/store_exchange.hpp"

namespace sparcoll::detail {

namespace {

// The processes this one exchanges messages with: workers talk to aggregators and back, and to
// each other (the peer-to-peer collectives).
std::vector<std::uint32_t> peers_of(const block_sparse::JobLayout& layout) {
  std::vector<std::uint32_t> peers;
  for (std::uint32_t p = 0; p < layout.processes(); ++p) {
    if (p == layout.self) continue;
    const bool p_aggregates = layout.dedicated == 0 || p >= layout.workers;
    const bool talks = (layout.self_is_worker() && (p_aggregates || layout.is_worker(p))) ||
                       (layout.self_aggregates() && layout.is_worker(p));
    if (talks) peers.push_back(p);
  }
  return peers;
}

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

// Empty when the arguments are fine, else what is wrong with them.
std::string check_arguments(const void* send, const void* recv, std::size_t count, DataType dtype, ReduceOp op) {
  if (!dtype_valid(static_cast<std::uint8_t>(dtype)))
    return "dtype " + std::to_string(static_cast<int>(dtype)) + " is not one of f32, f16, bf16, i32, f64, i64";
  if (!reduce_op_valid(static_cast<std::uint8_t>(op)))
    return "op " + std::to_string(static_cast<int>(op)) + " is not one of sum, avg, min, max, product, band, bor, bxor";
  if (reduce_op_is_bitwise(op) && dtype != DataType::i32 && dtype != DataType::i64)
    return "op " + std::string(reduce_op_name(op)) + " is bitwise: it takes i32 or i64, not " +
           std::string(dtype_name(dtype));
  if (op == ReduceOp::avg && dtype == DataType::i64)
    return "op avg does not take i64 (its sum would wrap): reduce with sum and divide";
  if (count == 0) return std::string();
  if (count > (std::size_t{1} << 56)) return "count " + std::to_string(count) + " exceeds the limit of 2^56 elements";
  const std::size_t esize = dtype_size(dtype);
  if (send == nullptr) return "sendbuf is null with count " + std::to_string(count);
  if (recv == nullptr) return "recvbuf is null with count " + std::to_string(count);
  const auto s = reinterpret_cast<std::uintptr_t>(send);
  const auto r = reinterpret_cast<std::uintptr_t>(recv);
  if (s % esize != 0)
    return "sendbuf " + hex(send) + " is not aligned to the " + std::to_string(esize) + "-byte " +
           std::string(dtype_name(dtype)) + " element";
  if (r % esize != 0)
    return "recvbuf " + hex(recv) + " is not aligned to the " + std::to_string(esize) + "-byte " +
           std::string(dtype_name(dtype)) + " element";
  const std::size_t bytes = count * esize;
  if (s != r && s < r + bytes && r < s + bytes) return "sendbuf and recvbuf overlap without being the same buffer";
  return std::string();
}

}  // namespace

Status CommunicatorImpl::create(const Options& options, std::shared_ptr<CommunicatorImpl>* out) {
  std::shared_ptr<CommunicatorImpl> impl(new CommunicatorImpl());
  Status s = impl->setup(options);
  if (!s.ok()) return s;
  *out = std::move(impl);
  return Status();
}

Status CommunicatorImpl::setup(const Options& options) {
  Status s = options.validate();
  if (!s.ok()) return s;
  if (options.block_elems + 0ull > 0 && options.max_message < block_sparse::min_message_for(options.block_elems))
    return Status(ErrorCode::invalid_argument,
                  "max_message=" + std::to_string(options.max_message) + " (SPARCOLL_MAX_MESSAGE) cannot carry one block of " +
                      std::to_string(options.block_elems) + " elements (needs " +
                      std::to_string(block_sparse::min_message_for(options.block_elems)) + " bytes)");
  options_ = options;
  log::Level level;
  if (log::parse_level(options_.log_level, &level)) log::set_level(level);  // code may have changed it
  s = membership::join(options_, &membership_);
  if (!s.ok()) return s;
  joined_ = true;
  // auto: the transport (and over shm the ranks) decide how dense a stripe must be for the ring
  // to beat block-sparse (docs/algorithms.md, "hybrid"); every process joined with the same
  // transport and world.
  if (options_.hybrid_dense_percent < 0)
    options_.hybrid_dense_percent =
        transport() == "shm" ? static_cast<int>(algo::shm_dense_union_percent(membership_.workers)) : 65;

  block_sparse::EngineConfig cfg;
  cfg.layout.workers = membership_.workers;
  cfg.layout.dedicated = membership_.dedicated;
  cfg.layout.self = membership_.self;
  cfg.layout.lanes = options_.lanes;
  cfg.layout.threads = options_.threads;
  cfg.options = options_;
  cfg.job_epoch = membership_.job_epoch;
  cfg.window_capacity = block_sparse::window_capacity(options_.fusion, options_.block_elems, options_.max_message);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const bool oversubscribed = std::uint64_t{membership_.local_processes} * options_.threads > cores;
  cfg.yield_when_waiting = options_.poll_mode == "yield" || (options_.poll_mode == "auto" && oversubscribed);
  // This process's share of the host's cores for its scans: the other processes here scan at
  // the same moment (every rank scans its tensor at the start of the same allreduce).
  block::set_scan_threads(cores / std::max<std::uint32_t>(membership_.local_processes, 1));

  const std::vector<std::uint32_t> peers = peers_of(cfg.layout);
  if (!peers.empty()) {
    // Peers exist only in a job of several processes, which has a store.
    membership::StoreExchange exchange(*membership_.store, membership_.key_prefix, membership_.transport, membership_.self);
    transport::DriverContext ctx;
    ctx.options = &options_;
    ctx.exchange = &exchange;
    ctx.job_id = membership_.key_prefix;
    ctx.self = membership_.self;
    ctx.processes = membership_.processes;
    ctx.peers = peers;
    // Channels 0..threads-1 belong to the block-sparse progress threads, the last one to the collective
    // thread (every process creates it, so channel numbers agree everywhere).
    ctx.channels = options_.threads + 1;
    ctx.max_message = options_.max_message;
    ctx.deadline_ms = options_.connect_timeout_ms;
    s = transport::create_driver(membership_.transport, ctx, &driver_);
    if (!s.ok()) return s;
    // A packet transport carries less than SPARCOLL_MAX_MESSAGE per message (one frame): windows
    // and result chunks are sized to what every channel accepts.
    std::uint32_t limit = options_.max_message;
    for (std::uint32_t c = 0; c < options_.threads; ++c) limit = std::min(limit, driver_->channel(c).max_message());
    if (limit < block_sparse::min_message_for(options_.block_elems))
      return Status(ErrorCode::invalid_argument,
                    "the " + membership_.transport + " transport carries at most " + std::to_string(limit) +
                        " bytes per message, too few for one block of " + std::to_string(options_.block_elems) +
                        " elements (SPARCOLL_BLOCK_ELEMS): use smaller blocks or a larger MTU");
    if (limit < options_.max_message) {
      cfg.options.max_message = limit;
      cfg.window_capacity = block_sparse::window_capacity(options_.fusion, options_.block_elems, limit);
    }
  }
  SC_LOG_INFO("joined: %u workers, %u dedicated aggregators, transport %s, %u lanes, window %u blocks%s",
              membership_.workers, membership_.dedicated, membership_.transport.c_str(), options_.lanes,
              cfg.window_capacity, cfg.yield_when_waiting ? ", yielding (more busy threads than cores)" : "");
  const bool yield = cfg.yield_when_waiting;
  engine_ = std::make_unique<block_sparse::Engine>(std::move(cfg), driver_.get());
  engine_->start();
  if (options_.role == Role::worker)
    executor_ = std::make_unique<coll::Executor>(driver_ ? &driver_->channel(options_.threads) : nullptr,
                                                 membership_.self, membership_.workers, options_, yield,
                                                 engine_.get());
  return Status();
}

CommunicatorImpl::~CommunicatorImpl() { shutdown(); }

void CommunicatorImpl::shutdown() {
  if (engine_) {
    // Every op must be finished before the peers are told we are leaving.
    engine_->slots().wait_all_free();
  }
  // The collective thread finishes what it runs, then keeps serving its channel through the
  // teardown barrier: a peer may still be finishing its last collective and need this rank's
  // acknowledgements (dpdk) to do so. It stops with the engine, after the barrier.
  if (executor_) executor_->drain();
  if (engine_ && engine_->broken()) {
    // Linger before closing: peers then see the root cause (say, a dead rank) themselves rather
    // than this process closing its transport.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (joined_ && options_.role == Role::worker) {
    Status s = membership::leave(membership_, options_, engine_ && engine_->broken(), [this] {
      return engine_ && engine_->broken() ? engine_->broken_status() : Status();
    });
    if (!s.ok() && !(engine_ && engine_->broken()))
      SC_LOG_WARN("teardown barrier failed, peers may report this process as failed: %s", s.message().c_str());
  }
  executor_.reset();
  if (engine_) engine_->stop();
  engine_.reset();
  driver_.reset();
  membership_.store.reset();
  membership_.server.reset();
  joined_ = false;
}

Status CommunicatorImpl::serve() {
  // The engine's threads do the work; this thread watches for the end of the job or a failure.
  for (;;) {
    if (engine_->broken()) return engine_->broken_status();
    Status s = membership::wait_for_workers_to_leave(membership_, 100);
    if (s.ok()) break;
    if (s.code() != ErrorCode::timeout) return s;
  }
  return membership::leave(membership_, options_, engine_->broken());
}

Status CommunicatorImpl::iallreduce_block_sparse(const void* send, void* recv, std::size_t count, DataType dtype,
                                                 ReduceOp op, std::shared_ptr<RequestState>* out) {
  if (engine_->broken())
    return Status(ErrorCode::broken, "an earlier failure broke this communicator: " + engine_->broken_status().to_string());
  block_sparse::OpState& state = prepare_block_sparse(send, recv, count, dtype, op, check_arguments(send, recv, count, dtype, op));
  state.request = std::make_shared<RequestState>();
  *out = state.request;
  engine_->submit(&state);
  return Status();
}

// The next op slot, waited for and filled: arguments, geometry, and the bitmap from one scan of
// the send buffer (or the abort a bad argument or a failed allocation turns into).
block_sparse::OpState& CommunicatorImpl::prepare_block_sparse(const void* send, void* recv, std::size_t count, DataType dtype,
                                                        ReduceOp op, const std::string& problem, bool scan) {
  const std::uint32_t op_id = next_op_id_++;

  block_sparse::OpState& state = engine_->slots().wait_free(op_id);

  state.op_id = op_id;
  state.abort = !problem.empty();
  state.abort_code = ErrorCode::invalid_argument;
  state.abort_reason = problem;
  state.send = static_cast<const std::byte*>(send);
  state.recv = static_cast<std::byte*>(recv);
  state.in_place = send == recv;
  state.geometry.count = state.abort ? 0 : count;
  state.geometry.block_elems = options_.block_elems;
  state.geometry.num_lanes = options_.lanes;
  state.geometry.dtype = dtype_valid(static_cast<std::uint8_t>(dtype)) ? dtype : DataType::f32;
  // An op the wire does not take with this dtype (a bitwise one on floats) travels as sum in the
  // abort that fails the op on every rank: the peers' codec would drop it as hostile otherwise.
  state.redop = reduce_op_valid(static_cast<std::uint8_t>(op)) &&
                        (!reduce_op_is_bitwise(op) || state.geometry.dtype == DataType::i32)
                    ? op
                    : ReduceOp::sum;
  state.deadline = block_sparse::Clock::now() + std::chrono::milliseconds(options_.deadline_ms);
  state.failed.store(false, std::memory_order_relaxed);
  state.error = Status();
  if (!state.abort) {
    // The bitmap is the one allocation that grows with the count: a rank that cannot get it
    // (a count far beyond its memory) aborts the op for everyone like a bad argument, instead
    // of throwing past its peers, who would wait for it until their deadline.
    try {
      const std::size_t nblocks = block::block_count(count, options_.block_elems);
      state.bitmap.assign(block::bitmap_words(nblocks) + 1, 0);  // +1: never empty, so data() is valid
      if (scan) block_sparse::scan_op_blocks(state, count, 0, nblocks, &signed_zero_);
    } catch (const std::bad_alloc&) {
      state.abort = true;
      state.abort_code = ErrorCode::no_resource;
      state.abort_reason = "rank " + std::to_string(options_.rank) + " is out of memory for the bitmap of " +
                           std::to_string(block::block_count(count, options_.block_elems)) + " blocks (count " +
                           std::to_string(count) + ")";
      state.geometry.count = 0;
    }
  }
  if (state.abort)
    state.fail(Status(state.abort_code, "allreduce op " + std::to_string(op_id) + ": " + state.abort_reason));
  state.user_memory = {};
  if (!state.abort && count > 0) {
    const std::byte* begin = state.send;
    const std::byte* end = begin + count * dtype_size(dtype);
    for (const RegisteredBuffer& buffer : registered_)
      if (begin >= buffer.base && end <= buffer.base + buffer.bytes) {
        state.user_memory = buffer.memory;
        break;
      }
  }
  state.lanes.assign(options_.lanes, block_sparse::WorkerLane{});
  state.scratch.resize(std::size_t{options_.lanes} *
                       block_sparse::BlockSparseWorker::scratch_per_lane(engine_->config().window_capacity));
  state.stripe_blocks = 0;
  state.dense_stripes.clear();
  state.counted_stripe_blocks = 0;
  state.stripe_results_out = nullptr;
  state.wake_raw = false;
  return state;
}

// The hybrid allreduce (coll/hybrid_allreduce.cpp): the block-sparse op slot is prepared and
// reserved here; the collective thread estimates each stripe's density from a sample of its
// blocks when the call exchanges them (not when it plans from a kept table), decides, scans the
// stripes that stay block-sparse and hands them to the engine.
Status CommunicatorImpl::iallreduce_hybrid(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                           std::shared_ptr<RequestState>* out, bool caller_waits) {
  if (Status s = check_usable("allreduce"); !s.ok()) return s;
  const std::string problem = check_arguments(send, recv, count, dtype, op);
  block_sparse::OpState& state = prepare_block_sparse(send, recv, count, dtype, op, problem, /*scan=*/false);
  state.busy.store(1, std::memory_order_release);  // reserved until the collective thread hands it over or gives it back
  coll::CollOp& c = executor_->next_slot();
  c.kind = coll::CollKind::hybrid_allreduce;
  c.algo = Algorithm::hybrid;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.dtype = dtype;
  c.op = op;
  c.hybrid.sparse_part = &state;
  c.hybrid.handed_over = false;
  const std::uint64_t nblocks = state.abort ? 0 : block::block_count(count, options_.block_elems);
  c.hybrid.stripe_blocks = algo::stripe_blocks_for(nblocks);
  const std::uint64_t stripes = (nblocks + c.hybrid.stripe_blocks - 1) / c.hybrid.stripe_blocks;
  c.hybrid.stripe_masks.assign(stripes, 0);
  const std::size_t min_count = options_.hybrid_min_bytes / dtype_size(state.geometry.dtype);
  // Over shm a byte saved is worth less against block recursive doubling's extra passes over the
  // tensor than over a wire, and over a wire more the smaller the tensor (docs/algorithms.md, "hybrid").
  const bool over_shm = transport() == "shm";
  c.hybrid.stripes_unless_rd = count >= min_count;
  c.hybrid.rd_max_percent = algo::rd_max_percent(over_shm, std::uint64_t{count} * dtype_size(dtype));
  std::string local_problem = problem;
  if (local_problem.empty() && state.abort) local_problem = state.abort_reason;
  return submit(c, "allreduce op", local_problem, out, std::string(),
                problem.empty() && state.abort ? state.abort_code : ErrorCode::invalid_argument, caller_waits);
}

Status CommunicatorImpl::register_buffer(const void* buffer, std::size_t bytes) {
  if (buffer == nullptr || bytes == 0)
    return Status(ErrorCode::invalid_argument, "register_buffer: buffer is null or has 0 bytes");
  const auto* base = static_cast<const std::byte*>(buffer);
  for (const RegisteredBuffer& other : registered_)
    if (base < other.base + other.bytes && other.base < base + bytes)
      return Status(ErrorCode::invalid_argument,
                    "register_buffer: [" + hex(buffer) + ", +" + std::to_string(bytes) +
                        ") overlaps a buffer registered before at " + hex(other.base) + " (" +
                        std::to_string(other.bytes) + " bytes); deregister that one first");
  RegisteredBuffer entry;
  entry.base = base;
  entry.bytes = bytes;
  if (driver_ == nullptr || !driver_->register_memory(buffer, bytes, &entry.memory)) entry.memory = {};
  registered_.push_back(entry);
  return Status();
}

Status CommunicatorImpl::deregister_buffer(const void* buffer) {
  for (std::size_t i = 0; i < registered_.size(); ++i) {
    const RegisteredBuffer& entry = registered_[i];
    if (entry.base != buffer) continue;
    for (std::uint32_t slot = 0; slot < engine_->slots().size(); ++slot) {
      const block_sparse::OpState& op = engine_->slot(slot);
      if (op.busy.load(std::memory_order_acquire) != 0 && op.send >= entry.base && op.send < entry.base + entry.bytes)
        return Status(ErrorCode::invalid_argument, "deregister_buffer: op " + std::to_string(op.op_id) +
                                                       " still sends from " + hex(buffer) +
                                                       "; wait for it before deregistering");
    }
    if (entry.memory.len != 0) driver_->forget_memory(entry.base, entry.bytes);
    registered_.erase(registered_.begin() + static_cast<std::ptrdiff_t>(i));
    return Status();
  }
  return Status(ErrorCode::invalid_argument, "deregister_buffer: " + hex(buffer) + " was not registered");
}

Status CommunicatorImpl::wait(RequestState& request) {
  // atomic::wait spins briefly itself, then sleeps in the kernel: the progress threads, not the
  // caller, need the cores.
  while (request.done.load(std::memory_order_acquire) == 0) request.done.wait(0, std::memory_order_acquire);
  return request.status;
}

}  // namespace sparcoll::detail

namespace sparcoll::detail {

namespace {

// Empty when a plain buffer argument is fine, else what is wrong with it.
std::string check_buffer(const char* name, const void* p, std::size_t count, DataType dtype) {
  if (count == 0) return std::string();
  if (p == nullptr) return std::string(name) + " is null with count " + std::to_string(count);
  if (reinterpret_cast<std::uintptr_t>(p) % dtype_size(dtype) != 0)
    return std::string(name) + " " + hex(p) + " is not aligned to the " + std::to_string(dtype_size(dtype)) + "-byte " +
           std::string(dtype_name(dtype)) + " element";
  return std::string();
}

std::string check_dtype_op(DataType dtype, const ReduceOp* op) {
  if (!dtype_valid(static_cast<std::uint8_t>(dtype)))
    return "dtype " + std::to_string(static_cast<int>(dtype)) + " is not one of f32, f16, bf16, i32, f64, i64";
  if (op && !reduce_op_valid(static_cast<std::uint8_t>(*op)))
    return "op " + std::to_string(static_cast<int>(*op)) + " is not one of sum, avg, min, max, product, band, bor, bxor";
  if (op && reduce_op_is_bitwise(*op) && dtype != DataType::i32 && dtype != DataType::i64)
    return "op " + std::string(reduce_op_name(*op)) + " is bitwise: it takes i32 or i64, not " +
           std::string(dtype_name(dtype));
  if (op && *op == ReduceOp::avg && dtype == DataType::i64)
    return "op avg does not take i64 (its sum would wrap): reduce with sum and divide";
  return std::string();
}

constexpr std::uint64_t kMaxSparseDim = std::uint64_t{1} << 32;

bool is_sparse_algorithm(Algorithm a) {
  return a == Algorithm::ssar_recursive_doubling || a == Algorithm::ssar_split_allgather ||
         a == Algorithm::dsar_split_allgather;
}

bool overlaps(const void* a, std::size_t abytes, const void* b, std::size_t bbytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return abytes && bbytes && x < y + bbytes && y < x + abytes;
}

}  // namespace

// The channels' own counters (the block-sparse progress threads and the collective thread), summed by name.
static std::vector<transport::NamedCounter> channel_counter_totals(const block_sparse::Engine& engine, const coll::Executor* executor) {
  std::vector<transport::NamedCounter> totals;
  engine.add_counters(&totals);
  if (executor != nullptr) executor->add_counters(&totals);
  return totals;
}

TrafficStats CommunicatorImpl::traffic() const {
  TrafficStats t = engine_->traffic();
  if (executor_) executor_->add_traffic(&t);
  // The fields TrafficStats kept from before transport_counters(), by the counters' names.
  transport::ChannelCounters named;
  for (const transport::NamedCounter& c : channel_counter_totals(*engine_, executor_.get())) named.add(c.name, c.value);
  t.packets_sent = named.get("packets_sent");
  t.packets_received = named.get("packets_received");
  t.packets_retransmitted = named.get("retransmitted");
  t.packets_dropped_invalid = named.get("dropped_invalid");
  t.packets_duplicate = named.get("duplicates");
  return t;
}

std::vector<TransportCounter> CommunicatorImpl::transport_counters() const {
  std::vector<TransportCounter> out;
  for (const transport::NamedCounter& c : channel_counter_totals(*engine_, executor_.get()))
    out.push_back(TransportCounter{transport() + "." + c.name, c.value});
  return out;
}

Status CommunicatorImpl::check_usable(const char* what) const {
  if (engine_->broken())
    return Status(ErrorCode::broken, "an earlier failure broke this communicator: " + engine_->broken_status().to_string());
  if (!executor_) return Status(ErrorCode::invalid_argument, std::string(what) + " is for workers, not aggregators");
  return Status();
}

Algorithm CommunicatorImpl::resolve(Algorithm algo, const void* send, std::size_t count, DataType dtype, ReduceOp op) {
  if (algo == Algorithm::from_options) algo = parse_algorithm(options_.algo).value_or(Algorithm::auto_select);
  if (algo != Algorithm::auto_select) return algo;
  // 64-bit types: the dense algorithms, recursive doubling while latency decides.
  if (dtype_valid(static_cast<std::uint8_t>(dtype)) && dtype_is_wide(dtype))
    return size() > 1 && count * 8 <= options_.small_tensor_bytes ? Algorithm::recursive_doubling : Algorithm::ring;
  // auto decides from what every rank already has (algo/auto_choice.hpp): the count, dtype and
  // SPARCOLL_SMALL_TENSOR_BYTES, the same on every rank, and the transport every process joined
  // with. A small tensor goes by block recursive doubling, or above its limit by the dense
  // algorithm below stripes over shm and by the hybrid over a wire; anything larger by the
  // hybrid, which decides from every rank's densities (below SPARCOLL_HYBRID_MIN_BYTES the whole
  // tensor by block recursive doubling or that dense algorithm, from there per stripe,
  // block-sparse or the ring; docs/algorithms.md, "auto").
  // Both run on the collective thread, whatever this rank's arguments: a rank whose buffer or
  // count is bad still takes its turn there and fails the collective on every rank, and ranks
  // whose counts or dtypes differ (so that they choose differently) meet in the same collective
  // and fail it with `mismatch` (the peer header's signature), never one on the progress threads
  // and another on the collective thread, out of step.
  (void)send;
  (void)op;
  const std::size_t esize = dtype_valid(static_cast<std::uint8_t>(dtype)) ? dtype_size(dtype) : 4;
  return algo::auto_algorithm(size(), transport() == "shm", count * esize, options_.small_tensor_bytes);
}

Status CommunicatorImpl::submit(coll::CollOp& op, const char* what, const std::string& problem,
                                std::shared_ptr<RequestState>* out, const std::string& detail, ErrorCode code,
                                bool caller_waits) {
  op.invalid_code = code;
  // A rank with bad arguments still submits: the collective thread aborts the collective on
  // every rank (so no peer waits for its deadline), carrying this text.
  op.invalid = problem.empty() ? std::string() : std::string(what) + " " + std::to_string(op.seq) + detail + ": " + problem;
  if (!problem.empty()) {
    op.count = 0;
    op.sparse.entries.resize(0);
  }
  op.deadline = block_sparse::Clock::now() + std::chrono::milliseconds(options_.deadline_ms);
  op.request = std::make_shared<RequestState>();
  *out = op.request;
  // An allreduce with nothing queued ahead of it runs here when it is small (handing it to the
  // collective thread and back costs two wake-ups, more than its transfers) or when the caller
  // waits for it anyway (allreduce, not iallreduce): docs/architecture.md.
  const bool is_allreduce = op.kind == coll::CollKind::allreduce || op.kind == coll::CollKind::hybrid_allreduce;
  if (is_allreduce && (caller_waits || op.count * dtype_size(op.dtype) <= options_.small_tensor_bytes) &&
      executor_->can_run_here()) {
    executor_->run_here(op);
    return Status();
  }
  executor_->submit(op);
  return Status();
}

Status CommunicatorImpl::iallreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                    Algorithm algo, std::shared_ptr<RequestState>* out, bool caller_waits) {
  if (static_cast<std::uint8_t>(algo) > static_cast<std::uint8_t>(Algorithm::block_recursive_doubling))
    return Status(ErrorCode::invalid_argument,
                  "allreduce: algorithm " + std::to_string(static_cast<int>(algo)) + " is not a known algorithm");
  Algorithm chosen = resolve(algo, send, count, dtype, op);
  // The 64-bit types reduce on the dense algorithms only (their accumulators are 8 bytes; the
  // block-sparse, block-set and sparse wire formats carry 32-bit ones). Every rank decides this
  // alike, so the refusal fails the collective on every rank through the collective thread.
  std::string wide_problem;
  if (dtype_valid(static_cast<std::uint8_t>(dtype)) && dtype_is_wide(dtype) && chosen != Algorithm::ring &&
      chosen != Algorithm::butterfly && chosen != Algorithm::recursive_doubling) {
    wide_problem = "algorithm " + std::string(algorithm_name(chosen)) + " reduces 32-bit dtypes; " +
                   std::string(dtype_name(dtype)) + " runs on ring, butterfly or recursive_doubling (auto picks)";
    chosen = Algorithm::ring;
  }
  if (chosen == Algorithm::block_sparse) return iallreduce_block_sparse(send, recv, count, dtype, op, out);
  if (chosen == Algorithm::hybrid) return iallreduce_hybrid(send, recv, count, dtype, op, out, caller_waits);
  if (Status s = check_usable("allreduce"); !s.ok()) return s;
  coll::CollOp& c = executor_->next_slot();
  c.kind = coll::CollKind::allreduce;
  c.algo = chosen;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.dtype = dtype;
  c.op = op;
  std::string problem = check_arguments(send, recv, count, dtype, op);
  if (problem.empty()) problem = wide_problem;
  if (problem.empty() && is_sparse_algorithm(chosen) && count > kMaxSparseDim)
    problem = "count " + std::to_string(count) + " exceeds 2^32, the index range of " +
              std::string(algorithm_name(chosen)) + " (indices travel as u32)";
  return submit(c, "allreduce op", problem, out, std::string(), ErrorCode::invalid_argument, caller_waits);
}

coll::CollOp& CommunicatorImpl::fill_slot(coll::CollKind kind, const void* send, void* recv, std::size_t count,
                                          DataType dtype, ReduceOp op, int root) {
  coll::CollOp& c = executor_->next_slot();
  c.kind = kind;
  c.algo = Algorithm::ring;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.dtype = dtype;
  c.op = op;
  c.root = static_cast<std::uint32_t>(root);
  return c;
}

namespace {

// "" or why `count` elements per rank over `ranks` ranks are too many.
std::string check_per_rank_count(std::size_t count, int ranks) {
  if (count <= (std::size_t{1} << 56) / static_cast<std::size_t>(ranks)) return std::string();
  return "count " + std::to_string(count) + " times " + std::to_string(ranks) + " ranks exceeds 2^56 elements";
}

// "" when `piece` (bytes long) is slot `slot` of `whole` (ranks * bytes) or lies apart from it,
// else `why`: a piece inside the whole is taken only as its own slot (in place).
std::string check_own_slot(const void* piece, const void* whole, std::size_t bytes, int ranks, int slot,
                           const char* why) {
  if (bytes == 0) return std::string();
  const auto* mine = static_cast<const std::byte*>(whole) + static_cast<std::size_t>(slot) * bytes;
  if (piece != mine && overlaps(piece, bytes, whole, bytes * static_cast<std::size_t>(ranks))) return why;
  return std::string();
}

}  // namespace

Status CommunicatorImpl::ibroadcast(void* buffer, std::size_t count, DataType dtype, int root,
                                    std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("broadcast"); !s.ok()) return s;
  coll::CollOp& c = fill_slot(coll::CollKind::broadcast, buffer, buffer, count, dtype, ReduceOp::sum, root);
  std::string problem = check_dtype_op(dtype, nullptr);
  if (problem.empty()) problem = check_root(root);
  if (problem.empty()) problem = check_buffer("buffer", buffer, count, dtype);
  return submit(c, "broadcast", problem, out);
}

Status CommunicatorImpl::iallgather(const void* send, void* recv, std::size_t count, DataType dtype,
                                    std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("allgather"); !s.ok()) return s;
  coll::CollOp& c = fill_slot(coll::CollKind::allgather, send, recv, count, dtype);
  std::string problem = check_dtype_op(dtype, nullptr);
  if (problem.empty()) problem = check_buffer("sendbuf", send, count, dtype);
  if (problem.empty()) problem = check_buffer("recvbuf", recv, count, dtype);
  if (problem.empty())
    problem = check_own_slot(send, recv, count * dtype_size(dtype), size(), rank(),
                             "sendbuf overlaps recvbuf without being this rank's slot in it (recvbuf + rank * count)");
  return submit(c, "allgather", problem, out);
}

Status CommunicatorImpl::ireduce_scatter(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                         std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("reduce_scatter"); !s.ok()) return s;
  coll::CollOp& c = fill_slot(coll::CollKind::reduce_scatter, send, recv, count, dtype, op);
  std::string problem = check_dtype_op(dtype, &op);
  if (problem.empty()) problem = check_per_rank_count(count, size());
  if (problem.empty()) problem = check_buffer("sendbuf", send, count * static_cast<std::size_t>(size()), dtype);
  if (problem.empty()) problem = check_buffer("recvbuf", recv, count, dtype);
  if (problem.empty() &&
      overlaps(send, count * size() * dtype_size(dtype), recv, count * dtype_size(dtype)))
    problem = "sendbuf and recvbuf overlap";
  return submit(c, "reduce_scatter", problem, out);
}

// --- rooted: reduce, gather, scatter -------------------------------------------------------------
// The root's buffers are checked on the root only: elsewhere they are not used and may be null
// (as MPI's recvbuf of a reduce is "significant only at root").

std::string CommunicatorImpl::check_root(int root) const {
  if (root < 0 || root >= size())
    return "root " + std::to_string(root) + " is not a rank of this " + std::to_string(size()) + "-rank communicator";
  return std::string();
}

Status CommunicatorImpl::ireduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                 int root, std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("reduce"); !s.ok()) return s;
  coll::CollOp& c = fill_slot(coll::CollKind::reduce, send, recv, count, dtype, op, root);
  std::string problem = check_dtype_op(dtype, &op);
  if (problem.empty()) problem = check_root(root);
  if (problem.empty() && count > (std::size_t{1} << 56))
    problem = "count " + std::to_string(count) + " exceeds the limit of 2^56 elements";
  if (problem.empty()) problem = check_buffer("sendbuf", send, count, dtype);
  if (problem.empty() && root == rank()) problem = check_buffer("recvbuf", recv, count, dtype);
  const std::size_t bytes = count * dtype_size(dtype);
  if (problem.empty() && root == rank() && send != recv && overlaps(send, bytes, recv, bytes))
    problem = "sendbuf and recvbuf overlap without being the same buffer";
  return submit(c, "reduce", problem, out);
}

Status CommunicatorImpl::igather(const void* send, void* recv, std::size_t count, DataType dtype, int root,
                                 std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("gather"); !s.ok()) return s;
  coll::CollOp& c = fill_slot(coll::CollKind::gather, send, recv, count, dtype, ReduceOp::sum, root);
  std::string problem = check_dtype_op(dtype, nullptr);
  if (problem.empty()) problem = check_root(root);
  if (problem.empty()) problem = check_per_rank_count(count, size());
  if (problem.empty()) problem = check_buffer("sendbuf", send, count, dtype);
  if (problem.empty() && root == rank()) problem = check_buffer("recvbuf", recv, count * size(), dtype);
  if (problem.empty() && root == rank())
    problem = check_own_slot(send, recv, count * dtype_size(dtype), size(), rank(),
                             "sendbuf overlaps recvbuf without being the root's slot in it (recvbuf + root * count)");
  return submit(c, "gather", problem, out);
}

Status CommunicatorImpl::iscatter(const void* send, void* recv, std::size_t count, DataType dtype, int root,
                                  std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("scatter"); !s.ok()) return s;
  coll::CollOp& c = fill_slot(coll::CollKind::scatter, send, recv, count, dtype, ReduceOp::sum, root);
  std::string problem = check_dtype_op(dtype, nullptr);
  if (problem.empty()) problem = check_root(root);
  if (problem.empty()) problem = check_per_rank_count(count, size());
  if (problem.empty() && root == rank()) problem = check_buffer("sendbuf", send, count * size(), dtype);
  if (problem.empty()) problem = check_buffer("recvbuf", recv, count, dtype);
  if (problem.empty() && root == rank())
    problem = check_own_slot(recv, send, count * dtype_size(dtype), size(), rank(),
                             "recvbuf overlaps sendbuf without being the root's slot in it (sendbuf + root * count)");
  return submit(c, "scatter", problem, out);
}

// --- all_to_all -----------------------------------------------------------------------------------

namespace {

// What is wrong with one side's pieces (bytes[p] at offsets[p] of buffer), or "". *lo, *hi: the
// bytes they span.
std::string check_pieces(const char* side, const void* buffer, const std::size_t* bytes, const std::size_t* offsets,
                         int ranks, std::size_t* lo, std::size_t* hi) {
  *lo = SIZE_MAX;
  *hi = 0;
  if (bytes == nullptr || offsets == nullptr)
    return std::string(side) + (bytes == nullptr ? " bytes" : " offsets") + " array is null";
  for (int p = 0; p < ranks; ++p) {
    const std::size_t b = bytes[p], o = offsets[p];
    if (b > (std::size_t{1} << 44) || o > (std::size_t{1} << 56))
      return std::string(side) + " piece " + std::to_string(p) + " (" + std::to_string(b) + " bytes at offset " +
             std::to_string(o) + ") is beyond the limits (2^44 bytes, offsets below 2^56)";
    if (b == 0) continue;
    if (buffer == nullptr)
      return std::string(side) + "buf is null with " + std::to_string(b) + " bytes for rank " + std::to_string(p);
    *lo = std::min(*lo, o);
    *hi = std::max(*hi, o + b);
  }
  return std::string();
}

}  // namespace

Status CommunicatorImpl::iall_to_all(const void* send, const std::size_t* send_bytes, const std::size_t* send_offsets,
                                     void* recv, const std::size_t* recv_bytes, const std::size_t* recv_offsets,
                                     std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("all_to_all"); !s.ok()) return s;
  coll::CollOp& c = executor_->next_slot();
  c.kind = coll::CollKind::all_to_all;
  c.algo = Algorithm::ring;
  c.send = send;
  c.recv = recv;
  c.count = 0;
  c.dtype = DataType::i32;
  const auto n = static_cast<std::size_t>(size());
  c.send_bytes.assign(n, 0);
  c.send_offsets.assign(n, 0);
  c.recv_bytes.assign(n, 0);
  c.recv_offsets.assign(n, 0);
  std::size_t slo, shi, rlo, rhi;
  std::string problem = check_pieces("send", send, send_bytes, send_offsets, size(), &slo, &shi);
  if (problem.empty()) problem = check_pieces("recv", recv, recv_bytes, recv_offsets, size(), &rlo, &rhi);
  if (problem.empty() && send_bytes[rank()] != recv_bytes[rank()])
    problem = "this rank's piece for itself is " + std::to_string(send_bytes[rank()]) + " bytes in sendbuf and " +
              std::to_string(recv_bytes[rank()]) + " in recvbuf";
  if (problem.empty() && slo < shi && rlo < rhi &&
      overlaps(static_cast<const std::byte*>(send) + slo, shi - slo, static_cast<const std::byte*>(recv) + rlo,
               rhi - rlo))
    problem = "sendbuf and recvbuf overlap";
  if (problem.empty()) {
    std::copy_n(send_bytes, n, c.send_bytes.begin());
    std::copy_n(send_offsets, n, c.send_offsets.begin());
    std::copy_n(recv_bytes, n, c.recv_bytes.begin());
    std::copy_n(recv_offsets, n, c.recv_offsets.begin());
  }
  return submit(c, "all_to_all", problem, out);
}

// --- send, recv -----------------------------------------------------------------------------------
// Not collectives: bad arguments fail the call here, on this rank alone (no peer is waiting in
// a collective for it), before anything is submitted.

std::string CommunicatorImpl::check_p2p(const void* data, std::size_t bytes, int peer, int tag,
                                        bool any_source_ok) const {
  if (!(any_source_ok && peer == kAnySource) && (peer < 0 || peer >= size()))
    return "peer " + std::to_string(peer) + " is not a rank of this " + std::to_string(size()) + "-rank communicator" +
           (any_source_ok ? " (nor kAnySource, -1)" : "");
  if (peer == rank()) return "peer " + std::to_string(peer) + " is this rank itself";
  if (tag < 0) return "tag " + std::to_string(tag) + " is negative";
  if (bytes > p2p::kMaxLogicalBytes)
    return std::to_string(bytes) + " bytes exceed the limit of 2^44 bytes of one message";
  if (bytes != 0 && data == nullptr) return "the buffer is null with " + std::to_string(bytes) + " bytes";
  return std::string();
}

Status CommunicatorImpl::submit_p2p(coll::CollKind kind, const void* send, void* recv, std::size_t bytes, int peer,
                                    int tag, int* source, std::shared_ptr<RequestState>* out) {
  coll::CollOp& c = executor_->next_slot();
  c.kind = kind;
  c.send = send;
  c.recv = recv;
  c.count = bytes;
  c.peer = peer;
  c.tag = static_cast<std::uint32_t>(tag);
  c.source = source;
  c.invalid.clear();
  c.deadline = block_sparse::Clock::now() + std::chrono::milliseconds(options_.deadline_ms);
  c.request = std::make_shared<RequestState>();
  *out = c.request;
  executor_->submit(c);
  return Status();
}

Status CommunicatorImpl::isend(const void* data, std::size_t bytes, int peer, int tag,
                               std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("send"); !s.ok()) return s;
  if (std::string problem = check_p2p(data, bytes, peer, tag, false); !problem.empty())
    return Status(ErrorCode::invalid_argument, "send: " + problem);
  return submit_p2p(coll::CollKind::send, data, nullptr, bytes, peer, tag, nullptr, out);
}

Status CommunicatorImpl::irecv(void* data, std::size_t bytes, int peer, int tag, int* source,
                               std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("recv"); !s.ok()) return s;
  if (std::string problem = check_p2p(data, bytes, peer, tag, true); !problem.empty())
    return Status(ErrorCode::invalid_argument, "recv: " + problem);
  return submit_p2p(coll::CollKind::recv, nullptr, data, bytes, peer, tag, source, out);
}

// --- allreduce_sparse ---------------------------------------------------------------------------

namespace {

// Checks the caller's sparse input and copies it into `entries` (u32 indices, accumulator
// values) in the same pass; returns what is wrong with it, naming the position and the value.
std::string take_sparse_input(const std::int64_t* indices, const void* values, std::size_t nnz, std::size_t dim,
                              DataType dtype, ReduceOp op, const SparseResult* result, algo::SparseVector* entries) {
  if (std::string p = check_dtype_op(dtype, &op); !p.empty()) return p;
  if (result == nullptr) return "result is null";
  if (dim > kMaxSparseDim)
    return "dim " + std::to_string(dim) + " exceeds 2^32, the index range of the sparse algorithms (indices travel as u32)";
  if (nnz > dim) return "nnz " + std::to_string(nnz) + " exceeds dim " + std::to_string(dim);
  if (nnz > 0 && indices == nullptr) return "indices is null with nnz " + std::to_string(nnz);
  if (std::string p = check_buffer("values", values, nnz, dtype); !p.empty()) return p;
  entries->resize(nnz);
  std::uint32_t* out = entries->idx.data();
  for (std::size_t k = 0; k < nnz; ++k) {
    const std::int64_t x = indices[k];
    if (x < 0 || static_cast<std::uint64_t>(x) >= dim)
      return "indices[" + std::to_string(k) + "] = " + std::to_string(x) + " is outside [0, dim = " + std::to_string(dim) +
             ")";
    if (k > 0 && x <= indices[k - 1])
      return "indices[" + std::to_string(k) + "] = " + std::to_string(x) +
             (x == indices[k - 1] ? " repeats indices[" : " is below indices[") + std::to_string(k - 1) + "] = " +
             std::to_string(indices[k - 1]) + " (indices must be sorted and unique)";
    out[k] = static_cast<std::uint32_t>(x);
  }
  if (nnz > 0) block::acc_load(dtype, values, entries->val.data(), nnz);
  return std::string();
}

}  // namespace

Algorithm CommunicatorImpl::resolve_sparse(Algorithm algo, std::string* problem) const {
  if (algo == Algorithm::from_options) {
    algo = parse_algorithm(options_.algo).value_or(Algorithm::dsar_split_allgather);
    if (!is_sparse_algorithm(algo)) algo = Algorithm::dsar_split_allgather;  // SPARCOLL_ALGO names a dense one
  }
  if (algo == Algorithm::auto_select) algo = Algorithm::dsar_split_allgather;
  if (!is_sparse_algorithm(algo)) {
    *problem = "algorithm " +
               (static_cast<std::uint8_t>(algo) > static_cast<std::uint8_t>(Algorithm::dsar_split_allgather)
                    ? std::to_string(static_cast<int>(algo))
                    : std::string(algorithm_name(algo))) +
               " is not a sparse allreduce (ssar_recursive_doubling, ssar_split_allgather or dsar_split_allgather)";
    return Algorithm::dsar_split_allgather;
  }
  return algo;
}

Status CommunicatorImpl::iallreduce_sparse(const std::int64_t* indices, const void* values, std::size_t nnz,
                                           std::size_t dim, DataType dtype, ReduceOp op, SparseResult* result,
                                           Algorithm algo, std::shared_ptr<RequestState>* out) {
  if (Status s = check_usable("allreduce_sparse"); !s.ok()) return s;
  coll::CollOp& c = executor_->next_slot();
  c.kind = coll::CollKind::sparse_allreduce;
  std::string problem;
  c.algo = resolve_sparse(algo, &problem);
  c.send = nullptr;
  c.recv = nullptr;
  c.count = 0;
  c.dtype = dtype;
  c.op = op;
  c.sparse.dim = dim;
  c.sparse.result = result;
  if (problem.empty() && dtype_valid(static_cast<std::uint8_t>(dtype)) && dtype_is_wide(dtype))
    problem = "allreduce_sparse reduces 32-bit dtypes, not " + std::string(dtype_name(dtype));
  if (problem.empty()) problem = take_sparse_input(indices, values, nnz, dim, dtype, op, result, &c.sparse.entries);
  return submit(c, "allreduce_sparse", problem, out);
}

}  // namespace sparcoll::detail
