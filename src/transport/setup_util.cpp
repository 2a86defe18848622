#include "transport/setup_util.hpp"

namespace sparcoll::transport {

std::string process_name(const DriverContext& ctx, std::uint32_t index) {
  if (index < ctx.processes.size() && !ctx.processes[index].name.empty()) return ctx.processes[index].name;
  return "process " + std::to_string(index);
}

std::string process_list(const DriverContext& ctx, const std::vector<std::uint32_t>& indices) {
  std::string text;
  for (std::uint32_t index : indices) {
    if (!text.empty()) text += ", ";
    text += process_name(ctx, index);
  }
  return text;
}

Status check_context(const DriverContext& ctx) {
  if (ctx.options == nullptr) return Status(ErrorCode::invalid_argument, "driver context has no options");
  if (ctx.exchange == nullptr) return Status(ErrorCode::invalid_argument, "driver context has no setup exchange");
  if (ctx.self >= ctx.processes.size())
    return Status(ErrorCode::invalid_argument, "driver context: self index " + std::to_string(ctx.self) +
                                                   " is outside the " + std::to_string(ctx.processes.size()) +
                                                   " processes of the job");
  if (ctx.channels == 0) return Status(ErrorCode::invalid_argument, "driver context asks for 0 channels");
  if (ctx.max_message == 0) return Status(ErrorCode::invalid_argument, "driver context asks for a max message of 0 bytes");
  // A message and its 8-byte header must fit a u32 length with room for padding.
  if (ctx.max_message > (1u << 30))
    return Status(ErrorCode::invalid_argument, "max message of " + std::to_string(ctx.max_message) +
                                                   " bytes is above the 1 GiB transport limit");
  std::vector<bool> seen(ctx.processes.size(), false);
  for (std::uint32_t peer : ctx.peers) {
    if (peer >= ctx.processes.size())
      return Status(ErrorCode::invalid_argument, "driver context: peer index " + std::to_string(peer) +
                                                     " is outside the " + std::to_string(ctx.processes.size()) +
                                                     " processes of the job");
    if (peer == ctx.self)
      return Status(ErrorCode::invalid_argument, "driver context lists " + process_name(ctx, peer) + " (self) as a peer");
    if (seen[peer])
      return Status(ErrorCode::invalid_argument, "driver context lists " + process_name(ctx, peer) + " twice as a peer");
    seen[peer] = true;
  }
  return Status::Ok();
}

Status read_from_peers(const DriverContext& ctx, const std::vector<std::uint32_t>& peers, std::string_view topic,
                       bool for_me, const SetupDeadline& deadline, const char* driver, const char* what,
                       std::vector<std::string>* blobs) {
  std::vector<std::string> found(peers.size());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    Status status = ctx.exchange->read(peers[i], topic, for_me, deadline.remaining_ms(), &found[i]);
    if (status.ok()) continue;
    if (status.code() != ErrorCode::timeout) return status;
    // Out of time: look (briefly) at the remaining peers too so the error names every laggard.
    constexpr std::uint32_t kProbeMs = 50;
    std::vector<std::uint32_t> missing{peers[i]};
    for (std::size_t j = i + 1; j < peers.size(); ++j) {
      std::string ignored;
      if (!ctx.exchange->read(peers[j], topic, for_me, kProbeMs, &ignored).ok()) missing.push_back(peers[j]);
    }
    return Status(ErrorCode::timeout, std::string(driver) + " setup timed out after " + std::to_string(deadline.total_ms()) +
                                          " ms waiting for " + process_list(ctx, missing) + " to " + what);
  }
  *blobs = std::move(found);
  return Status::Ok();
}

Status wait_for_peers(const DriverContext& ctx, const std::vector<std::uint32_t>& peers, std::string_view topic,
                      const SetupDeadline& deadline, const char* driver, const char* what) {
  Status status = ctx.exchange->publish(topic, "1");
  if (!status.ok()) return status;
  std::vector<std::string> ignored;
  return read_from_peers(ctx, peers, topic, false, deadline, driver, what, &ignored);
}

}  // namespace sparcoll::transport
