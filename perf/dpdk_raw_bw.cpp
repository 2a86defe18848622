// sparcoll-dpdk-raw-bw: raw DPDK burst sender / receiver, the baseline the DPDK driver's
// goodput is compared with. Two processes: the server receives, the client sends (like iperf).
//
//   on a net_memif pair (default; abstract socket, scoped to the network namespace):
//     sparcoll-dpdk-raw-bw --role server &             # receiver, lcore 0
//     sparcoll-dpdk-raw-bw --role client --size 8192   # sender, lcore 1
//   on af_packet, e.g. between two hosts of scripts/netns-cluster (start the receiver first):
//     scripts/netns-cluster up 2
//     scripts/netns-cluster exec 1 -- sparcoll-dpdk-raw-bw --role server
//         --eal "--vdev=net_af_packet0,iface=veth0,framecnt=4096" &
//     scripts/netns-cluster exec 0 -- sparcoll-dpdk-raw-bw --role client --dst-mac 02:77:00:00:00:02
//         --eal "--vdev=net_af_packet0,iface=veth0,framecnt=4096"
//   (one command line each)
//   (payloads over ~2000 bytes on af_packet need bigger frames: blocksz=20480,framesz=10240)
//
// Sender: UDP/IPv4/Ethernet frames with --size bytes of UDP payload, written once into every
// mbuf of its pool when the pool is created (the template); per packet only the lengths and a
// sequence number are set (with --copy, the payload is also copied in from a buffer of the
// program's, once per packet: the work a send() that copies adds). Bursts of 32, partial bursts
// retried. Runs --seconds S or --packets N, then sends an end marker (once on memif, 16 copies
// on lossy devices) carrying its counts and keeps its port open 200 ms so the receiver stops
// polling before the sender disconnects.
// Receiver: counts IPv4/UDP packets to --udp-port and their payload bytes from the first packet
// to the last one before the marker; stops at the marker, after 2 s without packets, or when
// the link goes down (the last two still print the line, but exit 1).
// Known limit (DPDK 22.11 memif): a peer killed mid-run can crash the survivor inside the PMD
// (its interrupt thread unmaps the shared regions while rx/tx_burst copies); clean ends are safe.
// Both print one line on stdout:
//   role=sender|receiver packets=N bytes=N seconds=S mpps=X gbit_per_s=Y
// (bytes = UDP payload, gbit_per_s = 1e9 bit/s of payload) and append the same fields as a JSON
// line to --json FILE. Diagnostics (loss, reordering, device drops) go to stderr.
// EAL: --no-huge -m 256 --no-pci --no-shconf --no-telemetry -l L (server 0, client 1) plus --eal.
// rte_eal_init pins the calling thread; that affinity is undone right after, and the polling
// thread is pinned to its lcore's CPU on purpose unless --no-pin.
// Exit codes: 0 ok; 1 run-time failure (EAL, device, link, timeout); 2 bad flags.
#include <sched.h>
#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// DPDK headers are included as system headers (meson: include_type 'system'); they warn under C++20.
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_udp.h>

namespace {

constexpr const char* kProg = "sparcoll-dpdk-raw-bw";
constexpr std::uint16_t kBurst = 32;
constexpr std::uint32_t kMagic = 0x53505242;  // "SPRB"
constexpr std::uint32_t kKindData = 0;
constexpr std::uint32_t kKindEnd = 1;
constexpr std::uint32_t kHeaders = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr);  // 42
constexpr std::uint32_t kDataRoom = 10240;  // one mbuf holds a jumbo frame (memif bsize=10240)
constexpr std::uint32_t kMaxPayload = kDataRoom - kHeaders;
constexpr std::uint32_t kMinPayload = 16;   // the payload header below
constexpr unsigned kPoolSize = 8191;
constexpr double kIdleSeconds = 2.0;        // receiver: stop after this long without packets
constexpr int kLingerMs = 200;              // sender: port stays open after the marker

