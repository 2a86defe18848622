#include "rdma_qp.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>

#include "transport/setup_util.hpp"

namespace sparcoll::transport::rdma {
namespace {

std::string hex(std::uint64_t v) {
  char buffer[17];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v, 16);
  (void)ec;
  return std::string(buffer, end);
}

bool parse_hex(const std::string& text, std::uint64_t max, std::uint64_t* out) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
  if (ec != std::errc() || end != text.data() + text.size() || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

std::string encode_endpoint(const Endpoint& e) {
  std::string gid;
  for (std::uint8_t byte : e.gid.raw) {
    gid.push_back("0123456789abcdef"[byte >> 4]);
    gid.push_back("0123456789abcdef"[byte & 15]);
  }
  return "qpn=" + hex(e.qpn) + " psn=" + hex(e.psn) + " lid=" + hex(e.lid) + " gid=" + gid + " mtu=" + hex(e.mtu) +
         " ring=" + hex(e.ring_addr) + " ring_rkey=" + hex(e.ring_rkey) + " slots=" + hex(e.slots) +
         " slot_bytes=" + hex(e.slot_bytes) + " credit=" + hex(e.credit_addr) + " credit_rkey=" + hex(e.credit_rkey);
}

bool decode_endpoint(const std::string& text, Endpoint* out) {
  Endpoint e;
  std::istringstream in(text);
  std::string field;
  int seen = 0;
  while (in >> field) {
    const std::size_t eq = field.find('=');
    if (eq == std::string::npos) return false;
    const std::string key = field.substr(0, eq);
    const std::string value = field.substr(eq + 1);
    std::uint64_t v = 0;
    constexpr std::uint64_t u32 = 0xffffffffu;
    if (key == "gid") {
      if (value.size() != 32) return false;
      for (int i = 0; i < 16; ++i) {
        if (!parse_hex(value.substr(2 * i, 2), 0xff, &v)) return false;
        e.gid.raw[i] = static_cast<std::uint8_t>(v);
      }
    } else if (key == "qpn" && parse_hex(value, 0xffffff, &v)) {
      e.qpn = static_cast<std::uint32_t>(v);
    } else if (key == "psn" && parse_hex(value, 0xffffff, &v)) {
      e.psn = static_cast<std::uint32_t>(v);
    } else if (key == "lid" && parse_hex(value, 0xffff, &v)) {
      e.lid = static_cast<std::uint16_t>(v);
    } else if (key == "mtu" && parse_hex(value, IBV_MTU_4096, &v) && v >= IBV_MTU_256) {
      e.mtu = static_cast<std::uint32_t>(v);
    } else if (key == "ring" && parse_hex(value, ~std::uint64_t{0}, &v)) {
      e.ring_addr = v;
    } else if (key == "ring_rkey" && parse_hex(value, u32, &v)) {
      e.ring_rkey = static_cast<std::uint32_t>(v);
    } else if (key == "slots" && parse_hex(value, u32, &v) && v > 0) {
      e.slots = static_cast<std::uint32_t>(v);
    } else if (key == "slot_bytes" && parse_hex(value, u32, &v) && v > 0) {
      e.slot_bytes = static_cast<std::uint32_t>(v);
    } else if (key == "credit" && parse_hex(value, ~std::uint64_t{0}, &v)) {
      e.credit_addr = v;
    } else if (key == "credit_rkey" && parse_hex(value, u32, &v)) {
      e.credit_rkey = static_cast<std::uint32_t>(v);
    } else {
      return false;
    }
    ++seen;
  }
  if (seen != 11) return false;
  *out = e;
  return true;
}

Status create_qp(ibv_pd* pd, ibv_cq* cq, const PortChoice& port, const QpSizes& sizes, ibv_qp** out,
                 std::uint32_t* max_inline) {
  ibv_qp_init_attr init {};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;  // selective signalling
  init.cap.max_send_wr = sizes.send_depth;
  init.cap.max_recv_wr = sizes.recv_depth;
  init.cap.max_send_sge = sizes.send_sge;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = kWantedInline;
  ibv_qp* qp = ibv_create_qp(pd, &init);
  if (qp == nullptr) {
    // Some devices offer less inline space; credit words (8 bytes) are all we really need.
    init.cap.max_inline_data = 8;
    qp = ibv_create_qp(pd, &init);
  }
  if (qp == nullptr)
    return Status(ErrorCode::system_error, "ibv_create_qp (rc, " + std::to_string(sizes.send_depth) + " send / " +
                                               std::to_string(sizes.recv_depth) + " receive wrs) on " + port.device +
                                               " failed: " + errno_text(errno));
  ibv_qp_attr attr {};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = port.port;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (int err = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS); err != 0) {
    const std::string qpn = hex(qp->qp_num);
    ibv_destroy_qp(qp);
    return Status(ErrorCode::system_error, "moving qp 0x" + qpn + " to init failed: " + errno_text(err));
  }
  *max_inline = init.cap.max_inline_data;
  *out = qp;
  return Status::Ok();
}

Status connect_qp(ibv_qp* qp, const PortChoice& port, std::uint32_t local_psn, const Endpoint& remote,
                  const std::string& label) {
  ibv_qp_attr attr {};
  attr.qp_state = IBV_QPS_RTR;
  // Both ends must agree on the path MTU: the smaller of the two ports' active MTUs.
  attr.path_mtu = static_cast<enum ibv_mtu>(std::min<std::uint32_t>(port.mtu, remote.mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.port_num = port.port;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.sl = 0;
  // RoCE always routes by GID; InfiniBand by LID within a subnet (GRH only if there is no LID).
  if (port.ethernet || remote.lid == 0) {
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = remote.gid;
    attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(port.gid_index);
    attr.ah_attr.grh.hop_limit = 64;
  }
  int err = ibv_modify_qp(qp, &attr,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (err != 0)
    return Status(ErrorCode::system_error, "moving the qp to " + label + " to rtr failed: " + errno_text(err) +
                                               " (remote gid " + gid_text(remote.gid) + ", local gid index " +
                                               std::to_string(port.gid_index) + " on " + port.device + ")");
  attr = ibv_qp_attr {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = kQpTimeout;
  attr.retry_cnt = kQpRetryCount;
  attr.rnr_retry = kQpRnrRetry;
  attr.sq_psn = local_psn;
  attr.max_rd_atomic = 1;
  err = ibv_modify_qp(qp, &attr,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC);
  if (err != 0) return Status(ErrorCode::system_error, "moving the qp to " + label + " to rts failed: " + errno_text(err));
  return Status::Ok();
}

}  // namespace sparcoll::transport::rdma
