// shm-only behaviour: the ring itself (wrap records, full ring, release), setup checks, and
// that no segment name outlives setup.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "../../drivers/shm/ring_stores.hpp"
#include "../../drivers/shm/shm_channel.hpp"
#include "../../drivers/shm/shm_ring.hpp"
#include "../../drivers/shm/shm_segment.hpp"
#include "driver_cluster.hpp"

namespace sparcoll::test {
namespace {

using transport::shm::RingControl;
using transport::shm::RingReader;
using transport::shm::RingWriter;

struct LocalRing {
  explicit LocalRing(std::size_t capacity) : memory(sizeof(RingControl) + capacity) {
    control = new (memory.data()) RingControl{};
    data = reinterpret_cast<std::byte*>(control + 1);
  }
  std::vector<std::uint64_t> memory;  // 8-byte aligned backing store
  RingControl* control;
  std::byte* data;
};

TEST(DriverShmRing, WrapsFillsAndReleases) {
  constexpr std::uint64_t kCapacity = 256;
  LocalRing ring(kCapacity);
  RingWriter writer(ring.control, ring.data, kCapacity);
  RingReader reader(ring.control, ring.data, kCapacity, 120);
  std::byte payload[120];
  for (std::size_t i = 0; i < sizeof payload; ++i) payload[i] = static_cast<std::byte>(i);

  // Many rounds of messages of awkward sizes force wrap records at every position.
  std::uint32_t next_write = 0;
  std::uint32_t next_read = 0;
  for (int round = 0; round < 500; ++round) {
    int written = 0;
    for (;;) {
      const std::uint32_t len = (next_write * 37) % 121;
      struct iovec iov[2] = {{payload, len / 2}, {payload + len / 2, len - len / 2}};
      if (!writer.try_write(iov, 2, len)) break;
      ++next_write;
      ++written;
    }
    ASSERT_GT(written, 0) << "an empty ring must take a max message (round " << round << ")";
    const std::byte* data = nullptr;
    std::uint32_t len = 0;
    while (reader.next(&data, &len) == RingReader::Next::message) {
      ASSERT_EQ(len, (next_read * 37) % 121);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(data) % 8, 0u);
      ASSERT_EQ(std::memcmp(data, payload, len), 0);
      ++next_read;
    }
    ASSERT_EQ(next_read, next_write);
    // Until released, the space stays taken.
    struct iovec one = {payload, 120};
    if (round == 0) {
      EXPECT_FALSE(writer.try_write(&one, 1, 120));
    }
    reader.release();
  }
}

// Streaming stores copy every byte, whatever the alignment of either end and the length.
TEST(DriverShmRingStores, StreamCopyIsAnExactCopyAtEveryAlignment) {
  std::vector<std::byte> src(70000), dst(70016);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 131 + 7);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{63},
                        std::size_t{64}, std::size_t{65}, std::size_t{4097}, std::size_t{65536}, std::size_t{69000}})
    for (std::size_t d = 0; d < 16; d += 3)
      for (std::size_t s = 0; s < 16; s += 5) {
        std::fill(dst.begin(), dst.end(), std::byte{0xee});
        transport::shm::stream_copy(dst.data() + d, src.data() + s, n);
        transport::shm::stream_fence();
        ASSERT_EQ(std::memcmp(dst.data() + d, src.data() + s, n), 0) << "n " << n << " dst+" << d << " src+" << s;
        for (std::size_t i = 0; i < d; ++i) ASSERT_EQ(dst[i], std::byte{0xee}) << "wrote before the start";
        for (std::size_t i = d + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], std::byte{0xee}) << "wrote past the end";
      }
}

