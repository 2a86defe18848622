// Test harness: one job in one test process. A StoreServer on 127.0.0.1:0 and N "processes",
// each a Driver with its own store client, options and process index (the real pid is shared,
// which the drivers accept: shm then relies on the closed flag instead of a pidfd).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "control/store.hpp"
#include "membership/store_exchange.hpp"
#include "sparcoll/options.hpp"
#include "transport/driver.hpp"

namespace sparcoll::test {

struct ClusterConfig {
  std::string driver;
  std::uint32_t processes = 2;
  std::uint32_t channels = 1;
  std::uint32_t max_message = 4096;
  std::uint32_t shm_ring_bytes = 1u << 18;
  std::uint32_t deadline_ms = 10000;
};

inline constexpr const char* kTestJobToken = "driver-test-token";

class DriverCluster {
 public:
  explicit DriverCluster(ClusterConfig config);
  ~DriverCluster();

  // Starts the store server; every process gets default options (job token, ring size).
  Status start_store();
  // "127.0.0.1:<port>" of the store.
  std::string store_address() const;
  // Options of process i, to change before create (e.g. a wrong job token).
  Options& options(std::uint32_t i) { return *options_[i]; }
  // The context process i passes to create_driver (connects its store client on first use;
  // valid while the cluster lives).
  Status context(std::uint32_t i, transport::DriverContext* out);
  // Creates the drivers of `which` (default: all) concurrently, one thread each, as processes
  // would; returns each one's status.
  std::vector<Status> create(const std::vector<std::uint32_t>& which = {});
  // start_store() + create() of all, failing with the first error.
  Status start();

  transport::Driver& driver(std::uint32_t i) { return *drivers_[i]; }
  bool has_driver(std::uint32_t i) const { return drivers_[i] != nullptr; }
  void destroy(std::uint32_t i) { drivers_[i].reset(); }
  // Runs fn(i) on one thread per process and joins them.
  void run(const std::function<void(std::uint32_t)>& fn);

  const ClusterConfig& config() const { return config_; }
  const std::string& key_prefix() const { return key_prefix_; }
  std::vector<transport::ProcessInfo> processes() const;
  // Identity overrides, for a forked child (its own pid) or a remote host.
  void set_pid(std::uint32_t i, std::int64_t pid) { pids_[i] = pid; }
  void set_host(std::uint32_t i, std::string host) { hosts_[i] = std::move(host); }

 private:
  ClusterConfig config_;
  std::string key_prefix_;
  std::unique_ptr<control::StoreServer> server_;
  std::vector<std::int64_t> pids_;
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<Options>> options_;
  std::vector<std::unique_ptr<control::Store>> stores_;
  std::vector<std::unique_ptr<membership::StoreExchange>> exchanges_;
  std::vector<std::unique_ptr<transport::Driver>> drivers_;
};

// Message `seq` from `from` to `to` on `channel`: a size in 1..max and bytes taken from a fixed
// pattern at an offset derived from all four, so a misplaced or reordered message is caught.
struct TestMessage {
  std::uint32_t size;
  const std::byte* bytes;
};
TestMessage test_message(std::uint64_t seq, std::uint32_t from, std::uint32_t to, std::uint32_t channel,
                         std::uint32_t max_message);
// Sends `message` split into three gathered pieces.
transport::SendResult send_gathered(transport::Channel& channel, std::uint32_t peer, const TestMessage& message);

}  // namespace sparcoll::test
