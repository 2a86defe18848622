#include "job_simulator.hpp"

#include <algorithm>
#include <cstring>

#include "block/bitmap.hpp"
#include "block_sparse/limits.hpp"

namespace sparcoll::testing {

using proto::MsgType;
using proto::WireHeader;

// ---------------------------------------------------------------------------------------------
// SimChannel / SimNetwork

std::uint32_t SimChannel::max_message() const { return net_.config().max_message; }

transport::SendResult SimChannel::send(std::uint32_t peer, const struct iovec* iov, int iovcnt) {
  std::size_t bytes = 0;
  for (int i = 0; i < iovcnt; ++i) bytes += iov[i].iov_len;
  if (peer >= net_.nprocs() || peer == self_) {
    error_ = Status(ErrorCode::internal, "sim: send from " + std::to_string(self_) + " to invalid peer " + std::to_string(peer));
    return transport::SendResult::error;
  }
  if (bytes > net_.config().max_message) {
    error_ = Status(ErrorCode::invalid_argument, "sim: message of " + std::to_string(bytes) + " bytes from " +
                                                     std::to_string(self_) + " exceeds max_message " +
                                                     std::to_string(net_.config().max_message));
    return transport::SendResult::error;
  }
  auto& q = net_.queue(self_, peer);
  if ((net_.config().queue_capacity != 0 && q.size() >= net_.config().queue_capacity) || net_.refuse()) {
    ++net_.refused;
    return transport::SendResult::no_resource;
  }
  Msg m;
  m.words.assign((bytes + 7) / 8 + 1, 0);
  m.size = static_cast<std::uint32_t>(bytes);
  m.src = self_;
  auto* dst = reinterpret_cast<std::byte*>(m.words.data());
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len) std::memcpy(dst, iov[i].iov_base, iov[i].iov_len);
    dst += iov[i].iov_len;
  }
  q.push_back(std::move(m));
  return transport::SendResult::ok;
}

int SimChannel::poll(transport::ReceivedMessage* out, int max) {
  current_.clear();  // the previous batch is no longer valid
  int n = 0;
  while (n < max && !arrived.empty()) {
    current_.push_back(std::move(arrived.front()));
    arrived.pop_front();
    ++n;
  }
  for (int i = 0; i < n; ++i) {
    out[i].peer = current_[static_cast<std::size_t>(i)].src;
    out[i].data = reinterpret_cast<const std::byte*>(current_[static_cast<std::size_t>(i)].words.data());
    out[i].size = current_[static_cast<std::size_t>(i)].size;
  }
  return n;
}

bool SimNetwork::refuse() {
  if (cfg_.refuse_probability <= 0) return false;
  return std::uniform_real_distribution<double>(0, 1)(*rng_) < cfg_.refuse_probability;
}

// ---------------------------------------------------------------------------------------------
// JobSimulator

struct JobSimulator::Proc {
  std::uint32_t self;
  SimChannel channel;
  block_sparse::SelfChannel loopback;
  block_sparse::Outbox outbox;
  std::unique_ptr<block_sparse::Aggregator> aggregator;
  std::unique_ptr<block_sparse::BlockSparseWorker> worker;
  std::deque<SimOp> ops;             // stable addresses
  std::deque<SimOp*> to_start;       // submitted, not started (FIFO)
  std::vector<SimOp*> active;        // started, not finished

  Proc(SimNetwork& net, std::uint32_t p, std::size_t loopback_bytes)
      : self(p), channel(net, p), loopback(p, loopback_bytes), outbox(p, &channel, &loopback) {}
};

block_sparse::JobLayout JobSimulator::layout(std::uint32_t self) const {
  block_sparse::JobLayout l;
  l.workers = cfg_.workers;
  l.dedicated = cfg_.dedicated;
  l.self = self;
  l.lanes = cfg_.lanes;
  l.threads = 1;
  return l;
}

