// The decisions of the dpdk channel's reliable delivery, apart from frames and mbufs, so they
// build and are tested without DPDK (tests/drivers/dpdk_reliability_test.cpp): the round-trip
// estimate and the retransmission timeout, the selective acknowledgement (SACK) bitmap both
// ways, and when a frame in flight is presumed lost before its timeout. dpdk_channel.cpp keeps
// the frames, the windows' slots and the timers, and asks these. Times are in TSC cycles.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sparcoll::transport::dpdk {

// Smoothed round-trip time and its variation (RFC 6298's estimator, gains 1/8 and 1/4), from
// samples of frames sent once (Karn: a resent frame's acknowledgement may be the first copy's).
struct RttEstimate {
  std::uint64_t srtt = 0;  // 0: no sample yet
  std::uint64_t rttvar = 0;

  void sample(std::uint64_t rtt) {
    if (srtt == 0) {
      srtt = rtt;
      rttvar = rtt / 2;
      return;
    }
    const std::uint64_t diff = rtt > srtt ? rtt - srtt : srtt - rtt;
    rttvar = (3 * rttvar + diff) / 4;
    srtt = (7 * srtt + rtt) / 8;
  }

  // srtt + 4 rttvar (`initial` before any sample), within [min, max], doubled per `backoff`
  // (timeouts in a row), never above max.
  std::uint64_t timeout(std::uint64_t initial, std::uint64_t min, std::uint64_t max, std::uint32_t backoff) const {
    std::uint64_t base = srtt == 0 ? initial : srtt + 4 * rttvar;
    base = std::clamp(base, min, max);
    if (backoff >= 64 || (base << backoff) >> backoff != base) return max;
    return std::min(base << backoff, max);
  }
};

// xorshift64: the timers' jitter. Up to 1/8 of a timeout is added, so that timers of different
// peers (and a periodic loss pattern such as the drop hook's) do not stay in lockstep, or the
// same frames could be lost round after round.
inline std::uint64_t jittered(std::uint64_t wait, std::uint64_t* state) {
  std::uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return wait + x % (wait / 8 + 1);
}

// The receiver's SACK bitmap: bit i says that seq `arrived + 1 + i` is here (out of order),
// for the 64 seqs above `arrived` (the first not yet here) that are below `limit` (what the
// reorder buffer can hold). `has(seq)` says whether that seq sits in the reorder buffer.
template <typename Has>
std::uint64_t sack_bits(std::uint64_t arrived, std::uint64_t limit, Has&& has) {
  std::uint64_t sack = 0;
  for (std::uint32_t i = 0; i < 64; ++i) {
    const std::uint64_t seq = arrived + 1 + i;
    if (seq >= limit) break;
    if (has(seq)) sack |= std::uint64_t{1} << i;
  }
  return sack;
}

// The sender's reading of a SACK bitmap: calls fn(seq) for every seq it marks, lowest first,
// and returns the highest seq the acknowledgement covers (`ack` when no bit is set).
template <typename Fn>
std::uint64_t for_each_sacked(std::uint64_t ack, std::uint64_t sack, Fn&& fn) {
  std::uint64_t highest = ack;
  for (std::uint64_t bits = sack; bits != 0; bits &= bits - 1) {
    const std::uint64_t seq = ack + 1 + static_cast<std::uint64_t>(__builtin_ctzll(bits));
    highest = seq;
    fn(seq);
  }
  return highest;
}

// Three later frames acknowledged: a frame sent once is presumed lost (the fast retransmit).
inline constexpr std::uint32_t kFastRetransmitGap = 3;

// Whether a frame in flight (not acknowledged, not SACKed) is presumed lost now, before its
// timeout: it was sent once and kFastRetransmitGap later seqs were acknowledged (`highest`), or
// a frame transmitted after it (transmission number `xmit` below `rack_xmit`, the newest
// transmission known to have arrived) arrived, which links that keep a flow in order (RACK)
// only allow when it was lost.
constexpr bool presumed_lost(std::uint64_t seq, std::uint32_t tx_count, std::uint64_t xmit, std::uint64_t highest,
                             std::uint64_t rack_xmit) {
  const bool by_count = tx_count == 1 && seq + kFastRetransmitGap <= highest;
  const bool overtaken = xmit < rack_xmit;
  return by_count || overtaken;
}

}  // namespace sparcoll::transport::dpdk
