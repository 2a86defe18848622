// An in-memory link between two p2p::Peers for their unit tests: a transport::Channel pair whose
// sends land in the other's inbox, whole (one message per send, 8-byte aligned as drivers
// deliver), a step driven to its end, and test bytes.
#pragma once

#include <sys/uio.h>

#include <cstring>
#include <deque>
#include <vector>

#include "common/task.hpp"
#include "p2p/drive.hpp"
#include "p2p/peers.hpp"
#include "transport/driver.hpp"

namespace sparcoll::p2p::test_pair {

// One direction of an in-memory link between two processes.
struct Message {
  std::vector<std::uint64_t> words;  // 8-byte aligned, as drivers deliver
  std::uint32_t size = 0;
  std::uint32_t from = 0;
};

// A channel of process `self` of two: sends go to the other's inbox, poll() drains its own.
class PairChannel final : public transport::Channel {
 public:
  PairChannel(std::uint32_t self, std::deque<Message>* inbox, std::deque<Message>* peer_inbox,
              std::uint32_t max_message = 64 * 1024)
      : self_(self), inbox_(inbox), peer_inbox_(peer_inbox), max_message_(max_message) {}
  std::uint32_t max_message() const override { return max_message_; }
  transport::SendResult send(std::uint32_t, const struct iovec* iov, int iovcnt) override {
    Message m;
    for (int i = 0; i < iovcnt; ++i) m.size += static_cast<std::uint32_t>(iov[i].iov_len);
    m.words.assign(m.size / 8 + 1, 0);
    m.from = self_;
    auto* at = reinterpret_cast<std::byte*>(m.words.data());
    for (int i = 0; i < iovcnt; ++i) {
      std::memcpy(at, iov[i].iov_base, iov[i].iov_len);
      at += iov[i].iov_len;
    }
    peer_inbox_->push_back(std::move(m));
    return transport::SendResult::ok;
  }
  int poll(transport::ReceivedMessage* out, int max) override {
    current_.clear();  // the previous batch is no longer valid
    while (static_cast<int>(current_.size()) < max && !inbox_->empty()) {
      current_.push_back(std::move(inbox_->front()));
      inbox_->pop_front();
    }
    for (std::size_t i = 0; i < current_.size(); ++i)
      out[i] = {current_[i].from, reinterpret_cast<const std::byte*>(current_[i].words.data()), current_[i].size};
    return static_cast<int>(current_.size());
  }
  bool flushed() override { return true; }
  const Status& error() const override { return error_; }

 private:
  std::uint32_t self_;
  std::deque<Message>* inbox_;
  std::deque<Message>* peer_inbox_;
  std::uint32_t max_message_;
  std::vector<Message> current_;
  Status error_;
};

// `bytes` bytes that differ from one seed to the next.
inline std::vector<std::byte> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::byte> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return v;
}

// The posted step of `peers`, awaited and driven to its end here.
inline sparcoll::Task await_step(Peers& peers) { co_return co_await peers.wait(); }
inline Status run_step(Peers& peers) {
  sparcoll::Task step = await_step(peers);
  return sparcoll::p2p::drive(peers, step);
}

}  // namespace sparcoll::p2p::test_pair
