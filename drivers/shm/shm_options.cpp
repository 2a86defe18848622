// The shm driver's variables (common/config.hpp, DriverOptionTable): built whether or not the
// driver is, so every build knows them.
#include <array>
#include <string_view>

#include "common/config_rows.hpp"

namespace sparcoll {
namespace {

using namespace config;

constexpr std::array<std::string_view, 2> kShmPeerReads = {"auto", "off"};
constexpr std::array<std::string_view, 3> kShmStreamingStores = {"auto", "on", "off"};
constexpr std::uint32_t kMinShmRing = 64u << 10;
constexpr std::uint32_t kMaxShmRing = 1u << 30;

std::vector<ConfigVariable> variables() {
  return {
      {"SPARCOLL_SHM_RING_BYTES", "shm_ring_bytes", "1048576",
       "bytes of each shared-memory ring (per sender, receiver and thread): a power of two from 65536 to "
       "1073741824, at least 4 * max_message.",
       {}, &parse_positive_u32<&Options::shm_ring_bytes>},
      {"SPARCOLL_SHM_PEER_READS", "shm_peer_reads", "auto",
       "auto: the shm transport reads peers' memory in place when every process of the job can "
       "(process_vm_readv, checked at setup), for the direct algorithm's one-copy transfers. off: never "
       "(the direct algorithm is then unsupported and auto uses the ring).",
       {}, &parse_choice<&Options::shm_peer_reads, kShmPeerReads>},
      {"SPARCOLL_SHM_STREAMING_STORES", "shm_streaming_stores", "auto",
       "how a message of 32 KiB or more is copied into a peer's ring: auto: each ring's writer times its "
       "copies and streams (non-temporal stores, which skip taking the lines back from the reader's cache) "
       "only while that copies at least twice as fast as ordinary stores, as between cores that share no "
       "cache; on: always stream; off: never. Changes the speed only, never the result "
       "(docs/perf.md, \"Two placements of the host\").",
       {}, &parse_choice<&Options::shm_streaming_stores, kShmStreamingStores>},
  };
}

void validate(const Options& o, ConfigProblems& p) {
  const std::uint32_t ring = o.shm_ring_bytes;
  if (ring < kMinShmRing || ring > kMaxShmRing || (ring & (ring - 1)) != 0) {
    p.add("shm_ring_bytes=" + std::to_string(ring) + " (SPARCOLL_SHM_RING_BYTES) must be a power of two between " +
          std::to_string(kMinShmRing) + " and " + std::to_string(kMaxShmRing));
  } else if (std::uint64_t{ring} < 4 * std::uint64_t{o.max_message}) {
    p.add("shm_ring_bytes=" + std::to_string(ring) + " (SPARCOLL_SHM_RING_BYTES) must be at least 4 * max_message = " +
          std::to_string(4 * std::uint64_t{o.max_message}) + " (SPARCOLL_MAX_MESSAGE)");
  }
  p.check_choice("shm_peer_reads", o.shm_peer_reads, kShmPeerReads);
  p.check_choice("shm_streaming_stores", o.shm_streaming_stores, kShmStreamingStores);
}

}  // namespace

extern const DriverOptionTable shm_option_table = {"shm", &variables, &validate};

}  // namespace sparcoll
