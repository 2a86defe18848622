// Memory registration cache: address range -> memory region, registered once and reused.
//
// Registering pins pages and costs a syscall plus page-table work, so every buffer the driver
// hands the NIC goes through here: a lookup that falls inside a registered range reuses it, a
// new range is registered once, and evict() deregisters ranges whose memory is about to be
// freed. It holds the driver's own rings and staging buffers and the user buffers the
// application registers for zero-copy sends (Communicator::register_buffer).
//
// Thread-safe (setup and registration may run on different threads). Not on the data path:
// channels and operations keep the lkey/rkey they were given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "sparcoll/status.hpp"

struct ibv_mr;
struct ibv_pd;

namespace sparcoll::transport::rdma {

struct MemoryKeys {
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
};

class MrCache {
 public:
  // How a range is (de)registered; the default uses ibv_reg_mr / ibv_dereg_mr on `pd`.
  // Tests substitute their own to exercise the cache without a device.
  struct Registrar {
    // Returns an opaque handle and the keys, or nullptr with errno set.
    std::function<void*(void* addr, std::size_t len, int access, MemoryKeys* keys)> reg;
    std::function<int(void* handle)> dereg;
  };

  explicit MrCache(ibv_pd* pd);
  explicit MrCache(Registrar registrar) : registrar_(std::move(registrar)) {}
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;
  ~MrCache();

  // Keys for [addr, addr + len) with at least `access` (IBV_ACCESS_* flags), registering the
  // range if no cached region covers it. `what` names the buffer in errors ("receive ring for
  // rank 2"). ENOMEM / EPERM come with the locked-memory (ulimit -l) hint.
  Status get(void* addr, std::size_t len, int access, const std::string& what, MemoryKeys* out);
  // Deregisters every cached region that overlaps [addr, addr + len).
  void evict(const void* addr, std::size_t len);

  std::size_t size() const;
  std::uint64_t registrations() const { return registrations_; }  // reg calls made (cache misses)

 private:
  struct Region {
    std::uintptr_t end = 0;
    int access = 0;
    void* handle = nullptr;
    MemoryKeys keys;
  };

  Registrar registrar_;
  mutable std::mutex mutex_;
  std::multimap<std::uintptr_t, Region> regions_;  // by start address; may overlap
  std::uint64_t registrations_ = 0;
};

}  // namespace sparcoll::transport::rdma
