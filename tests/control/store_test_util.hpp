// Helpers shared by the store tests: a server on a loopback port picked by the kernel, and a
// loopback port nobody listens on.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "control/store.hpp"

namespace sparcoll::control::test {

inline constexpr const char* kToken = "test-token-1234";

// Starts a server on 127.0.0.1 with kToken; fails the test on error.
std::unique_ptr<StoreServer> start_server(const StoreLimits& limits = {});
std::string address_of(const StoreServer& server);
std::unique_ptr<Store> connect_ok(const StoreServer& server, const std::string& who);
// A loopback port that was free a moment ago (bound to port 0, then closed).
std::uint16_t unused_port();

}  // namespace sparcoll::control::test
