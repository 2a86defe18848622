// Finds a sanitizer report (ASan, LSan, UBSan, TSan) in a child process's captured output.
// Under scripts/sanitize every program a test starts is a sanitized build: a report goes to that
// program's stderr, which the Launcher (launch_util.hpp) captures. A test that expects the
// program to fail, or never looks at its stderr, would pass over the report, so every launch
// checks its output with this and fails the test naming the report's first lines.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sparcoll::testing {

// The first `max_lines` lines of the first sanitizer report in `text`, from the start of the
// line that opens it; empty when there is none. These are the lines each sanitizer begins its
// reports with (UBSan: "file:line:col: runtime error: ...", the others "==pid==ERROR: ..." or
// "WARNING: ThreadSanitizer: ...").
inline std::string sanitizer_report(std::string_view text, int max_lines = 16) {
  static constexpr std::string_view kMarkers[] = {
      "runtime error: ", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
      "ERROR: ThreadSanitizer", "ERROR: UndefinedBehaviorSanitizer"};
  std::size_t first = std::string_view::npos;
  for (std::string_view marker : kMarkers) {
    const std::size_t at = text.find(marker);
    if (at < first) first = at;
  }
  if (first == std::string_view::npos) return {};
  const std::size_t line_start = text.rfind('\n', first);
  std::size_t begin = line_start == std::string_view::npos ? 0 : line_start + 1;
  std::size_t end = begin;
  for (int n = 0; n < max_lines && end < text.size(); ++n) {
    const std::size_t newline = text.find('\n', end);
    end = newline == std::string_view::npos ? text.size() : newline + 1;
  }
  return std::string(text.substr(begin, end - begin));
}

}  // namespace sparcoll::testing
