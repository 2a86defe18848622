// The shm driver: setup through the setup exchange, then one ShmChannel per channel.
//
// Setup, per process (topics of the setup exchange in quotes):
//   1. check that every peer runs on this host and that the ring size fits max_message;
//   2. create our segment with one inbound ring per (peer, channel), publish its name as
//      "segment";
//   3. map every peer's segment, then tell that peer so ("mapped", for it alone);
//   4. wait until every peer has mapped ours, then unlink our name: from then on the memory
//      lives only as long as the mappings, so a crash leaves no file in /dev/shm.
// A process killed between 2 and 4 cannot remove its name. So: when setup fails, a survivor
// removes every peer's name it learned (the job is over); before creating its own segment, a
// process removes this user's segments whose owner is gone (and older than a minute); and
// sparcoll-run removes its children's when they are gone (remove_segments_of).
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "shm_channel.hpp"
#include "shm_liveness.hpp"
#include "shm_peer_memory.hpp"
#include "shm_segment.hpp"
#include "common/log.hpp"
#include "transport/driver.hpp"
#include "transport/driver_descriptor.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport {
namespace shm {
namespace {

// A segment whose owner is gone is removed by the next process of this user that sets up, once
// it is this old: the age keeps the segments of a live job in another pid namespace (sharing
// /dev/shm) safe while it sets up.
constexpr int kStaleSegmentAgeS = 60;

class ShmDriver final : public Driver {
 public:
  ~ShmDriver() override {
    // Tell every peer (they poll our header) before anything is unmapped.
    if (own_.header() != nullptr) own_.header()->closed.store(1, std::memory_order_release);
  }

  std::string_view name() const override { return "shm"; }
  Channel& channel(std::uint32_t index) override { return *channels_[index]; }

  Status setup(const DriverContext& ctx);

 private:
  Status create_own_segment(const DriverContext& ctx, std::uint64_t ring_bytes);
  Status map_peer_segments(const DriverContext& ctx, const SetupDeadline& deadline);
  Status wait_until_mapped(const DriverContext& ctx, const SetupDeadline& deadline);
  void build_channels(const DriverContext& ctx);