// The writer's choice: one large copy each way first; then ordinary stores unless streaming ones
// copied at least twice as fast; the other way tried every kProbeEvery large copies; small
// copies never stream; `on` and `off` do not measure.
TEST(DriverShmRingStores, StreamOnlyWhileItCopiesTwiceAsFast) {
  using transport::shm::RingStores;
  using transport::shm::StoreMode;
  constexpr std::size_t kBig = 64 * 1024;
  RingStores stores;
  EXPECT_FALSE(stores.stream_next(RingStores::kStreamMinBytes - 1));
  ASSERT_FALSE(stores.stream_next(kBig));  // first: ordinary
  stores.record(kBig, false, 30000);       // 2.2 GB/s: the cores share no cache
  ASSERT_TRUE(stores.stream_next(kBig));   // then: streaming
  stores.record(kBig, true, 3500);         // 19 GB/s
  EXPECT_TRUE(stores.streaming());
  int ordinary = 0;
  for (std::uint32_t i = 0; i < 2 * RingStores::kProbeEvery; ++i) {
    const bool stream = stores.stream_next(kBig);
    ordinary += stream ? 0 : 1;
    stores.record(kBig, stream, stream ? 3500 : 30000);
  }
  EXPECT_EQ(ordinary, 2) << "the ordinary way is tried again once every " << RingStores::kProbeEvery << " copies";
  EXPECT_TRUE(stores.streaming());
  // The host moves the cores: ordinary stores now copy at 17 GB/s. The probes see it.
  for (std::uint32_t i = 0; i < 8 * RingStores::kProbeEvery && stores.streaming(); ++i) {
    const bool stream = stores.stream_next(kBig);
    stores.record(kBig, stream, stream ? 3500 : 3800);
  }
  EXPECT_FALSE(stores.streaming()) << "17 against 19 GB/s is not twice as fast: ordinary stores";
  EXPECT_FALSE(stores.stream_next(RingStores::kStreamMinBytes - 1));
  EXPECT_TRUE(RingStores(StoreMode::always).stream_next(kBig));
  EXPECT_FALSE(RingStores(StoreMode::always).stream_next(RingStores::kStreamMinBytes - 1));
  EXPECT_FALSE(RingStores(StoreMode::never).stream_next(kBig));
}

// Large messages through a ring in each mode arrive intact, header iovecs and all.
TEST(DriverShmRingStores, LargeMessagesArriveIntactInEveryMode) {
  using transport::shm::StoreMode;
  constexpr std::uint64_t kCapacity = 1 << 20;
  constexpr std::uint32_t kMax = 200000;
  std::vector<std::byte> payload(kMax);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i * 29 + 3);
  for (StoreMode mode : {StoreMode::automatic, StoreMode::always, StoreMode::never}) {
    LocalRing ring(kCapacity);
    RingWriter writer(ring.control, ring.data, kCapacity, mode);
    RingReader reader(ring.control, ring.data, kCapacity, kMax);
    for (std::uint32_t m = 0; m < 300; ++m) {
      const std::uint32_t len = (m * 40009u) % kMax + 1;
      const std::size_t split = (m * 7u) % 13;  // a small header iovec, then the rest
      struct iovec iov[2] = {{payload.data(), std::min<std::size_t>(split, len)},
                             {payload.data() + std::min<std::size_t>(split, len), len - std::min<std::size_t>(split, len)}};
      ASSERT_TRUE(writer.try_write(iov, 2, len)) << "message " << m;
      const std::byte* data = nullptr;
      std::uint32_t got = 0;
      ASSERT_EQ(reader.next(&data, &got), RingReader::Next::message);
      ASSERT_EQ(got, len);
      ASSERT_EQ(std::memcmp(data, payload.data(), len), 0) << "message " << m << ", mode " << static_cast<int>(mode);
      reader.release();
    }
  }
}

TEST(DriverShmRing, CorruptRecordIsReported) {
  constexpr std::uint64_t kCapacity = 256;
  LocalRing ring(kCapacity);
  RingReader reader(ring.control, ring.data, kCapacity, 64);
  const transport::shm::RecordHeader bogus{1000, transport::shm::kRecordMessage};
  std::memcpy(ring.data, &bogus, sizeof bogus);
  ring.control->tail.store(16, std::memory_order_release);
  const std::byte* data = nullptr;
  std::uint32_t len = 0;
  EXPECT_EQ(reader.next(&data, &len), RingReader::Next::corrupt);
}

// Found by review after fuzz_tcp_wire found the same in the tcp channel: a corrupt record failed
// the poll that met it, and the good messages before it, already handed out, were lost with it.
TEST(DriverShmChannel, MessagesBeforeACorruptRecordAreDelivered) {
  constexpr std::uint64_t kCapacity = 256;
  LocalRing ring(kCapacity);
  RingWriter writer(ring.control, ring.data, kCapacity);
  for (const std::string text : {"first", "second message"}) {
    struct iovec iov = {const_cast<char*>(text.data()), text.size()};
    ASSERT_TRUE(writer.try_write(&iov, 1, static_cast<std::uint32_t>(text.size())));
  }
  // A third record claiming more than the max message, published.
  const std::uint64_t tail = ring.control->tail.load();
  const transport::shm::RecordHeader bogus{1000, transport::shm::kRecordMessage};
  std::memcpy(ring.data + tail, &bogus, sizeof bogus);
  ring.control->tail.store(tail + 16, std::memory_order_release);

  std::atomic<std::uint32_t> closed{0};
  std::vector<transport::shm::PeerLink> links(1);
  links[0].index = 1;
  links[0].label = "rank 1 (pid 1)";
  links[0].in = RingReader(ring.control, ring.data, kCapacity, 64);
  links[0].closed = &closed;
  transport::shm::ShmChannel channel(0, 64, 2, std::move(links));
  transport::ReceivedMessage got[4];
  ASSERT_EQ(channel.poll(got, 4), 2) << channel.error().to_string();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got[0].data), got[0].size), "first");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got[1].data), got[1].size), "second message");
  EXPECT_EQ(channel.poll(got, 4), -1);
  EXPECT_EQ(channel.error().code(), ErrorCode::protocol_error) << channel.error().to_string();
  EXPECT_NE(channel.error().message().find("rank 1"), std::string::npos) << channel.error().message();
}

