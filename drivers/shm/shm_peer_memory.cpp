// One-copy reads of a peer's memory (Channel::read_peer_memory) and the setup check that every
// process of the job may do them: process_vm_readv copies straight out of the peer's pages, so
// the direct algorithm moves each byte once where the ring copies it into a shared ring and out.
#include "shm_peer_memory.hpp"

#include <sys/uio.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/log.hpp"
#include "shm_channel.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::shm {

namespace {

// Reads exactly `bytes`, looping over partial reads. errno is kept for the caller on failure.
bool read_all(std::int64_t pid, std::uint64_t remote, void* local, std::size_t bytes) {
  auto* out = static_cast<std::byte*>(local);
  while (bytes > 0) {
    struct iovec l{out, bytes};
    struct iovec r{reinterpret_cast<void*>(remote), bytes};
    const ssize_t n = process_vm_readv(static_cast<pid_t>(pid), &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EFAULT;
      return false;
    }
    out += n;
    remote += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string hex(std::uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace

Status ShmChannel::read_peer_memory(std::uint32_t peer, std::uint64_t remote, void* local, std::size_t bytes) {
  const std::int32_t slot = peer < slot_of_.size() ? slot_of_[peer] : -1;
  if (!reads_peer_memory_ || slot < 0)
    return Status(ErrorCode::unsupported, "shm channel " + std::to_string(index_) + " cannot read the memory of process " +
                                              std::to_string(peer));
  const Peer& p = peers_[static_cast<std::size_t>(slot)];
  if (read_all(p.pid, remote, local, bytes)) return Status();
  const int err = errno;
  if (err == ESRCH) return Status(ErrorCode::peer_failure, p.label + " is gone (reading its memory)");
  if (err == EFAULT)
    return Status(ErrorCode::protocol_error, p.label + " named " + std::to_string(bytes) + " bytes at " + hex(remote) +
                                                 " that are not in its memory");
  return Status(ErrorCode::system_error, "reading " + std::to_string(bytes) + " bytes of " + p.label + "'s memory: " +
                                             errno_text(err));
}

Status agree_on_peer_reads(const DriverContext& ctx, const std::vector<std::int64_t>& peer_pids,
                           const void* probe, std::uint64_t probe_value, const SetupDeadline& deadline, bool* enabled) {
  // 1. Where our probe word is; 2. whether we could read every peer's; 3. everyone's answers.
  Status s = ctx.exchange->publish("peer_reads/probe", std::to_string(reinterpret_cast<std::uint64_t>(probe)));
  if (!s.ok()) return s;
  std::vector<std::string> probes;
  s = read_from_peers(ctx, ctx.peers, "peer_reads/probe", false, deadline, "shm", "publish their probe addresses",
                      &probes);
  if (!s.ok()) return s;
  std::string mine = ctx.options->shm_peer_reads == "off" ? "off (SPARCOLL_SHM_PEER_READS=off)" : "yes";
  for (std::size_t i = 0; i < ctx.peers.size() && mine == "yes"; ++i) {
    std::uint64_t value = 0;
    if (!read_all(peer_pids[i], std::strtoull(probes[i].c_str(), nullptr, 10), &value, sizeof value))
      mine = process_name(ctx, ctx.peers[i]) + ": " + errno_text(errno);
    else if (value != probe_value)
      mine = process_name(ctx, ctx.peers[i]) + ": read a different word";
  }
  s = ctx.exchange->publish("peer_reads/answer", mine);
  if (!s.ok()) return s;
  std::vector<std::string> answers;
  s = read_from_peers(ctx, ctx.peers, "peer_reads/answer", false, deadline, "shm",
                      "say whether they can read peers' memory", &answers);
  if (!s.ok()) return s;
  *enabled = mine == "yes";
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (answers[i] == "yes") continue;
    if (*enabled)
      SC_LOG_INFO("shm: no one-copy reads of peers' memory in this job: %s cannot (%s)",
                  process_name(ctx, ctx.peers[i]).c_str(), answers[i].c_str());
    *enabled = false;
  }
  if (mine != "yes") SC_LOG_INFO("shm: no one-copy reads of peers' memory in this job: %s", mine.c_str());
  return Status();
}

}  // namespace sparcoll::transport::shm
