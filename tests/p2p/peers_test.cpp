// p2p::Peers, the collective thread's messaging, between two ranks on an in-memory channel.
//
// The collective thread's stash (p2p::Peers): a message that arrives before its receive is
// posted is kept and delivered whole when the receive comes. A small stash buffer is kept for
// reuse (steady state allocates nothing); a large one is freed once delivered, so a rare large
// early message does not stay allocated for the communicator's life (sparcoll-soak found the
// retained memory stepping up after warm-up whenever a peer ran further ahead than before).
//
// A message sent in two parts (p2p::Peers::send with a head): the receiver gets the head's bytes
// and then the data's as one message, split into fragments wherever the channel's message size
// falls, the head's end among them or not (block sets send their header and bitmap so, followed
// by the tensor itself: algo/block_recursive_doubling.cpp).
#include <gtest/gtest.h>

#include <chrono>

#include "pair_channel.hpp"

namespace {

using sparcoll::Status;
using sparcoll::p2p::Peers;
using namespace sparcoll::p2p::test_pair;  // PairChannel, Message, pattern, run_step

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

// Channels of 4096-byte messages: a fragment carries 4096 minus the peer header, rounded down to 8.
class PeersTwoPartSend : public ::testing::Test {
 protected:
  // Rank 1 sends head_bytes then data_bytes as one message; rank 0 receives it both ways
  // (exact size, and any size) and gets their concatenation.
  void expect_one_message(std::size_t head_bytes, std::size_t data_bytes, std::uint32_t seq) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    const std::vector<std::byte> head = pattern(head_bytes, seq), data = pattern(data_bytes, seq + 7);
    std::vector<std::byte> whole = head;
    whole.insert(whole.end(), data.begin(), data.end());
    for (const bool any : {false, true}) {
      rank0_.begin(seq, "test collective", "two parts", deadline, 0x8000);
      rank1_.begin(seq, "test collective", "two parts", deadline, 0x8000);
      rank1_.send(0, 3, head.data(), head.size(), data.data(), data.size());
      std::vector<std::byte> got(any ? 0 : whole.size());
      if (any)
        rank0_.recv_any(1, 3, &got, whole.size() + 100);
      else
        rank0_.recv(1, 3, got.data(), got.size());
      const Status sent = run_step(rank1_);
      ASSERT_TRUE(sent.ok()) << sent.to_string();
      const Status received = run_step(rank0_);
      ASSERT_TRUE(received.ok()) << received.to_string();
      EXPECT_EQ(got, whole) << "head " << head_bytes << ", data " << data_bytes << (any ? ", recv_any" : ", recv");
      seq += 1000;
    }
  }

  std::deque<Message> inbox0_, inbox1_;
  PairChannel channel0_{0, &inbox0_, &inbox1_, 4096}, channel1_{1, &inbox1_, &inbox0_, 4096};
  Peers rank0_{&channel0_, 0, 2, false}, rank1_{&channel1_, 1, 2, false};
};

TEST_F(PeersTwoPartSend, TheReceiverGetsHeadThenDataAsOneMessage) {
  std::uint32_t seq = 1;
  // One fragment; the head's end inside a later fragment; the head longer than two fragments;
  // an empty head; empty data; both empty.
  for (const auto& [head, data] : std::vector<std::pair<std::size_t, std::size_t>>{
           {32, 1000}, {32, 20000}, {5000, 3}, {9000, 9000}, {0, 7000}, {40, 0}, {0, 0}, {4056, 4056}})
    expect_one_message(head, data, seq++);
}

}  // namespace