// Found by tests/fuzz/fuzz_shm_ring (corpus: crash-writer-trusts-head): the consumer's head is
// written by another process; one ahead of the writer's tail made the free space wrap to a huge
// number, and a message larger than the ring was copied past its end.
TEST(DriverShmRing, WriterStaysInsideTheRingWhateverTheHead) {
  constexpr std::uint64_t kCapacity = 64;
  constexpr std::size_t kGuard = 256;
  std::byte payload[200] = {};
  // The writer reads the head when it attaches and again whenever the ring looks full.
  for (const bool fill_first : {false, true}) {
    for (const std::uint64_t head : {std::uint64_t{1000}, std::uint64_t{8}, std::uint64_t{1}}) {  // ahead of the tail
      std::vector<std::uint64_t> memory((sizeof(RingControl) + kCapacity + kGuard) / 8);
      auto* control = new (memory.data()) RingControl{};
      auto* data = reinterpret_cast<std::byte*>(control + 1);
      std::memset(data + kCapacity, 0xaa, kGuard);
      if (!fill_first) control->head.store(head, std::memory_order_relaxed);
      RingWriter writer(control, data, kCapacity);
      std::uint64_t base = 0;
      if (fill_first) {
        struct iovec iov = {payload, 56};
        ASSERT_TRUE(writer.try_write(&iov, 1, 56));  // 64 bytes: the ring is full
        base = 64;
        control->head.store(base + head, std::memory_order_release);
      }
      for (const std::uint32_t len : {0u, 8u, 56u, 60u, 200u}) {
        struct iovec iov = {payload, len};
        EXPECT_FALSE(writer.try_write(&iov, 1, len)) << "head " << base + head << ", message of " << len << " bytes";
      }
      for (std::size_t i = 0; i < kGuard; ++i)
        ASSERT_EQ(data[kCapacity + i], std::byte{0xaa}) << "byte " << i << " past the ring";
      // A sane head again: the ring works.
      control->head.store(base, std::memory_order_release);
      struct iovec iov = {payload, 8};
      EXPECT_TRUE(writer.try_write(&iov, 1, 8));
    }
  }
}

// Found by tests/fuzz/fuzz_shm_ring (corpus: crash-unaligned-counters): both ends start from the
// counters in shared memory, which a peer may have written before they attach; a counter that
// is not a multiple of 8 put a record header across the end of the ring.
TEST(DriverShmRing, UnalignedCountersAtAttachAreCorrupt) {
  constexpr std::uint64_t kCapacity = 64;
  constexpr std::size_t kGuard = 64;
  std::vector<std::uint64_t> memory((sizeof(RingControl) + kCapacity + kGuard) / 8);
  auto* control = new (memory.data()) RingControl{};
  auto* data = reinterpret_cast<std::byte*>(control + 1);
  std::memset(data + kCapacity, 0xaa, kGuard);
  control->tail.store(kCapacity - 3, std::memory_order_relaxed);
  control->head.store(kCapacity - 3, std::memory_order_relaxed);
  RingWriter writer(control, data, kCapacity);
  std::byte payload[16] = {};
  struct iovec iov = {payload, sizeof payload};
  EXPECT_FALSE(writer.try_write(&iov, 1, sizeof payload));
  for (std::size_t i = 0; i < kGuard; ++i) ASSERT_EQ(data[kCapacity + i], std::byte{0xaa}) << "byte " << i << " past the ring";
  RingReader reader(control, data, kCapacity, 32);
  control->tail.store(kCapacity + 13, std::memory_order_release);
  const std::byte* got = nullptr;
  std::uint32_t len = 0;
  EXPECT_EQ(reader.next(&got, &len), RingReader::Next::corrupt);
}