// First bytes of every UDP payload. The end marker carries the sender's totals.
struct PayloadHeader {
  std::uint32_t magic;
  std::uint32_t kind;
  std::uint64_t seq;  // data: sequence number; end: packets sent
};
struct EndMarker {
  PayloadHeader h;
  std::uint64_t bytes;  // payload bytes sent
};

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_signal(int) { g_stop = 1; }

struct Flags {
  std::string role;  // server (receiver) | client (sender)
  std::string socket = "/sparcoll-raw-bw";
  std::string eal;
  std::string json;
  std::uint32_t size = 8192;
  double seconds = 3.0;
  std::uint64_t packets = 0;  // 0: run --seconds
  double timeout = 30.0;
  int lcore = -1;
  bool pin = true;
  bool copy = false;  // sender: copy each payload from a buffer of its own (what a copying send API costs)
  std::uint16_t udp_port = 47000;
  rte_ether_addr dst_mac{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
  std::uint32_t src_ip = RTE_IPV4(10, 77, 0, 1);
  std::uint32_t dst_ip = RTE_IPV4(10, 77, 0, 2);
};

void usage(std::FILE* out) {
  std::fprintf(out,
      "usage: %s --role server|client [flags]\n"
      "  --role server|client  server receives, client sends (memif role of the same name)\n"
      "  --socket NAME         memif abstract socket name (default /sparcoll-raw-bw)\n"
      "  --eal \"ARGS\"          extra EAL arguments, split on spaces; with a --vdev the memif\n"
      "                        device is not added (e.g. --vdev=net_af_packet0,iface=veth0)\n"
      "  --lcore N             EAL lcore (default: server 0, client 1)\n"
      "  --no-pin              leave the polling thread unpinned after EAL init\n"
      "  --copy                sender: copy every payload into its mbuf from one buffer of the\n"
      "                        program's (like a send() that copies), not the pool's template\n"
      "  --size BYTES          sender: UDP payload per packet, %u..%u (default 8192)\n"
      "  --seconds S           sender: run time (default 3)\n"
      "  --packets N           sender: send N packets instead of --seconds\n"
      "  --timeout S           link-up and first-packet deadline (default 30)\n"
      "  --udp-port P          UDP destination port sent and counted (default 47000)\n"
      "  --dst-mac MAC         sender: destination MAC (default broadcast)\n"
      "  --src-ip A --dst-ip A sender: IPv4 addresses (default 10.77.0.1 -> 10.77.0.2)\n"
      "  --json FILE           append the result as one JSON line\n"
      "prints: role=sender|receiver packets=N bytes=N seconds=S mpps=X gbit_per_s=Y\n",
      kProg, kMinPayload, kMaxPayload);
}

[[noreturn]] void bad_flag(const std::string& what) {
  std::fprintf(stderr, "%s: %s (see --help)\n", kProg, what.c_str());
  std::exit(2);
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "%s: error: %s\n", kProg, what.c_str());
  std::exit(1);
}

template <typename T>
bool parse_uint(const std::string& s, T* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return !s.empty() && ec == std::errc() && p == end;
}

bool parse_double(const std::string& s, double* out) {
  if (s.empty() || s[0] == '-' || s[0] == '+' || s[0] == ' ') return false;
  char* end = nullptr;
  errno = 0;
  *out = std::strtod(s.c_str(), &end);
  return errno == 0 && end == s.c_str() + s.size();
}

bool parse_ipv4(const std::string& s, std::uint32_t* out) {
  unsigned a[4];
  char tail;
  if (std::sscanf(s.c_str(), "%u.%u.%u.%u%c", &a[0], &a[1], &a[2], &a[3], &tail) != 4) return false;
  for (unsigned v : a)
    if (v > 255) return false;
  *out = RTE_IPV4(a[0], a[1], a[2], a[3]);
  return true;
}

