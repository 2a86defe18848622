#include "membership/bootstrap.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>

#include "common/log.hpp"
#include "membership/auto_transport.hpp"
#include "control/store_address.hpp"

namespace sparcoll::membership {

namespace {

// Communicators created by this process, so several in one job get distinct store keys.
std::atomic<std::uint32_t> g_generation{0};

std::uint32_t fnv1a(const std::string& text) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  return h == 0 ? 1 : h;
}

// Settings every process must share, with the variable that sets each.
struct SharedSetting {
  const char* variable;
  std::string value;
};

std::vector<SharedSetting> shared_settings(const Options& o) {
  return {
      {"SPARCOLL_WORLD_SIZE", std::to_string(o.world_size)},
      {"SPARCOLL_AGGREGATORS", std::to_string(o.aggregators)},
      {"SPARCOLL_TRANSPORT", o.transport},
      {"SPARCOLL_ALGO", o.algo},
      {"SPARCOLL_HYBRID_DENSE_PERCENT", o.hybrid_dense_percent < 0 ? "auto" : std::to_string(o.hybrid_dense_percent)},
      {"SPARCOLL_SMALL_TENSOR_BYTES", std::to_string(o.small_tensor_bytes)},
      {"SPARCOLL_HYBRID_MIN_BYTES", std::to_string(o.hybrid_min_bytes)},
      {"SPARCOLL_HYBRID_PLAN_REUSE", std::to_string(o.hybrid_plan_reuse)},
      {"SPARCOLL_RING_SEGMENT_BYTES", std::to_string(o.ring_segment_bytes)},
      {"SPARCOLL_BLOCK_ELEMS", std::to_string(o.block_elems)},
      {"SPARCOLL_LANES", std::to_string(o.lanes)},
      {"SPARCOLL_FUSION", std::to_string(o.fusion)},
      {"SPARCOLL_THREADS", std::to_string(o.threads)},
      {"SPARCOLL_MAX_INFLIGHT", std::to_string(o.max_inflight)},
      {"SPARCOLL_MAX_MESSAGE", std::to_string(o.max_message)},
  };
}

// "key=value" lines: identity then shared settings.
std::string encode_process(const transport::ProcessInfo& p, const Options& o) {
  std::ostringstream out;
  out << "name=" << p.name << "\npid=" << p.pid << "\nhost=" << p.host << "\naddress=" << p.address << "\n";
  // What this process can run of the transports auto may choose (auto_transport.hpp).
  if (o.transport == "auto") out << "transports=" << auto_candidates_here() << "\n";
  for (const auto& s : shared_settings(o)) out << s.variable << "=" << s.value << "\n";
  return out.str();
}

std::string field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, key.size() + 1, key + "=") == 0) return line.substr(key.size() + 1);
  return std::string();
}

std::string process_name(const Options& o, std::uint32_t workers, std::uint32_t index) {
  (void)o;
  return index < workers ? "rank " + std::to_string(index) : "aggregator " + std::to_string(index - workers);
}

