// The C API's options handle and sparcoll_comm_init's argument checks (Options::set too): each
// bad input gets SPARCOLL_ERR_INVALID_ARGUMENT and a message naming the call and the key.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "sparcoll/sparcoll.h"
#include "sparcoll/sparcoll.hpp"

namespace {

std::string last_error() { return sparcoll_last_error(); }

class COptions : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(sparcoll_options_create(&options_), SPARCOLL_SUCCESS) << last_error(); }
  void TearDown() override { EXPECT_EQ(sparcoll_options_destroy(options_), SPARCOLL_SUCCESS); }
  sparcoll_options_t* options_ = nullptr;
};

TEST_F(COptions, TakesFieldNamesAndVariableNames) {
  EXPECT_EQ(sparcoll_options_set(options_, "block_elems", "512"), SPARCOLL_SUCCESS) << last_error();
  EXPECT_EQ(sparcoll_options_set(options_, "SPARCOLL_LANES", "16"), SPARCOLL_SUCCESS) << last_error();
  EXPECT_EQ(sparcoll_options_set(options_, "transport", "tcp"), SPARCOLL_SUCCESS) << last_error();
  EXPECT_EQ(sparcoll_options_set(options_, "pin_cores", "0,1"), SPARCOLL_SUCCESS) << last_error();
  EXPECT_EQ(last_error(), "");
}

