// Small helpers every driver uses while it connects (never on the data path): a deadline that
// counts down from create_driver, and the peer names that go into error messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sparcoll/status.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport {

// Counts down from construction; setup steps pass remaining_ms() to blocking store calls so the
// whole of create_driver stays within DriverContext::deadline_ms.
class SetupDeadline {
 public:
  explicit SetupDeadline(std::uint32_t total_ms)
      : total_ms_(total_ms), end_(std::chrono::steady_clock::now() + std::chrono::milliseconds(total_ms)) {}

  std::uint32_t total_ms() const { return total_ms_; }
  bool expired() const { return std::chrono::steady_clock::now() >= end_; }
  std::uint32_t remaining_ms() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - std::chrono::steady_clock::now());
    return left.count() > 0 ? static_cast<std::uint32_t>(left.count()) : 0;
  }

 private:
  std::uint32_t total_ms_;
  std::chrono::steady_clock::time_point end_;
};

// "rank 2", or "process 2" when the context gave no name.
std::string process_name(const DriverContext& ctx, std::uint32_t index);
// "rank 1, rank 3" for a list of process indices.
std::string process_list(const DriverContext& ctx, const std::vector<std::uint32_t>& indices);
// Checks what every driver relies on: options and store present, self and peers in range,
// no duplicate peer, at least one channel, a non-zero max message.
Status check_context(const DriverContext& ctx);
// Reads every listed peer's blob for `topic` from ctx.exchange (with `for_me`, the one each
// published for this process), waiting until the deadline. On timeout the error names every peer
// still missing: "<driver> setup timed out after 30000 ms waiting for rank 2, rank 3 to <what>".
// Other exchange errors (auth, a broken store) pass through.
Status read_from_peers(const DriverContext& ctx, const std::vector<std::uint32_t>& peers, std::string_view topic,
                       bool for_me, const SetupDeadline& deadline, const char* driver, const char* what,
                       std::vector<std::string>* blobs);
// A barrier between two steps of setup: publishes an empty `topic` and waits until every one of
// `peers` has published it too (the error as read_from_peers').
Status wait_for_peers(const DriverContext& ctx, const std::vector<std::uint32_t>& peers, std::string_view topic,
                      const SetupDeadline& deadline, const char* driver, const char* what);
// strerror(err), lowercase ("connection refused"), thread-safe.
std::string errno_text(int err);

}  // namespace sparcoll::transport