// A peer's segment laid out as Segment::create does, in 64-byte aligned memory (a mapping is
// page aligned), for check_segment.
struct SegmentImage {
  SegmentImage(std::uint32_t owner, std::uint32_t rings, std::uint64_t ring_bytes)
      : size(transport::shm::segment_first_ring_offset(rings) + rings * transport::shm::segment_ring_stride(ring_bytes)),
        memory(size / 64 + 1) {
    auto* header = new (memory.data()) transport::shm::SegmentHeader{};
    header->magic = transport::shm::kSegmentMagic;
    header->version = transport::shm::kSegmentVersion;
    header->owner_index = owner;
    header->ring_count = rings;
    header->max_message = 64;
    header->ring_bytes = ring_bytes;
    header->total_bytes = size;
    for (std::uint32_t i = 0; i < rings; ++i)
      table()[i] = transport::shm::RingEntry{i, 0, transport::shm::segment_first_ring_offset(rings) +
                                                       i * transport::shm::segment_ring_stride(ring_bytes)};
  }
  transport::shm::RingEntry* table() {
    return reinterpret_cast<transport::shm::RingEntry*>(bytes() + transport::shm::segment_table_offset());
  }
  std::byte* bytes() { return reinterpret_cast<std::byte*>(memory.data()); }
  Status check(std::uint32_t owner) {
    transport::shm::SegmentLayout layout;
    return transport::shm::check_segment(bytes(), size, owner, "rank 1", "/test", &layout);
  }

  struct alignas(64) Line {
    std::byte b[64];
  };
  std::uint64_t size;
  std::vector<Line> memory;
};

TEST(DriverShmSegment, ALaidOutSegmentIsAccepted) {
  SegmentImage image(1, 3, 128);
  EXPECT_TRUE(image.check(1).ok()) << image.check(1).to_string();
  EXPECT_EQ(image.check(2).code(), ErrorCode::protocol_error);  // another process's segment
}

// Found by tests/fuzz/fuzz_shm_segment (corpus: crash-ring-offset-wraps): a ring offset near
// 2^64 made offset + ring size wrap to a small number, so the check passed and the writer would
// have written far outside the mapping.
TEST(DriverShmSegment, RingOffsetThatWrapsIsRefused) {
  SegmentImage image(1, 2, 64);
  image.table()[1].offset = ~std::uint64_t{63};  // 2^64 - 64: 64-byte aligned, past the table
  const Status status = image.check(1);
  EXPECT_EQ(status.code(), ErrorCode::protocol_error) << status.to_string();
  EXPECT_NE(status.message().find("ring 1 lies outside the segment"), std::string::npos) << status.message();
}

// Found by tests/fuzz/fuzz_shm_ring (corpus: crash-tail-behind-head): the producer's tail is
// another process's word; one moved back behind the reader (or more than a ring ahead) made the
// published-bytes check wrap and pass, and records never published were handed out.
TEST(DriverShmRing, TailOutsideOneRingAheadIsCorrupt) {
  constexpr std::uint64_t kCapacity = 256;
  for (const std::uint64_t tail : {std::uint64_t{8}, std::uint64_t{kCapacity + 32 + 8}, ~std::uint64_t{0}}) {
    LocalRing ring(kCapacity);
    RingWriter writer(ring.control, ring.data, kCapacity);
    RingReader reader(ring.control, ring.data, kCapacity, 64);
    std::byte payload[24] = {};
    struct iovec iov = {payload, sizeof payload};
    ASSERT_TRUE(writer.try_write(&iov, 1, sizeof payload));  // one 32-byte record
    const std::byte* data = nullptr;
    std::uint32_t len = 0;
    ASSERT_EQ(reader.next(&data, &len), RingReader::Next::message);
    ASSERT_EQ(reader.next(&data, &len), RingReader::Next::empty);
    // A well-formed record after the first one, published by a tail outside [32, 32 + ring].
    const transport::shm::RecordHeader record{8, transport::shm::kRecordMessage};
    std::memcpy(ring.data + 32, &record, sizeof record);
    ring.control->tail.store(tail, std::memory_order_release);
    EXPECT_EQ(reader.next(&data, &len), RingReader::Next::corrupt) << "tail " << tail;
  }
}