TEST_F(COptions, UnknownKeySuggestsTheClosest) {
  EXPECT_EQ(sparcoll_options_set(options_, "blok_elems", "512"), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "invalid argument: sparcoll_options_set: unknown option 'blok_elems' (did you mean block_elems?); the "
            "names are the Options fields or their SPARCOLL_* variables in docs/config.md");
  EXPECT_EQ(sparcoll_options_set(options_, "frobnicate", "1"), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown option 'frobnicate';"), std::string::npos) << last_error();
}

TEST_F(COptions, MalformedValueNamesKeyAndVariable) {
  EXPECT_EQ(sparcoll_options_set(options_, "block_elems", "lots"), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "invalid argument: sparcoll_options_set: block_elems='lots' (SPARCOLL_BLOCK_ELEMS): not a positive integer");
  EXPECT_EQ(sparcoll_options_set(options_, "SPARCOLL_TRANSPORT", "carrier-pigeon"), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("transport='carrier-pigeon' (SPARCOLL_TRANSPORT): expected one of auto, shm"),
            std::string::npos)
      << last_error();
}

TEST_F(COptions, VariablesReadElsewhereAreNotOptions) {
  EXPECT_EQ(sparcoll_options_set(options_, "SPARCOLL_SIMD", "avx2"), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("SPARCOLL_SIMD is not an option of a communicator"), std::string::npos) << last_error();
}

TEST_F(COptions, NullArguments) {
  EXPECT_EQ(sparcoll_options_set(nullptr, "lanes", "4"), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "invalid argument: sparcoll_options_set: options is null");
  EXPECT_EQ(sparcoll_options_set(options_, nullptr, "4"), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "invalid argument: sparcoll_options_set: key is null");
  EXPECT_EQ(sparcoll_options_set(options_, "lanes", nullptr), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "invalid argument: sparcoll_options_set: value of lanes is null");
  EXPECT_EQ(sparcoll_options_create(nullptr), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sparcoll_options_destroy(nullptr), SPARCOLL_SUCCESS);
}

TEST_F(COptions, FromEnvReadsTheVariablesThenSetOverrides) {
  ::setenv("SPARCOLL_LANES", "notanumber", 1);
  sparcoll_options_t* from_env = nullptr;
  EXPECT_EQ(sparcoll_options_create_from_env(&from_env), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(from_env, nullptr);
  EXPECT_NE(last_error().find("SPARCOLL_LANES='notanumber'"), std::string::npos) << last_error();
  ::setenv("SPARCOLL_LANES", "8", 1);
  ASSERT_EQ(sparcoll_options_create_from_env(&from_env), SPARCOLL_SUCCESS) << last_error();
  ::unsetenv("SPARCOLL_LANES");
  EXPECT_EQ(sparcoll_options_set(from_env, "lanes", "2"), SPARCOLL_SUCCESS);
  EXPECT_EQ(sparcoll_options_destroy(from_env), SPARCOLL_SUCCESS);
}

TEST_F(COptions, CommInitChecksItsArguments) {
  sparcoll_comm_t comm = reinterpret_cast<sparcoll_comm_t>(&comm);  // must be reset to NULL on failure
  EXPECT_EQ(sparcoll_comm_init(&comm, 0, 0, "127.0.0.1:1", options_), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(last_error(), "invalid argument: sparcoll_comm_init: size=0 must be at least 1");
  EXPECT_EQ(sparcoll_comm_init(&comm, 2, 2, "127.0.0.1:1", options_), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "invalid argument: sparcoll_comm_init: rank=2 must be between 0 and 1 for size=2");
  EXPECT_EQ(sparcoll_comm_init(&comm, 0, 2, "localhost", options_), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(),
            "invalid argument: sparcoll_comm_init: store_address='localhost': not host:port with a port between 1 "
            "and 65535");
  EXPECT_EQ(sparcoll_comm_init(&comm, 0, 2, nullptr, options_), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("sparcoll_comm_init: store_address is null and the options hold no store"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(sparcoll_comm_init(nullptr, 0, 1, nullptr, options_), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(last_error(), "invalid argument: sparcoll_comm_init: comm is null");
  // A value that parses but is out of range is caught when the communicator validates.
  ASSERT_EQ(sparcoll_options_set(options_, "block_elems", "2000000"), SPARCOLL_SUCCESS);
  EXPECT_EQ(sparcoll_comm_init(&comm, 0, 1, nullptr, options_), SPARCOLL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("block_elems=2000000 (SPARCOLL_BLOCK_ELEMS) must be between 1 and 1048576"),
            std::string::npos)
      << last_error();
}

TEST_F(COptions, OneRankCommunicatorUsesTheOptions) {
  ASSERT_EQ(sparcoll_options_set(options_, "block_elems", "32"), SPARCOLL_SUCCESS);
  sparcoll_comm_t comm = nullptr;
  ASSERT_EQ(sparcoll_comm_init(&comm, 0, 1, nullptr, options_), SPARCOLL_SUCCESS) << last_error();
  // The communicator copied the options: the handle may go right away.
  EXPECT_EQ(sparcoll_options_destroy(options_), SPARCOLL_SUCCESS);
  options_ = nullptr;
  float data[100] = {};
  data[40] = 2.5f;
  EXPECT_EQ(sparcoll_allreduce(comm, data, data, 100, SPARCOLL_FLOAT32, SPARCOLL_SUM), SPARCOLL_SUCCESS)
      << last_error();
  EXPECT_EQ(data[40], 2.5f);
  int size = 0;
  EXPECT_EQ(sparcoll_comm_size(comm, &size), SPARCOLL_SUCCESS);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(sparcoll_comm_destroy(comm), SPARCOLL_SUCCESS);
}

TEST(CppOptions, SetThrowsNamingTheKey) {
  sparcoll::Options o;
  o.set("fusion", "4");
  EXPECT_EQ(o.fusion, 4u);
  o.set("SPARCOLL_DEADLINE_MS", "1500");
  EXPECT_EQ(o.deadline_ms, 1500u);
  try {
    o.set("fusion", "-1");
    FAIL() << "no exception";
  } catch (const sparcoll::Error& e) {
    EXPECT_EQ(e.code(), sparcoll::ErrorCode::invalid_argument);
    EXPECT_STREQ(e.what(), "invalid argument: fusion='-1' (SPARCOLL_FUSION): not a positive integer");
  }
  EXPECT_EQ(o.fusion, 4u);
}

}  // namespace