bool parse_mac(const std::string& s, rte_ether_addr* out) {
  unsigned b[6];
  char tail;
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &tail) != 6)
    return false;
  for (int i = 0; i < 6; ++i) {
    if (b[i] > 255) return false;
    out->addr_bytes[i] = static_cast<std::uint8_t>(b[i]);
  }
  return true;
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  bool size_set = false, seconds_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    }
    if (a == "--no-pin") {
      f.pin = false;
      continue;
    }
    if (a == "--copy") {
      f.copy = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) bad_flag("unexpected argument '" + a + "'");
    if (i + 1 >= argc) bad_flag("missing value after " + a);
    const std::string v = argv[++i];
    if (a == "--role") {
      if (v != "server" && v != "client") bad_flag("--role must be server or client, got '" + v + "'");
      f.role = v;
    } else if (a == "--socket") {
      if (v.empty() || v.size() > 100 || v.find_first_of(", ") != std::string::npos)
        bad_flag("--socket: 1..100 characters, no ',' or ' '");
      f.socket = v;
    } else if (a == "--eal") {
      f.eal = v;
    } else if (a == "--json") {
      if (v.empty()) bad_flag("--json needs a file name");
      f.json = v;
    } else if (a == "--size") {
      if (!parse_uint(v, &f.size) || f.size < kMinPayload || f.size > kMaxPayload)
        bad_flag("--size must be an integer in [" + std::to_string(kMinPayload) + ", " +
                 std::to_string(kMaxPayload) + "], got '" + v + "'");
      size_set = true;
    } else if (a == "--seconds") {
      if (!parse_double(v, &f.seconds) || !(f.seconds > 0) || f.seconds > 86400)
        bad_flag("--seconds must be a number in (0, 86400], got '" + v + "'");
      seconds_set = true;
    } else if (a == "--packets") {
      if (!parse_uint(v, &f.packets) || f.packets == 0) bad_flag("--packets must be a positive integer, got '" + v + "'");
    } else if (a == "--timeout") {
      if (!parse_double(v, &f.timeout) || !(f.timeout > 0) || f.timeout > 86400)
        bad_flag("--timeout must be a number of seconds in (0, 86400], got '" + v + "'");
    } else if (a == "--lcore") {
      unsigned l = 0;
      if (!parse_uint(v, &l) || l >= RTE_MAX_LCORE) bad_flag("--lcore must be an lcore number, got '" + v + "'");
      f.lcore = static_cast<int>(l);
    } else if (a == "--udp-port") {
      if (!parse_uint(v, &f.udp_port) || f.udp_port == 0) bad_flag("--udp-port must be in [1, 65535], got '" + v + "'");
    } else if (a == "--dst-mac") {
      if (!parse_mac(v, &f.dst_mac)) bad_flag("--dst-mac must look like 02:77:00:00:00:02, got '" + v + "'");
    } else if (a == "--src-ip") {
      if (!parse_ipv4(v, &f.src_ip)) bad_flag("--src-ip must be an IPv4 address, got '" + v + "'");
    } else if (a == "--dst-ip") {
      if (!parse_ipv4(v, &f.dst_ip)) bad_flag("--dst-ip must be an IPv4 address, got '" + v + "'");
    } else {
      bad_flag("unknown flag " + a);
    }
  }
  if (f.role.empty()) bad_flag("--role server|client is required");
  if (f.role == "server" && (size_set || seconds_set || f.packets || f.copy))
    bad_flag("--size, --seconds, --packets and --copy are sender (client) flags");
  if (f.packets && seconds_set) bad_flag("give --seconds or --packets, not both");
  if (f.lcore < 0) f.lcore = f.role == "server" ? 0 : 1;
  return f;
}

