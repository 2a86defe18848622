// sparcoll-fault SCENARIO: run under sparcoll-run; rank 1 (the "culprit") misbehaves in the way
// SCENARIO names and every rank checks it gets the error it should, with the code it should.
// Each rank prints "fault: rank R: <code>: <message>" and exits 0 when the outcome is the
// expected one, 1 otherwise. The culprit of `die` exits 0 on purpose so the launcher does not
// stop the survivors, whose error is the point of the test.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "sparcoll/sparcoll.hpp"

namespace {

using sparcoll::DataType;
using sparcoll::ErrorCode;
using sparcoll::ReduceOp;

int rank_from_env() {
  const char* r = std::getenv("SPARCOLL_RANK");
  return r ? std::atoi(r) : 0;
}

int report(int rank, const sparcoll::Error& e, ErrorCode want, const char* must_mention) {
  std::printf("fault: rank %d: %s\n", rank, e.what());
  std::fflush(stdout);
  if (e.code() != want) {
    std::printf("fault: rank %d: expected code '%s'\n", rank, sparcoll::error_code_name(want));
    return 1;
  }
  if (must_mention && std::strstr(e.what(), must_mention) == nullptr) {
    std::printf("fault: rank %d: expected the message to mention '%s'\n", rank, must_mention);
    return 1;
  }
  return 0;
}

// After a clean per-op failure (mismatch, invalid argument) the communicator must still work.
int check_still_works(sparcoll::Communicator& comm) {
  std::vector<float> v(1000, 1.0f);
  comm.allreduce(v.data(), v.data(), v.size(), DataType::f32, ReduceOp::sum);
  for (float x : v)
    if (x != static_cast<float>(comm.size())) {
      std::printf("fault: rank %d: communicator gave a wrong sum after the failure\n", comm.rank());
      return 1;
    }
  std::printf("fault: rank %d: communicator still works\n", comm.rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sparcoll-fault SCENARIO\n");
    return 2;
  }
  const std::string scenario = argv[1];
  const int rank = rank_from_env();
  const bool culprit = rank == 1;

  // Scenarios that break the setup itself.
  if (scenario == "wrong_token" && culprit) setenv("SPARCOLL_JOB_TOKEN", "not-the-job-token", 1);
  if (scenario == "unreachable_store") {
    setenv("SPARCOLL_STORE", "127.0.0.1:1", 1);
    setenv("SPARCOLL_STORE_SERVER", "external", 1);
    setenv("SPARCOLL_CONNECT_TIMEOUT_MS", "700", 1);
  }
  if (scenario == "bad_option") setenv("SPARCOLL_LANES", "12abc", 1);
  if (scenario == "bad_range") setenv("SPARCOLL_FUSION", "0", 1);
  if (scenario == "config_mismatch" && culprit) setenv("SPARCOLL_LANES", "32", 1);
  if (scenario == "unknown_variable") setenv("SPARCOLL_LANE", "8", 1);

  std::unique_ptr<sparcoll::Communicator> comm;
  try {
    comm = std::make_unique<sparcoll::Communicator>(sparcoll::Communicator::from_env());
  } catch (const sparcoll::Error& e) {
    if (scenario == "wrong_token") return report(rank, e, ErrorCode::auth_failure, culprit ? "job token" : "rank 1");
    if (scenario == "unreachable_store") return report(rank, e, ErrorCode::timeout, "127.0.0.1:1");
    if (scenario == "bad_option") return report(rank, e, ErrorCode::invalid_argument, "SPARCOLL_LANES");
    if (scenario == "bad_range") return report(rank, e, ErrorCode::invalid_argument, "SPARCOLL_FUSION");
    if (scenario == "config_mismatch") return report(rank, e, ErrorCode::mismatch, "SPARCOLL_LANES");
    std::printf("fault: rank %d: unexpected setup failure: %s\n", rank, e.what());
    return 1;
  }
  if (scenario == "wrong_token" || scenario == "unreachable_store" || scenario == "bad_option" ||
      scenario == "bad_range" || scenario == "config_mismatch") {
    std::printf("fault: rank %d: setup unexpectedly succeeded\n", rank);
    return 1;
  }
  if (scenario == "unknown_variable") return check_still_works(*comm);

  std::vector<float> data(4096, 1.0f);
  try {
    if (scenario == "count_mismatch") {
      comm->allreduce(data.data(), data.data(), culprit ? 4001 : 4000, DataType::f32, ReduceOp::sum);
    } else if (scenario == "dtype_mismatch") {
      comm->allreduce(data.data(), data.data(), 1000, culprit ? DataType::f16 : DataType::f32, ReduceOp::sum);
    } else if (scenario == "op_mismatch") {
      comm->allreduce(data.data(), data.data(), 1000, DataType::f32, culprit ? ReduceOp::max : ReduceOp::sum);
    } else if (scenario == "null_buffer") {
      comm->allreduce(culprit ? nullptr : data.data(), data.data(), 1000, DataType::f32, ReduceOp::sum);
    } else if (scenario == "misaligned") {
      auto* bytes = reinterpret_cast<char*>(data.data());
      void* buf = culprit ? static_cast<void*>(bytes + 1) : static_cast<void*>(data.data());
      comm->allreduce(buf, buf, 1000, DataType::f32, ReduceOp::sum);
    } else if (scenario == "die") {
      std::vector<float> big(std::size_t{1} << 22, 1.0f);
      if (culprit) {
        sparcoll::Request r = comm->iallreduce(big.data(), big.data(), big.size(), DataType::f32, ReduceOp::sum);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::printf("fault: rank %d: dying mid-operation\n", rank);
        std::fflush(stdout);
        _exit(0);
      }
      const auto t0 = std::chrono::steady_clock::now();
      try {
        comm->allreduce(big.data(), big.data(), big.size(), DataType::f32, ReduceOp::sum);
      } catch (const sparcoll::Error& e) {
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("fault: rank %d: error after %.2f s\n", rank, s);
        // A survivor that noticed the death before it even started the op gets `broken`
        // (carrying the same cause) from the call itself.
        return report(rank, e, e.code() == ErrorCode::broken ? ErrorCode::broken : ErrorCode::peer_failure, "rank 1");
      }
    } else if (scenario == "hang") {
      if (culprit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3000));
        std::printf("fault: rank %d: never joined the op\n", rank);
        return 0;
      }
      comm->allreduce(data.data(), data.data(), data.size(), DataType::f32, ReduceOp::sum);
    } else if (scenario == "after_break") {
      // The culprit never joins; the others time out, then any further call must fail at once.
      if (culprit) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        return 0;
      }
      try {
        comm->allreduce(data.data(), data.data(), data.size(), DataType::f32, ReduceOp::sum);
      } catch (const sparcoll::Error&) {
      }
      comm->allreduce(data.data(), data.data(), data.size(), DataType::f32, ReduceOp::sum);
    } else {
      std::fprintf(stderr, "sparcoll-fault: unknown scenario %s\n", scenario.c_str());
      return 2;
    }
  } catch (const sparcoll::Error& e) {
    int rc = 1;
    if (scenario == "count_mismatch") rc = report(rank, e, ErrorCode::mismatch, "4001");
    else if (scenario == "dtype_mismatch") rc = report(rank, e, ErrorCode::mismatch, "f16");
    else if (scenario == "op_mismatch") rc = report(rank, e, ErrorCode::mismatch, "max");
    else if (scenario == "null_buffer") rc = report(rank, e, ErrorCode::invalid_argument, culprit ? "sendbuf is null" : "rank 1");
    else if (scenario == "misaligned") rc = report(rank, e, ErrorCode::invalid_argument, culprit ? "not aligned" : "rank 1");
    else if (scenario == "hang") return report(rank, e, ErrorCode::timeout, "rank 1");
    else if (scenario == "after_break") return report(rank, e, ErrorCode::broken, "earlier failure");
    else std::printf("fault: rank %d: unexpected error: %s\n", rank, e.what());
    if (rc != 0) return rc;
    return check_still_works(*comm);
  }
  std::printf("fault: rank %d: %s did not fail\n", rank, scenario.c_str());
  return 1;
}
