// Options::from_env(), Options::validate() and docs/config.md, all from one table.
//
// Precedence: defaults (the initialisers in options.hpp) < environment < code. For each row,
// the SPARCOLL_* variable wins; its launcher fallbacks (torchrun, Open MPI, PMI, Slurm) are read
// only when it is unset. An empty variable counts as unset.
#include "common/config.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <limits>

#include "common/log.hpp"
#include "common/host_port.hpp"

extern char** environ;

namespace sparcoll {
namespace {

// The allowed values of enumerated options, each listed once: parsing, validation and the
// docs all read these. A new algorithm or transport is added here.
constexpr std::array<std::string_view, 11> kAlgorithms = {"block_sparse", "auto", "ring", "butterfly",
                                                         "ssar_recursive_doubling", "ssar_split_allgather",
                                                         "dsar_split_allgather", "recursive_doubling", "direct", "hybrid",
                                                         "block_recursive_doubling"};
constexpr std::array<std::string_view, 5> kTransports = {"auto", "shm", "tcp", "rdma", "dpdk"};
constexpr std::array<std::string_view, 4> kPollModes = {"spin", "yield", "auto", "event"};
constexpr std::array<std::string_view, 2> kMemifZeroCopy = {"auto", "off"};
constexpr std::array<std::string_view, 2> kShmPeerReads = {"auto", "off"};
constexpr std::array<std::string_view, 2> kStoreServers = {"rank0", "external"};
constexpr std::array<std::string_view, 4> kLogLevels = {"error", "warn", "info", "debug"};

constexpr std::uint32_t kMaxBlockElems = 1u << 20;
// Past a few thousand lanes nothing is gained (a lane only pipelines its own windows), and an
// aggregator's worst case is lanes x op slots x workers x fusion blocks of buffers.
constexpr std::uint32_t kMaxLanes = 4096;
constexpr std::uint32_t kMaxFusion = 255;
constexpr std::uint32_t kMaxThreads = 64;
constexpr std::uint32_t kMaxInflight = 1024;
constexpr std::uint32_t kMinMessage = 4096;
constexpr std::uint32_t kMaxMessage = 64u << 20;
constexpr std::uint32_t kMinShmRing = 64u << 10;
constexpr std::uint32_t kMaxShmRing = 1u << 30;
constexpr std::size_t kMaxJobToken = 4096;  // the store's hello limit

template <std::size_t N>
std::string join(const std::array<std::string_view, N>& values) {
  std::string out;
  for (std::string_view v : values) {
    if (!out.empty()) out += ", ";
    out += v;
  }
  return out;
}

template <std::size_t N>
bool one_of(const std::array<std::string_view, N>& values, std::string_view text) {
  return std::find(values.begin(), values.end(), text) != values.end();
}

Status bad(std::string reason) { return Status(ErrorCode::invalid_argument, std::move(reason)); }

// Strict decimal: digits only, no sign, no spaces, no suffix, no overflow of `max`.
Status parse_decimal(const std::string& text, std::uint64_t max, const char* kind, std::uint64_t* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return bad(std::string("not a ") + kind);
  std::uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && v > max)) {
    return bad("out of range (at most " + std::to_string(max) + ")");
  }
  if (ec != std::errc() || ptr != text.data() + text.size()) return bad(std::string("not a ") + kind);
  *out = v;
  return Status::Ok();
}

// Parsers, one per field type, instantiated per Options member so the table stays declarative.
template <std::uint32_t Options::*Field>
Status parse_positive_u32(const std::string& text, Options* o) {
  std::uint64_t v = 0;
  Status st = parse_decimal(text, std::numeric_limits<std::uint32_t>::max(), "positive integer", &v);
  if (!st.ok()) return st;
  if (v == 0) return bad("not a positive integer");
  o->*Field = static_cast<std::uint32_t>(v);
  return Status::Ok();
}

template <std::uint32_t Options::*Field>
Status parse_nonnegative_u32(const std::string& text, Options* o) {
  std::uint64_t v = 0;
  Status st = parse_decimal(text, std::numeric_limits<std::uint32_t>::max(), "non-negative integer", &v);
  if (!st.ok()) return st;
  o->*Field = static_cast<std::uint32_t>(v);
  return Status::Ok();
}

