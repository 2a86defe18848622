// A single-threaded, transport-free simulator of a whole sparcoll job, for protocol tests.
//
// Every process of the job (W workers, then M dedicated aggregators; M == 0 is co-located mode)
// gets what one progress thread (progress thread 0, threads = 1) has in the engine: an block_sparse::SelfChannel,
// an in-memory transport::Channel (SimChannel), an block_sparse::Outbox, an block_sparse::Aggregator and an
// block_sparse::BlockSparseWorker. OpStates are prepared the way CommunicatorImpl::iallreduce and
// Engine::submit prepare them. The driver loop (run()) delivers messages in a seeded random
// interleaving over the (src, dst) queues and the loopbacks (each queue stays FIFO, as the
// drivers promise), starts submitted ops at random moments, decodes every message with
// proto::decode and routes it like ProgressThread::dispatch does, and calls retry_sends on every
// process each round. Everything the tests want to check afterwards is recorded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "block_sparse/aggregator.hpp"
#include "block_sparse/block_sparse_worker.hpp"
#include "block_sparse/layout.hpp"
#include "block_sparse/op_state.hpp"
#include "block_sparse/outbox.hpp"
#include "block_sparse/self_channel.hpp"
#include "proto/wire.hpp"
#include "transport/driver.hpp"

namespace sparcoll::testing {

struct SimConfig {
  std::uint32_t workers = 2;
  std::uint32_t dedicated = 0;       // 0: co-located
  std::uint32_t lanes = 1;
  std::uint32_t fusion = 8;          // Options::fusion; the window capacity is block_sparse::window_capacity(...)
  std::uint32_t block_elems = 4;
  std::uint32_t max_message = 65536;
  std::uint32_t max_inflight = 4;
  std::uint32_t job_epoch = 7;
  std::uint64_t seed = 1;            // delivery interleaving
  std::size_t queue_capacity = 0;    // messages per (src, dst) queue; 0 = unbounded
  double refuse_probability = 0.0;   // extra random no_resource answers from send()
  std::size_t loopback_bytes = std::size_t{64} << 20;
  int slow_process = -1;             // deliveries to this process are picked with slow_probability
  double slow_probability = 1.0;
  bool start_immediately = false;
  bool reuse_buffers_on_finish = false;  // scribble over send/recv as soon as an op finishes on a worker    // start submitted ops at once instead of at random moments
  std::size_t max_steps = 5'000'000; // livelock guard
};

// One message as it was dispatched (for the checks).
struct SimRecord {
  std::uint32_t src = 0, dst = 0;
  proto::MsgType type = proto::MsgType::window;
  std::uint32_t op_id = 0, lane = 0;
  std::vector<std::uint64_t> indices;
  std::uint64_t next = proto::kEnd;
  bool final = false;
};

class SimNetwork;

// In-memory Channel of one process: per (src, dst) FIFO queues live in the SimNetwork; poll()
// returns the messages the driver loop moved into this channel's arrival list, valid until the
// next poll().
class SimChannel final : public transport::Channel {
 public:
  SimChannel(SimNetwork& net, std::uint32_t self) : net_(net), self_(self) {}
  std::uint32_t max_message() const override;
  transport::SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt) override;
  int poll(transport::ReceivedMessage* out, int max) override;
  bool flushed() override { return true; }
  const Status& error() const override { return error_; }

  struct Msg {
    std::vector<std::uint64_t> words;  // 8-byte aligned storage
    std::uint32_t size = 0;
    std::uint32_t src = 0;
  };
  std::deque<Msg> arrived;  // filled by the driver loop

 private:
  SimNetwork& net_;
  std::uint32_t self_;
  std::vector<Msg> current_;  // the batch handed out by the last poll()
  Status error_;
};

class SimNetwork {
 public:
  SimNetwork(std::uint32_t nprocs, const SimConfig& cfg, std::mt19937_64* rng)
      : nprocs_(nprocs), cfg_(cfg), rng_(rng), queues_(std::size_t{nprocs} * nprocs) {}
  std::deque<SimChannel::Msg>& queue(std::uint32_t src, std::uint32_t dst) { return queues_[std::size_t{src} * nprocs_ + dst]; }
  std::uint32_t nprocs() const { return nprocs_; }
  const SimConfig& config() const { return cfg_; }
  bool refuse();  // random back-pressure
  std::uint64_t refused = 0;

