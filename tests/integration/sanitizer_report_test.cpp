// sanitizer_report(): what makes a child's sanitizer report fail its test under scripts/sanitize.
#include "sanitizer_report.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sparcoll::testing {
namespace {

TEST(SanitizerReport, PlainOutputHasNone) {
  EXPECT_EQ(sanitizer_report(""), "");
  EXPECT_EQ(sanitizer_report("[0] allreduce: ok\n[1] error: peer failure: rank 0 exited\n"), "");
}

TEST(SanitizerReport, UbsanReportFromItsLineOn) {
  const std::string out =
      "[0] starting\n"
      "../src/api/c_api.cpp:101:5: runtime error: load of value 99, which is not a valid value for type "
      "'sparcoll_dtype_t'\n"
      "    #0 0x1 in sparcoll_allreduce ../src/api/c_api.cpp:101\n"
      "[0] done\n";
  const std::string report = sanitizer_report(out, 2);
  EXPECT_EQ(report.rfind("../src/api/c_api.cpp:101:5: runtime error: load of value 99", 0), 0u) << report;
  EXPECT_NE(report.find("#0 0x1 in sparcoll_allreduce"), std::string::npos) << report;
  EXPECT_EQ(report.find("[0] done"), std::string::npos) << report;
}

TEST(SanitizerReport, AsanLsanAndTsanReportsAreFound) {
  for (const char* line : {"==12==ERROR: AddressSanitizer: heap-use-after-free on address 0x6",
                           "==12==ERROR: LeakSanitizer: detected memory leaks",
                           "WARNING: ThreadSanitizer: data race (pid=12)"}) {
    const std::string report = sanitizer_report(std::string("[1] ") + line + "\n  #0 frame\n");
    EXPECT_NE(report.find(line), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace sparcoll::testing
