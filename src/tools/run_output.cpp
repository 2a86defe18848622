#include "tools/run_output.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace sparcoll::run {

void LineForwarder::append_line(std::string_view line, bool add_newline, std::string* out) const {
  out->append(prefix_);
  out->append(line);
  if (add_newline) out->push_back('\n');
}

void LineForwarder::forward(std::string_view data) {
  std::string out;
  while (!data.empty()) {
    std::size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(data);
      break;
    }
    pending_.append(data.substr(0, newline + 1));
    append_line(pending_, false, &out);
    pending_.clear();
    data.remove_prefix(newline + 1);
  }
  if (pending_.size() >= kMaxLine) {
    append_line(pending_, !prefix_.empty(), &out);
    pending_.clear();
  }
  // One write for everything complete: fewer syscalls, and each line stays whole.
  if (!out.empty()) write_fully(out_fd_, out);
}

void LineForwarder::flush() {
  if (pending_.empty()) return;
  std::string out;
  append_line(pending_, !prefix_.empty(), &out);
  pending_.clear();
  write_fully(out_fd_, out);
}

void write_fully(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Our stdout may be a non-blocking descriptor we inherited.
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, -1);
    } else {
      return;  // EPIPE and the like: nobody reads our output any more; the job goes on
    }
  }
}

}  // namespace sparcoll::run
