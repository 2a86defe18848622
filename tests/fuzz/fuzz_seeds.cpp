// Writes the seed corpus of the fuzz targets: small valid inputs, built with the library's own
// encoders, deterministically (same bytes on every run), one folder per target:
//
//   fuzz_seeds --write-seeds tests/fuzz/corpus        (scripts/fuzz --write-seeds runs it)
//
// Files in a target's folder that this program does not write (crash inputs kept as
// regressions, named crash-*) are left alone.
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "algo/block_set.hpp"
#include "control/store_wire.hpp"
#include "p2p/peer_wire.hpp"
#include "dpdk_wire.hpp"
#include "fuzz_params.hpp"
#include "proto/wire.hpp"
#include "shm_segment.hpp"
#include "tcp_wire.hpp"
#include "trace_writer.hpp"

namespace sparcoll::fuzz {
namespace {

using Bytes = std::vector<unsigned char>;

std::string g_root;
int g_written = 0;

void write(const std::string& target, const std::string& name, const Bytes& bytes) {
  const std::string dir = g_root + "/" + target;
  mkdir(g_root.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "fuzz_seeds: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(1);
  }
  ++g_written;
}

template <typename T>
void append(Bytes* out, const T& value) {
  const auto* p = reinterpret_cast<const unsigned char*>(&value);
  out->insert(out->end(), p, p + sizeof value);
}
void append(Bytes* out, const std::string& s) { out->insert(out->end(), s.begin(), s.end()); }

// --- proto: block-sparse messages -----------------------------------------------------------
Bytes proto_blocks(proto::MsgType type, DataType dtype, std::uint64_t count, std::uint32_t block_elems,
                   std::uint32_t lanes, std::uint32_t lane, const std::vector<std::uint64_t>& indices,
                   std::uint64_t next, std::uint32_t flags) {
  proto::Geometry g;
  g.count = count;
  g.block_elems = block_elems;
  g.num_lanes = lanes;
  g.dtype = dtype;
  proto::WireHeader h = proto::make_header(type, g, ReduceOp::sum, 0x5eed, 7, lane, 1);
  h.nblocks = static_cast<std::uint16_t>(indices.size());
  h.next_index = next;
  h.flags = flags;
  const std::uint64_t payload = (flags & proto::kFlagLocalData)
                                    ? indices.size() * sizeof(std::uint64_t)
                                    : proto::payload_bytes(g, indices.data(), h.nblocks);
  h.payload_len = static_cast<std::uint32_t>(payload);
  Bytes out;
  append(&out, h);
  for (std::uint64_t b : indices) append(&out, b);
  while (out.size() < sizeof h + payload) out.push_back(static_cast<unsigned char>(out.size() * 7));
  return out;
}

Bytes proto_reason(proto::MsgType type, const std::string& reason) {
  proto::Geometry g;
  g.count = 1000;
  g.block_elems = 256;
  g.num_lanes = 4;
  proto::WireHeader h = proto::make_header(type, g, ReduceOp::max, 0x5eed, 7, 2, 0);
  h.status = static_cast<std::uint32_t>(ErrorCode::mismatch);
  h.payload_len = static_cast<std::uint32_t>(reason.size());
  Bytes out;
  append(&out, h);
  append(&out, reason);
  return out;
}

void proto_seeds() {
  using proto::MsgType;
  write("proto_codec", "window-two-blocks", proto_blocks(MsgType::window, DataType::f32, 30, 4, 2, 1, {1, 5}, 7, 0));
  write("proto_codec", "window-empty-end", proto_blocks(MsgType::window, DataType::bf16, 100, 8, 3, 0, {}, proto::kEnd, 0));
  write("proto_codec", "result-final-short-tail",
        proto_blocks(MsgType::result, DataType::f16, 30, 4, 1, 0, {0, 3, 7}, proto::kEnd, proto::kFlagFinal));
  write("proto_codec", "result-not-final", proto_blocks(MsgType::result, DataType::i32, 64, 4, 4, 3, {3, 7, 11}, 15, 0));
  write("proto_codec", "window-local-data",
        proto_blocks(MsgType::window, DataType::f32, 4096, 256, 2, 0, {0, 2, 4}, 6, proto::kFlagLocalData));
  write("proto_codec", "error-reason", proto_reason(MsgType::error, "rank 0 passed 4000 x f32 sum, rank 1 passed 4001"));
  write("proto_codec", "abort-reason", proto_reason(MsgType::abort, "invalid argument: null buffer"));
}

// --- coll: peer messages --------------------------------------------------------------------
Bytes peer(p2p::PeerKind kind, std::uint32_t seq, std::uint32_t tag, std::uint64_t total, std::uint64_t offset,
           const std::string& payload) {
  const p2p::PeerHeader h{p2p::kPeerMagic, p2p::kPeerVersion, static_cast<std::uint8_t>(kind), 0,
                           kind == p2p::PeerKind::data ? 0x80000000u : 0u, 0, seq, tag, total, offset};
  Bytes out;
  append(&out, h);
  append(&out, payload);
  return out;
}

// --- block sets (block recursive doubling) ---------------------------------------------------
// 20 f32 elements in blocks of 8 (the last one 4 long): blocks `present` of {0, 1, 2}.
Bytes block_set(const std::vector<int>& present) {
  std::uint64_t bits = 0;
  std::size_t elems = 0;
  for (int b : present) {
    bits |= std::uint64_t{1} << b;
    elems += b == 2 ? 4 : 8;
  }
  const algo::BlockSetHeader h{algo::kBlockSetMagic, algo::kBlockSetVersion, static_cast<std::uint8_t>(DataType::f32),
                               0, 8, static_cast<std::uint32_t>(present.size()), 20};
  Bytes out;
  append(&out, h);
  append(&out, bits);
  for (std::size_t i = 0; i < elems; ++i) append(&out, static_cast<float>(i) - 3.5f);
  return out;
}

void block_set_seeds() {
  write("block_set", "empty", block_set({}));
  write("block_set", "first-and-short-last", block_set({0, 2}));
  write("block_set", "every-block", block_set({0, 1, 2}));
}

void peer_seeds() {
  using p2p::PeerKind;
  write("peer_wire", "data-first-fragment", peer(PeerKind::data, 3, 1, 64, 0, std::string(32, 'a')));
  write("peer_wire", "data-last-fragment", peer(PeerKind::data, 3, 1, 64, 32, std::string(32, 'b')));
  write("peer_wire", "data-empty-message", peer(PeerKind::data, 4, 0, 0, 0, ""));
  write("peer_wire", "p2p-tagged-message", peer(PeerKind::p2p, 0, 42, 16, 0, std::string(16, 'p')));
  write("peer_wire", "abort-timeout", peer(PeerKind::abort, 5, static_cast<std::uint32_t>(ErrorCode::timeout), 26, 0,
                                           "rank 2: deadline passed\n\x01"));
}

// --- control: store frames ------------------------------------------------------------------
Bytes frames(const std::vector<std::string>& encoded) {
  Bytes out;
  for (const std::string& e : encoded) append(&out, e);
  return out;
}

void store_seeds() {
  namespace wire = control::wire;
  wire::Hello hello;
  hello.token = "job-token-1";
  hello.identity = "rank 1 pid 4242";
  auto request = [](wire::MsgType type, std::uint64_t id, const std::string& key, const std::string& value,
                    std::int64_t number) {
    wire::Request r;
    r.type = type;
    r.id = id;
    r.key = key;
    r.value = value;
    r.number = number;
    return wire::encode(r);
  };
  write("store_wire", "hello", frames({wire::encode(hello)}));
  write("store_wire", "session",
        frames({wire::encode(hello), request(wire::MsgType::set, 1, "shm/segment/0", "/sparcoll-00ff-1-0", 0),
                request(wire::MsgType::get, 2, "shm/segment/1", "", 0), request(wire::MsgType::add, 3, "barrier", "", -1),
                request(wire::MsgType::wait_at_least, 4, "barrier", "", 4)}));
  wire::Reply ok;
  ok.id = 3;
  ok.data = wire::encode_i64(7);
  wire::Reply failed;
  failed.id = 4;
  failed.code = static_cast<std::uint32_t>(ErrorCode::auth_failure);
  failed.data = "job token mismatch";
  write("store_wire", "replies", frames({wire::encode(ok), wire::encode(failed)}));
}

// --- tcp: handshake and frames --------------------------------------------------------------
Bytes tcp_frame(const std::string& payload) {
  Bytes out;
  append(&out, transport::tcp::FrameHeader{static_cast<std::uint32_t>(payload.size()), 0});
  append(&out, payload);
  while (out.size() % 8 != 0) out.push_back(0);
  return out;
}

void tcp_seeds() {
  namespace tcp = transport::tcp;
  tcp::HandshakeHeader hello{tcp::HandshakeKind::hello, 1, 0, 0, 0};
  Bytes session;
  append(&session, tcp::encode_handshake(hello, "job-token-1"));
  for (const char* p : {"", "hello", "sixteen bytes!!!", "a message of twenty-nine bytes"}) {
    const Bytes f = tcp_frame(p);
    session.insert(session.end(), f.begin(), f.end());
  }
  write("tcp_wire", "hello-and-frames", session);
  tcp::HandshakeHeader accept{tcp::HandshakeKind::accept, 0, 2, 0, 0};
  Bytes answer;
  append(&answer, tcp::encode_handshake(accept));
  const Bytes f = tcp_frame(std::string(100, 'x'));
  answer.insert(answer.end(), f.begin(), f.end());
  answer.insert(answer.end(), f.begin(), f.begin() + 50);  // the peer closed in the middle of a frame
  write("tcp_wire", "accept-and-cut-frame", answer);
  tcp::HandshakeHeader reject{tcp::HandshakeKind::reject, 0, 0, static_cast<std::uint32_t>(ErrorCode::auth_failure), 0};
  write("tcp_wire", "reject", [&] {
    Bytes b;
    append(&b, tcp::encode_handshake(reject));
    return b;
  }());
}

// --- dpdk: Ethernet frames ------------------------------------------------------------------
Bytes dpdk_frame(transport::dpdk::FrameType type, const std::string& payload, bool udp_checksum, std::size_t padding) {
  namespace dpdk = transport::dpdk;
  dpdk::FrameHeader h;
  std::memcpy(h.dst_mac.bytes, kDpdkMac, 6);
  const std::uint8_t src_mac[6] = {0x02, 0x53, 0x43, 0x00, 0x00, 0x01};
  std::memcpy(h.src_mac.bytes, src_mac, 6);
  h.src_ip = 0x0a000001;
  h.dst_ip = kDpdkIp;
  h.src_port = 47000;
  h.dst_port = kDpdkPort;
  h.type = type;
  h.channel = kDpdkChannel;
  h.job_id = 0x1234abcd5678ef00;
  h.src = 0;
  h.dst = kDpdkSelf;
  h.seq = 41;
  h.ack = 17;
  h.sack = 0b1011;
  h.limit = 80;
  h.payload_len = static_cast<std::uint32_t>(payload.size());
  Bytes out(dpdk::kHeadersLen + payload.size() + padding, 0);
  dpdk::build_frame(out.data(), h, payload.data(), udp_checksum);
  return out;
}

void dpdk_seeds() {
  using transport::dpdk::FrameType;
  write("dpdk_wire", "data-udp-checksum", dpdk_frame(FrameType::data, std::string(24, 'p'), true, 0));
  write("dpdk_wire", "data-no-checksum-padded", dpdk_frame(FrameType::data, "short", false, 11));
  write("dpdk_wire", "ack", dpdk_frame(FrameType::ack, "", false, 0));
  write("dpdk_wire", "fin", dpdk_frame(FrameType::fin, "", true, 0));
  write("dpdk_wire", "fin-ack", dpdk_frame(FrameType::fin_ack, "", false, 0));
  // The address parsers read text: an input that is only an address.
  write("dpdk_wire", "text-mac", Bytes{'0', '2', ':', '5', '3', ':', '4', '3', ':', '0', '0', ':', '0', '0', ':', '0', '1'});
  write("dpdk_wire", "text-ip", Bytes{'1', '0', '.', '0', '.', '0', '.', '2'});
}

// --- shm: ring step sequences and segments --------------------------------------------------
void shm_seeds() {
  // The ring target reads its input as a sequence of steps (FuzzedDataProvider): any bytes are
  // a valid input; these are a few lengths of fixed pseudo-random bytes.
  std::mt19937 random(20240516);
  for (const std::size_t len : {32, 128, 512, 2048}) {
    Bytes b(len);
    for (unsigned char& c : b) c = static_cast<unsigned char>(random());
    write("shm_ring", "steps-" + std::to_string(len), b);
  }
  namespace shm = transport::shm;
  auto segment = [](std::uint32_t rings, std::uint64_t ring_bytes) {
    const std::uint64_t first = shm::segment_first_ring_offset(rings);
    const std::uint64_t size = first + rings * shm::segment_ring_stride(ring_bytes);
    Bytes out(size, 0);
    shm::SegmentHeader h{};
    h.magic = shm::kSegmentMagic;
    h.version = shm::kSegmentVersion;
    h.owner_index = kShmOwner;
    h.ring_count = rings;
    h.max_message = 16;
    h.ring_bytes = ring_bytes;
    h.total_bytes = size;
    std::memcpy(out.data(), static_cast<const void*>(&h), offsetof(shm::SegmentHeader, closed));
    for (std::uint32_t i = 0; i < rings; ++i) {
      const shm::RingEntry e{i % 2, i / 2, first + i * shm::segment_ring_stride(ring_bytes)};
      std::memcpy(out.data() + shm::segment_table_offset() + i * sizeof e, &e, sizeof e);
    }
    return out;
  };
  write("shm_segment", "no-rings", segment(0, 64));
  write("shm_segment", "one-ring", segment(1, 64));
  write("shm_segment", "three-rings", segment(3, 128));
}

// --- perf: gradient traces ------------------------------------------------------------------
void trace_seeds() {
  perf::GradientTrace t;
  t.workers = 1;
  t.steps = 1;
  t.block_elems = 4;
  t.elements = 10;
  t.description = "seed: 10 elements";
  t.records.resize(1);
  t.records[0].blocks = {0, 2};
  t.records[0].values = {0x3f80, 0xbf80, 0x4000, 0x0001, 0x7f80, 0xff80};  // block 2 is the short tail
  write("trace", "one-record", write_trace(t));

  perf::GradientTrace u;
  u.workers = 2;
  u.steps = 2;
  u.block_elems = 3;
  u.elements = 11;
  u.description = "seed: 2 workers x 2 steps";
  u.parameters = {{"weight", 0, 8}, {"bias", 8, 3}};
  u.records.resize(4);
  u.records[0].blocks = {1};
  u.records[0].values = {1, 2, 3};
  u.records[2].blocks = {0, 3};
  u.records[2].values = {4, 5, 6, 7, 8};
  u.records[3].blocks = {0, 1, 2, 3};
  u.records[3].values = {9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  write("trace", "two-workers-two-steps", write_trace(u));

  // A record that inflates to far more than 4 times its compressed size: the reader's inflate
  // buffer must grow (its first size is 4 KiB or 4 times the compressed bytes).
  perf::GradientTrace v;
  v.workers = 1;
  v.steps = 1;
  v.block_elems = 256;
  v.elements = 65536;
  v.description = "seed: one compressible record";
  v.records.resize(1);
  for (std::uint32_t b = 0; b < 256; ++b) v.records[0].blocks.push_back(b);
  v.records[0].values.assign(65536, 0x3f80);  // 1.0
  write("trace", "large-compressible-record", write_trace(v));
}

}  // namespace
}  // namespace sparcoll::fuzz

int main(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], "--write-seeds") != 0) {
    std::fprintf(stderr, "usage: %s --write-seeds DIR\n", argv[0]);
    return 2;
  }
  using namespace sparcoll::fuzz;
  g_root = argv[2];
  proto_seeds();
  peer_seeds();
  block_set_seeds();
  store_seeds();
  tcp_seeds();
  dpdk_seeds();
  shm_seeds();
  trace_seeds();
  std::printf("fuzz_seeds: wrote %d seeds under %s\n", g_written, g_root.c_str());
  return 0;
}