std::vector<std::string> split_spaces(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Writes the frame template (Ethernet/IPv4/UDP headers and payload header) into every mbuf of
// the pool, once, at the offset rte_pktmbuf_alloc gives each packet's data.
struct Template {
  std::vector<std::uint8_t> bytes;
};

void write_template(rte_mempool*, void* arg, void* obj, unsigned) {
  const auto* t = static_cast<const Template*>(arg);
  auto* m = static_cast<rte_mbuf*>(obj);
  std::memcpy(static_cast<char*>(m->buf_addr) + RTE_PKTMBUF_HEADROOM, t->bytes.data(), t->bytes.size());
}

std::vector<std::uint8_t> build_frame(const Flags& f, const rte_ether_addr& src_mac, std::uint32_t payload) {
  std::vector<std::uint8_t> b(kHeaders + payload, 0);
  auto* eth = reinterpret_cast<rte_ether_hdr*>(b.data());
  eth->dst_addr = f.dst_mac;
  eth->src_addr = src_mac;
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->total_length = rte_cpu_to_be_16(static_cast<std::uint16_t>(sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr) + payload));
  ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = rte_cpu_to_be_32(f.src_ip);
  ip->dst_addr = rte_cpu_to_be_32(f.dst_ip);
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
  udp->src_port = rte_cpu_to_be_16(f.udp_port);
  udp->dst_port = rte_cpu_to_be_16(f.udp_port);
  udp->dgram_len = rte_cpu_to_be_16(static_cast<std::uint16_t>(sizeof(rte_udp_hdr) + payload));
  udp->dgram_cksum = 0;  // optional over IPv4
  PayloadHeader h{kMagic, kKindData, 0};
  std::memcpy(udp + 1, &h, sizeof h);
  return b;
}

