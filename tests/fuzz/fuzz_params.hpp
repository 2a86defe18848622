// Values the fuzz targets and the seed generator (fuzz_seeds.cpp) must agree on: the seeds are
// valid inputs for exactly these.
#pragma once

#include <cstdint>

namespace sparcoll::fuzz {

// proto: processes in the job (a sender index must be below it).
inline constexpr std::uint32_t kProtoProcs = 8;
// tcp: the channel's max message; small enough that oversized frames are easy to reach.
inline constexpr std::uint32_t kTcpMaxMessage = 1024;
// dpdk: what the receiving channel expects (RxExpect) and its max payload.
inline constexpr std::uint8_t kDpdkMac[6] = {0x02, 0x53, 0x43, 0x00, 0x00, 0x02};
inline constexpr std::uint32_t kDpdkIp = 0x0a000002;  // 10.0.0.2
inline constexpr std::uint16_t kDpdkPort = 47001;
inline constexpr std::uint16_t kDpdkChannel = 1;
inline constexpr std::uint32_t kDpdkSelf = 1;
inline constexpr std::uint32_t kDpdkMaxPayload = 2048;
// shm: the process that owns the segment.
inline constexpr std::uint32_t kShmOwner = 3;

}  // namespace sparcoll::fuzz