template <int Options::*Field>
Status parse_nonnegative_int(const std::string& text, Options* o) {
  std::uint64_t v = 0;
  Status st = parse_decimal(text, std::numeric_limits<int>::max(), "non-negative integer", &v);
  if (!st.ok()) return st;
  o->*Field = static_cast<int>(v);
  return Status::Ok();
}

// "auto" is -1.
template <int Options::*Field>
Status parse_percent_or_auto(const std::string& text, Options* o) {
  if (text == "auto") {
    o->*Field = -1;
    return Status::Ok();
  }
  std::uint64_t v = 0;
  Status st = parse_decimal(text, 101, "percentage from 0 to 101, or auto", &v);
  if (!st.ok()) return st;
  o->*Field = static_cast<int>(v);
  return Status::Ok();
}

template <int Options::*Field>
Status parse_positive_int(const std::string& text, Options* o) {
  std::uint64_t v = 0;
  Status st = parse_decimal(text, std::numeric_limits<int>::max(), "positive integer", &v);
  if (!st.ok()) return st;
  if (v == 0) return bad("not a positive integer");
  o->*Field = static_cast<int>(v);
  return Status::Ok();
}

template <std::string Options::*Field>
Status parse_text(const std::string& text, Options* o) {
  o->*Field = text;
  return Status::Ok();
}

template <std::string Options::*Field, const auto& Allowed>
Status parse_choice(const std::string& text, Options* o) {
  if (!one_of(Allowed, text)) return bad("expected one of " + join(Allowed));
  o->*Field = text;
  return Status::Ok();
}

Status parse_role(const std::string& text, Options* o) {
  if (text == "worker") {
    o->role = Role::worker;
  } else if (text == "aggregator") {
    o->role = Role::aggregator;
  } else {
    return bad("expected worker or aggregator");
  }
  return Status::Ok();
}

Status parse_pin_cores(const std::string& text, Options* o) {
  std::vector<int> cores;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::uint64_t core = 0;
    if (!parse_decimal(text.substr(start, comma - start), std::numeric_limits<int>::max(), "core", &core).ok()) {
      return bad("not a comma-separated list of non-negative core numbers");
    }
    cores.push_back(static_cast<int>(core));
    start = comma + 1;
  }
  o->pin_cores = std::move(cores);
  return Status::Ok();
}

Status parse_store(const std::string& text, Options* o) {
  HostPort address;
  Status st = parse_host_port(text, &address);
  if (st.code() == ErrorCode::unsupported) return bad("ipv6 addresses are not supported yet, use an ipv4 address or host name");
  if (!st.ok() || address.port == 0) return bad("not host:port with a port between 1 and 65535");
  o->store = text;
  return Status::Ok();
}

Status parse_log_level(const std::string& text, Options* o) {
  log::Level level;
  if (!log::parse_level(text, &level)) return bad("expected one of " + join(kLogLevels));
  o->log_level = text;
  return Status::Ok();
}

const char* getenv_nonempty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// torchrun's own TCPStore occupies MASTER_PORT, so ours takes the next port.
void apply_launcher_store(Options* o) {
  const char* addr = getenv_nonempty("MASTER_ADDR");
  const char* port_text = getenv_nonempty("MASTER_PORT");
  if (addr == nullptr || port_text == nullptr) return;
  std::uint64_t port = 0;
  if (!parse_decimal(port_text, 65534, "port", &port).ok() || port == 0) {
    throw Error(bad(std::string("MASTER_PORT='") + port_text +
                    "': not a port between 1 and 65534 (SPARCOLL_STORE defaults to MASTER_ADDR:MASTER_PORT+1); "
                    "set SPARCOLL_STORE"));
  }
  o->store = std::string(addr) + ":" + std::to_string(port + 1);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

void warn_unknown_variables() {
  constexpr std::string_view kPrefix = "SPARCOLL_";
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view assignment(*entry);
    if (assignment.substr(0, kPrefix.size()) != kPrefix) continue;
    const std::string name(assignment.substr(0, assignment.find('=')));
    const auto& table = config_variables();
    if (std::any_of(table.begin(), table.end(), [&](const ConfigVariable& v) { return name == v.name; })) continue;
    const std::string suggestion = closest_config_variable(name);
    if (suggestion.empty()) {
      SC_LOG_WARN("unknown variable %s ignored", name.c_str());
    } else {
      SC_LOG_WARN("unknown variable %s ignored (did you mean %s?)", name.c_str(), suggestion.c_str());
    }
  }
}