bool link_up(std::uint16_t port) {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

struct Result {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};

void report(const Flags& f, const char* role, const Result& r) {
  const double secs = r.seconds > 0 ? r.seconds : 0;
  const double mpps = secs > 0 ? static_cast<double>(r.packets) / secs / 1e6 : 0;
  const double gbps = secs > 0 ? static_cast<double>(r.bytes) * 8 / secs / 1e9 : 0;
  std::printf("role=%s packets=%llu bytes=%llu seconds=%.6f mpps=%.4f gbit_per_s=%.4f\n", role,
              static_cast<unsigned long long>(r.packets), static_cast<unsigned long long>(r.bytes), secs, mpps, gbps);
  std::fflush(stdout);
  if (!f.json.empty()) {
    std::FILE* out = std::fopen(f.json.c_str(), "a");
    if (!out) {
      std::fprintf(stderr, "%s: warning: cannot open --json %s: %s\n", kProg, f.json.c_str(), std::strerror(errno));
      return;
    }
    std::fprintf(out,
                 "{\"role\": \"%s\", \"packets\": %llu, \"bytes\": %llu, \"seconds\": %.6f, \"mpps\": %.4f, "
                 "\"gbit_per_s\": %.4f}\n",
                 role, static_cast<unsigned long long>(r.packets), static_cast<unsigned long long>(r.bytes), secs,
                 mpps, gbps);
    std::fclose(out);
  }
}

// Sends bufs[0..n) completely, retrying partial bursts. Returns how many went out; frees the
// rest if the link goes down or nothing goes out for `stall_cycles`.
std::uint16_t send_all(std::uint16_t port, rte_mbuf** bufs, std::uint16_t n, std::uint64_t stall_cycles) {
  std::uint16_t sent = 0;
  std::uint32_t spins = 0;
  std::uint64_t since = 0;
  while (sent < n) {
    const std::uint16_t k = rte_eth_tx_burst(port, 0, bufs + sent, static_cast<std::uint16_t>(n - sent));
    sent = static_cast<std::uint16_t>(sent + k);
    if (k != 0) {
      spins = 0;
      since = 0;
      continue;
    }
    if ((++spins & 0xfff) != 0) continue;
    const std::uint64_t now = rte_rdtsc();
    if (since == 0) since = now;
    if (now - since > stall_cycles || !link_up(port) || g_stop) break;
  }
  if (sent < n) rte_pktmbuf_free_bulk(bufs + sent, n - sent);
  return sent;
}

int run_sender(const Flags& f, std::uint16_t port, rte_mempool* pool, bool lossless) {
  const std::uint64_t hz = rte_get_tsc_hz();
  const std::uint16_t frame_len = static_cast<std::uint16_t>(kHeaders + f.size);
  rte_mbuf* bufs[kBurst];
  Result r;
  std::uint64_t seq = 0;
  const std::uint64_t start = rte_rdtsc();
  const std::uint64_t end = start + static_cast<std::uint64_t>(f.seconds * static_cast<double>(hz));
  const std::uint64_t stall = static_cast<std::uint64_t>(f.timeout * static_cast<double>(hz));
  std::uint64_t last = start;
  bool stalled = false;
  // --copy: the payload after the sequence header comes from here, one memcpy per packet.
  const std::size_t copied = f.size > sizeof(PayloadHeader) ? f.size - sizeof(PayloadHeader) : 0;
  const std::vector<char> source(f.copy ? copied : 0, 0x5a);
  while (!g_stop) {
    std::uint16_t n = kBurst;
    if (f.packets) {
      if (seq >= f.packets) break;
      n = static_cast<std::uint16_t>(std::min<std::uint64_t>(kBurst, f.packets - seq));
    } else if (rte_rdtsc() >= end) {
      break;
    }
    if (rte_pktmbuf_alloc_bulk(pool, bufs, n) != 0) continue;  // all in flight: retry
    for (std::uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = bufs[i];
      m->data_len = frame_len;
      m->pkt_len = frame_len;
      std::uint64_t s = seq + i;
      std::memcpy(rte_pktmbuf_mtod_offset(m, char*, kHeaders + offsetof(PayloadHeader, seq)), &s, sizeof s);
      if (f.copy) std::memcpy(rte_pktmbuf_mtod_offset(m, char*, kHeaders + sizeof(PayloadHeader)), source.data(), copied);
    }
    const std::uint16_t sent = send_all(port, bufs, n, stall);
    seq += sent;
    last = rte_rdtsc();
    if (seq == sent && sent > 0) {
      // af_packet accepts frames larger than its framesz and drops them as errors: stop early.
      rte_eth_stats st{};
      if (rte_eth_stats_get(port, &st) == 0 && st.oerrors >= sent) {
        std::fprintf(stderr, "%s: error: the device dropped every frame of the first burst as errors (%u-byte "
                     "frames; af_packet needs framesz >= frame + 32, e.g. blocksz=20480,framesz=10240)\n",
                     kProg, frame_len);
        return 1;
      }
    }
    if (sent < n) {
      if (g_stop) break;
      std::fprintf(stderr, "%s: error: sender stalled (link down or receiver gone); stopping\n", kProg);
      stalled = true;
      break;
    }
  }
  // Frames the device accepted but dropped as errors (af_packet) were not sent.
  rte_eth_stats st{};
  std::uint64_t errors = 0;
  if (rte_eth_stats_get(port, &st) == 0) errors = std::min<std::uint64_t>(st.oerrors, seq);
  if (errors)
    std::fprintf(stderr, "%s: warning: the device dropped %llu of %llu frames as transmit errors; not counted\n",
                 kProg, static_cast<unsigned long long>(errors), static_cast<unsigned long long>(seq));
  r.packets = seq - errors;
  r.bytes = r.packets * f.size;
  r.seconds = static_cast<double>(last - start) / static_cast<double>(hz);

  // End marker: its own small frame (payload >= sizeof(EndMarker)) from the same pool.
  const std::uint32_t marker_payload = std::max<std::uint32_t>(f.size, sizeof(EndMarker));
  auto frame = build_frame(f, rte_ether_addr{}, marker_payload);
  rte_eth_macaddr_get(port, &reinterpret_cast<rte_ether_hdr*>(frame.data())->src_addr);
  EndMarker em{{kMagic, kKindEnd, r.packets}, r.bytes};
  std::memcpy(frame.data() + kHeaders, &em, sizeof em);
  const int copies = lossless ? 1 : 16;
  int delivered = 0;
  for (int c = 0; c < copies; ++c) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (!m) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    char* d = rte_pktmbuf_append(m, static_cast<std::uint16_t>(frame.size()));
    if (!d) {
      rte_pktmbuf_free(m);
      break;
    }
    std::memcpy(d, frame.data(), frame.size());
    delivered += send_all(port, &m, 1, hz);
    if (copies > 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (delivered == 0) std::fprintf(stderr, "%s: warning: the end marker could not be sent\n", kProg);
  report(f, "sender", r);
  // The receiver stops polling when it sees the marker; only then may this side disconnect.
  std::this_thread::sleep_for(std::chrono::milliseconds(kLingerMs));
  return stalled ? 1 : 0;
}

int run_receiver(const Flags& f, std::uint16_t port) {
  const std::uint64_t hz = rte_get_tsc_hz();
  rte_mbuf* bufs[kBurst];
  Result r;
  std::uint64_t first_tsc = 0, last_tsc = 0, other = 0, truncated = 0, reordered = 0, max_seq = 0;
  bool got_end = false, have_seq = false;
  std::uint64_t sender_packets = 0, sender_bytes = 0;
  const std::uint64_t first_deadline = rte_rdtsc() + static_cast<std::uint64_t>(f.timeout * static_cast<double>(hz));
  const std::uint64_t idle = static_cast<std::uint64_t>(kIdleSeconds * static_cast<double>(hz));
  std::uint32_t empty = 0;
  const std::uint16_t want_port = rte_cpu_to_be_16(f.udp_port);
  const char* why = "end marker";
  while (!got_end) {
    const std::uint16_t n = rte_eth_rx_burst(port, 0, bufs, kBurst);
    if (n == 0) {
      if ((++empty & 0x3fff) != 0) continue;
      const std::uint64_t now = rte_rdtsc();
      if (g_stop) { why = "signal"; break; }
      if (r.packets == 0 && now > first_deadline) { why = "timeout before the first packet"; break; }
      if (r.packets > 0 && now - last_tsc > idle) { why = "no packet for 2 s (end marker lost?)"; break; }
      if (!link_up(port)) { why = "link down"; break; }
      continue;
    }
    const std::uint64_t now = rte_rdtsc();
    for (std::uint16_t i = 0; i < n; ++i) {
      const rte_mbuf* m = bufs[i];
      if (m->data_len < kHeaders + sizeof(PayloadHeader)) { ++other; continue; }
      const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
      const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(eth + 1);
      const auto* udp = reinterpret_cast<const rte_udp_hdr*>(ip + 1);
      if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) || ip->version_ihl != RTE_IPV4_VHL_DEF ||
          ip->next_proto_id != IPPROTO_UDP || udp->dst_port != want_port) {
        ++other;
        continue;
      }
      PayloadHeader h;
      std::memcpy(&h, udp + 1, sizeof h);
      if (h.magic != kMagic) { ++other; continue; }
      if (h.kind == kKindEnd) {
        if (m->data_len >= kHeaders + sizeof(EndMarker)) {
          EndMarker em;
          std::memcpy(&em, udp + 1, sizeof em);
          sender_packets = em.h.seq;
          sender_bytes = em.bytes;
        }
        got_end = true;
        continue;
      }
      const std::uint32_t payload = rte_be_to_cpu_16(udp->dgram_len) - static_cast<std::uint32_t>(sizeof(rte_udp_hdr));
      if (m->pkt_len < kHeaders + payload) {  // cut short (af_packet: frame larger than framesz)
        ++truncated;
        continue;
      }
      if (r.packets == 0) first_tsc = now;
      ++r.packets;
      r.bytes += payload;
      if (have_seq && h.seq < max_seq) ++reordered;
      if (!have_seq || h.seq > max_seq) max_seq = h.seq;
      have_seq = true;
      last_tsc = now;
    }
    rte_pktmbuf_free_bulk(bufs, n);
  }
  // Stop polling first (we just did); the sender lingers before it disconnects.
  r.seconds = r.packets > 1 ? static_cast<double>(last_tsc - first_tsc) / static_cast<double>(hz) : 0;
  report(f, "receiver", r);
  rte_eth_stats st{};
  rte_eth_stats_get(port, &st);
  std::fprintf(stderr, "%s: receiver stopped on %s; ", kProg, why);
  if (got_end && sender_packets > 0)
    std::fprintf(stderr, "sender sent %llu packets (%llu bytes), lost %llu (%.3f%%), ",
                 static_cast<unsigned long long>(sender_packets), static_cast<unsigned long long>(sender_bytes),
                 static_cast<unsigned long long>(sender_packets > r.packets ? sender_packets - r.packets : 0),
                 sender_packets > r.packets ? 100.0 * static_cast<double>(sender_packets - r.packets) / static_cast<double>(sender_packets) : 0.0);
  std::fprintf(stderr, "reordered %llu, truncated %llu, other frames %llu, device imissed %llu ierrors %llu rx_nombuf %llu\n",
               static_cast<unsigned long long>(reordered), static_cast<unsigned long long>(truncated),
               static_cast<unsigned long long>(other),
               static_cast<unsigned long long>(st.imissed), static_cast<unsigned long long>(st.ierrors),
               static_cast<unsigned long long>(st.rx_nombuf));
  return got_end && r.packets > 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = parse_flags(argc, argv);
  const bool sender = f.role == "client";

  std::vector<std::string> eal = {kProg, "--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--no-telemetry",
                                  "--log-level=lib.eal:error"};
  const std::vector<std::string> extra = split_spaces(f.eal);
  bool has_vdev = false, has_lcores = false;
  for (const auto& a : extra) {
    if (a.rfind("--vdev", 0) == 0) has_vdev = true;
    if (a.rfind("-l", 0) == 0 || a.rfind("--lcores", 0) == 0 || a == "-c") has_lcores = true;
  }
  if (!has_lcores) {
    eal.push_back("-l");
    eal.push_back(std::to_string(f.lcore));
  }
  if (!has_vdev)
    eal.push_back("--vdev=net_memif0,role=" + f.role + ",socket=" + f.socket + ",bsize=" + std::to_string(kDataRoom));
  eal.insert(eal.end(), extra.begin(), extra.end());
  std::vector<char*> eal_argv;
  for (auto& a : eal) eal_argv.push_back(a.data());
  eal_argv.push_back(nullptr);

  // rte_eal_init pins this thread to its lcore: save the affinity and put it back afterwards.
  cpu_set_t saved;
  CPU_ZERO(&saved);
  const bool have_saved = pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0;
  rte_openlog_stream(stderr);
  if (rte_eal_init(static_cast<int>(eal_argv.size() - 1), eal_argv.data()) < 0)
    fail(std::string("rte_eal_init failed: ") + rte_strerror(rte_errno) + " (EAL args: check --eal)");
  if (have_saved) pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
  if (f.pin) {
    // Deliberate: the baseline busy-polls on its own CPU (server -l 0, client -l 1).
    rte_cpuset_t cpus = rte_lcore_cpuset(rte_lcore_id());
    if (pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus) != 0)
      std::fprintf(stderr, "%s: warning: could not pin to lcore %u's CPU\n", kProg, rte_lcore_id());
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  if (rte_eth_dev_count_avail() == 0)
    fail("no DPDK port (memif socket in use by another run? wrong --vdev in --eal?)");
  const std::uint16_t port = static_cast<std::uint16_t>(rte_eth_find_next(0));
  if (port >= RTE_MAX_ETHPORTS) fail("no DPDK port");
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0) fail("rte_eth_dev_info_get failed");
  const std::string driver = info.driver_name ? info.driver_name : "?";
  const bool lossless = driver == "net_memif";

  rte_mempool* pool = rte_pktmbuf_pool_create("raw_bw_pool", kPoolSize, 256, 0,
                                              static_cast<std::uint16_t>(kDataRoom + RTE_PKTMBUF_HEADROOM),
                                              static_cast<int>(rte_socket_id()));
  if (!pool) fail(std::string("mbuf pool: ") + rte_strerror(rte_errno));

  if (sender) {
    rte_ether_addr src{};
    rte_eth_macaddr_get(port, &src);
    Template t{build_frame(f, src, f.size)};
    rte_mempool_obj_iter(pool, write_template, &t);
  }

  rte_eth_conf conf{};
  int rc = rte_eth_dev_configure(port, 1, 1, &conf);
  if (rc != 0) fail("rte_eth_dev_configure: " + std::string(rte_strerror(-rc)));
  std::uint16_t nb_rx = 1024, nb_tx = 1024;
  rte_eth_dev_adjust_nb_rx_tx_desc(port, &nb_rx, &nb_tx);
  const int socket = rte_eth_dev_socket_id(port) < 0 ? 0 : rte_eth_dev_socket_id(port);
  if ((rc = rte_eth_rx_queue_setup(port, 0, nb_rx, static_cast<unsigned>(socket), nullptr, pool)) != 0)
    fail("rte_eth_rx_queue_setup: " + std::string(rte_strerror(-rc)));
  if ((rc = rte_eth_tx_queue_setup(port, 0, nb_tx, static_cast<unsigned>(socket), nullptr)) != 0)
    fail("rte_eth_tx_queue_setup: " + std::string(rte_strerror(-rc)));

  // A memif client started before its server fails to start (-EPERM) and DPDK does not retry.
  // A client that connects after the server's EAL created the listener but before the server
  // started its port is refused ("ID 0 not found") and stays down: the sender restarts its port
  // when the link is not up 1 s after a start. Both retry until --timeout.
  const double deadline = now_s() + f.timeout;
  const std::uint32_t log_level = rte_log_get_global_level();
  for (int attempt = 0;; ++attempt) {
    rc = rte_eth_dev_start(port);
    if (rc == 0) {
      const double wait_until = sender ? std::min(deadline, now_s() + 1.0) : deadline;
      bool up = false;
      while (!(up = link_up(port)) && now_s() < wait_until && !g_stop)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (up) break;
      rte_eth_dev_stop(port);
    } else if (attempt == 0) {
      std::fprintf(stderr, "%s: port start failed (%s), retrying until the --timeout (peer not up yet?)\n", kProg,
                   rte_strerror(-rc));
      rte_log_set_global_level(RTE_LOG_CRIT);  // else one PMD error line per retry
    }
    if (now_s() > deadline || g_stop) {
      rte_log_set_global_level(log_level);
      rte_eth_dev_close(port);
      fail(rc != 0 ? "rte_eth_dev_start: " + std::string(rte_strerror(-rc)) + " until the --timeout (is the peer running?)"
                   : std::string("link not up before the --timeout (is the peer running?)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  rte_log_set_global_level(log_level);

  int status;
  if (sender) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the receiver enters its poll loop
    status = run_sender(f, port, pool, lossless);
  } else {
    status = run_receiver(f, port);
  }
  if (!sender && lossless) {
    // memif teardown handshake: the receiver has stopped polling; the sender disconnects after
    // its linger, and only then does the receiver close. Closing first while the sender was
    // still connected crashed 2 runs in 10 (EAL's interrupt thread handled the memif disconnect
    // while rte_eal_cleanup unmapped memory); with this wait, 0 in 30.
    const double until = now_s() + 1.0;
    while (link_up(port) && now_s() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  // Margin for the interrupt thread to drop the closed device's callbacks before cleanup.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  rte_eal_cleanup();
  return status;
}
