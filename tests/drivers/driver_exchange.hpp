// A shared test of delivery: every process of a cluster sends to every other on every channel
// and checks what arrives (driver_delivery_test.cpp, and the dpdk tests of two jobs at once).
#pragma once

#include <cstdint>

#include "driver_cluster.hpp"

namespace sparcoll::test {

// Every process sends `per_peer` test messages to every peer on every channel (gathered, sizes
// 1..max) and checks that each arrives exactly once and in order; then that every channel
// becomes flushed and nothing more arrives.
void exchange_all(DriverCluster& cluster, std::uint64_t per_peer);

}  // namespace sparcoll::test
