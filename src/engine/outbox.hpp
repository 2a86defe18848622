// Where a progress thread sends: to itself through the loopback, to anyone else through its
// driver channel. One virtual call per message (never per block).
#pragma once

#include <cstdint>

#include "engine/self_channel.hpp"
#include "transport/driver.hpp"

namespace sparcoll::engine {

class Outbox {
 public:
  Outbox(std::uint32_t self, transport::Channel* channel, SelfChannel* loopback)
      : self_(self), channel_(channel), loopback_(loopback) {}

  transport::SendResult send(std::uint32_t peer, const struct iovec* iov, int iovcnt) {
    if (peer == self_) return loopback_->send(iov, iovcnt);
    return channel_->send(peer, iov, iovcnt);
  }
  // Why the last send() returned error.
  const Status& error() const { return channel_->error(); }
  std::uint32_t self() const noexcept { return self_; }

 private:
  std::uint32_t self_;
  transport::Channel* channel_;
  SelfChannel* loopback_;
};

}  // namespace sparcoll::engine
