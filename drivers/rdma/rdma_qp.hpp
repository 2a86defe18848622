// One RC queue pair per (peer, channel): creation, the INIT -> RTR -> RTS transitions, and the
// endpoint record peers exchange (the setup exchange) to connect them.
//
// Timeouts are chosen so a dead peer turns into a failed completion within about a second:
//   timeout 14 -> 4.096 us * 2^14 = 67 ms per try, retry_cnt 6 -> 7 tries = ~470 ms
// (HCAs may round the timer up). retry_cnt 7 is NOT used: Soft-RoCE (rxe) treats 7 as
// "retry forever", so a vanished peer was never reported. rnr_retry 7 (infinite) is safe
// because receive WRs are always posted ahead of the credits a sender can use (rdma_channel.hpp).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "rdma_device.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll::transport::rdma {

inline constexpr std::uint8_t kQpTimeout = 14;
inline constexpr std::uint8_t kQpRetryCount = 6;
inline constexpr std::uint8_t kQpRnrRetry = 7;
inline constexpr std::uint8_t kMinRnrTimer = 12;  // 0.64 ms
// Inline data we ask for: credit words (8 bytes) always go inline; data up to this size too.
inline constexpr std::uint32_t kWantedInline = 128;

// What a peer needs to connect to our QP and write into our memory. Serialised as one line of
// "key=hex" fields so the exchanged blob is readable in a debugger.
struct Endpoint {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::uint16_t lid = 0;
  union ibv_gid gid {};
  std::uint32_t mtu = 0;          // enum ibv_mtu
  std::uint64_t ring_addr = 0;    // where the peer writes its messages to us
  std::uint32_t ring_rkey = 0;
  std::uint32_t slots = 0;
  std::uint32_t slot_bytes = 0;
  std::uint64_t credit_addr = 0;  // where the peer writes how many of our messages it consumed
  std::uint32_t credit_rkey = 0;
};

std::string encode_endpoint(const Endpoint& endpoint);
// False on any missing or malformed field.
bool decode_endpoint(const std::string& text, Endpoint* out);

struct QpSizes {
  std::uint32_t send_depth = 0;
  std::uint32_t recv_depth = 0;
  std::uint32_t send_sge = 1;  // gather entries per send WR (zero-copy sends need several)
};

// Creates an RC QP on `cq` and moves it to INIT. *max_inline is what the device granted.
Status create_qp(ibv_pd* pd, ibv_cq* cq, const PortChoice& port, const QpSizes& sizes, ibv_qp** out,
                 std::uint32_t* max_inline);
// INIT -> RTR -> RTS against `remote`; `label` names the peer and QP in errors.
Status connect_qp(ibv_qp* qp, const PortChoice& port, std::uint32_t local_psn, const Endpoint& remote,
                  const std::string& label);

}  // namespace sparcoll::transport::rdma
