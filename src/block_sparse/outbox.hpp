// Where a progress thread sends: to itself through the loopback, to anyone else through its
// driver channel. One virtual call per message (never per block).
#pragma once

#include <atomic>
#include <cstdint>

#include "block_sparse/self_channel.hpp"
#include "transport/driver.hpp"

namespace sparcoll::block_sparse {

class Outbox {
 public:
  Outbox(std::uint32_t self, transport::Channel* channel, SelfChannel* loopback)
      : self_(self), channel_(channel), loopback_(loopback) {}

  // `user` (len 0: none) is memory the driver may read in place; see Channel::send.
  transport::SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt,
                             const transport::UserMemory& user = {}) {
    if (peer == self_) return loopback_->send(iov, iovcnt);
    const transport::SendResult r =
        user.len != 0 ? channel_->send(peer, iov, iovcnt, user) : channel_->send(peer, iov, iovcnt);
    if (r == transport::SendResult::ok) {
      std::size_t bytes = 0;
      for (int i = 0; i < iovcnt; ++i) bytes += iov[i].iov_len;
      // Single writer (this progress thread): a relaxed load + store is enough.
      bytes_sent_.store(bytes_sent_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
      messages_sent_.store(messages_sent_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    return r;
  }
  // Bytes and messages that left through the driver (loopback excluded); read by any thread.
  std::uint64_t bytes_sent() const noexcept { return bytes_sent_.load(std::memory_order_relaxed); }
  std::uint64_t messages_sent() const noexcept { return messages_sent_.load(std::memory_order_relaxed); }
  // Why the last send() returned error.
  const Status& error() const { return channel_->error(); }
  std::uint32_t self() const noexcept { return self_; }

 private:
  std::uint32_t self_;
  transport::Channel* channel_;
  SelfChannel* loopback_;
  std::atomic<std::uint64_t> bytes_sent_{0};
  std::atomic<std::uint64_t> messages_sent_{0};
};

}  // namespace sparcoll::block_sparse
