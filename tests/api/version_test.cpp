// The version macros (generated version.h) agree with each other and with the library's
// sparcoll_version() / sparcoll::version().
#include <string>

#include <gtest/gtest.h>

#include "sparcoll/sparcoll.h"
#include "sparcoll/version.hpp"

namespace {

TEST(Version, MacrosMatchTheLibrary) {
  EXPECT_STREQ(sparcoll_version(), SPARCOLL_VERSION_STRING);
  EXPECT_EQ(sparcoll_version_number(), SPARCOLL_VERSION_NUMBER);
  EXPECT_STREQ(sparcoll::version(), SPARCOLL_VERSION_STRING);
  EXPECT_EQ(sparcoll::version_number(),
            SPARCOLL_VERSION_MAJOR * 10000 + SPARCOLL_VERSION_MINOR * 100 + SPARCOLL_VERSION_PATCH);
  const std::string text = std::to_string(SPARCOLL_VERSION_MAJOR) + "." + std::to_string(SPARCOLL_VERSION_MINOR) +
                           "." + std::to_string(SPARCOLL_VERSION_PATCH);
  EXPECT_EQ(text, SPARCOLL_VERSION_STRING);
}

}  // namespace
