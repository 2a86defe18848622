// Loopback for messages a process sends to itself (co-located mode: a worker and the
// aggregator of some of its lanes live in the same progress thread). Same contract as
// transport::Channel::send/poll: messages sent are delivered, in order, by the next poll(), and
// stay valid until the poll after that. Two buffers swap on poll, so a delivered message is
// never moved by later sends; their capacity grows to the working set once and is then reused.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/driver.hpp"

namespace sparcoll::block_sparse {

class SelfChannel {
 public:
  SelfChannel(std::uint32_t self, std::size_t max_bytes) : self_(self), max_bytes_(max_bytes) {}

  transport::SendResult send(const struct iovec* iov, int iovcnt);
  // Returns the messages queued before this call (up to max; the rest stay for later calls).
  int poll(transport::ReceivedMessage* out, int max);
  bool empty() const noexcept { return inbox_.empty() && read_pos_ >= reading_.size(); }

 private:
  std::uint32_t self_;
  std::size_t max_bytes_;
  std::vector<std::uint64_t> inbox_;    // records: [u64 length][payload padded to 8 bytes]
  std::vector<std::uint64_t> reading_;  // the batch being delivered
  std::size_t read_pos_ = 0;            // in words
};

}  // namespace sparcoll::block_sparse