  Segment own_;
  std::vector<Segment> peer_segments_;  // by position in ctx.peers
  std::vector<std::string> peer_names_;  // their names, once every peer published one
  PeerProcesses processes_;
  bool reads_peer_memory_ = false;  // every process of the job may read every other's memory
  std::vector<std::unique_ptr<ShmChannel>> channels_;
};

std::string label(const DriverContext& ctx, std::uint32_t index) {
  return process_name(ctx, index) + " (pid " + std::to_string(ctx.processes[index].pid) + ")";
}

Status check_locality(const DriverContext& ctx) {
  const std::string& here = ctx.processes[ctx.self].host;
  for (std::uint32_t peer : ctx.peers) {
    if (ctx.processes[peer].host == here) continue;
    return Status(ErrorCode::unsupported, "shm transport needs every process on one host: " + process_name(ctx, peer) +
                                              " is on host " + ctx.processes[peer].host + ", this is host " + here +
                                              "; use SPARCOLL_TRANSPORT=tcp");
  }
  return Status::Ok();
}

Status check_ring_size(const DriverContext& ctx, std::uint64_t ring_bytes) {
  if (ring_bytes == 0 || (ring_bytes & (ring_bytes - 1)) != 0)
    return Status(ErrorCode::invalid_argument, "shm ring size " + std::to_string(ring_bytes) +
                                                   " bytes is not a power of two (SPARCOLL_SHM_RING_BYTES)");
  if (ring_bytes < min_ring_bytes(ctx.max_message))
    return Status(ErrorCode::invalid_argument, "shm ring size " + std::to_string(ring_bytes) + " bytes is too small for a max message of " +
                                                   std::to_string(ctx.max_message) + " bytes: it needs at least " +
                                                   std::to_string(min_ring_bytes(ctx.max_message)) +
                                                   " (SPARCOLL_SHM_RING_BYTES or SPARCOLL_MAX_MESSAGE)");
  return Status::Ok();
}

// SPARCOLL_SHM_STREAMING_STORES (validated with the options: auto, on or off).
StoreMode store_mode(const Options& options) {
  if (options.shm_streaming_stores == "on") return StoreMode::always;
  if (options.shm_streaming_stores == "off") return StoreMode::never;
  return StoreMode::automatic;
}

Status ShmDriver::setup(const DriverContext& ctx) {
  const SetupDeadline deadline(ctx.deadline_ms);
  Status status = check_locality(ctx);
  if (!status.ok()) return status;
  const std::uint64_t ring_bytes = ctx.options->shm_ring_bytes;
  status = check_ring_size(ctx, ring_bytes);
  if (!status.ok()) return status;
  status = processes_.open(ctx);
  if (!status.ok()) return status;
  remove_stale_segments(kStaleSegmentAgeS);
  status = create_own_segment(ctx, ring_bytes);
  if (!status.ok()) return status;
  status = map_peer_segments(ctx, deadline);
  if (status.ok()) status = wait_until_mapped(ctx, deadline);
  if (!status.ok()) {
    // Setup failed, so the job cannot run: a peer that died before unlinking its name (below)
    // leaves it behind unless someone who knows the name removes it. Ours goes with own_.
    for (const std::string& name : peer_names_) shm_unlink(name.c_str());
    return status;
  }
  own_.unlink();
  // Our segment header's magic is the probe word every peer tries to read.
  std::vector<std::int64_t> pids;
  for (std::uint32_t peer : ctx.peers) pids.push_back(ctx.processes[peer].pid);
  status = agree_on_peer_reads(ctx, pids, &own_.header()->magic, kSegmentMagic, deadline, &reads_peer_memory_);
  if (!status.ok()) return status;
  build_channels(ctx);
  return Status::Ok();
}

Status ShmDriver::create_own_segment(const DriverContext& ctx, std::uint64_t ring_bytes) {
  std::vector<RingKey> rings;
  for (std::uint32_t peer : ctx.peers)
    for (std::uint32_t channel = 0; channel < ctx.channels; ++channel) rings.push_back(RingKey{peer, channel});
  const std::string name = segment_name(ctx.job_id, getpid(), ctx.self);
  Status status = Segment::create(name, ctx.self, ctx.max_message, ring_bytes, rings, &own_);
  if (!status.ok()) return status;
  return ctx.exchange->publish("segment", name);
}

Status ShmDriver::map_peer_segments(const DriverContext& ctx, const SetupDeadline& deadline) {
  std::vector<std::string> names;
  Status status = read_from_peers(ctx, ctx.peers, "segment", false, deadline, "shm", "publish their shm segments", &names);
  if (!status.ok()) return status;
  peer_names_ = names;
  peer_segments_.resize(ctx.peers.size());
  for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
    const std::uint32_t peer = ctx.peers[i];
    // The name is the one segment_name gives that process in this job: a peer cannot point this
    // process at another job's segment, or at a file of its choosing.
    if (names[i] != segment_name(ctx.job_id, ctx.processes[peer].pid, peer))
      return Status(ErrorCode::protocol_error, label(ctx, peer) + " published '" + log::printable(names[i]) +
                                                   "' as its shm segment, not the name of its segment in this job");
    status = Segment::open(names[i], peer, label(ctx, peer), &peer_segments_[i]);
    if (!status.ok()) return status;
    for (std::uint32_t channel = 0; channel < ctx.channels; ++channel) {
      if (peer_segments_[i].ring(ctx.self, channel) != nullptr) continue;
      return Status(ErrorCode::mismatch, label(ctx, peer) + " has no shm ring for " + process_name(ctx, ctx.self) +
                                             " on channel " + std::to_string(channel) +
                                             " (the processes disagree on peers or channel count)");
    }
    status = ctx.exchange->publish_to(peer, "mapped", "1");
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

Status ShmDriver::wait_until_mapped(const DriverContext& ctx, const SetupDeadline& deadline) {
  std::vector<std::string> ignored;
  return read_from_peers(ctx, ctx.peers, "mapped", true, deadline, "shm", "map this process's shm segment", &ignored);
}

void ShmDriver::build_channels(const DriverContext& ctx) {
  for (std::uint32_t channel = 0; channel < ctx.channels; ++channel) {
    std::vector<PeerLink> links;
    for (std::size_t i = 0; i < ctx.peers.size(); ++i) {
      const std::uint32_t peer = ctx.peers[i];
      const Segment& theirs = peer_segments_[i];
      RingControl* out_ring = theirs.ring(ctx.self, channel);
      RingControl* in_ring = own_.ring(peer, channel);
      PeerLink link;
      link.index = peer;
      link.label = label(ctx, peer);
      theirs.populate(out_ring);
      link.out = RingWriter(out_ring, theirs.ring_data(out_ring), theirs.ring_bytes(), store_mode(*ctx.options));
      // Messages are bounded by our max_message: a larger one from a misconfigured peer is corrupt.
      link.in = RingReader(in_ring, own_.ring_data(in_ring), own_.ring_bytes(), ctx.max_message);
      link.closed = &theirs.header()->closed;
      link.pidfd = processes_.pidfd(i);
      link.kill_pid = processes_.use_kill(i) ? processes_.pid(i) : 0;
      link.pid = ctx.processes[peer].pid;
      links.push_back(std::move(link));
    }
    channels_.push_back(
        std::make_unique<ShmChannel>(channel, ctx.max_message, ctx.processes.size(), std::move(links), reads_peer_memory_));
  }
}

}  // namespace
}  // namespace shm

extern const DriverDescriptor shm_driver_descriptor{"shm", 30, &create_and_set_up<shm::ShmDriver>, nullptr,
                                                {/*zero_copy=*/false, /*events=*/false, /*reads_peer_memory=*/true, /*recovers_loss=*/false, /*chosen_by_auto=*/false}};

}  // namespace sparcoll::transport
