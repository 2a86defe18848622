#include "block_sparse/aggregator.hpp"

#include <algorithm>
#include <cstring>

#include "block/reduce.hpp"
#include "common/log.hpp"
#include "block_sparse/limits.hpp"

namespace sparcoll::block_sparse {

using proto::kEnd;
using proto::MsgType;
using proto::WireHeader;

namespace {
constexpr std::uint64_t kInitialRound = kEnd - 1;  // cursor of the first round (every worker reports)

// Serial-number order of op ids (they wrap at 2^32).
bool op_older(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) < 0; }
}  // namespace

struct Aggregator::Lane {
  std::uint32_t lane = 0;
  bool finished = true;
  bool failing = false;
  ErrorCode fail_code = ErrorCode::ok;
  std::string fail_reason;
  std::uint64_t cursor = kInitialRound;
  std::uint32_t expecting = 0;
  std::vector<std::uint64_t> next;       // per worker: advertised next non-zero block
  std::vector<std::uint8_t> reported;    // per worker: window received in this round
  std::vector<std::uint8_t> joined;      // per worker: first window (or abort) received
  std::vector<std::uint16_t> staged_n;   // per worker: blocks staged
  std::vector<std::uint16_t> staged_head;// per worker: blocks already reduced
  std::vector<std::uint64_t> staged_idx; // per worker x fusion
  std::vector<std::byte> staged_data;    // per worker x fusion x full block bytes
  std::vector<const std::byte*> staged_src;  // where each staged block's bytes are: staged_data,
                                         // the user's send buffer (local worker) or, while the
                                         // message that completed the round is being handled, that message
  std::int32_t borrowed = -1;            // worker whose staged blocks point into the current message
  block_sparse::OpState* local_op = nullptr;   // co-located: results of this round were written to its recv
  // The round's outgoing message(s): indices then blocks, or a reason.
  std::vector<std::uint64_t> out_idx;
  std::vector<std::byte> out_data;
  std::uint32_t out_blocks = 0;
  std::uint64_t out_next = kEnd;
  bool out_is_error = false;
  WireHeader header{};
  WireHeader local_header{};             // the same chunk for the local worker: indices only
  // Send progress.
  bool sending = false;
  bool queued_for_retry = false;
  bool round_ready = false;
  std::uint32_t chunk = 0, chunks = 0, chunk_cap = 1, to_worker = 0;
};

struct Aggregator::Slot {
  bool used = false;
  bool active = false;
  std::uint32_t op_id = 0;
  bool has_params = false;
  proto::Geometry geometry;
  ReduceOp redop = ReduceOp::sum;
  std::uint32_t params_from = 0;
  std::uint32_t lanes_left = 0;
  block_sparse::Clock::time_point started;
  std::vector<Lane> lanes;  // one per lane served here
};

Aggregator::Aggregator(const AggregatorConfig& config, block_sparse::Outbox& outbox)
    : cfg_(config), outbox_(outbox), workers_(config.layout.workers) {
  const auto& L = cfg_.layout;
  local_index_.assign(L.lanes, -1);
  if (L.self_aggregates()) {
    for (std::uint32_t l = 0; l < L.lanes; ++l) {
      if (L.aggregator_of_lane(l) == L.self && L.thread_of_lane(l) == cfg_.thread_index) {
        local_index_[l] = static_cast<std::int32_t>(my_lanes_.size());
        my_lanes_.push_back(l);
      }
    }
  }
  const std::size_t staged = std::size_t{workers_} * cfg_.fusion;
  slots_.resize(std::size_t{2} * block_sparse::op_slot_count(cfg_.max_inflight));
  for (Slot& s : slots_) {
    s.lanes.resize(my_lanes_.size());
    for (std::size_t i = 0; i < my_lanes_.size(); ++i) {
      Lane& ln = s.lanes[i];
      ln.lane = my_lanes_[i];
      ln.next.assign(workers_, kEnd);
      ln.reported.assign(workers_, 0);
      ln.joined.assign(workers_, 0);
      ln.staged_n.assign(workers_, 0);
      ln.staged_head.assign(workers_, 0);
      ln.staged_idx.assign(staged, 0);
      ln.staged_src.assign(staged, nullptr);
      ln.out_idx.assign(staged, 0);
    }
  }
  retry_.reserve(slots_.size() * my_lanes_.size());
  retrying_.reserve(slots_.size() * my_lanes_.size());
  spare_buffers_.reserve(slots_.size() * my_lanes_.size());
  acc_.resize(cfg_.block_elems);
  acc64_.resize(cfg_.block_elems);
  iov_.resize(std::size_t{block_sparse::result_chunk_capacity(cfg_.block_elems, 2, cfg_.max_message)} + 2);
}