 private:
  std::uint32_t nprocs_;
  const SimConfig& cfg_;
  std::mt19937_64* rng_;
  std::vector<std::deque<SimChannel::Msg>> queues_;
};

// What a worker passes to one allreduce.
struct OpInput {
  std::uint32_t op_id = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  std::string abort_reason;  // non-empty: the worker's arguments were invalid (OpState::abort)
};

class JobSimulator {
 public:
  explicit JobSimulator(const SimConfig& cfg);
  ~JobSimulator();

  const SimConfig& config() const { return cfg_; }
  std::uint32_t processes() const { return cfg_.workers + cfg_.dedicated; }
  std::uint32_t window_capacity() const { return window_capacity_; }
  block_sparse::JobLayout layout(std::uint32_t self) const;

  // Prepares an op on worker `w` like iallreduce + Engine::submit. It starts when run() decides
  // (or now, with start_immediately). Ops of one worker start in submission order, and (as
  // iallreduce waits for the op slot op_id % max_inflight) only when no unfinished op of that
  // worker has the same slot.
  block_sparse::OpState& submit(std::uint32_t w, const OpInput& in);
  // Delivers until nothing is in flight and no send is pending. False if max_steps was hit, if
  // an op can never start, or at the first violation (see `violations`).
  bool run();

  // The OpState of (worker, op_id) (the most recent one with that id).
  block_sparse::OpState& op(std::uint32_t w, std::uint32_t op_id);
  bool finished(std::uint32_t w, std::uint32_t op_id) const;
  Status status(std::uint32_t w, std::uint32_t op_id);  // the op's error, or ok
  // The op's recv bytes at the moment it finished (before reuse_buffers_on_finish scribbled).
  const std::vector<std::byte>& output(std::uint32_t w, std::uint32_t op_id) const;

  block_sparse::Aggregator& aggregator(std::uint32_t p);
  block_sparse::BlockSparseWorker& worker(std::uint32_t p);

  // Non-ok statuses returned by on_message/retry_sends/start, or decode failures, as text.
  std::vector<std::string> violations;
  // Every dispatched message.
  std::vector<SimRecord> records;
  std::uint64_t steps = 0;
  std::uint64_t refused() const { return net_.refused; }
  std::uint64_t loopback_messages = 0, network_messages = 0;

 private:
  struct Proc;
  struct SimOp {
    std::unique_ptr<block_sparse::OpState> state;
    bool started = false;
    bool finished = false;
    std::vector<std::byte> output;  // recv as it was when the op finished
  };

  void start(std::uint32_t w, SimOp& op);
  void dispatch(std::uint32_t p, const transport::ReceivedMessage& msg);
  void maybe_finish(std::uint32_t w, SimOp& op);
  SimOp* find_active(std::uint32_t w, std::uint32_t op_id);
  bool slot_free(std::uint32_t w, std::uint32_t op_id) const;
  static block_sparse::OpState* find_local_op(void* context, std::uint32_t op_id);
  void note(std::uint32_t p, const Status& s);

  SimConfig cfg_;
  std::uint32_t window_capacity_ = 1;
  std::mt19937_64 rng_;
  SimNetwork net_;
  std::vector<std::unique_ptr<Proc>> procs_;
};

// A message built by a test: 8-byte aligned storage of exactly `size` meaningful bytes.
struct RawMessage {
  std::vector<std::uint64_t> words;
  std::size_t size = 0;
  const std::byte* data() const { return reinterpret_cast<const std::byte*>(words.data()); }
  std::byte* data() { return reinterpret_cast<std::byte*>(words.data()); }
  proto::WireHeader& header() { return *reinterpret_cast<proto::WireHeader*>(words.data()); }
};

// Builds a window/result message: header (nblocks and payload_len filled in) + indices + the
// blocks' bytes (`data`, back to back, `data_bytes` long; zeros when null).
RawMessage build_message(proto::WireHeader h, const std::vector<std::uint64_t>& indices, const void* data,
                         std::size_t data_bytes);
// Builds an error/abort message with `reason` as payload.
RawMessage build_reason_message(proto::WireHeader h, const std::string& reason);

}  // namespace sparcoll::testing
