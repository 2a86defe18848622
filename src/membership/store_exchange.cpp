#include "membership/store_exchange.hpp"

namespace sparcoll::membership {

std::string StoreExchange::key(std::string_view job_prefix, std::string_view driver, std::string_view topic,
                               std::uint32_t from, std::uint32_t to) {
  std::string key;
  key.reserve(job_prefix.size() + driver.size() + topic.size() + 24);
  key.append(job_prefix).append(driver).append("/").append(topic).append("/").append(std::to_string(from));
  if (to != kEveryone) key.append("/").append(std::to_string(to));
  return key;
}

Status StoreExchange::publish(std::string_view topic, std::string_view blob) {
  return store_.set(key(job_prefix_, driver_, topic, self_, kEveryone), std::string(blob));
}

Status StoreExchange::publish_to(std::uint32_t peer, std::string_view topic, std::string_view blob) {
  return store_.set(key(job_prefix_, driver_, topic, self_, peer), std::string(blob));
}

Status StoreExchange::read(std::uint32_t peer, std::string_view topic, bool for_me, std::uint32_t timeout_ms,
                           std::string* blob) {
  return store_.get(key(job_prefix_, driver_, topic, peer, for_me ? self_ : kEveryone), timeout_ms, blob);
}

}  // namespace sparcoll::membership