Aggregator::~Aggregator() = default;

Status Aggregator::violation(std::uint32_t sender, const proto::MessageView& m, const std::string& what) const {
  return Status(ErrorCode::protocol_error, cfg_.layout.name(sender) + " sent op " + std::to_string(m.header->op_id) +
                                               " lane " + std::to_string(m.header->lane) + " a message that " + what);
}

void Aggregator::init_slot(Slot& slot, std::uint32_t op_id) {
  slot.used = true;
  slot.active = true;
  slot.op_id = op_id;
  slot.has_params = false;
  slot.lanes_left = static_cast<std::uint32_t>(slot.lanes.size());
  slot.started = block_sparse::Clock::now();
  for (Lane& ln : slot.lanes) {
    ln.finished = false;
    ln.failing = false;
    ln.fail_code = ErrorCode::ok;
    ln.fail_reason.clear();
    ln.cursor = kInitialRound;
    ln.expecting = workers_;
    std::fill(ln.next.begin(), ln.next.end(), kEnd);
    std::fill(ln.reported.begin(), ln.reported.end(), 0);
    std::fill(ln.joined.begin(), ln.joined.end(), 0);
    std::fill(ln.staged_n.begin(), ln.staged_n.end(), 0);
    std::fill(ln.staged_head.begin(), ln.staged_head.end(), 0);
    ln.sending = false;
    ln.round_ready = false;
    ln.out_is_error = false;
    ln.borrowed = -1;
    ln.local_op = nullptr;
  }
}

Status Aggregator::on_message(const proto::MessageView& m) {
  const WireHeader& h = *m.header;
  const std::uint32_t w = h.sender;
  if (!cfg_.layout.is_worker(w)) return violation(w, m, "only workers may send (it is not a worker)");
  const std::int32_t li = h.lane < local_index_.size() ? local_index_[h.lane] : -1;
  if (li < 0) return violation(w, m, "names a lane this thread does not aggregate");

  Slot& slot = slots_[h.op_id % slots_.size()];
  if (slot.active && slot.op_id != h.op_id) {
    if (op_older(h.op_id, slot.op_id)) return Status();  // late message of a finished op: drop
    return violation(w, m, "arrived while op " + std::to_string(slot.op_id) +
                               " still runs in its slot (do all ranks issue collectives in the same order?)");
  }
  if (!slot.active) {
    if (slot.used && !op_older(slot.op_id, h.op_id)) return Status();  // stale: drop
    init_slot(slot, h.op_id);
  }
  Lane& lane = slot.lanes[static_cast<std::size_t>(li)];
  if (lane.finished) return Status();  // the lane failed or ended before this arrived
  return on_window(slot, lane, m);
}

