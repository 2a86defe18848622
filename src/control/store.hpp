// Rendezvous key-value store over TCP (one server, hosted by rank 0 or given by SPARCOLL_STORE).
//
// Used at setup and teardown only, never on the data path. Every client connection starts with
// a hello carrying the job token and the identity the client claims ("rank 3"); a wrong token is
// rejected with a reason the client turns into ErrorCode::auth_failure, and the server closes
// that connection and nothing else: a process that can merely reach the port cannot end the job
// (docs/security.md). The server keeps notes on rejected clients (diagnose()), which a rank
// that waited in vain for another adds to its error.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sparcoll/status.hpp"

namespace sparcoll::control {

// What a client that has not (yet) presented the job token may cost the server. The defaults
// are what jobs run with; tests shorten them.
struct StoreLimits {
  std::chrono::milliseconds hello_timeout{10000};  // a connection must say hello within this
  std::size_t max_unauthenticated = 64;            // more close the oldest of them
  std::chrono::milliseconds warn_interval{10000};  // one warning line per kind per interval
};

class StoreServer {
 public:
  // Listens on host:port ("0.0.0.0:0" picks a port). Serves on its own thread until destroyed.
  static Status start(const std::string& host_port, const std::string& job_token, std::unique_ptr<StoreServer>* out,
                      const StoreLimits& limits = {});
  virtual ~StoreServer() = default;
  virtual std::uint16_t port() const = 0;
};

class Store {
 public:
  // Connects (retrying until timeout_ms: the server may start later than the client).
  // `who` is the claimed identity, for logs and error messages ("rank 3", "aggregator 0").
  static Status connect(const std::string& host_port, const std::string& job_token, const std::string& who,
                        std::uint32_t timeout_ms, std::unique_ptr<Store>* out);
  virtual ~Store() = default;

  virtual Status set(const std::string& key, const std::string& value) = 0;
  // Waits until `key` is set, up to timeout_ms; the timeout error names the key.
  virtual Status get(const std::string& key, std::uint32_t timeout_ms, std::string* value) = 0;
  // Atomically adds delta to the integer at key (absent = 0); returns the new value.
  virtual Status add(const std::string& key, std::int64_t delta, std::int64_t* result) = 0;
  // Waits until the integer at key is >= target, up to timeout_ms.
  virtual Status wait_at_least(const std::string& key, std::int64_t target, std::uint32_t timeout_ms) = 0;
  // The server's notes on clients it rejected ("" when none, or when it cannot be asked): for
  // error messages only.
  virtual std::string diagnose() = 0;
  // The local address of the connection to the server (the address peers can reach us at).
  virtual std::string local_address() const = 0;
};

}  // namespace sparcoll::control