JobSimulator::JobSimulator(const SimConfig& cfg)
    : cfg_(cfg),
      window_capacity_(block_sparse::window_capacity(cfg.fusion, cfg.block_elems, cfg.max_message)),
      rng_(cfg.seed),
      net_(cfg.workers + cfg.dedicated, cfg_, &rng_) {
  for (std::uint32_t p = 0; p < processes(); ++p) {
    auto proc = std::make_unique<Proc>(net_, p, cfg_.loopback_bytes);
    block_sparse::AggregatorConfig a;
    a.layout = layout(p);
    a.thread_index = 0;
    a.job_epoch = cfg_.job_epoch;
    a.max_inflight = cfg_.max_inflight;
    a.fusion = window_capacity_;
    a.block_elems = cfg_.block_elems;
    a.max_message = cfg_.max_message;
    a.deadline_ms = 3'600'000;
    // As engine.cpp's aggregator_config: a co-located worker's aggregator reads its own blocks
    // from, and writes results to, the worker's buffers (kFlagLocalData on the loopback).
    if (cfg_.dedicated == 0 && a.layout.self_is_worker()) {
      a.find_local_op = &JobSimulator::find_local_op;
      a.find_local_context = proc.get();
    }
    proc->aggregator = std::make_unique<block_sparse::Aggregator>(a, proc->outbox);
    block_sparse::WorkerConfig w;
    w.layout = layout(p);
    w.thread_index = 0;
    w.job_epoch = cfg_.job_epoch;
    w.fusion = window_capacity_;
    proc->worker = std::make_unique<block_sparse::BlockSparseWorker>(w, proc->outbox);
    procs_.push_back(std::move(proc));
  }
}

JobSimulator::~JobSimulator() = default;

block_sparse::Aggregator& JobSimulator::aggregator(std::uint32_t p) { return *procs_.at(p)->aggregator; }
block_sparse::BlockSparseWorker& JobSimulator::worker(std::uint32_t p) { return *procs_.at(p)->worker; }

void JobSimulator::note(std::uint32_t p, const Status& s) {
  if (!s.ok()) violations.push_back(layout(p).name(p) + ": " + s.to_string());
}

block_sparse::OpState& JobSimulator::submit(std::uint32_t w, const OpInput& in) {
  Proc& proc = *procs_.at(w);
  proc.ops.emplace_back();
  SimOp& sop = proc.ops.back();
  sop.state = std::make_unique<block_sparse::OpState>();
  block_sparse::OpState& state = *sop.state;
  // As CommunicatorImpl::iallreduce does.
  state.op_id = in.op_id;
  state.abort = !in.abort_reason.empty();
  state.abort_reason = in.abort_reason;
  state.send = static_cast<const std::byte*>(in.send);
  state.recv = static_cast<std::byte*>(in.recv);
  state.in_place = in.send == in.recv;
  state.geometry.count = state.abort ? 0 : in.count;
  state.geometry.block_elems = cfg_.block_elems;
  state.geometry.num_lanes = cfg_.lanes;
  state.geometry.dtype = in.dtype;
  state.redop = in.op;
  state.deadline = block_sparse::Clock::now() + std::chrono::hours(1);
  state.failed.store(false, std::memory_order_relaxed);
  state.error = Status();
  if (state.abort) {
    state.fail(Status(ErrorCode::invalid_argument, "allreduce op " + std::to_string(in.op_id) + ": " + in.abort_reason));
  } else {
    const std::size_t nblocks = block::block_count(in.count, cfg_.block_elems);
    state.bitmap.assign(block::bitmap_words(nblocks) + 1, 0);
    block::scan_nonzero_blocks(in.send, in.count, in.dtype, cfg_.block_elems, state.bitmap.data());
  }
  state.lanes.resize(cfg_.lanes);
  state.scratch.resize(std::size_t{cfg_.lanes} * block_sparse::BlockSparseWorker::scratch_per_lane(window_capacity_));
  state.request = std::make_shared<detail::RequestState>();
  // As Engine::submit does (one progress thread).
  state.thread_lanes_left.assign(1, proc.worker->lanes_here());
  state.thread_stats.assign(1, OpStats{});
  state.threads_left.store(1, std::memory_order_relaxed);
  state.busy.store(1, std::memory_order_release);
  if (cfg_.start_immediately && proc.to_start.empty() && slot_free(w, in.op_id))
    start(w, sop);
  else
    proc.to_start.push_back(&sop);
  return state;
}

void JobSimulator::start(std::uint32_t w, SimOp& op) {
  Proc& proc = *procs_[w];
  op.started = true;
  proc.active.push_back(&op);
  note(w, proc.worker->start(*op.state));
  maybe_finish(w, op);
}

void JobSimulator::maybe_finish(std::uint32_t w, SimOp& op) {
  if (op.finished || op.state->thread_lanes_left[0] != 0) return;
  Proc& proc = *procs_[w];
  proc.active.erase(std::remove(proc.active.begin(), proc.active.end(), &op), proc.active.end());
  op.finished = true;
  op.state->threads_left.fetch_sub(1);
  op.state->busy.store(0);
  // The user owns the buffers again: keep what the op produced, then scribble over them as a
  // user reusing them at once would.
  const std::size_t bytes = op.state->geometry.count * op.state->geometry.elem_size();
  if (op.state->recv != nullptr) {
    op.output.assign(op.state->recv, op.state->recv + bytes);
    if (cfg_.reuse_buffers_on_finish) {
      std::memset(op.state->recv, 0xEE, bytes);
      if (!op.state->in_place && op.state->send) std::memset(const_cast<std::byte*>(op.state->send), 0xDD, bytes);
    }
  }
}

