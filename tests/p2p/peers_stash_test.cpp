// The collective thread's stash (p2p::Peers): a message that arrives before its receive is
// posted is kept and delivered whole when the receive comes. A small stash buffer is kept for
// reuse (steady state allocates nothing); a large one is freed once delivered, so a rare large
// early message does not stay allocated for the communicator's life (sparcoll-soak found the
// retained memory stepping up after warm-up whenever a peer ran further ahead than before).
#include <sys/uio.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <vector>

#include <gtest/gtest.h>

#include "p2p/drive.hpp"
#include "p2p/peers.hpp"

namespace {

using sparcoll::Status;
using sparcoll::p2p::Peers;
namespace transport = sparcoll::transport;

// One direction of an in-memory link between two processes.
struct Message {
  std::vector<std::uint64_t> words;  // 8-byte aligned, as drivers deliver
  std::uint32_t size = 0;
  std::uint32_t from = 0;
};

// A channel of process `self` of two: sends go to the other's inbox, poll() drains its own.
class PairChannel final : public transport::Channel {
 public:
  PairChannel(std::uint32_t self, std::deque<Message>* inbox, std::deque<Message>* peer_inbox)
      : self_(self), inbox_(inbox), peer_inbox_(peer_inbox) {}
  std::uint32_t max_message() const override { return 64 * 1024; }
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
  std::vector<Message> current_;
  Status error_;
};

// The posted step of `peers`, awaited and driven to its end here.
sparcoll::Task await_step(Peers& peers) { co_return co_await peers.wait(); }
Status run_step(Peers& peers) {
  sparcoll::Task step = await_step(peers);
  return sparcoll::p2p::drive(peers, step);
}

std::vector<std::byte> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::byte> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return v;
}

class PeersStash : public ::testing::Test {
 protected:
  // Rank 1 sends `bytes` for collective `seq` while rank 0 is still between collectives (its
  // fragments are stashed); then rank 0 runs collective `seq` and receives it.
  void early_message(std::uint32_t seq, std::size_t bytes) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    const std::vector<std::byte> sent = pattern(bytes, seq);
    rank1_.begin(seq, "test collective", "stash", deadline, 0x8000);
    rank1_.send(0, 0, sent.data(), sent.size());
    ASSERT_TRUE(run_step(rank1_).ok());
    while (rank0_.poll_idle()) {
    }
    stashed_ = rank0_.stash_bytes();
    rank0_.begin(seq, "test collective", "stash", deadline, 0x8000);
    std::vector<std::byte> got(bytes);
    rank0_.recv(1, 0, got.data(), got.size());
    const Status s = run_step(rank0_);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(got, sent);
  }

  std::deque<Message> inbox0_, inbox1_;
  PairChannel channel0_{0, &inbox0_, &inbox1_}, channel1_{1, &inbox1_, &inbox0_};
  Peers rank0_{&channel0_, 0, 2, false}, rank1_{&channel1_, 1, 2, false};
  std::size_t stashed_ = 0;
};

TEST_F(PeersStash, ALargeEarlyMessageIsFreedOnceDelivered) {
  early_message(1, std::size_t{8} << 20);
  EXPECT_GE(stashed_, std::size_t{8} << 20);  // it was stashed whole, not received in place
  EXPECT_LE(rank0_.stash_bytes(), std::size_t{1} << 20);
  // The next large one is stashed and delivered as well.
  early_message(2, (std::size_t{3} << 20) + 24);
  EXPECT_LE(rank0_.stash_bytes(), std::size_t{1} << 20);
}

TEST_F(PeersStash, SmallEarlyMessagesReuseOneBuffer) {
  early_message(1, 100000);
  const std::size_t kept = rank0_.stash_bytes();
  EXPECT_GE(kept, std::size_t{100000});  // kept for the next early message
  for (std::uint32_t seq = 2; seq < 50; ++seq) early_message(seq, 1000 + seq * 1000);
  EXPECT_EQ(rank0_.stash_bytes(), kept);
}

}  // namespace
