// Forwards a child's output stream to one of the launcher's, a whole line at a time with the
// child's prefix, so lines of different ranks never mix mid-line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace sparcoll::run {

class LineForwarder {
 public:
  // Lines longer than this are split, so a child that never writes '\n' cannot grow us unbounded.
  static constexpr std::size_t kMaxLine = 64 * 1024;

  // An empty prefix passes bytes through unchanged (--no-prefix), still line by line.
  LineForwarder(int out_fd, std::string prefix) : out_fd_(out_fd), prefix_(std::move(prefix)) {}

  // Writes every complete line in pending + data; keeps the rest for later.
  void forward(std::string_view data);
  // Writes the partial last line, if any. With a prefix a '\n' is added so the next prefixed
  // line starts on a line of its own.
  void flush();

 private:
  void append_line(std::string_view line, bool add_newline, std::string* out) const;

  int out_fd_;
  std::string prefix_;
  std::string pending_;  // the incomplete last line
};

// write() until done, retrying EINTR and waiting out EAGAIN; output to a closed reader is dropped.
void write_fully(int fd, std::string_view data);

}  // namespace sparcoll::run
