#include "shm_segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <new>
#include <string_view>

#include "common/log.hpp"
#include "transport/setup_util.hpp"

namespace sparcoll::transport::shm {
namespace {

RingEntry* table(std::byte* base) { return reinterpret_cast<RingEntry*>(base + segment_table_offset()); }

// `populate`: map every page now (the owner, which reads all its rings) instead of faulting them
// in one by one under the first messages: a fresh communicator's first allreduces of 256 KiB
// took 3-6x their time while they walked the 1 MiB rings. A peer maps only its own rings now
// (Segment::populate): mapping every ring of every peer cost an 8-rank job 50 ms of setup.
Status map_fd(int fd, std::uint64_t size, const std::string& name, bool populate, std::byte** out) {
  void* addr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  if (addr == MAP_FAILED)
    return Status(ErrorCode::system_error, "mmap of shm segment " + name + " (" + std::to_string(size) +
                                               " bytes) failed: " + errno_text(errno));
  *out = static_cast<std::byte*>(addr);
  return Status::Ok();
}

}  // namespace

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = other.base_;
    size_ = other.size_;
    layout_ = std::move(other.layout_);
    name_ = std::move(other.name_);
    linked_ = other.linked_;
    other.base_ = nullptr;
    other.size_ = 0;
    other.linked_ = false;
  }
  return *this;
}

Segment::~Segment() { reset(); }

void Segment::reset() {
  unlink();
  if (base_ != nullptr) munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

void Segment::unlink() {
  if (!linked_) return;
  linked_ = false;
  if (shm_unlink(name_.c_str()) != 0 && errno != ENOENT)
    SC_LOG_WARN("shm_unlink of segment %s failed: %s", name_.c_str(), errno_text(errno).c_str());
}

Status Segment::create(const std::string& name, std::uint32_t owner_index, std::uint32_t max_message,
                       std::uint64_t ring_bytes, const std::vector<RingKey>& rings, Segment* out) {
  const std::uint64_t size = segment_first_ring_offset(rings.size()) + rings.size() * segment_ring_stride(ring_bytes);
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0 && errno == EEXIST) {
    // Only a crash between create and unlink leaves a name behind; the pid in the name makes it ours.
    SC_LOG_WARN("removing stale shm segment %s", name.c_str());
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  }
  if (fd < 0) return Status(ErrorCode::system_error, "shm_open of " + name + " failed: " + errno_text(errno));
  Segment segment;
  segment.name_ = name;
  segment.linked_ = true;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    close(fd);
    return Status(ErrorCode::system_error, "ftruncate of shm segment " + name + " to " + std::to_string(size) +
                                               " bytes failed: " + errno_text(err) + " (is /dev/shm large enough?)");
  }
  // Reserve the pages now: a /dev/shm too small for the rings fails here, with its name, instead
  // of a SIGBUS at the first message that reaches an unbacked page.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(size)); err != 0) {
    close(fd);  // the segment's destructor unlinks the name
    return Status(ErrorCode::no_resource, "shm segment " + name + " needs " + std::to_string(size) +
                                              " bytes of /dev/shm: " + errno_text(err) +
                                              " (make /dev/shm larger, or lower SPARCOLL_SHM_RING_BYTES)");
  }
  Status status = map_fd(fd, size, name, true, &segment.base_);
  close(fd);
  if (!status.ok()) return status;
  segment.size_ = size;

  // ftruncate gave zeroed pages; construct the shared objects in place before publishing the name.
  auto* header = new (segment.base_) SegmentHeader{};
  header->magic = kSegmentMagic;
  header->version = kSegmentVersion;
  header->owner_index = owner_index;
  header->ring_count = static_cast<std::uint32_t>(rings.size());
  header->max_message = max_message;
  header->ring_bytes = ring_bytes;
  header->total_bytes = size;
  header->closed.store(0, std::memory_order_relaxed);
  RingEntry* entries = table(segment.base_);
  segment.layout_.ring_bytes = ring_bytes;
  for (std::size_t i = 0; i < rings.size(); ++i) {
    const std::uint64_t offset = segment_first_ring_offset(rings.size()) + i * segment_ring_stride(ring_bytes);
    entries[i] = RingEntry{rings[i].sender, rings[i].channel, offset};
    segment.layout_.rings.push_back(entries[i]);
    new (segment.base_ + offset) RingControl{};
  }
  std::atomic_thread_fence(std::memory_order_release);
  *out = std::move(segment);
  return Status::Ok();
}