// Found by review while writing tests/fuzz/fuzz_shm_segment: Segment::ring() read the ring count
// and table from the mapping again after open() had checked them, so the owner could rewrite
// them afterwards and point a writer anywhere. Only the checked copy is used now.
TEST(DriverShmSegment, OpenUsesTheTableItChecked) {
  const std::string name = "/sparcoll-test-table-" + std::to_string(getpid());
  transport::shm::Segment owner_side;
  ASSERT_TRUE(transport::shm::Segment::create(name, 1, 64, 256, {{0, 0}, {2, 0}}, &owner_side).ok());
  transport::shm::Segment writer_side;
  const Status opened = transport::shm::Segment::open(name, 1, "rank 1", &writer_side);
  ASSERT_TRUE(opened.ok()) << opened.to_string();
  auto offset_of = [&](RingControl* ring) {
    return reinterpret_cast<std::byte*>(ring) - reinterpret_cast<std::byte*>(writer_side.header());
  };
  const auto ring0 = offset_of(writer_side.ring(0, 0));
  const auto ring2 = offset_of(writer_side.ring(2, 0));
  // The owner rewrites everything the writer checked.
  transport::shm::SegmentHeader* header = owner_side.header();
  header->ring_count = 1u << 20;
  header->ring_bytes = std::uint64_t{1} << 40;
  auto* table = reinterpret_cast<transport::shm::RingEntry*>(reinterpret_cast<std::byte*>(header) +
                                                             transport::shm::segment_table_offset());
  table[0].offset = table[1].offset = std::uint64_t{1} << 62;
  EXPECT_EQ(offset_of(writer_side.ring(0, 0)), ring0);
  EXPECT_EQ(offset_of(writer_side.ring(2, 0)), ring2);
  EXPECT_EQ(writer_side.ring(3, 0), nullptr);
  EXPECT_EQ(writer_side.ring_bytes(), 256u);
}

// A /dev/shm too small for the rings (a container's 64 MB default against many ranks' rings) is
// an error at setup that names the segment and what to change, not a SIGBUS when a message first
// reaches an unbacked page. A child process mounts a 1 MiB /dev/shm of its own.
TEST(DriverShmSegment, TooSmallDevShmIsAClearErrorAtSetup) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    std::string report;
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0) {
      report = "skip: cannot mount a private /dev/shm (not root?)";
    } else {
      transport::shm::Segment segment;
      const Status s = transport::shm::Segment::create("/sparcoll-test-small", 0, 4096, 1u << 20, {{1, 0}, {2, 0}},
                                                       &segment);
      report = std::to_string(static_cast<int>(s.code())) + " " + s.message();
    }
    (void)!write(pipe_fds[1], report.data(), report.size());
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string report;
  char buf[512];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<std::size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child crashed: " << report;
  if (report.rfind("skip:", 0) == 0) GTEST_SKIP() << report;
  EXPECT_EQ(report.substr(0, report.find(' ')), std::to_string(static_cast<int>(ErrorCode::no_resource))) << report;
  EXPECT_NE(report.find("shm segment /sparcoll-test-small needs"), std::string::npos) << report;
  EXPECT_NE(report.find("SPARCOLL_SHM_RING_BYTES"), std::string::npos) << report;
}

ClusterConfig shm_config() {
  ClusterConfig c;
  c.driver = "shm";
  c.processes = 2;
  c.deadline_ms = 5000;
  return c;
}

TEST(DriverShm, ProcessesOnAnotherHostAreUnsupported) {
  DriverCluster cluster(shm_config());
  cluster.set_host(1, "elsewhere");
  ASSERT_TRUE(cluster.start_store().ok());
  const Status status = cluster.create({0})[0];
  EXPECT_EQ(status.code(), ErrorCode::unsupported) << status.to_string();
  EXPECT_NE(status.message().find("rank 1 is on host elsewhere"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("SPARCOLL_TRANSPORT=tcp"), std::string::npos) << status.message();
}

TEST(DriverShm, RingSizeIsChecked) {
  DriverCluster cluster(shm_config());
  ASSERT_TRUE(cluster.start_store().ok());
  cluster.options(0).shm_ring_bytes = 300000;
  Status status = cluster.create({0})[0];
  EXPECT_EQ(status.code(), ErrorCode::invalid_argument) << status.to_string();
  EXPECT_NE(status.message().find("power of two"), std::string::npos) << status.message();
  cluster.options(0).shm_ring_bytes = 4096;  // max message is 4096: needs two records' worth
  status = cluster.create({0})[0];
  EXPECT_EQ(status.code(), ErrorCode::invalid_argument) << status.to_string();
  EXPECT_NE(status.message().find("too small"), std::string::npos) << status.message();
}

TEST(DriverShm, NoSegmentNameOutlivesSetup) {
  DriverCluster cluster(shm_config());
  Status started = cluster.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  for (std::uint32_t i = 0; i < 2; ++i) {
    const std::string name = transport::shm::segment_name(cluster.key_prefix(), getpid(), i);
    const int fd = shm_open(name.c_str(), O_RDONLY, 0);
    EXPECT_LT(fd, 0) << name << " still exists";
    if (fd >= 0) close(fd);
  }
}

}  // namespace
}  // namespace sparcoll::test