// iallreduce waits until the engine's op slot (op_id % max_inflight) is free: op X + max_inflight
// starts only after op X finished on this worker.
bool JobSimulator::slot_free(std::uint32_t w, std::uint32_t op_id) const {
  for (const SimOp* op : procs_[w]->active)
    if (op->state->op_id % cfg_.max_inflight == op_id % cfg_.max_inflight) return false;
  return true;
}

block_sparse::OpState* JobSimulator::find_local_op(void* context, std::uint32_t op_id) {
  for (SimOp* op : static_cast<Proc*>(context)->active)
    if (op->state->op_id == op_id) return op->state.get();
  return nullptr;
}

JobSimulator::SimOp* JobSimulator::find_active(std::uint32_t w, std::uint32_t op_id) {
  for (SimOp* op : procs_[w]->active)
    if (op->state->op_id == op_id) return op;
  return nullptr;
}

block_sparse::OpState& JobSimulator::op(std::uint32_t w, std::uint32_t op_id) {
  Proc& proc = *procs_.at(w);
  for (auto it = proc.ops.rbegin(); it != proc.ops.rend(); ++it)
    if (it->state->op_id == op_id) return *it->state;
  throw std::out_of_range("no such op");
}

bool JobSimulator::finished(std::uint32_t w, std::uint32_t op_id) const {
  const Proc& proc = *procs_.at(w);
  for (auto it = proc.ops.rbegin(); it != proc.ops.rend(); ++it)
    if (it->state->op_id == op_id) return it->finished;
  return false;
}

const std::vector<std::byte>& JobSimulator::output(std::uint32_t w, std::uint32_t op_id) const {
  const Proc& proc = *procs_.at(w);
  for (auto it = proc.ops.rbegin(); it != proc.ops.rend(); ++it)
    if (it->state->op_id == op_id) return it->output;
  throw std::out_of_range("no such op");
}

Status JobSimulator::status(std::uint32_t w, std::uint32_t op_id) {
  block_sparse::OpState& s = op(w, op_id);
  return s.failed.load() ? s.error : Status();
}

// As ProgressThread::dispatch, recording what passes.
void JobSimulator::dispatch(std::uint32_t p, const transport::ReceivedMessage& msg) {
  const block_sparse::JobLayout L = layout(p);
  proto::MessageView view;
  const proto::DecodeError e = proto::decode(msg.data, msg.size, L.processes(), &view);
  if (e != proto::DecodeError::none) {
    violations.push_back(L.name(p) + ": undecodable message from " + L.name(msg.peer) + ": " + proto::describe(e));
    return;
  }
  const WireHeader& h = *view.header;
  if (h.sender != msg.peer || h.job_epoch != cfg_.job_epoch || ((h.flags & proto::kFlagLocalData) && msg.peer != p)) {
    violations.push_back(L.name(p) + ": bad sender/epoch from " + L.name(msg.peer));
    return;
  }
  SimRecord r;
  r.src = msg.peer;
  r.dst = p;
  r.type = static_cast<MsgType>(h.type);
  r.op_id = h.op_id;
  r.lane = h.lane;
  if (view.indices) r.indices.assign(view.indices, view.indices + h.nblocks);
  r.next = h.next_index;
  r.final = (h.flags & proto::kFlagFinal) != 0;
  const MsgType type = r.type;
  records.push_back(std::move(r));

  if (type == MsgType::window || type == MsgType::abort) {
    note(p, procs_[p]->aggregator->on_message(view));
  } else {
    SimOp* op = find_active(p, h.op_id);
    if (op == nullptr) {
      violations.push_back(L.name(p) + ": " + L.name(msg.peer) + " sent a result for op " + std::to_string(h.op_id) +
                           ", which is not running here");
      return;
    }
    note(p, procs_[p]->worker->on_message(*op->state, view));
    maybe_finish(p, *op);
  }
}