// The block-sized buffers are most of an aggregator's memory: a lane has staging and results
// for fusion blocks of every worker. Made up front for every lane of every op slot they cost the
// configured lanes however few a job's tensors use (65536 lanes took 7 GB per rank for a 400 KB
// tensor). A lane takes them when it first stages a block from another process, sends results
// from its own buffer or an error (every lane sees a first window, most of them empty, in every
// op), and gives them back when it finishes: they grow once to the lanes in flight and are
// reused. (Kept per slot, each of the 2 x max_inflight slots faulted its own in: a fresh
// communicator's first 8 allreduces of 256 KiB took 0.3-2.5 ms instead of 0.07.)
void Aggregator::ensure_buffers(Lane& lane) {
  if (!lane.out_data.empty()) return;
  if (!spare_buffers_.empty()) {
    lane.staged_data.swap(spare_buffers_.back().first);
    lane.out_data.swap(spare_buffers_.back().second);
    spare_buffers_.pop_back();
    return;
  }
  const std::size_t bytes = std::size_t{workers_} * cfg_.fusion * cfg_.block_elems * 4;
  lane.staged_data.resize(bytes);
  lane.out_data.resize(std::max(bytes, std::size_t{proto::kMaxReasonBytes}));
}

Status Aggregator::on_window(Slot& slot, Lane& lane, const proto::MessageView& m) {
  const WireHeader& h = *m.header;
  const std::uint32_t w = h.sender;
  const bool initial = lane.cursor == kInitialRound;
  if (initial) {
    if (lane.joined[w]) return violation(w, m, "repeats its first window");
    lane.joined[w] = 1;
  } else if (lane.reported[w] || lane.next[w] != lane.cursor) {
    return violation(w, m, "was not asked for (its advertised next block is " + std::to_string(lane.next[w]) +
                               ", the round is at " + std::to_string(lane.cursor) + ")");
  }
  lane.reported[w] = 1;
  --lane.expecting;

  if (static_cast<MsgType>(h.type) == MsgType::abort) {
    if (!initial) return violation(w, m, "aborts after its first window");
    begin_failure(lane, static_cast<ErrorCode>(h.status),
                  cfg_.layout.name(w) + " aborted op " + std::to_string(h.op_id) + ": " +
                      std::string(m.reason, m.reason_len));
  } else if (!lane.failing) {
    Status s = stage(slot, lane, w, m);
    if (!s.ok()) return s;
  }
  if (lane.expecting > 0) return Status();
  if (lane.failing) {
    build_error(slot, lane);
    return start_sending(slot, lane);
  }
  Status s = try_emit(slot, lane);
  unborrow(slot, lane);  // the message goes away when we return
  return s;
}

// Copies the blocks that still point into the message being handled into the lane's staging.
void Aggregator::unborrow(Slot& slot, Lane& lane) {
  if (lane.borrowed < 0) return;
  const auto w = static_cast<std::uint32_t>(lane.borrowed);
  lane.borrowed = -1;
  const std::size_t full_block = std::size_t{cfg_.block_elems} * 4;
  for (std::uint32_t i = lane.staged_head[w]; i < lane.staged_n[w]; ++i) {
    const std::size_t at = std::size_t{w} * cfg_.fusion + i;
    std::byte* dst = lane.staged_data.data() + at * full_block;
    std::memcpy(dst, lane.staged_src[at], slot.geometry.block_bytes_at(lane.staged_idx[at]));
    lane.staged_src[at] = dst;
  }
}

