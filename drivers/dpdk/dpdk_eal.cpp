#include "dpdk_eal.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <sstream>

#include "common/log.hpp"
#include "dpdk_rte.hpp"

namespace sparcoll::transport::dpdk {
namespace {

// The option name of an argument: "--vdev=net_x" -> "--vdev", "-a0000:00:08.0" -> "-a".
std::string option_name(const std::string& arg) {
  if (arg.rfind("--", 0) == 0) return arg.substr(0, arg.find('='));
  if (arg.size() >= 2 && arg[0] == '-') return arg.substr(0, 2);
  return "";
}

bool has_option(const std::vector<std::string>& args, std::initializer_list<const char*> names) {
  for (const std::string& arg : args) {
    const std::string name = option_name(arg);
    for (const char* wanted : names)
      if (name == wanted) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> eal_arguments(const std::string& user_args) {
  std::vector<std::string> user;
  std::istringstream in(user_args);
  for (std::string word; in >> word;) user.push_back(word);

  // Each default with the user options that replace it.
  struct Default {
    std::vector<std::string> words;
    std::initializer_list<const char*> replaced_by;
  };
  const Default defaults[] = {
      {{"--no-huge"}, {"--no-huge", "--huge-dir", "--socket-mem", "--in-memory", "--huge-unlink", "--single-file-segments"}},
      // One memfd-backed file for all of the (--no-huge) memory: a memif zero-copy client shares
      // it with its server (dpdk_driver.cpp).
      {{"--single-file-segments"}, {"--single-file-segments", "--huge-dir", "--socket-mem", "--in-memory", "--huge-unlink", "--legacy-mem"}},
      {{"-m", "1024"}, {"-m", "--socket-mem", "--socket-limit"}},
      {{"--no-pci"}, {"--no-pci", "-a", "--allow", "-b", "--block", "-w", "--pci-whitelist"}},
      {{"--no-shconf"}, {"--no-shconf", "--proc-type", "--in-memory"}},
      {{"--no-telemetry"}, {"--no-telemetry", "--telemetry"}},
      {{"--log-level=lib.eal:error"}, {}},
      {{"--log-level=pmd.*:error"}, {}},
      {{"-l", "0"}, {"-l", "-c", "--lcores"}},
  };
  std::vector<std::string> args = {"sparcoll"};
  for (const Default& d : defaults) {
    if (has_option(user, d.replaced_by)) continue;
    args.insert(args.end(), d.words.begin(), d.words.end());
  }
  // Appended after the defaults: a later --log-level wins.
  args.insert(args.end(), user.begin(), user.end());
  return args;
}

bool eal_arguments_name_a_device(const std::vector<std::string>& args) {
  return has_option(args, {"--vdev", "-a", "--allow", "-b", "--block", "-w", "--pci-whitelist"});
}

std::string join_args(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& arg : args) text += (text.empty() ? "" : " ") + arg;
  return text;
}

std::mutex& control_mutex() {
  static std::mutex* mutex = new std::mutex;  // never destroyed: the closer thread may outlive statics
  return *mutex;
}

const EalState& start_eal(const std::string& user_args) {
  // Never destroyed, like the EAL itself.
  static EalState* state = new EalState;
  static std::string* first_args = new std::string;
  static std::once_flag once;
  std::call_once(once, [&] {
    *first_args = user_args;
    state->args = eal_arguments(user_args);
    state->has_device = eal_arguments_name_a_device(state->args);
    // DPDK logs to stdout (and syslog) by default; stdout belongs to the program.
    rte_openlog_stream(stderr);
    cpu_set_t saved;
    CPU_ZERO(&saved);
    const bool have_affinity = sched_getaffinity(0, sizeof saved, &saved) == 0;
    std::vector<std::string> words = state->args;
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    const int result = rte_eal_init(static_cast<int>(words.size()), argv.data());
    const int err = rte_errno;
    // rte_eal_init pinned this thread to its lcore's CPU; threads created from here on would
    // inherit it.
    if (have_affinity) sched_setaffinity(0, sizeof saved, &saved);
    if (result < 0 && err == EALREADY) {
      // The program (or a library) started the EAL itself: use it as it is.
      state->reused = true;
      state->has_device = rte_eth_dev_count_avail() > 0;
      SC_LOG_INFO("dpdk: the EAL was already running in this process; using it (%u ports)", rte_eth_dev_count_avail());
    } else if (result < 0) {
      state->status = Status(ErrorCode::system_error, "dpdk: rte_eal_init failed (" + std::string(rte_strerror(err)) +
                                                          ") with arguments '" + join_args(state->args) +
                                                          "' (defaults + SPARCOLL_DPDK_EAL_ARGS)");
      return;
    } else {
      SC_LOG_INFO("dpdk: EAL started with '%s' (%s), %u ports", join_args(state->args).c_str(), rte_version(),
                  rte_eth_dev_count_avail());
    }
    state->tsc_hz = rte_get_tsc_hz();
    state->shareable_memory = rte_eal_has_hugepages() == 0 && rte_mcfg_get_single_file_segments();
  });
  static std::atomic<bool> warned{false};
  if (state->status.ok() && !state->reused && user_args != *first_args && !warned.exchange(true))
    SC_LOG_WARN("dpdk: the EAL runs with '%s' since the first dpdk driver of this process; SPARCOLL_DPDK_EAL_ARGS='%s' "
                "is ignored",
                join_args(state->args).c_str(), user_args.c_str());
  return *state;
}

namespace {

// Unregisters the thread's lcore at thread exit, so that threads that come and go (one set per
// communicator) do not use up RTE_MAX_LCORE.
struct LcoreLease {
  bool held = false;
  ~LcoreLease() {
    if (held) rte_thread_unregister();
  }
};

}  // namespace

void register_this_thread() {
  if (rte_lcore_id() != LCORE_ID_ANY) return;  // the EAL's own thread, or registered already
  thread_local LcoreLease lease;
  if (rte_thread_register() == 0) {
    lease.held = true;
    return;
  }
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    SC_LOG_WARN("dpdk: cannot register a progress thread as an lcore (%s): it runs without mempool caches (slower)",
                rte_strerror(rte_errno));
}

}  // namespace sparcoll::transport::dpdk
