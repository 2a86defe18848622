#include "block_sparse/block_sparse_worker.hpp"

#include <cstring>

#include "block/bitmap.hpp"

namespace sparcoll::block_sparse {

using proto::kEnd;
using proto::MsgType;
using proto::WireHeader;

BlockSparseWorker::BlockSparseWorker(const WorkerConfig& config, block_sparse::Outbox& outbox)
    : cfg_(config), outbox_(outbox) {
  if (cfg_.layout.self_is_worker()) {
    for (std::uint32_t l = 0; l < cfg_.layout.lanes; ++l)
      if (cfg_.layout.thread_of_lane(l) == cfg_.thread_index) my_lanes_.push_back(l);
  }
  iov_.resize(std::size_t{cfg_.fusion} + 1);
  retry_.reserve(my_lanes_.size() * 64);
  retrying_.reserve(my_lanes_.size() * 64);
}

Status BlockSparseWorker::violation(const proto::MessageView& m, const std::string& what) const {
  return Status(ErrorCode::protocol_error, cfg_.layout.name(m.header->sender) + " sent op " +
                                               std::to_string(m.header->op_id) + " lane " +
                                               std::to_string(m.header->lane) + " a result that " + what);
}

Status BlockSparseWorker::start(block_sparse::OpState& op) {
  for (std::uint32_t l : my_lanes_) {
    block_sparse::WorkerLane& lane = op.lanes[l];
    lane.lane = l;
    lane.done = false;
    lane.started = true;
    lane.send_pending = false;
    lane.filled_until = l;
    lane.advertised_next = l;
    Status s = send_window(op, lane, true);
    if (!s.ok()) return s;
  }
  return Status();
}

// Builds the lane's next window (or the abort) in its scratch, then transmits it.
Status BlockSparseWorker::send_window(block_sparse::OpState& op, block_sparse::WorkerLane& lane, bool first) {
  std::byte* scratch = op.scratch.data() + std::size_t{lane.lane} * scratch_per_lane(cfg_.fusion);
  auto* h = reinterpret_cast<WireHeader*>(scratch);
  if (op.abort) {
    *h = proto::make_header(MsgType::abort, op.geometry, op.redop, cfg_.job_epoch, op.op_id, lane.lane, cfg_.layout.self);
    h->count = 0;  // the caller's count may be what was invalid; aborts carry no tensor
    h->status = static_cast<std::uint32_t>(op.abort_code);
    h->payload_len = static_cast<std::uint32_t>(std::min<std::size_t>(op.abort_reason.size(), proto::kMaxReasonBytes));
    lane.window_blocks = 0;
    return transmit(op, lane);
  }
  auto* idx = reinterpret_cast<std::uint64_t*>(scratch + sizeof(WireHeader));
  const std::uint64_t nblocks = op.geometry.nblocks();
  const std::uint64_t stride = cfg_.layout.lanes;
  const std::uint64_t* bits = op.bitmap.data();
  // The first window starts at the lane's first block; later ones at the advertised block,
  // which the worker knows is non-zero.
  std::uint64_t b = first ? block::next_in_lane(bits, lane.lane, stride, nblocks) : lane.advertised_next;
  std::uint16_t n = 0;
  while (n < cfg_.fusion && b < nblocks) {
    idx[n++] = b;
    b = block::next_in_lane(bits, b + stride, stride, nblocks);
  }
  *h = proto::make_header(MsgType::window, op.geometry, op.redop, cfg_.job_epoch, op.op_id, lane.lane, cfg_.layout.self);
  h->nblocks = n;
  h->next_index = b < nblocks ? b : kEnd;
  if (cfg_.layout.aggregator_of_lane(lane.lane) == cfg_.layout.self) {
    // Our own aggregator reads the blocks straight from op.send: send the indices only.
    h->flags = proto::kFlagLocalData;
    h->payload_len = static_cast<std::uint32_t>(8 * std::size_t{n});
  } else {
    h->payload_len = static_cast<std::uint32_t>(proto::payload_bytes(op.geometry, idx, n));
  }
  lane.advertised_next = h->next_index;
  lane.window_blocks = n;
  return transmit(op, lane);
}

Status BlockSparseWorker::transmit(block_sparse::OpState& op, block_sparse::WorkerLane& lane) {
  std::byte* scratch = op.scratch.data() + std::size_t{lane.lane} * scratch_per_lane(cfg_.fusion);
  const auto* h = reinterpret_cast<const WireHeader*>(scratch);
  int iovcnt = 0;
  if (op.abort) {
    iov_[0] = {scratch, sizeof(WireHeader)};
    iov_[1] = {const_cast<char*>(op.abort_reason.data()), h->payload_len};
    iovcnt = 2;
  } else {
    const auto* idx = reinterpret_cast<const std::uint64_t*>(scratch + sizeof(WireHeader));
    iov_[0] = {scratch, sizeof(WireHeader) + 8 * std::size_t{h->nblocks}};
    iovcnt = 1;
    const std::size_t full = op.geometry.full_block_bytes();
    if (!(h->flags & proto::kFlagLocalData))
      for (std::uint16_t i = 0; i < h->nblocks; ++i)
        iov_[iovcnt++] = {const_cast<std::byte*>(op.send) + idx[i] * full, op.geometry.block_bytes_at(idx[i])};
  }
  const std::uint32_t aggregator = cfg_.layout.aggregator_of_lane(lane.lane);
  const transport::SendResult r = outbox_.send(aggregator, iov_.data(), iovcnt, op.user_memory);
  if (r == transport::SendResult::no_resource) {
    if (!lane.send_pending) {
      lane.send_pending = true;
      retry_.push_back({&op, &lane});
    }
    return Status();
  }
  if (r == transport::SendResult::error) return outbox_.error();
  lane.send_pending = false;
  OpStats& st = op.thread_stats[cfg_.thread_index];
  st.bytes_sent += sizeof(WireHeader) + h->payload_len;
  st.blocks_sent += h->nblocks;
  return Status();
}

Status BlockSparseWorker::retry_sends() {
  if (retry_.empty()) return Status();
  retrying_.swap(retry_);
  for (const Pending& p : retrying_) p.lane->send_pending = false;
  for (const Pending& p : retrying_) {
    if (p.lane->done || p.lane->send_pending) continue;
    Status s = transmit(*p.op, *p.lane);
    if (!s.ok()) {
      retrying_.clear();
      return s;
    }
  }
  retrying_.clear();
  return Status();
}

void BlockSparseWorker::zero_fill(block_sparse::OpState& op, block_sparse::WorkerLane& lane, std::uint64_t until) {
  if (op.in_place) return;  // blocks no worker sent are zero here already
  const std::uint64_t stride = cfg_.layout.lanes;
  const std::size_t full = op.geometry.full_block_bytes();
  for (std::uint64_t b = lane.filled_until; b < until; b += stride)
    if (!op.in_dense_stripe(b)) std::memset(op.recv + b * full, 0, op.geometry.block_bytes_at(b));
}

void BlockSparseWorker::finish_lane(block_sparse::OpState& op, block_sparse::WorkerLane& lane) {
  if (lane.done) return;
  lane.done = true;
  --op.thread_lanes_left[cfg_.thread_index];
}

Status BlockSparseWorker::on_message(block_sparse::OpState& op, const proto::MessageView& m) {
  const WireHeader& h = *m.header;
  if (h.lane >= op.lanes.size() || cfg_.layout.thread_of_lane(h.lane) != cfg_.thread_index)
    return violation(m, "names a lane this thread does not run");
  block_sparse::WorkerLane& lane = op.lanes[h.lane];
  if (h.sender != cfg_.layout.aggregator_of_lane(h.lane)) return violation(m, "comes from the wrong aggregator");
  if (lane.done) return violation(m, "arrived after the lane ended");

  if (static_cast<MsgType>(h.type) == MsgType::error) {
    const auto code = static_cast<ErrorCode>(h.status);
    op.fail(Status(code == ErrorCode::ok ? ErrorCode::peer_failure : code, std::string(m.reason, m.reason_len)));
    finish_lane(op, lane);
    return Status();
  }
  if (static_cast<MsgType>(h.type) != MsgType::result) return violation(m, "has a worker-only message type");
  const proto::Geometry& g = m.geometry;
  if (g.count != op.geometry.count || g.dtype != op.geometry.dtype || g.block_elems != op.geometry.block_elems ||
      g.num_lanes != cfg_.layout.lanes || static_cast<ReduceOp>(h.redop) != op.redop)
    return violation(m, "describes another tensor");

  const std::size_t full = g.full_block_bytes();
  // A co-located aggregator has already written the reduced blocks into op.recv.
  const bool placed = h.flags & proto::kFlagLocalData;
  const std::byte* src = m.blocks;
  for (std::uint32_t i = 0; i < h.nblocks; ++i) {
    const std::uint64_t b = m.indices[i];
    if (b < lane.filled_until) return violation(m, "repeats or reorders block " + std::to_string(b));
    zero_fill(op, lane, b);
    const std::size_t bytes = g.block_bytes_at(b);
    if (!placed) {
      std::memcpy(op.recv + b * full, src, bytes);
      src += bytes;
    }
    lane.filled_until = b + cfg_.layout.lanes;
  }
  if (op.counted_stripe_blocks != 0) {
    std::uint32_t* counts = op.stripe_results.data() + std::size_t{cfg_.thread_index} * op.counted_stripes;
    for (std::uint32_t i = 0; i < h.nblocks; ++i) ++counts[m.indices[i] / op.counted_stripe_blocks];
  }
  OpStats& st = op.thread_stats[cfg_.thread_index];
  st.bytes_received += sizeof(WireHeader) + h.payload_len;
  st.blocks_received += h.nblocks;
  if (!(h.flags & proto::kFlagFinal)) return Status();

  const std::uint64_t next = h.next_index;
  if (next == kEnd) {
    if (lane.advertised_next != kEnd) return violation(m, "ends the lane before this worker's block " + std::to_string(lane.advertised_next));
    zero_fill(op, lane, g.nblocks());
    finish_lane(op, lane);
    return Status();
  }
  if (next > lane.advertised_next) return violation(m, "skips this worker's block " + std::to_string(lane.advertised_next));
  if (next == lane.advertised_next) return send_window(op, lane, false);
  return Status();
}

void BlockSparseWorker::fail_lanes(block_sparse::OpState& op, const Status& reason) {
  op.fail(reason);
  for (std::uint32_t l : my_lanes_) finish_lane(op, op.lanes[l]);
}

std::string BlockSparseWorker::describe_wait(const block_sparse::OpState& op) const {
  std::uint32_t open = 0;
  std::string first;
  for (std::uint32_t l : my_lanes_) {
    const block_sparse::WorkerLane& lane = op.lanes[l];
    if (lane.done) continue;
    if (open++ == 0)
      first = "lane " + std::to_string(l) + " waits for " + cfg_.layout.name(cfg_.layout.aggregator_of_lane(l)) +
              (lane.advertised_next == kEnd ? std::string(" (this worker has sent all its blocks)")
                                            : " (this worker's next block " + std::to_string(lane.advertised_next) + ")");
  }
  if (open == 0) return std::string();
  return std::to_string(open) + " lane(s) unfinished; " + first;
}

}  // namespace sparcoll::block_sparse