// The variable of an Options field, for validate() messages.
std::string var_of(std::string_view field) {
  for (const ConfigVariable& v : config_variables()) {
    if (field == v.field) return v.name;
  }
  return "SPARCOLL_?";
}

// Collects every problem validate() finds; the message is all of them, joined by "; ".
class Problems {
 public:
  void add(std::string what) {
    if (!text_.empty()) text_ += "; ";
    text_ += what;
  }
  template <typename T>
  void check_range(const char* field, T value, T lo, T hi) {
    if (value < lo || value > hi) {
      add(std::string(field) + "=" + std::to_string(value) + " (" + var_of(field) + ") must be between " +
          std::to_string(lo) + " and " + std::to_string(hi));
    }
  }
  template <std::size_t N>
  void check_choice(const char* field, const std::string& value, const std::array<std::string_view, N>& allowed) {
    if (!one_of(allowed, value)) {
      add(std::string(field) + "='" + value + "' (" + var_of(field) + ") must be one of " + join(allowed));
    }
  }
  Status status() const { return text_.empty() ? Status::Ok() : Status(ErrorCode::invalid_argument, text_); }

 private:
  std::string text_;
};

void check_identity(const Options& o, Problems& p) {
  const std::string unset_hint = " is not set: set it or start the job with torchrun, mpirun or srun";
  if (o.world_size < 1) {
    p.add("world_size=" + std::to_string(o.world_size) + " (SPARCOLL_WORLD_SIZE)" +
          (o.world_size == -1 ? unset_hint : " must be at least 1"));
  }
  if (o.role == Role::worker) {
    if (o.rank == -1) {
      p.add("rank=-1 (SPARCOLL_RANK)" + unset_hint);
    } else if (o.world_size >= 1 && (o.rank < 0 || o.rank >= o.world_size)) {
      p.add("rank=" + std::to_string(o.rank) + " (SPARCOLL_RANK) must be between 0 and " +
            std::to_string(o.world_size - 1) + " for world_size=" + std::to_string(o.world_size) +
            " (SPARCOLL_WORLD_SIZE)");
    } else if (o.rank < 0) {
      p.add("rank=" + std::to_string(o.rank) + " (SPARCOLL_RANK) must not be negative");
    }
  } else if (o.role == Role::aggregator) {
    if (o.aggregators < 1) {
      p.add("role=aggregator (SPARCOLL_ROLE) needs aggregators >= 1 (SPARCOLL_AGGREGATORS), not " +
            std::to_string(o.aggregators));
    } else if (o.aggregator_index < 0 || o.aggregator_index >= o.aggregators) {
      p.add("aggregator_index=" + std::to_string(o.aggregator_index) +
            " (SPARCOLL_AGGREGATOR_INDEX) must be between 0 and " + std::to_string(o.aggregators - 1) +
            " for aggregators=" + std::to_string(o.aggregators) + " (SPARCOLL_AGGREGATORS)");
    }
  } else {
    p.add("role=" + std::to_string(static_cast<int>(o.role)) + " (SPARCOLL_ROLE) must be worker or aggregator");
  }
  if (o.aggregators < 0) {
    p.add("aggregators=" + std::to_string(o.aggregators) + " (SPARCOLL_AGGREGATORS) must be at least 0");
  }
  const bool needs_store = o.world_size > 1 || o.role == Role::aggregator;
  if (o.store.empty()) {
    if (needs_store) {
      p.add("store is empty (SPARCOLL_STORE): a job of world_size=" + std::to_string(o.world_size) +
            (o.role == Role::aggregator ? " with aggregator processes" : "") +
            " needs host:port; set it, or MASTER_ADDR and MASTER_PORT");
    }
  } else {
    Options scratch;
    Status st = parse_store(o.store, &scratch);
    if (!st.ok()) p.add("store='" + o.store + "' (SPARCOLL_STORE): " + st.message());
  }
  if (o.job_token.size() > kMaxJobToken) {
    p.add("job_token (SPARCOLL_JOB_TOKEN) is " + std::to_string(o.job_token.size()) + " bytes, at most " +
          std::to_string(kMaxJobToken) + " allowed");
  }
  p.check_choice("store_server", o.store_server, kStoreServers);
}

