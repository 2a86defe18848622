// How a driver tells its peers where to reach it while it connects, without knowing how the
// words travel: the core carries them (over the job's store, membership/store_exchange.hpp).
// A driver names each step of its setup by a topic ("address", "ready", ...) and publishes an
// opaque blob under it; the core keeps every driver's topics apart from the others' and from its
// own keys, so a driver sees no store, no keys and no job prefix.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sparcoll/status.hpp"

namespace sparcoll::transport {

class SetupExchange {
 public:
  virtual ~SetupExchange() = default;
  // This process's blob for `topic`, the same for every peer (an address, a "ready" mark).
  virtual Status publish(std::string_view topic, std::string_view blob) = 0;
  // This process's blob for `topic` meant for `peer` alone (rdma: one queue pair per pair).
  virtual Status publish_to(std::uint32_t peer, std::string_view topic, std::string_view blob) = 0;
  // `peer`'s blob for `topic`: the one it published for everyone, or with `for_me` the one it
  // published for this process. Waits up to timeout_ms; ErrorCode::timeout when it is not there
  // by then, other errors when the exchange itself failed.
  virtual Status read(std::uint32_t peer, std::string_view topic, bool for_me, std::uint32_t timeout_ms,
                      std::string* blob) = 0;
  // The IP address this process reaches the rest of the job from ("" when unknown): where a
  // driver may listen when no address was configured.
  virtual std::string local_address() const = 0;
};

}  // namespace sparcoll::transport
