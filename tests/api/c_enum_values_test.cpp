// Enum arguments of the C API that no enumerator names (a C program may pass any int): every
// call fails with SPARCOLL_ERR_INVALID_ARGUMENT and a message naming the value, and the C++ side
// never reads the value through the C enum type, which would be undefined behaviour (UBSan
// reports it under scripts/sanitize). The casts are made in C (c_enum_calls.c).
#include <string>

#include <gtest/gtest.h>

#include "c_enum_calls.h"
#include "sparcoll/sparcoll.h"

namespace {

std::string last_error() { return sparcoll_last_error(); }

class CEnumValues : public ::testing::Test {
 protected:
  void SetUp() override {
    sparcoll_options_t* options = nullptr;
    ASSERT_EQ(sparcoll_options_create(&options), SPARCOLL_SUCCESS) << last_error();
    ASSERT_EQ(sparcoll_comm_init(&comm_, 0, 1, nullptr, options), SPARCOLL_SUCCESS) << last_error();
    sparcoll_options_destroy(options);
    ASSERT_EQ(sparcoll_sparse_result_create(&result_), SPARCOLL_SUCCESS) << last_error();
  }
  void TearDown() override {
    EXPECT_EQ(sparcoll_sparse_result_destroy(result_), SPARCOLL_SUCCESS);
    EXPECT_EQ(sparcoll_comm_destroy(comm_), SPARCOLL_SUCCESS);
  }

  // `s` is SPARCOLL_ERR_INVALID_ARGUMENT and the message holds `words`.
  static void expect_invalid(sparcoll_status_t s, const std::string& words) {
    EXPECT_EQ(s, SPARCOLL_ERR_INVALID_ARGUMENT) << last_error();
    EXPECT_NE(last_error().find(words), std::string::npos) << last_error();
  }

  sparcoll_comm_t comm_ = nullptr;
  sparcoll_sparse_result_t result_ = nullptr;
  float buf_[64] = {};
};

constexpr int kF32 = SPARCOLL_FLOAT32, kSum = SPARCOLL_SUM, kDefault = SPARCOLL_ALGO_DEFAULT;

TEST_F(CEnumValues, DtypeNoEnumeratorNames) {
  for (int dtype : {99, 6, -1, 300}) {  // 6: the first value past SPARCOLL_INT64
    SCOPED_TRACE("dtype " + std::to_string(dtype));
    expect_invalid(c_enum_allreduce(comm_, buf_, 64, dtype, kSum), "dtype");
    expect_invalid(c_enum_allreduce_algo(comm_, buf_, 64, dtype, kSum, SPARCOLL_ALGO_RING), "dtype");
    expect_invalid(c_enum_iallreduce(comm_, buf_, 64, dtype, kSum, kDefault), "dtype");
    expect_invalid(c_enum_broadcast(comm_, buf_, 64, dtype), "dtype");
    expect_invalid(c_enum_allgather(comm_, buf_, 64, dtype), "dtype");
    expect_invalid(c_enum_reduce_scatter(comm_, buf_, 64, dtype, kSum), "dtype");
    expect_invalid(c_enum_allreduce_sparse(comm_, dtype, kSum, SPARCOLL_SPARSE_FROM_OPTIONS, result_), "dtype");
  }
  // 99 is named as it was passed; 300 does not fit the C++ byte and must not wrap onto f16.
  expect_invalid(c_enum_allreduce(comm_, buf_, 64, 99, kSum), "dtype 99");
}

TEST_F(CEnumValues, OpNoEnumeratorNames) {
  expect_invalid(c_enum_allreduce(comm_, buf_, 64, kF32, 99), "op 99");
  expect_invalid(c_enum_allreduce_algo(comm_, buf_, 64, kF32, 99, SPARCOLL_ALGO_BUTTERFLY), "op");
  expect_invalid(c_enum_iallreduce(comm_, buf_, 64, kF32, 99, kDefault), "op");
  expect_invalid(c_enum_reduce_scatter(comm_, buf_, 64, kF32, 99), "op");
  expect_invalid(c_enum_allreduce_sparse(comm_, kF32, 99, SPARCOLL_SPARSE_FROM_OPTIONS, result_), "op");
}

TEST_F(CEnumValues, AlgorithmNoEnumeratorNames) {
  expect_invalid(c_enum_allreduce_algo(comm_, buf_, 64, kF32, kSum, 99), "algorithm 99");
  expect_invalid(c_enum_iallreduce(comm_, buf_, 64, kF32, kSum, 99), "algorithm 99");
  expect_invalid(c_enum_allreduce_sparse(comm_, kF32, kSum, 99, result_), "algorithm");
}

TEST_F(CEnumValues, TheCommunicatorStillWorksAfterwards) {
  expect_invalid(c_enum_allreduce(comm_, buf_, 64, 99, kSum), "dtype 99");
  buf_[3] = 1.5f;
  EXPECT_EQ(c_enum_allreduce(comm_, buf_, 64, kF32, kSum), SPARCOLL_SUCCESS) << last_error();
  EXPECT_EQ(buf_[3], 1.5f);
}

TEST(CEnumStrerror, UnknownStatusHasAName) {
  EXPECT_STREQ(c_enum_strerror(SPARCOLL_ERR_TIMEOUT), "timeout");
  EXPECT_STREQ(c_enum_strerror(99), "unknown error");
  EXPECT_STREQ(c_enum_strerror(-1), "unknown error");
}

}  // namespace