void check_engine(const Options& o, Problems& p) {
  p.check_choice("transport", o.transport, kTransports);
  p.check_choice("algo", o.algo, kAlgorithms);
  p.check_range("hybrid_dense_percent", o.hybrid_dense_percent, -1, 101);
  p.check_range("block_elems", o.block_elems, 1u, kMaxBlockElems);
  p.check_range("lanes", o.lanes, 1u, kMaxLanes);
  p.check_range("fusion", o.fusion, 1u, kMaxFusion);
  p.check_range("threads", o.threads, 1u, kMaxThreads);
  if (!o.pin_cores.empty()) {
    if (o.pin_cores.size() < o.threads) {
      p.add("pin_cores lists " + std::to_string(o.pin_cores.size()) + " cores (SPARCOLL_PIN_CORES) but threads=" +
            std::to_string(o.threads) + " (SPARCOLL_THREADS) needs at least as many");
    }
    for (int core : o.pin_cores) {
      if (core < 0) p.add("pin_cores (SPARCOLL_PIN_CORES) lists core " + std::to_string(core) + "; cores are >= 0");
    }
  }
  p.check_range("max_inflight", o.max_inflight, 1u, kMaxInflight);
  p.check_range("max_message", o.max_message, kMinMessage, kMaxMessage);
  p.check_choice("poll_mode", o.poll_mode, kPollModes);
  p.check_range("deadline_ms", o.deadline_ms, 1u, std::numeric_limits<std::uint32_t>::max());
  p.check_range("connect_timeout_ms", o.connect_timeout_ms, 1u, std::numeric_limits<std::uint32_t>::max());
  const std::uint32_t ring = o.shm_ring_bytes;
  if (ring < kMinShmRing || ring > kMaxShmRing || (ring & (ring - 1)) != 0) {
    p.add("shm_ring_bytes=" + std::to_string(ring) + " (SPARCOLL_SHM_RING_BYTES) must be a power of two between " +
          std::to_string(kMinShmRing) + " and " + std::to_string(kMaxShmRing));
  } else if (std::uint64_t{ring} < 4 * std::uint64_t{o.max_message}) {
    p.add("shm_ring_bytes=" + std::to_string(ring) + " (SPARCOLL_SHM_RING_BYTES) must be at least 4 * max_message = " +
          std::to_string(4 * std::uint64_t{o.max_message}) + " (SPARCOLL_MAX_MESSAGE)");
  }
  // TCP_CA_NAME_MAX is 16 with the terminating NUL; kernel names are lowercase letters, digits, _.
  if (o.tcp_congestion.empty() || o.tcp_congestion.size() > 15 ||
      o.tcp_congestion.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    p.add("tcp_congestion='" + o.tcp_congestion + "' (SPARCOLL_TCP_CONGESTION) must be auto, system or a kernel "
          "congestion control name (1 to 15 of a-z, 0-9, _; net.ipv4.tcp_available_congestion_control lists them)");
  }
  p.check_range("dpdk_port", o.dpdk_port, 0u, 65535u);
  p.check_range("dpdk_udp_port", o.dpdk_udp_port, 1u, 65535u);
  if (!o.dpdk_ip.empty()) {
    in_addr addr{};
    if (inet_pton(AF_INET, o.dpdk_ip.c_str(), &addr) != 1)
      p.add("dpdk_ip='" + o.dpdk_ip + "' (SPARCOLL_DPDK_IP) must be an ipv4 address such as 10.0.0.2");
  }
  p.check_choice("log_level", o.log_level, kLogLevels);
}

}  // namespace

