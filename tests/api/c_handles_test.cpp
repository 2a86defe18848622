// The C API with handles a careless caller keeps after destroying them, or makes up: every call
// answers SPARCOLL_ERR_INVALID_ARGUMENT naming the call and the handle, never a use after free
// (a destroyed communicator used to crash, or answer "ok") or a double free.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "sparcoll/sparcoll.h"

namespace {

sparcoll_comm_t one_rank_comm() {
  sparcoll_comm_t comm = nullptr;
  EXPECT_EQ(sparcoll_comm_init(&comm, 0, 1, nullptr, nullptr), SPARCOLL_SUCCESS) << sparcoll_last_error();
  return comm;
}

void expect_not_live(sparcoll_status_t status, const char* call) {
  EXPECT_EQ(status, SPARCOLL_ERR_INVALID_ARGUMENT);
  const std::string message = sparcoll_last_error();
  EXPECT_NE(message.find(call), std::string::npos) << message;
  EXPECT_NE(message.find("is not live"), std::string::npos) << message;
}

TEST(CApiHandles, ADestroyedCommunicatorIsAnErrorNotAUseAfterFree) {
  sparcoll_comm_t comm = one_rank_comm();
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(sparcoll_comm_destroy(comm), SPARCOLL_SUCCESS);
  float x = 1.0f;
  int value = 0;
  expect_not_live(sparcoll_allreduce(comm, &x, &x, 1, SPARCOLL_FLOAT32, SPARCOLL_SUM), "sparcoll_allreduce");
  expect_not_live(sparcoll_comm_rank(comm, &value), "sparcoll_comm_rank");
  expect_not_live(sparcoll_barrier(comm), "sparcoll_barrier");
  expect_not_live(sparcoll_broadcast(comm, &x, 1, SPARCOLL_FLOAT32, 0), "sparcoll_broadcast");
  sparcoll_request_t request = nullptr;
  expect_not_live(sparcoll_iallreduce(comm, &x, &x, 1, SPARCOLL_FLOAT32, SPARCOLL_SUM, SPARCOLL_ALGO_DEFAULT, &request),
                  "sparcoll_iallreduce");
  EXPECT_EQ(request, nullptr);
  // A second destroy is refused, not a double free.
  expect_not_live(sparcoll_comm_destroy(comm), "sparcoll_comm_destroy");
  EXPECT_EQ(sparcoll_comm_destroy(nullptr), SPARCOLL_SUCCESS);
}

TEST(CApiHandles, AMadeUpHandleIsNeverDereferenced) {
  auto* fake = reinterpret_cast<sparcoll_comm_t>(std::uintptr_t{0x1234});
  int rank = 0;
  expect_not_live(sparcoll_comm_rank(fake, &rank), "sparcoll_comm_rank");
  expect_not_live(sparcoll_comm_destroy(fake), "sparcoll_comm_destroy");
  // Another kind's handle is not a communicator either.
  sparcoll_options_t* options = nullptr;
  ASSERT_EQ(sparcoll_options_create(&options), SPARCOLL_SUCCESS);
  expect_not_live(sparcoll_comm_rank(reinterpret_cast<sparcoll_comm_t>(options), &rank), "sparcoll_comm_rank");
  EXPECT_EQ(sparcoll_options_destroy(options), SPARCOLL_SUCCESS);
}

TEST(CApiHandles, OptionsRequestsAndResultsAreCheckedToo) {
  sparcoll_options_t* options = nullptr;
  ASSERT_EQ(sparcoll_options_create(&options), SPARCOLL_SUCCESS);
  ASSERT_EQ(sparcoll_options_destroy(options), SPARCOLL_SUCCESS);
  expect_not_live(sparcoll_options_set(options, "SPARCOLL_LANES", "8"), "sparcoll_options_set");
  expect_not_live(sparcoll_options_destroy(options), "sparcoll_options_destroy");
  sparcoll_comm_t comm = nullptr;
  expect_not_live(sparcoll_comm_init(&comm, 0, 1, nullptr, options), "sparcoll_comm_init");
  EXPECT_EQ(comm, nullptr);

  comm = one_rank_comm();
  ASSERT_NE(comm, nullptr);
  float x = 2.0f;
  sparcoll_request_t request = nullptr;
  ASSERT_EQ(sparcoll_iallreduce(comm, &x, &x, 1, SPARCOLL_FLOAT32, SPARCOLL_SUM, SPARCOLL_ALGO_DEFAULT, &request),
            SPARCOLL_SUCCESS)
      << sparcoll_last_error();
  sparcoll_request_t kept = request;
  ASSERT_EQ(sparcoll_wait(&request), SPARCOLL_SUCCESS) << sparcoll_last_error();
  EXPECT_EQ(request, nullptr);
  EXPECT_EQ(x, 2.0f);
  expect_not_live(sparcoll_wait(&kept), "sparcoll_wait");
  expect_not_live(sparcoll_request_free(kept), "sparcoll_request_free");

  sparcoll_sparse_result_t result = nullptr;
  ASSERT_EQ(sparcoll_sparse_result_create(&result), SPARCOLL_SUCCESS);
  ASSERT_EQ(sparcoll_sparse_result_destroy(result), SPARCOLL_SUCCESS);
  int dense = 0;
  expect_not_live(sparcoll_sparse_result_get(result, &dense, nullptr, nullptr, nullptr), "sparcoll_sparse_result_get");
  expect_not_live(sparcoll_sparse_result_destroy(result), "sparcoll_sparse_result_destroy");
  EXPECT_EQ(sparcoll_comm_destroy(comm), SPARCOLL_SUCCESS);
}

}  // namespace