Status Aggregator::stage(Slot& slot, Lane& lane, std::uint32_t w, const proto::MessageView& m) {
  const WireHeader& h = *m.header;
  const proto::Geometry& g = m.geometry;
  // Every worker must describe the same tensor and this process's configuration.
  if (g.block_elems != cfg_.block_elems || g.num_lanes != cfg_.layout.lanes) {
    begin_failure(lane, ErrorCode::mismatch,
                  cfg_.layout.name(w) + " uses block_elems=" + std::to_string(g.block_elems) + " lanes=" +
                      std::to_string(g.num_lanes) + ", " + cfg_.layout.name(cfg_.layout.self) + " uses block_elems=" +
                      std::to_string(cfg_.block_elems) + " lanes=" + std::to_string(cfg_.layout.lanes));
    return Status();
  }
  if (!slot.has_params) {
    slot.has_params = true;
    slot.geometry = g;
    slot.redop = static_cast<ReduceOp>(h.redop);
    slot.params_from = w;
  } else if (g.count != slot.geometry.count || g.dtype != slot.geometry.dtype ||
             static_cast<ReduceOp>(h.redop) != slot.redop) {
    auto describe = [](std::uint64_t count, DataType dt, ReduceOp op) {
      return std::to_string(count) + " x " + std::string(dtype_name(dt)) + " " + std::string(reduce_op_name(op));
    };
    begin_failure(lane, ErrorCode::mismatch,
                  "op " + std::to_string(h.op_id) + ": " + cfg_.layout.name(slot.params_from) + " passed " +
                      describe(slot.geometry.count, slot.geometry.dtype, slot.redop) + ", " + cfg_.layout.name(w) +
                      " passed " + describe(g.count, g.dtype, static_cast<ReduceOp>(h.redop)));
    return Status();
  }
  if (lane.staged_head[w] != lane.staged_n[w]) return violation(w, m, "arrived before its previous blocks were reduced");
  if (h.nblocks > cfg_.fusion) return violation(w, m, "carries more blocks than the window capacity");
  if (lane.cursor != kInitialRound && (h.nblocks == 0 || m.indices[0] != lane.cursor))
    return violation(w, m, "does not start at the block it advertised");
  if (h.next_index != kEnd && h.nblocks == 0) return violation(w, m, "is empty but advertises a next block");

  const std::size_t full_block = std::size_t{cfg_.block_elems} * 4;
  // Blocks of our own worker are read where they are; the message that completes the round is
  // reduced in place (whatever it leaves over is copied by unborrow()); others are staged.
  const bool local = h.flags & proto::kFlagLocalData;
  const block_sparse::OpState* local_op = nullptr;
  if (local) {
    local_op = cfg_.find_local_op ? cfg_.find_local_op(cfg_.find_local_context, h.op_id) : nullptr;
    if (local_op == nullptr) return violation(w, m, "points at local blocks of an op this process does not run");
  }
  const bool completes = lane.expecting == 0 && !lane.sending;
  if (!local && h.nblocks > 0) ensure_buffers(lane);
  const std::byte* src = m.blocks;
  for (std::uint32_t i = 0; i < h.nblocks; ++i) {
    const std::uint64_t b = m.indices[i];
    const std::size_t at = std::size_t{w} * cfg_.fusion + i;
    lane.staged_idx[at] = b;
    if (local) {
      lane.staged_src[at] = local_op->send + b * g.full_block_bytes();
      continue;
    }
    const std::size_t bytes = g.block_bytes_at(b);
    if (completes) {
      lane.staged_src[at] = src;
    } else {
      std::memcpy(lane.staged_data.data() + at * full_block, src, bytes);
      lane.staged_src[at] = lane.staged_data.data() + at * full_block;
    }
    src += bytes;
  }
  if (completes && !local && h.nblocks > 0) lane.borrowed = static_cast<std::int32_t>(w);
  lane.staged_n[w] = h.nblocks;
  lane.staged_head[w] = 0;
  lane.next[w] = h.next_index;
  return Status();
}

void Aggregator::begin_failure(Lane& lane, ErrorCode code, std::string reason) {
  if (lane.failing) return;
  lane.failing = true;
  lane.fail_code = code;
  lane.fail_reason = std::move(reason);
}

Status Aggregator::try_emit(Slot& slot, Lane& lane) {
  if (lane.sending) {
    lane.round_ready = true;  // emitted when the previous round's sends are out
    return Status();
  }
  std::uint64_t m = kEnd;
  for (std::uint32_t w = 0; w < workers_; ++w) m = std::min(m, lane.next[w]);
  reduce_round(slot, lane, m);
  lane.out_next = m;
  if (m != kEnd) {
    lane.cursor = m;
    lane.expecting = 0;
    for (std::uint32_t w = 0; w < workers_; ++w) {
      lane.reported[w] = 0;
      if (lane.next[w] == m) ++lane.expecting;
    }
  }
  return start_sending(slot, lane);
}

