// Every knob of a communicator. Each field has a SPARCOLL_* environment variable; the table
// with names, defaults and meanings is docs/config.md (generated from src/common/config.cpp).
//
// Precedence: defaults < environment < code. Typical use:
//   auto opts = sparcoll::Options::from_env();   // defaults + SPARCOLL_* / launcher variables
//   opts.block_elems = 512;                      // code overrides the environment
//   sparcoll::Communicator comm(opts);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sparcoll/status.hpp"

namespace sparcoll {

enum class Role : std::uint8_t { worker = 0, aggregator = 1 };

struct Options {
  // --- identity and rendezvous --------------------------------------------------------------
  int rank = -1;               // SPARCOLL_RANK (or RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID)
  int world_size = -1;         // SPARCOLL_WORLD_SIZE (or WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS)
  std::string store;           // SPARCOLL_STORE host:port (or MASTER_ADDR:MASTER_PORT+1)
  std::string job_token;       // SPARCOLL_JOB_TOKEN, checked on every connection
  std::string store_server = "rank0";  // SPARCOLL_STORE_SERVER: rank0 (rank 0 hosts the store) | external
  Role role = Role::worker;    // SPARCOLL_ROLE: worker | aggregator
  int aggregator_index = -1;   // SPARCOLL_AGGREGATOR_INDEX (dedicated aggregator processes)

  // --- engine -------------------------------------------------------------------------------
  std::string transport = "auto";  // SPARCOLL_TRANSPORT: auto | shm | tcp (| rdma | dpdk)
  std::string algo = "auto";       // SPARCOLL_ALGO: auto = block recursive doubling when small, else ring or hybrid
  int aggregators = 0;             // SPARCOLL_AGGREGATORS: 0 = co-located, M = dedicated processes
  std::uint32_t block_elems = 256; // SPARCOLL_BLOCK_ELEMS: elements per block
  std::uint32_t lanes = 64;        // SPARCOLL_LANES: slots the tensor's blocks are striped over
  std::uint32_t fusion = 32;       // SPARCOLL_FUSION: max blocks a worker fuses into one message
  std::uint32_t threads = 1;       // SPARCOLL_THREADS: progress threads (shards) per process
  std::vector<int> pin_cores;      // SPARCOLL_PIN_CORES: e.g. "2,3"; empty = no pinning
  std::uint32_t max_inflight = 4;  // SPARCOLL_MAX_INFLIGHT: operations in flight per communicator
  std::uint32_t max_message = 64 * 1024;  // SPARCOLL_MAX_MESSAGE: bytes per message, header included
  std::string poll_mode = "auto";  // SPARCOLL_POLL_MODE: spin | yield | auto (yield when oversubscribed)
  std::uint32_t idle_spin_us = 5000;  // SPARCOLL_IDLE_SPIN_US: idle progress/collective threads poll this long, then sleep
  int hybrid_dense_percent = -1;   // SPARCOLL_HYBRID_DENSE_PERCENT: a stripe whose union density reaches it goes dense; -1 = auto (by transport)
  std::uint32_t small_tensor_bytes = 65536;  // SPARCOLL_SMALL_TENSOR_BYTES: algo=auto's latency path up to here
  std::uint32_t hybrid_min_bytes = 2u << 20;  // SPARCOLL_HYBRID_MIN_BYTES: the hybrid sends smaller tensors whole, splits larger ones into stripes
  std::uint32_t ring_segment_bytes = 2u << 20;  // SPARCOLL_RING_SEGMENT_BYTES: the ring goes round once per segment of this many bytes; 0 = whole tensor
  std::uint32_t hybrid_plan_reuse = 32;  // SPARCOLL_HYBRID_PLAN_REUSE: calls of one shape planned without an exchange; 0 = every call exchanges

  // --- deadlines ----------------------------------------------------------------------------
  std::uint32_t deadline_ms = 60000;         // SPARCOLL_DEADLINE_MS: per collective operation
  std::uint32_t connect_timeout_ms = 30000;  // SPARCOLL_CONNECT_TIMEOUT_MS: rendezvous + connections

  // --- transports ---------------------------------------------------------------------------
  std::string tcp_addr;                      // SPARCOLL_TCP_ADDR: address to listen on / advertise
  std::string tcp_congestion = "auto";       // SPARCOLL_TCP_CONGESTION: auto | system | a kernel algorithm name
  std::uint32_t shm_ring_bytes = 1u << 20;   // SPARCOLL_SHM_RING_BYTES: per (sender, receiver, thread)
  std::string shm_peer_reads = "auto";       // SPARCOLL_SHM_PEER_READS: auto | off (one-copy reads of peers' memory)
  std::string shm_streaming_stores = "auto"; // SPARCOLL_SHM_STREAMING_STORES: auto | on | off (large messages into a ring)
  std::string ib_device;                     // SPARCOLL_IB_DEVICE: rdma device name; empty = first usable
  std::uint32_t ib_port = 0;                 // SPARCOLL_IB_PORT: 1-based port; 0 = first active port
  int ib_gid_index = -1;                     // SPARCOLL_IB_GID_INDEX: -1 = best GID (RoCE v2 preferred)
  std::string dpdk_eal_args;                 // SPARCOLL_DPDK_EAL_ARGS: appended to the EAL defaults; a device = port mode
  std::uint32_t dpdk_port = 0;               // SPARCOLL_DPDK_PORT: port id in port mode
  std::string dpdk_ip;                       // SPARCOLL_DPDK_IP: ipv4 in port mode; empty = the rendezvous address
  std::uint32_t dpdk_udp_port = 47000;       // SPARCOLL_DPDK_UDP_PORT: channel c uses this + c
  std::uint32_t dpdk_drop_every = 0;         // SPARCOLL_DPDK_DROP_EVERY: drop every Nth data frame sent (tests); 0 = off
  std::string dpdk_memif_zero_copy = "auto";  // SPARCOLL_DPDK_MEMIF_ZERO_COPY: auto | off (one memif link per process)

  // --- diagnostics --------------------------------------------------------------------------
  std::string log_level = "warn";  // SPARCOLL_LOG_LEVEL: error | warn | info | debug

  // Defaults, then SPARCOLL_* and launcher variables. Throws sparcoll::Error (invalid_argument)
  // on a malformed value; warns about unknown SPARCOLL_* variables.
  static Options from_env();

  // Sets one option by name, as the environment would: `key` is a field name ("block_elems") or
  // its variable ("SPARCOLL_BLOCK_ELEMS"), `value` the variable's text ("512"). Throws
  // sparcoll::Error (invalid_argument) naming the key for an unknown key or a malformed value;
  // ranges and combinations are checked by validate() (the Communicator calls it).
  void set(std::string_view key, const std::string& value);

  // Checks ranges and combinations; the message names the option and the variable.
  Status validate() const;
};

}  // namespace sparcoll