bool JobSimulator::run() {
  transport::ReceivedMessage msgs[64];
  enum Kind { kNet, kLoop, kStart };
  struct Choice {
    Kind kind;
    std::uint32_t a, b;
  };
  std::vector<Choice> choices;
  for (;;) {
    if (++steps > cfg_.max_steps) return false;
    if (!violations.empty()) return false;  // the engine would break here; nothing more to learn
    choices.clear();
    const std::uint32_t n = processes();
    for (std::uint32_t s = 0; s < n; ++s)
      for (std::uint32_t d = 0; d < n; ++d)
        if (!net_.queue(s, d).empty()) choices.push_back({kNet, s, d});
    for (std::uint32_t p = 0; p < n; ++p) {
      if (!procs_[p]->loopback.empty()) choices.push_back({kLoop, p, 0});
      if (!procs_[p]->to_start.empty() && slot_free(p, procs_[p]->to_start.front()->state->op_id))
        choices.push_back({kStart, p, 0});
    }
    bool pending = false;
    for (std::uint32_t p = 0; p < n; ++p)
      pending |= procs_[p]->worker->has_pending_sends() || procs_[p]->aggregator->has_pending_sends();
    if (choices.empty() && !pending) {
      for (std::uint32_t p = 0; p < n; ++p)
        if (!procs_[p]->to_start.empty()) return false;  // an op can never start: deadlock
      return true;
    }

    if (!choices.empty()) {
      Choice c = choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(rng_)];
      // A slow process: its deliveries and starts are usually skipped in favour of the others.
      for (int tries = 0; tries < 8; ++tries) {
        const std::uint32_t target = c.kind == kNet ? c.b : c.a;
        if (cfg_.slow_process < 0 || target != static_cast<std::uint32_t>(cfg_.slow_process) ||
            std::uniform_real_distribution<double>(0, 1)(rng_) < cfg_.slow_probability)
          break;
        c = choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(rng_)];
      }
      if (c.kind == kStart) {
        Proc& proc = *procs_[c.a];
        SimOp* op = proc.to_start.front();
        proc.to_start.pop_front();
        start(c.a, *op);
      } else if (c.kind == kLoop) {
        const int max = std::uniform_int_distribution<int>(1, 4)(rng_);
        const int got = procs_[c.a]->loopback.poll(msgs, max);
        loopback_messages += static_cast<std::uint64_t>(got);
        for (int i = 0; i < got; ++i) dispatch(c.a, msgs[i]);
      } else {
        // Move 1..3 messages of this queue into the destination, then let it poll them.
        auto& q = net_.queue(c.a, c.b);
        const int k = std::uniform_int_distribution<int>(1, 3)(rng_);
        for (int i = 0; i < k && !q.empty(); ++i) {
          procs_[c.b]->channel.arrived.push_back(std::move(q.front()));
          q.pop_front();
        }
        const int got = procs_[c.b]->channel.poll(msgs, 64);
        network_messages += static_cast<std::uint64_t>(got);
        for (int i = 0; i < got; ++i) dispatch(c.b, msgs[i]);
      }
    }
    // Every round, as ProgressThread::step does (in a random process order).
    std::vector<std::uint32_t> order(n);
    for (std::uint32_t p = 0; p < n; ++p) order[p] = p;
    std::shuffle(order.begin(), order.end(), rng_);
    for (std::uint32_t p : order) {
      note(p, procs_[p]->worker->retry_sends());
      note(p, procs_[p]->aggregator->retry_sends());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Message builders

RawMessage build_message(WireHeader h, const std::vector<std::uint64_t>& indices, const void* data,
                         std::size_t data_bytes) {
  RawMessage m;
  h.nblocks = static_cast<std::uint16_t>(indices.size());
  h.payload_len = static_cast<std::uint32_t>(indices.size() * 8 + data_bytes);
  m.size = sizeof(WireHeader) + indices.size() * 8 + data_bytes;
  m.words.assign((m.size + 7) / 8, 0);
  std::byte* p = m.data();
  std::memcpy(p, &h, sizeof h);
  if (!indices.empty()) std::memcpy(p + sizeof h, indices.data(), indices.size() * 8);
  if (data && data_bytes) std::memcpy(p + sizeof h + indices.size() * 8, data, data_bytes);
  return m;
}

RawMessage build_reason_message(WireHeader h, const std::string& reason) {
  RawMessage m;
  h.nblocks = 0;
  h.payload_len = static_cast<std::uint32_t>(reason.size());
  m.size = sizeof(WireHeader) + reason.size();
  m.words.assign((m.size + 7) / 8, 0);
  std::memcpy(m.data(), &h, sizeof h);
  if (!reason.empty()) std::memcpy(m.data() + sizeof h, reason.data(), reason.size());
  return m;
}

}  // namespace sparcoll::testing