// Reduces every staged block below `limit`, in block order, each over workers in rank order.
void Aggregator::reduce_round(Slot& slot, Lane& lane, std::uint64_t limit) {
  const proto::Geometry& g = slot.geometry;
  const DataType dt = g.dtype;
  const ReduceOp op = slot.redop;
  const bool zero_matters = !zero_is_neutral(op);  // min, max, product, band
  const bool wide_avg = dt == DataType::i32 && op == ReduceOp::avg;  // exact: block/reduce.hpp
  const std::size_t full_out = g.full_block_bytes();
  // Co-located: write the results straight into our own worker's output; the other workers'
  // copies are sent from there.
  lane.local_op = cfg_.find_local_op ? cfg_.find_local_op(cfg_.find_local_context, slot.op_id) : nullptr;
  if (lane.local_op == nullptr) ensure_buffers(lane);
  std::uint32_t n = 0;
  for (;;) {
    std::uint64_t b = kEnd;  // smallest staged block still pending, across workers
    for (std::uint32_t w = 0; w < workers_; ++w)
      if (lane.staged_head[w] < lane.staged_n[w])
        b = std::min(b, lane.staged_idx[std::size_t{w} * cfg_.fusion + lane.staged_head[w]]);
    if (b >= limit) break;
    const std::size_t elems = g.block_elems_at(b);
    bool first = true;
    for (std::uint32_t w = 0; w < workers_; ++w) {
      const std::size_t at = std::size_t{w} * cfg_.fusion + lane.staged_head[w];
      if (lane.staged_head[w] < lane.staged_n[w] && lane.staged_idx[at] == b) {
        const std::byte* src = lane.staged_src[at];
        if (wide_avg)
          (first ? block::i32_avg_load : block::i32_avg_add)(reinterpret_cast<const std::int32_t*>(src), acc64_.data(),
                                                              elems);
        else if (first)
          block::acc_load(dt, src, acc_.data(), elems);
        else
          block::acc_reduce(dt, op, src, acc_.data(), elems);
        first = false;
        ++lane.staged_head[w];
      } else if (zero_matters) {
        if (first)
          block::acc_zero(dt, acc_.data(), elems);
        else
          block::acc_reduce_zero(dt, op, acc_.data(), elems);
        first = false;
      }
    }
    lane.out_idx[n] = b;
    std::byte* out = lane.local_op ? lane.local_op->recv + b * full_out : lane.out_data.data() + std::size_t{n} * full_out;
    if (wide_avg)
      block::i32_avg_store(acc64_.data(), elems, workers_, reinterpret_cast<std::int32_t*>(out));
    else
      block::acc_store(dt, op, acc_.data(), elems, workers_, out);
    ++n;
  }
  lane.out_blocks = n;
  lane.out_is_error = false;
}

void Aggregator::build_error(Slot& slot, Lane& lane) {
  ensure_buffers(lane);
  const std::size_t len = std::min<std::size_t>(lane.fail_reason.size(), proto::kMaxReasonBytes);
  std::memcpy(lane.out_data.data(), lane.fail_reason.data(), len);
  lane.out_blocks = 0;
  lane.out_next = kEnd;
  lane.out_is_error = true;
  lane.header = proto::make_header(MsgType::error, slot.has_params ? slot.geometry : proto::Geometry{},
                                   slot.redop, cfg_.job_epoch, slot.op_id, lane.lane, cfg_.layout.self);
  lane.header.status = static_cast<std::uint32_t>(lane.fail_code);
  lane.header.payload_len = static_cast<std::uint32_t>(len);
  lane.header.num_lanes = cfg_.layout.lanes;
  lane.header.block_elems = cfg_.block_elems;
}

