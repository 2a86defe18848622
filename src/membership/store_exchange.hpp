// The setup exchange every driver uses (transport/setup_exchange.hpp), carried by the job's
// store. Each blob is one key, "<job prefix><driver>/<topic>/<from>" for everyone or
// "<job prefix><driver>/<topic>/<from>/<to>" for one peer: the driver's name keeps drivers' topics
// apart, the job prefix keeps them apart from the job's other keys and from earlier jobs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "control/store.hpp"
#include "transport/setup_exchange.hpp"

namespace sparcoll::membership {

class StoreExchange final : public transport::SetupExchange {
 public:
  // `store` outlives this; `self` is this process's index.
  StoreExchange(control::Store& store, std::string job_prefix, std::string_view driver, std::uint32_t self)
      : store_(store), job_prefix_(std::move(job_prefix)), driver_(driver), self_(self) {}

  Status publish(std::string_view topic, std::string_view blob) override;
  Status publish_to(std::uint32_t peer, std::string_view topic, std::string_view blob) override;
  Status read(std::uint32_t peer, std::string_view topic, bool for_me, std::uint32_t timeout_ms,
              std::string* blob) override;
  std::string local_address() const override { return store_.local_address(); }

  // The store key of `from`'s blob for `topic` (for everyone, or for `to` when to != kEveryone):
  // for tests that play a peer or corrupt its blob.
  static constexpr std::uint32_t kEveryone = ~0u;
  static std::string key(std::string_view job_prefix, std::string_view driver, std::string_view topic,
                         std::uint32_t from, std::uint32_t to = kEveryone);

 private:
  control::Store& store_;
  std::string job_prefix_;
  std::string driver_;
  std::uint32_t self_;
};

}  // namespace sparcoll::membership
