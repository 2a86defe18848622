// The collective thread's stash (p2p::Peers): a message that arrives before its receive is
// posted is kept and delivered whole when the receive comes. A small stash buffer is kept for
// reuse (steady state allocates nothing); a large one is freed once delivered, so a rare large
// early message does not stay allocated for the communicator's life (sparcoll-soak found the
// retained memory stepping up after warm-up whenever a peer ran further ahead than before).
#include <chrono>
#include <deque>
#include <vector>

#include <gtest/gtest.h>

#include "p2p/peers.hpp"
#include "pair_channel.hpp"

namespace {

using sparcoll::Status;
using sparcoll::p2p::Peers;
using sparcoll::p2p::test_pair::Message;
using sparcoll::p2p::test_pair::PairChannel;
using sparcoll::p2p::test_pair::run_step;

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