Status Segment::open(const std::string& name, std::uint32_t owner_index, const std::string& owner, Segment* out) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0)
    return Status(ErrorCode::system_error, "shm_open of " + owner + "'s segment " + name + " failed: " + errno_text(errno) +
                                               " (are both processes in one ipc namespace?)");
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    int err = errno;
    close(fd);
    return Status(ErrorCode::system_error, "fstat of " + owner + "'s shm segment " + name + " failed: " + errno_text(err));
  }
  const auto size = static_cast<std::uint64_t>(info.st_size);
  Segment segment;
  segment.name_ = name;
  if (size < segment_first_ring_offset(0)) {
    close(fd);
    return Status(ErrorCode::protocol_error, owner + "'s shm segment " + name + " is too small (" + std::to_string(size) +
                                                 " bytes) to hold a header");
  }
  Status status = map_fd(fd, size, name, false, &segment.base_);
  close(fd);
  if (!status.ok()) return status;
  segment.size_ = size;

  std::atomic_thread_fence(std::memory_order_acquire);
  status = check_segment(segment.base_, size, owner_index, owner, name, &segment.layout_);
  if (!status.ok()) return status;
  *out = std::move(segment);
  return Status::Ok();
}

RingControl* Segment::ring(std::uint32_t sender, std::uint32_t channel) const {
  // The checked copy: the owner may have rewritten the table in the mapping since.
  for (const RingEntry& entry : layout_.rings) {
    if (entry.sender == sender && entry.channel == channel) return reinterpret_cast<RingControl*>(base_ + entry.offset);
  }
  return nullptr;
}

void Segment::populate(RingControl* control) const {
  // Best effort: MADV_POPULATE_WRITE is Linux 5.14+; without it the pages fault in as before.
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(control) & ~(page - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(ring_data(control) + layout_.ring_bytes);
#ifdef MADV_POPULATE_WRITE
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)begin;
  (void)end;
#endif
}

std::string segment_name(const std::string& job_id, std::int64_t owner_pid, std::uint32_t index) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a: the job id may hold any byte
  for (unsigned char c : job_id) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char name[96];
  std::snprintf(name, sizeof name, "/sparcoll-%016llx-%lld-%u", static_cast<unsigned long long>(hash),
                static_cast<long long>(owner_pid), index);
  return name;
}

std::int64_t segment_owner_pid(const std::string& name) {
  // "/sparcoll-<16 hex>-<pid>-<index>" or the same without the leading '/' (a /dev/shm entry).
  std::string_view rest = name;
  if (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
  constexpr std::string_view kPrefix = "sparcoll-";
  if (rest.substr(0, kPrefix.size()) != kPrefix || rest.size() < kPrefix.size() + 17) return -1;
  rest.remove_prefix(kPrefix.size() + 17);  // the hash and its dash
  std::int64_t pid = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
  if (ec != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '-' || pid <= 0) return -1;
  return pid;
}

namespace {

// Every sparcoll segment of this user in /dev/shm for which `remove` says yes is unlinked.
template <typename Pred>
int remove_segments_if(Pred remove) {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    const std::int64_t pid = segment_owner_pid(name);
    if (pid < 0) continue;
    struct stat info {};
    if (fstatat(dirfd(dir), entry->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0 || info.st_uid != geteuid()) continue;
    if (!remove(pid, info)) continue;
    if (shm_unlink(("/" + name).c_str()) == 0) {
      SC_LOG_INFO("removed shm segment %s of process %lld, which is gone", name.c_str(), static_cast<long long>(pid));
      ++removed;
    }
  }
  closedir(dir);
  return removed;
}

bool process_gone(std::int64_t pid) { return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

int remove_stale_segments(int min_age_s) {
  const time_t now = time(nullptr);
  return remove_segments_if([&](std::int64_t pid, const struct stat& info) {
    return process_gone(pid) && now - info.st_mtime >= min_age_s;
  });
}

int remove_segments_of(const std::vector<std::int64_t>& pids) {
  return remove_segments_if([&](std::int64_t pid, const struct stat&) {
    for (std::int64_t p : pids)
      if (p == pid) return process_gone(pid);
    return false;
  });
}

}  // namespace sparcoll::transport::shm