Status Aggregator::start_sending(Slot& slot, Lane& lane) {
  lane.sending = true;
  lane.chunk = 0;
  lane.to_worker = 0;
  if (lane.out_is_error) {
    lane.chunks = 1;
  } else {
    lane.chunk_cap = block_sparse::result_chunk_capacity(cfg_.block_elems, slot.geometry.elem_size(), cfg_.max_message);
    lane.chunks = std::max<std::uint32_t>(1, (lane.out_blocks + lane.chunk_cap - 1) / lane.chunk_cap);
  }
  return pump(slot, lane);
}

// Sends the round's message(s) to every worker, resuming where back-pressure stopped it.
Status Aggregator::pump(Slot& slot, Lane& lane) {
  const proto::Geometry& g = slot.geometry;
  struct iovec* iov = iov_.data();
  while (lane.chunk < lane.chunks) {
    int iovcnt = 0;
    int local_iovcnt = 0;
    if (lane.out_is_error) {
      iov[0] = {&lane.header, sizeof(WireHeader)};
      iov[1] = {lane.out_data.data(), lane.header.payload_len};
      iovcnt = 2;
    } else {
      const std::uint32_t first = lane.chunk * lane.chunk_cap;
      const std::uint32_t n = std::min(lane.chunk_cap, lane.out_blocks - first);
      if (lane.to_worker == 0) {
        lane.header = proto::make_header(MsgType::result, g, slot.redop, cfg_.job_epoch, slot.op_id, lane.lane,
                                         cfg_.layout.self);
        lane.header.nblocks = static_cast<std::uint16_t>(n);
        lane.header.payload_len = static_cast<std::uint32_t>(proto::payload_bytes(g, &lane.out_idx[first], n));
        if (lane.chunk + 1 == lane.chunks) {
          lane.header.flags = proto::kFlagFinal;
          lane.header.next_index = lane.out_next;
        }
        lane.local_header = lane.header;
        lane.local_header.flags |= proto::kFlagLocalData;
        lane.local_header.payload_len = n * 8;
      }
      iov[0] = {&lane.header, sizeof(WireHeader)};
      iov[1] = {&lane.out_idx[first], std::size_t{n} * 8};
      iovcnt = 2;
      if (lane.local_op != nullptr) {
        // The blocks sit in our worker's output, one lane stride apart.
        const std::size_t full = g.full_block_bytes();
        for (std::uint32_t i = 0; i < n; ++i) {
          const std::uint64_t b = lane.out_idx[first + i];
          iov[iovcnt++] = {lane.local_op->recv + b * full, g.block_bytes_at(b)};
        }
        local_iovcnt = 2;
      } else {
        const std::size_t data_bytes = lane.header.payload_len - std::size_t{n} * 8;
        iov[iovcnt++] = {lane.out_data.data() + std::size_t{first} * g.full_block_bytes(), data_bytes};
      }
    }
    while (lane.to_worker < workers_) {
      // Co-located: our own worker comes last. Its final result completes its op, and then the
      // caller owns the output again, which the other workers' copies are sent from.
      const std::uint32_t w = local_iovcnt != 0 ? (cfg_.layout.self + 1 + lane.to_worker) % workers_ : lane.to_worker;
      if (lane.out_is_error && !lane.joined[w]) {  // never tell a worker about an op it has not started
        ++lane.to_worker;
        continue;
      }
      transport::SendResult r;
      if (local_iovcnt != 0 && w == cfg_.layout.self) {
        struct iovec local[2] = {{&lane.local_header, sizeof(WireHeader)}, iov[1]};
        r = outbox_.send(w, local, local_iovcnt);
      } else {
        r = outbox_.send(w, iov, iovcnt);
      }
      if (r == transport::SendResult::no_resource) {
        if (!lane.queued_for_retry) {
          lane.queued_for_retry = true;
          retry_.push_back({&slot, &lane});
        }
        return Status();
      }
      if (r == transport::SendResult::error) return outbox_.error();
      ++lane.to_worker;
    }
    lane.to_worker = 0;
    ++lane.chunk;
  }
  lane.sending = false;
  if (lane.out_is_error || lane.out_next == kEnd) {
    finish_lane(slot, lane);
    return Status();
  }
  if (lane.round_ready) {
    lane.round_ready = false;
    return try_emit(slot, lane);
  }
  return Status();
}

