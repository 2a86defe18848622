// A message sent in two parts (p2p::Peers::send with a head): the receiver gets the head's bytes
// and then the data's as one message, split into fragments wherever the channel's message size
// falls, the head's end among them or not (block sets send their header and bitmap so, followed
// by the tensor itself: algo/block_recursive_doubling.cpp).
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
