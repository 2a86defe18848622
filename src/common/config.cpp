// Options::from_env(), Options::validate() and docs/config.md, all from one table.
//
// Precedence: defaults (the initialisers in options.hpp) < environment < code. For each row,
// the SPARCOLL_* variable wins; its launcher fallbacks (torchrun, Open MPI, PMI, Slurm) are read
// only when it is unset. An empty variable counts as unset.
#include "common/config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <limits>

#include "common/config_rows.hpp"
#include "common/log.hpp"
#include "common/host_port.hpp"

extern char** environ;

namespace sparcoll {
namespace {

// The allowed values of enumerated options, each listed once: parsing, validation and the
// docs all read these. A new algorithm is added here; a transport is a driver folder
// (kDriverOptionTables).
constexpr std::array<std::string_view, 11> kAlgorithms = {"block_sparse", "auto", "ring", "butterfly",
                                                         "ssar_recursive_doubling", "ssar_split_allgather",
                                                         "dsar_split_allgather", "recursive_doubling", "direct", "hybrid",
                                                         "block_recursive_doubling"};
constexpr std::array<std::string_view, 4> kPollModes = {"spin", "yield", "auto", "event"};
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
constexpr std::size_t kMaxJobToken = 4096;  // the store's hello limit

using config::bad;
using config::join;
using config::one_of;
using config::parse_choice;
using config::parse_decimal;
using config::parse_nonnegative_int;
using config::parse_nonnegative_u32;
using config::parse_positive_int;
using config::parse_positive_u32;
using config::parse_text;

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

// SPARCOLL_TRANSPORT's values: auto and every driver folder's name, "auto, shm, tcp, rdma, dpdk"
// (with `last` = " or ", "auto, shm, tcp, rdma or dpdk").
std::string transport_choices(const char* last = ", ") {
  std::string out = "auto";
  std::size_t n = 0;
  while (kDriverOptionTables[n] != nullptr) ++n;
  for (std::size_t i = 0; i < n; ++i) out.append(i + 1 == n ? last : ", ").append(kDriverOptionTables[i]->driver);
  return out;
}

bool is_transport(std::string_view text) {
  bool known = text == "auto";
  for (std::size_t i = 0; kDriverOptionTables[i] != nullptr && !known; ++i) known = text == kDriverOptionTables[i]->driver;
  return known;
}

Status parse_transport(const std::string& text, Options* o) {
  if (!is_transport(text)) return bad("expected one of " + transport_choices());
  o->transport = text;
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

void check_identity(const Options& o, ConfigProblems& p) {
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

void check_engine(const Options& o, ConfigProblems& p) {
  if (!is_transport(o.transport))
    p.add("transport='" + o.transport + "' (SPARCOLL_TRANSPORT) must be one of " + transport_choices());
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
  p.check_choice("log_level", o.log_level, kLogLevels);
}

}  // namespace

const std::vector<ConfigVariable>& config_variables() {
  static const std::string transport_help =
      transport_choices(" or ") +
      "; auto picks shm when every process is on one host, else the most preferred transport auto may choose "
      "(rdma, then tcp) that every process can run.";
  static const std::vector<ConfigVariable> table = [] {
  std::vector<ConfigVariable> rows = {
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
      {"SPARCOLL_TRANSPORT", "transport", "auto", transport_help.c_str(), {}, &parse_transport},
      {"SPARCOLL_ALGO", "algo", "auto", "allreduce algorithm when a call names none: auto (by size: block_recursive_doubling up to SPARCOLL_SMALL_TENSOR_BYTES, then hybrid), block_sparse, ring, butterfly, ssar_recursive_doubling, ssar_split_allgather, dsar_split_allgather, recursive_doubling, direct, hybrid or block_recursive_doubling (docs/algorithms.md).", {},
       &parse_choice<&Options::algo, kAlgorithms>},
      {"SPARCOLL_HYBRID_DENSE_PERCENT", "hybrid_dense_percent", "auto",
       "hybrid allreduce: a stripe whose union block density (estimated from every rank's sampled density of "
       "non-zero blocks in it) is at least this percentage goes the dense way, the others block-sparse; 0 to 101 "
       "(101: never dense), or auto: over shm the union of the ranks 12% dense each (23 at 2 ranks, 40 at 4, 64 "
       "at 8: where block-sparse and the ring met at 16 MiB), 65 over the transports with a wire (tcp, rdma, "
       "dpdk), where block-sparse saves more time per byte (measured over tcp, 16 MiB: it beat the ring up to a "
       "union density of 60-75% at 2 and 4 ranks). Must be equal on every process.",
       {}, &parse_percent_or_auto<&Options::hybrid_dense_percent>},
      {"SPARCOLL_SMALL_TENSOR_BYTES", "small_tensor_bytes", "65536",
       "algo=auto: a tensor of at most this many bytes takes block recursive doubling (log2(p) rounds, each an "
       "exchange of the non-zero blocks seen so far: latency beats bandwidth there; the limit halves per doubling of "
       "the ranks above 2, and once more over shm, where dense data cost it twice the butterfly's time at the top "
       "of the range, and at least once: a dense tensor's message above 64 KiB took two of loopback's segments; "
       "the ring, or the butterfly at 4 and 8 ranks, takes the rest), a larger one the hybrid. Must be equal on "
       "every process.",
       {}, &parse_nonnegative_u32<&Options::small_tensor_bytes>},
      {"SPARCOLL_HYBRID_MIN_BYTES", "hybrid_min_bytes", "2097152",
       "the smallest tensor the hybrid splits into stripes: the hybrid sends a tensor of any size whole by block "
       "recursive doubling where the exchanged sample masks say it moves few enough bytes; else, below this size, "
       "whole by the ring, and from it in stripes (docs/algorithms.md). Must be equal on every process.",
       {}, &parse_nonnegative_u32<&Options::hybrid_min_bytes>},
      {"SPARCOLL_RING_SEGMENT_BYTES", "ring_segment_bytes", "2097152",
       "the ring allreduce (and the hybrid's dense stripes, which run it) goes round once per segment of this "
       "many bytes of the tensor's accumulators (fp32 for f16 and bf16), so that a chunk is sent while the step "
       "that reduced it left it in the cache. Measured at 2 and 4 ranks: 1.2-1.6x faster than one ring at 16-100 "
       "MiB over shm and tcp where the host's cores share a cache; where they do not, faster over shm and at "
       "64-100 MiB over tcp, up to 1.25x slower at 16-32 MiB over tcp (docs/perf-log.md, \"The ring in segments\"). "
       "0: the whole tensor in one ring. The segments decide which rank reduces an element: must be equal on "
       "every process.",
       {}, &parse_nonnegative_u32<&Options::ring_segment_bytes>},
      {"SPARCOLL_HYBRID_PLAN_REUSE", "hybrid_plan_reuse", "32",
       "hybrid allreduce: later calls of one shape (count, dtype, op) skip the exchange of sample masks while "
       "the shape's results are steady, for at most this many calls after an exchange: they plan from the masks "
       "of its last exchange, and a tensor in stripes from what its last result calls for (the block-sparse "
       "stripes' exact union counts). 0: every call exchanges. Must be equal on every process "
       "(docs/algorithms.md, \"hybrid\").",
       {}, &parse_nonnegative_u32<&Options::hybrid_plan_reuse>},
      {"SPARCOLL_AGGREGATORS", "aggregators", "0",
       "0: aggregation co-located on the workers; M: M dedicated aggregator processes.", {},
       &parse_nonnegative_int<&Options::aggregators>},
      {"SPARCOLL_BLOCK_ELEMS", "block_elems", "256", "elements per block, 1 to 1048576.", {},
       &parse_positive_u32<&Options::block_elems>},
      {"SPARCOLL_LANES", "lanes", "64", "lanes (independent aggregation streams, each with its own window) the tensor's blocks are striped over, 1 to 4096.", {},
       &parse_positive_u32<&Options::lanes>},
      {"SPARCOLL_FUSION", "fusion", "32", "most blocks a worker fuses into one message (a window), 1 to 255; at most what fits in SPARCOLL_MAX_MESSAGE. Each aggregator lane in flight holds two buffers of workers x fusion blocks.", {},
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
       "before it sleeps until a local submission wakes it (or, in a dedicated aggregator or over dpdk, "
       "whose peers need its polls, naps of 50 us, 500 us after a second), in microseconds; 0 sleeps at once. The torch "
       "backend uses 0 unless set (the training's own threads need the cores).", {},
       &parse_nonnegative_u32<&Options::idle_spin_us>},
      {"SPARCOLL_DEADLINE_MS", "deadline_ms", "60000", "deadline of each collective operation, in ms.", {},
       &parse_positive_u32<&Options::deadline_ms>},
      {"SPARCOLL_CONNECT_TIMEOUT_MS", "connect_timeout_ms", "30000",
       "deadline of the rendezvous and of connection setup, in ms.", {},
       &parse_positive_u32<&Options::connect_timeout_ms>},
  };
  for (std::size_t i = 0; kDriverOptionTables[i] != nullptr; ++i) {
    const std::vector<ConfigVariable> own = kDriverOptionTables[i]->variables();
    rows.insert(rows.end(), own.begin(), own.end());
  }
  const std::vector<ConfigVariable> last = {
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
  rows.insert(rows.end(), last.begin(), last.end());
  return rows;
  }();
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
  ConfigProblems problems;
  check_identity(*this, problems);
  check_engine(*this, problems);
  for (std::size_t i = 0; kDriverOptionTables[i] != nullptr; ++i)
    if (kDriverOptionTables[i]->validate != nullptr) kDriverOptionTables[i]->validate(*this, problems);
  return problems.status();
}

namespace config {

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

std::string variable_of_field(std::string_view field) {
  for (const ConfigVariable& v : config_variables()) {
    if (field == v.field) return v.name;
  }
  return "SPARCOLL_?";
}

}  // namespace config

}  // namespace sparcoll
