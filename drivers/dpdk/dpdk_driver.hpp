// What the dpdk driver offers beyond the Driver interface: hooks for its own tests. No DPDK
// types here, so tests include it without the DPDK headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dpdk_wire.hpp"
#include "transport/driver.hpp"

namespace sparcoll::transport::dpdk {

// Feeds a raw Ethernet frame to channel `channel` of `driver` (a dpdk driver) through the same
// steering ring and validation as received traffic (DpdkChannel::inject_for_test). False for
// another driver, or when the frame could not be queued.
bool inject_for_test(Driver& driver, std::uint32_t channel, const void* frame, std::size_t len);
// The headers of a valid DATA frame from `peer` to channel `channel` of `driver`.
bool frame_header_for_test(Driver& driver, std::uint32_t channel, std::uint32_t peer, FrameHeader* out);
// "memif" or "port"; "" for another driver.
std::string mode_for_test(Driver& driver);

}  // namespace sparcoll::transport::dpdk