// Rank 0's store listens on the address the job was told to reach it at (SPARCOLL_STORE, or
// MASTER_ADDR): a job on 127.0.0.1 is then out of reach of other hosts, and one on a cluster
// network is not served on every other interface too. Only when that address is not one of this
// host's (behind NAT) does it listen on all of them, and says so.
Status host_store(const Options& options, std::unique_ptr<control::StoreServer>* out) {
  HostPort address;
  Status s = parse_host_port(options.store, &address);
  if (!s.ok()) return s;
  sockaddr_in ip{};
  std::string listen = "0.0.0.0:" + std::to_string(address.port);
  if (control::resolve_ipv4(address, /*passive=*/false, &ip).ok()) listen = control::format_ip_port(ip);
  s = control::StoreServer::start(listen, options.job_token, out);
  if (!s.ok() && listen.rfind("0.0.0.0:", 0) != 0 && s.message().find("cannot assign requested address") != std::string::npos) {
    SC_LOG_WARN("the store address %s is not an address of this host: the rendezvous store listens on every "
                "interface instead", listen.c_str());
    listen = "0.0.0.0:" + std::to_string(address.port);
    s = control::StoreServer::start(listen, options.job_token, out);
  }
  if (!s.ok())
    return Status(s.code(), "rank 0 could not host the rendezvous store (SPARCOLL_STORE=" + options.store + "): " + s.message());
  if (options.job_token.empty()) {
    // Said once, by the process that hosts the store, loudly: nothing else stops a stranger.
    const bool loopback = listen.rfind("127.", 0) == 0;
    SC_LOG_WARN("unauthenticated job: SPARCOLL_JOB_TOKEN is empty, so the rendezvous store on %s and every tcp data "
                "port accept any process that can reach them (%s), which can read the job's addresses, join as a "
                "rank or disturb it; set SPARCOLL_JOB_TOKEN to the same secret on every process (sparcoll-run and "
                "the PyTorch backend make one), see docs/security.md",
                listen.c_str(), loopback ? "any user of this host" : "anyone on its network");
  }
  return Status();
}

// Two processes claiming the same identity would silently overwrite each other.
Status claim_identity(Membership& m, const std::string& who) {
  std::int64_t claims = 0;
  Status s = m.store->add(m.key_prefix + "claim/" + std::to_string(m.self), 1, &claims);
  if (!s.ok()) return s;
  if (claims != 1)
    return Status(ErrorCode::invalid_argument, "two processes claim to be " + who + " (check SPARCOLL_RANK / SPARCOLL_AGGREGATOR_INDEX)");
  return Status();
}

// Every process's identity record, waited for until SPARCOLL_CONNECT_TIMEOUT_MS: into
// m->processes (with how many share this host), and the transports auto may choose that each
// can run into *auto_candidates. Fails with mismatch when a setting that must be equal differs.
Status read_every_process(const Options& options, const transport::ProcessInfo& me, Membership* out,
                          std::vector<std::string>* auto_candidates) {
  Membership& m = *out;
  const std::string& who = me.name;
  const auto mine = shared_settings(options);
  m.processes.resize(m.total());
  auto_candidates->assign(m.total(), std::string());
  for (std::uint32_t i = 0; i < m.total(); ++i) {
    std::string text;
    Status s = m.store->get(m.key_prefix + "proc/" + std::to_string(i), options.connect_timeout_ms, &text);
    if (!s.ok()) {
      if (s.code() == ErrorCode::timeout) {
        // A process that presented a wrong token was turned away by the store; if it was the one
        // we wait for, its claim in the notes is the likely cause.
        const std::string notes = m.store->diagnose();
        return Status(ErrorCode::timeout, process_name(options, m.workers, i) + " did not join the rendezvous at " +
                                              options.store + " within " + std::to_string(options.connect_timeout_ms) +
                                              " ms (SPARCOLL_CONNECT_TIMEOUT_MS)" + (notes.empty() ? "" : "; " + notes));
      }
      return s;
    }
    transport::ProcessInfo& p = m.processes[i];
    p.index = i;
    p.name = field(text, "name");
    p.pid = std::atoll(field(text, "pid").c_str());
    p.host = field(text, "host");
    p.address = field(text, "address");
    (*auto_candidates)[i] = field(text, "transports");
    for (const auto& setting : mine) {
      const std::string theirs = field(text, setting.variable);
      if (theirs != setting.value)
        return Status(ErrorCode::mismatch, std::string(setting.variable) + " differs: " + who + " has '" + setting.value +
                                               "', " + p.name + " has '" + theirs + "'");
    }
    if (p.host == me.host) ++m.local_processes;
  }
  --m.local_processes;  // counted myself in the loop
  return Status();
}

}  // namespace

std::string host_identity() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(name) + "/" + boot;
}

