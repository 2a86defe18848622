// A fixture for tests that set environment variables: it clears every SPARCOLL_* and launcher
// variable before the test and restores the original environment and log level afterwards.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "common/log.hpp"

namespace sparcoll::test {

class ConfigEnvFixture : public testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  static void set(const char* name, const std::string& value);

 private:
  static std::vector<std::string> managed_names();
  std::vector<std::pair<std::string, std::string>> saved_;
  log::Level saved_level_ = log::Level::warn;
};

}  // namespace sparcoll::test