void Aggregator::finish_lane(Slot& slot, Lane& lane) {
  lane.finished = true;
  // Its sends are done (channels copy what they accept) and init_slot resets what pointed into
  // the staging: the buffers go to the next lane. The reserve made room for every lane.
  if (!lane.out_data.empty()) spare_buffers_.emplace_back(std::move(lane.staged_data), std::move(lane.out_data));
  if (--slot.lanes_left == 0) slot.active = false;
}

Status Aggregator::retry_sends() {
  if (retry_.empty()) return Status();
  // Lanes still blocked re-queue themselves into retry_ while we walk the previous list.
  retrying_.swap(retry_);
  for (const Pending& p : retrying_) p.lane->queued_for_retry = false;
  for (const Pending& p : retrying_) {
    if (!p.lane->sending || p.lane->queued_for_retry) continue;
    Status s = pump(*p.slot, *p.lane);
    if (!s.ok()) {
      retrying_.clear();
      return s;
    }
  }
  retrying_.clear();
  return Status();
}

Status Aggregator::check_deadlines(block_sparse::Clock::time_point now) {
  // Aggregators give up a little before workers do, so workers receive the precise reason
  // ("waits for rank 2") rather than their own bare timeout.
  const auto limit = std::chrono::milliseconds(std::uint64_t{cfg_.deadline_ms} * 9 / 10);
  for (Slot& slot : slots_) {
    if (!slot.active || now - slot.started < limit) continue;
    bool logged = false;  // one line per op, not one per lane
    for (Lane& lane : slot.lanes) {
      if (lane.finished || lane.sending) continue;
      std::string missing;
      std::uint32_t count = 0;
      for (std::uint32_t w = 0; w < workers_; ++w) {
        const bool awaited = lane.cursor == kInitialRound ? !lane.joined[w] : (lane.next[w] == lane.cursor && !lane.reported[w]);
        if (!awaited) continue;
        if (count++ < 4) missing += (missing.empty() ? "" : ", ") + cfg_.layout.name(w);
      }
      if (count > 4) missing += " and " + std::to_string(count - 4) + " more";
      begin_failure(lane, ErrorCode::timeout,
                    "op " + std::to_string(slot.op_id) + " lane " + std::to_string(lane.lane) + ": " +
                        cfg_.layout.name(cfg_.layout.self) + " waited " + std::to_string(cfg_.deadline_ms * 9 / 10) +
                        " ms for " + (missing.empty() ? std::string("nobody (internal error)") : missing) +
                        (lane.cursor == kInitialRound ? " to start the op" : " (block " + std::to_string(lane.cursor) + ")"));
      if (!logged) SC_LOG_WARN("%s", lane.fail_reason.c_str());
      logged = true;
      build_error(slot, lane);
      Status s = start_sending(slot, lane);
      if (!s.ok()) return s;
    }
  }
  return Status();
}

void Aggregator::fail_all(const Status& reason) {
  for (Slot& slot : slots_) {
    if (!slot.active) continue;
    for (Lane& lane : slot.lanes) {
      if (lane.finished) continue;
      lane.failing = false;
      begin_failure(lane, reason.code(), reason.message());
      build_error(slot, lane);
      // Best effort: the channel may be down; the lane is finished either way.
      (void)start_sending(slot, lane);
      if (!lane.finished) finish_lane(slot, lane);
    }
  }
  retry_.clear();
}

}  // namespace sparcoll::block_sparse
