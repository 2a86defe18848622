// The process-wide DPDK environment (EAL): started once, on first use, never cleaned up before
// the process exits (rte_eal_init cannot run twice in a process, even after rte_eal_cleanup).
//
// Arguments: the defaults below, then SPARCOLL_DPDK_EAL_ARGS (whitespace-separated) appended.
// A user argument that conflicts with a default removes that default (a PCI allow-list removes
// --no-pci, -l/--lcores remove -l 0, -m/--socket-mem remove -m 1024, ...). rte_eal_init pins the
// calling thread to its lcore's CPU; the thread's previous affinity is restored right after, so
// threads created later (progress threads) do not all inherit CPU 0.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "sparcoll/status.hpp"

namespace sparcoll::transport::dpdk {

struct EalState {
  Status status;                   // why the EAL could not start, naming the arguments
  std::vector<std::string> args;   // what rte_eal_init got (argv[0] included)
  bool reused = false;             // someone else in this process had started it already
  bool has_device = false;         // the arguments name a device (--vdev, -a/--allow): port mode
  // All of the EAL's memory is one memfd-backed file (--no-huge --single-file-segments): a memif
  // zero-copy client can share it with its server. With hugepages memif 22.11 would describe
  // only the first memseg list to the server (its "region 1"), so zero-copy stays off there.
  bool shareable_memory = false;
  std::uint64_t tsc_hz = 0;
};

// The default arguments and `user_args` merged as described above (argv[0] first).
std::vector<std::string> eal_arguments(const std::string& user_args);
// Whether arguments name a device of their own (port mode) rather than leaving us memif.
bool eal_arguments_name_a_device(const std::vector<std::string>& args);

// Starts the EAL with `user_args` the first time it is called in this process; every later call
// returns that first outcome, whatever its arguments (a warning is logged when they differ).
const EalState& start_eal(const std::string& user_args);

// Serialises DPDK control-plane calls (vdev, port, mempool, ring creation and teardown) between
// the drivers of one process and the background closer. Never taken on the data path.
std::mutex& control_mutex();

std::string join_args(const std::vector<std::string>& args);

// Mempool caches are per lcore, and a thread the EAL does not know (LCORE_ID_ANY: every thread
// but the one that started the EAL) bypasses them: each mbuf it takes or returns goes through
// the pool's shared ring, a FIFO that always hands out the coldest mbuf, and the copies into
// cold mbufs cost a third of the dpdk driver's throughput (perf/transport_bw). The first call on
// a thread registers it as a non-EAL lcore (rte_thread_register) for the rest of its life; it is
// unregistered when the thread exits. Cheap after the first call. When every lcore id is taken
// the thread runs without caches, logged once.
void register_this_thread();

inline void adopt_lcore() {
  thread_local bool tried = false;
  if (!tried) {
    tried = true;
    register_this_thread();
  }
}

}  // namespace sparcoll::transport::dpdk
