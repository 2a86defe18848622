#include "rdma_mr_cache.hpp"

#include <infiniband/verbs.h>

#include <cerrno>

#include "common/log.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::rdma {

MrCache::MrCache(ibv_pd* pd) {
  registrar_.reg = [pd](void* addr, std::size_t len, int access, MemoryKeys* keys) -> void* {
    ibv_mr* mr = ibv_reg_mr(pd, addr, len, access);
    if (mr == nullptr) return nullptr;
    keys->lkey = mr->lkey;
    keys->rkey = mr->rkey;
    return mr;
  };
  registrar_.dereg = [](void* handle) { return ibv_dereg_mr(static_cast<ibv_mr*>(handle)); };
}

MrCache::~MrCache() {
  for (auto& [start, region] : regions_) registrar_.dereg(region.handle);
}

Status MrCache::get(void* addr, std::size_t len, int access, const std::string& what, MemoryKeys* out) {
  const auto start = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t end = start + len;
  std::lock_guard<std::mutex> lock(mutex_);
  // Any region starting at or before `start` may cover it; the nearest ones are checked first.
  for (auto it = regions_.upper_bound(start); it != regions_.begin();) {
    --it;
    const Region& region = it->second;
    if (end <= region.end && (region.access & access) == access) {
      *out = region.keys;
      return Status::Ok();
    }
  }
  // Not covered: register the range. Overlapping older regions stay (the kernel allows
  // overlapping registrations) until evict() removes them.
  MemoryKeys keys;
  errno = 0;
  void* handle = registrar_.reg(addr, len, access, &keys);
  if (handle == nullptr) {
    const int err = errno != 0 ? errno : ENOMEM;
    std::string message = "registering " + std::to_string(len) + " bytes for the " + what + " failed: " + errno_text(err);
    if (err == ENOMEM || err == EPERM || err == EAGAIN)
      message += " (the locked-memory limit is probably too low: raise `ulimit -l`, e.g. to unlimited, "
                 "or LimitMEMLOCK= for a systemd service)";
    return Status(ErrorCode::no_resource, message);
  }
  ++registrations_;
  regions_.emplace(start, Region{end, access, handle, keys});
  *out = keys;
  return Status::Ok();
}

void MrCache::evict(const void* addr, std::size_t len) {
  const auto start = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t end = start + len;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->first < end && start < it->second.end) {
      if (registrar_.dereg(it->second.handle) != 0) SC_LOG_WARN("ibv_dereg_mr failed: %s", errno_text(errno).c_str());
      it = regions_.erase(it);
    } else {
      ++it;
    }
  }
}

std::size_t MrCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return regions_.size();
}

}  // namespace sparcoll::transport::rdma