Status join(const Options& options, Membership* out) {
  Membership m;
  m.workers = static_cast<std::uint32_t>(options.world_size);
  m.dedicated = static_cast<std::uint32_t>(options.aggregators);
  m.self = options.role == Role::worker ? static_cast<std::uint32_t>(options.rank)
                                        : m.workers + static_cast<std::uint32_t>(options.aggregator_index);
  const std::string who = process_name(options, m.workers, m.self);
  log::set_identity(who);
  m.key_prefix = "sparcoll/" + std::to_string(g_generation.fetch_add(1)) + "/";
  m.job_epoch = fnv1a(options.job_token + "|" + m.key_prefix);

  transport::ProcessInfo me;
  me.index = m.self;
  me.name = who;
  me.pid = getpid();
  me.host = host_identity();

  if (m.total() == 1) {
    me.address = "127.0.0.1";
    m.processes.push_back(me);
    m.transport = options.transport == "auto" ? "shm" : options.transport;
    *out = std::move(m);
    return Status();
  }

  if (options.role == Role::worker && options.rank == 0 && options.store_server == "rank0") {
    Status s = host_store(options, &m.server);
    if (!s.ok()) return s;
  }
  Status s = control::Store::connect(options.store, options.job_token, who, options.connect_timeout_ms, &m.store);
  if (!s.ok()) return s;
  me.address = options.tcp_addr.empty() ? m.store->local_address() : options.tcp_addr;

  s = claim_identity(m, who);
  if (!s.ok()) return s;
  s = m.store->set(m.key_prefix + "proc/" + std::to_string(m.self), encode_process(me, options));
  if (!s.ok()) return s;
  std::vector<std::string> auto_candidates;
  s = read_every_process(options, me, &m, &auto_candidates);
  if (!s.ok()) return s;

  m.transport = options.transport;
  if (m.transport == "auto") {
    std::string why;
    m.transport = choose_auto_transport(m.processes, auto_candidates, &why);
    SC_LOG_DEBUG("transport auto: %s (%s)", m.transport.c_str(), why.c_str());
  }
  *out = std::move(m);
  return Status();
}

Status wait_for_workers_to_leave(Membership& m, std::uint32_t timeout_ms) {
  if (!m.store) return Status();
  return m.store->wait_at_least(m.key_prefix + "bye", m.workers, timeout_ms);
}

Status leave(Membership& m, const Options& options, bool broken, const std::function<Status()>& failure) {
  if (!m.store) return Status();
  std::int64_t count = 0;
  Status s = m.store->add(m.key_prefix + "bye", 1, &count);
  if (!s.ok()) return s;
  // A broken job may have lost processes for good: count ourselves out, wait for nobody.
  if (broken) return Status();
  // In slices, so a peer that died after the last collective (it will never say bye) ends the
  // wait as soon as it is seen, not after the whole timeout (30 s by default).
  constexpr std::uint32_t kSliceMs = 100;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.connect_timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    const auto slice = static_cast<std::uint32_t>(std::clamp<long long>(left.count(), 0, kSliceMs));
    s = m.store->wait_at_least(m.key_prefix + "bye", m.total(), slice);
    if (s.code() != ErrorCode::timeout || left.count() <= kSliceMs) break;
    if (failure) {
      const Status why = failure();
      if (!why.ok()) {
        SC_LOG_INFO("teardown: not waiting for the others to leave: %s", why.message().c_str());
        return Status();
      }
    }
  }
  if (!s.ok()) return s;
  // Rank 0 hosts the store: let everyone read the final count before it goes away.
  if (m.server) {
    s = m.store->add(m.key_prefix + "gone", 1, &count);
    if (s.ok()) s = m.store->wait_at_least(m.key_prefix + "gone", m.total(), 2000);
    if (!s.ok()) SC_LOG_DEBUG("teardown: not every process confirmed before the store closed: %s", s.message().c_str());
  } else {
    (void)m.store->add(m.key_prefix + "gone", 1, &count);
  }
  return Status();
}

}  // namespace sparcoll::membership