const std::vector<ConfigVariable>& config_variables() {
  static const std::vector<ConfigVariable> table = {
      {"SPARCOLL_RANK", "rank", "(from launcher)", "rank of this worker process, 0 to world_size-1.",
       {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}, &parse_nonnegative_int<&Options::rank>},
      {"SPARCOLL_WORLD_SIZE", "world_size", "(from launcher)", "number of worker processes.",
       {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, &parse_positive_int<&Options::world_size>},
      {"SPARCOLL_STORE", "store", "(MASTER_ADDR:MASTER_PORT+1)",
       "host:port of the rendezvous store (ipv4 address or host name). When unset and MASTER_ADDR and MASTER_PORT "
       "are (torchrun), MASTER_PORT+1 is used: torchrun's own store occupies MASTER_PORT.",
       {}, &parse_store},
      {"SPARCOLL_JOB_TOKEN", "job_token", "(empty)",
       "shared secret checked on every store and tcp connection; a wrong token closes that connection only. Empty: "
       "the job is unauthenticated, and its store's host warns (docs/security.md).",
       {},
       &parse_text<&Options::job_token>},
      {"SPARCOLL_STORE_SERVER", "store_server", "rank0",
       "who hosts the store: rank0 (rank 0 starts it) or external (a launcher such as sparcoll-run does).", {},
       &parse_choice<&Options::store_server, kStoreServers>},
      {"SPARCOLL_ROLE", "role", "worker", "worker, or aggregator for a dedicated aggregator process.", {}, &parse_role},
      {"SPARCOLL_AGGREGATOR_INDEX", "aggregator_index", "(unset)",
       "index of a dedicated aggregator process, 0 to aggregators-1.", {},
       &parse_nonnegative_int<&Options::aggregator_index>},
      {"SPARCOLL_TRANSPORT", "transport", "auto", "auto, shm, tcp, rdma or dpdk; auto picks shm when every process is on one host, else the most preferred transport auto may choose (rdma, then tcp) that every process can run.",
       {}, &parse_choice<&Options::transport, kTransports>},
      {"SPARCOLL_ALGO", "algo", "auto", "allreduce algorithm when a call names none: auto (by size: block_recursive_doubling, ring, then hybrid; SPARCOLL_SMALL_TENSOR_BYTES, SPARCOLL_HYBRID_MIN_BYTES), block_sparse, ring, butterfly, ssar_recursive_doubling, ssar_split_allgather, dsar_split_allgather, recursive_doubling, direct, hybrid or block_recursive_doubling (docs/algorithms.md).", {},
       &parse_choice<&Options::algo, kAlgorithms>},
      {"SPARCOLL_HYBRID_DENSE_PERCENT", "hybrid_dense_percent", "auto",
       "hybrid allreduce: a stripe whose union block density (estimated from every rank's sampled density of "
       "non-zero blocks in it) is at least this percentage goes the dense way, the others block-sparse; 0 to 101 "
       "(101: never dense), or auto: 40 over shm, 65 over the transports with a wire (tcp, rdma, dpdk), where "
       "block-sparse saves more time per byte (measured over tcp, 16 MiB: it beat the ring up to a union density "
       "of 60-75% at 2 and 4 ranks; over shm up to 35-40%). Must be equal on every process.",
       {}, &parse_percent_or_auto<&Options::hybrid_dense_percent>},
      {"SPARCOLL_SMALL_TENSOR_BYTES", "small_tensor_bytes", "65536",
       "algo=auto: a tensor of at most this many bytes takes block recursive doubling (log2(p) rounds, each an "
       "exchange of the non-zero blocks seen so far: latency beats bandwidth there; above 2 ranks the limit halves "
       "per doubling of the ranks and the ring takes the rest), a larger one the ring or the hybrid "
       "(SPARCOLL_HYBRID_MIN_BYTES). Must be equal on every process.",
       {}, &parse_nonnegative_u32<&Options::small_tensor_bytes>},
      {"SPARCOLL_HYBRID_MIN_BYTES", "hybrid_min_bytes", "2097152",
       "the smallest tensor the hybrid splits into stripes: below it the hybrid sends the whole tensor by block "
       "recursive doubling or by the ring, whichever the exchanged densities say moves fewer bytes. algo=auto over "
       "shm: a tensor above SPARCOLL_SMALL_TENSOR_BYTES and below this many bytes takes the ring without the "
       "hybrid's density exchange; over other transports the hybrid starts above SPARCOLL_SMALL_TENSOR_BYTES "
       "(docs/algorithms.md). Must be equal on every process.",
       {}, &parse_nonnegative_u32<&Options::hybrid_min_bytes>},
      {"SPARCOLL_AGGREGATORS", "aggregators", "0",
       "0: aggregation co-located on the workers; M: M dedicated aggregator processes.", {},
       &parse_nonnegative_int<&Options::aggregators>},
      {"SPARCOLL_BLOCK_ELEMS", "block_elems", "256", "elements per block, 1 to 1048576.", {},
       &parse_positive_u32<&Options::block_elems>},
      {"SPARCOLL_LANES", "lanes", "64", "lanes (independent aggregation streams, each with its own window) the tensor's blocks are striped over, 1 to 4096.", {},
       &parse_positive_u32<&Options::lanes>},
      {"SPARCOLL_FUSION", "fusion", "8", "most blocks a worker fuses into one message, 1 to 255.", {},
       &parse_positive_u32<&Options::fusion>},
      {"SPARCOLL_THREADS", "threads", "1", "progress threads of the block-sparse module per process, 1 to 64.", {},
       &parse_positive_u32<&Options::threads>},
      {"SPARCOLL_PIN_CORES", "pin_cores", "(none)",
       "comma-separated cores for the progress threads (e.g. 2,3), at least one per thread; unset: no pinning.", {},
       &parse_pin_cores},
      {"SPARCOLL_MAX_INFLIGHT", "max_inflight", "4", "operations in flight per communicator, 1 to 1024.", {},
       &parse_positive_u32<&Options::max_inflight>},
      {"SPARCOLL_MAX_MESSAGE", "max_message", "65536", "bytes per message, header included, 4096 to 67108864.", {},
       &parse_positive_u32<&Options::max_message>},
      {"SPARCOLL_POLL_MODE", "poll_mode", "auto",
       "spin, yield, auto (yield when there are more busy threads than cores), or event (idle progress "
       "threads sleep on the transport's descriptor: tcp, rdma).", {},
       &parse_choice<&Options::poll_mode, kPollModes>},
      {"SPARCOLL_IDLE_SPIN_US", "idle_spin_us", "5000",
       "how long an idle progress thread or collective thread keeps polling after its last activity "
       "before it naps (short futex sleeps that a local submission cuts short), in microseconds; 0 naps "
       "at once. The torch backend uses 0 unless set (the training's own threads need the cores).", {},
       &parse_nonnegative_u32<&Options::idle_spin_us>},
      {"SPARCOLL_DEADLINE_MS", "deadline_ms", "60000", "deadline of each collective operation, in ms.", {},
       &parse_positive_u32<&Options::deadline_ms>},
      {"SPARCOLL_CONNECT_TIMEOUT_MS", "connect_timeout_ms", "30000",
       "deadline of the rendezvous and of connection setup, in ms.", {},
       &parse_positive_u32<&Options::connect_timeout_ms>},
      {"SPARCOLL_TCP_ADDR", "tcp_addr", "(store connection's local address)",
       "address the tcp transport listens on and advertises to its peers.", {},
       &parse_text<&Options::tcp_addr>},
      {"SPARCOLL_TCP_CONGESTION", "tcp_congestion", "auto",
       "congestion control of the tcp transport's connections. auto: connections between processes of one "
       "host use cubic (reno where cubic is not allowed) instead of a pacing algorithm (bbr): loopback has no "
       "queue to protect, and pacing held a 1 MiB allreduce at 0.5 ms instead of 0.3; connections to other "
       "hosts keep the system's choice. system: every connection keeps net.ipv4.tcp_congestion_control. A "
       "name (cubic, reno, ...): every connection uses it, and setup fails if the kernel refuses it.", {},
       &parse_text<&Options::tcp_congestion>},
      {"SPARCOLL_SHM_RING_BYTES", "shm_ring_bytes", "1048576",
       "bytes of each shared-memory ring (per sender, receiver and thread): a power of two from 65536 to "
       "1073741824, at least 4 * max_message.",
       {}, &parse_positive_u32<&Options::shm_ring_bytes>},
      {"SPARCOLL_SHM_PEER_READS", "shm_peer_reads", "auto",
       "auto: the shm transport reads peers' memory in place when every process of the job can "
       "(process_vm_readv, checked at setup), for the direct algorithm's one-copy transfers. off: never "
       "(the direct algorithm is then unsupported and auto uses the ring).",
       {}, &parse_choice<&Options::shm_peer_reads, kShmPeerReads>},
      {"SPARCOLL_IB_DEVICE", "ib_device", "(first device with an active port)",
       "rdma device the rdma transport uses, e.g. mlx5_0 or rxe0 (ibv_devices lists them).", {},
       &parse_text<&Options::ib_device>},
      {"SPARCOLL_IB_PORT", "ib_port", "(first active port)", "port of the rdma device, counted from 1.", {},
       &parse_positive_u32<&Options::ib_port>},
      {"SPARCOLL_IB_GID_INDEX", "ib_gid_index", "(best gid: RoCE v2, IPv4-mapped first)",
       "GID table index the rdma transport addresses its peers with (show_gids or ibv_devinfo -v lists them).", {},
       &parse_nonnegative_int<&Options::ib_gid_index>},
      {"SPARCOLL_DPDK_EAL_ARGS", "dpdk_eal_args", "(empty)",
       "arguments appended to the dpdk transport's EAL defaults (--no-huge --single-file-segments -m 1024 --no-pci --no-shconf "
       "--no-telemetry, quiet logs, -l 0; a conflicting argument replaces its default). Without a device the "
       "transport links local processes by memif; with one (--vdev=net_af_packet0,iface=veth0 or -a <pci "
       "address>) it runs on that port. The EAL starts once per process.",
       {}, &parse_text<&Options::dpdk_eal_args>},
      {"SPARCOLL_DPDK_PORT", "dpdk_port", "0", "the dpdk port id the transport uses when the EAL arguments give a device.",
       {}, &parse_nonnegative_u32<&Options::dpdk_port>},
      {"SPARCOLL_DPDK_IP", "dpdk_ip", "(the rendezvous address)",
       "ipv4 address of this process on the dpdk port (port mode), published to its peers.", {},
       &parse_text<&Options::dpdk_ip>},
      {"SPARCOLL_DPDK_UDP_PORT", "dpdk_udp_port", "47000",
       "first udp port of the dpdk transport; channel (thread) c uses this + c.", {},
       &parse_positive_u32<&Options::dpdk_udp_port>},
      {"SPARCOLL_DPDK_DROP_EVERY", "dpdk_drop_every", "0",
       "test hook: the dpdk transport drops every Nth data frame it sends, per channel (retransmissions "
       "included) instead of sending it; 0 = off.",
       {}, &parse_nonnegative_u32<&Options::dpdk_drop_every>},
      {"SPARCOLL_DPDK_MEMIF_ZERO_COPY", "dpdk_memif_zero_copy", "auto",
       "auto: in memif mode, one link per process runs memif zero-copy (the process's link to its lowest-index "
       "peer, when it is that link's client; the server maps its EAL memory, so frames cross with one copy "
       "instead of two); needs the EAL memory in one file (--no-huge --single-file-segments, the defaults). off: "
       "every link copies on both sides.",
       {}, &parse_choice<&Options::dpdk_memif_zero_copy, kMemifZeroCopy>},
      {"SPARCOLL_LOG_LEVEL", "log_level", "warn", "error, warn, info or debug.", {}, &parse_log_level},
      {"SPARCOLL_SIMD", "(read elsewhere: src/block/cpu_features.cpp)", "(best the cpu supports)",
       "caps the SIMD kernels: scalar, avx2 or avx512 (tests and benchmarks).", {}, nullptr},
      {"SPARCOLL_BUILD_DIR", "(read elsewhere: tests)", "(set by meson test)",
       "build directory in which tests find helper programs.", {}, nullptr},
      {"SPARCOLL_SKIP_RDMA_VM", "(read elsewhere: scripts/test.sh)", "0",
       "any value but 0 skips the rdma suites that scripts/test.sh runs inside the Soft-RoCE VM; the value is "
       "printed as the reason (scripts/check-fresh-install sets it inside the clean root).", {}, nullptr},
      {"SPARCOLL_RXE_VM_CACHE", "(read elsewhere: scripts/rxe-vm)", "~/.cache/sparcoll-rxe-vm",
       "where scripts/rxe-vm keeps its kernel and initramfs.", {}, nullptr},
      {"SPARCOLL_RXE_VM_ACCEL", "(read elsewhere: scripts/rxe-vm)", "auto",
       "tcg, kvm or auto (kvm only when kvm_intel or kvm_amd is loaded).", {}, nullptr},
      {"SPARCOLL_RXE_VM_KERNEL_PKG", "(read elsewhere: scripts/rxe-vm)", "(what linux-image-amd64 depends on)",
       "the Debian kernel package the VM boots.", {}, nullptr},
      {"SPARCOLL_RXE_VM_BOOT_ALLOWANCE", "(read elsewhere: scripts/rxe-vm)", "90",
       "seconds added to --timeout for booting before the VM is killed.", {}, nullptr},
      {"SPARCOLL_RXE_VM_DEBUG", "(read elsewhere: scripts/rxe-vm)", "0",
       "1 keeps the kernel log and a trace of the VM's start-up (see --keep-log).", {}, nullptr},
  };
  return table;
}

std::string config_markdown_table() {
  // Values and names in backticks; descriptions such as "(from launcher)" as plain text.
  const auto code = [](const char* text) {
    if (text[0] == '(') return std::string(text);
    std::string quoted(1, '`');
    quoted.append(text).push_back('`');
    return quoted;
  };
  std::string out = "| variable | option field | default | meaning |\n|---|---|---|---|\n";
  for (const ConfigVariable& v : config_variables()) {
    std::string meaning = v.help;
    for (std::size_t i = 0; i < v.fallbacks.size(); ++i) {
      meaning.append(i == 0 ? " Launcher fallbacks, in order: `" : ", `").append(v.fallbacks[i]).append("`");
    }
    if (!v.fallbacks.empty()) meaning += ".";
    out.append("| ").append(code(v.name)).append(" | ").append(code(v.field)).append(" | ");
    out.append(code(v.default_text)).append(" | ").append(meaning).append(" |\n");
  }
  return out;
}

std::string closest_config_variable(std::string_view unknown) {
  constexpr std::string_view kPrefix = "SPARCOLL_";
  std::string_view suffix = unknown.substr(0, kPrefix.size()) == kPrefix ? unknown.substr(kPrefix.size()) : unknown;
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, suffix.size() / 3) + 1;
  for (const ConfigVariable& v : config_variables()) {
    const std::string_view known = std::string_view(v.name).substr(kPrefix.size());
    // A truncated name (SPARCOLL_DEADLINE for SPARCOLL_DEADLINE_MS) counts as a near miss.
    const bool truncated = suffix.size() >= 4 && known.substr(0, suffix.size()) == suffix;
    const std::size_t d = truncated ? 1 : edit_distance(suffix, known);
    if (d < best_distance) {
      best_distance = d;
      best = v.name;
    }
  }
  return best;
}

Options Options::from_env() {
  Options o;
  for (const ConfigVariable& v : config_variables()) {
    if (v.parse == nullptr) continue;
    const char* source = v.name;
    const char* text = getenv_nonempty(v.name);
    for (std::size_t i = 0; text == nullptr && i < v.fallbacks.size(); ++i) {
      source = v.fallbacks[i];
      text = getenv_nonempty(source);
    }
    if (text == nullptr) {
      if (std::string_view(v.name) == "SPARCOLL_STORE") apply_launcher_store(&o);
      continue;
    }
    Status st = v.parse(text, &o);
    if (!st.ok()) {
      std::string message = std::string(source) + "='" + text + "': " + st.message();
      if (source != v.name) message += " (read for " + std::string(v.name) + ")";
      throw Error(bad(std::move(message)));
    }
  }
  log::Level level;
  // parse_log_level admitted only names log::parse_level knows.
  if (log::parse_level(o.log_level, &level)) log::set_level(level);
  // After the level is applied, so SPARCOLL_LOG_LEVEL=error silences these warnings too.
  warn_unknown_variables();
  return o;
}

Status Options::validate() const {
  Problems problems;
  check_identity(*this, problems);
  check_engine(*this, problems);
  return problems.status();
}

}  // namespace sparcoll
