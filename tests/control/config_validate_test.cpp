// Options::validate(): ranges and combinations, each message naming the field and its variable.
#include <gtest/gtest.h>

#include "sparcoll/options.hpp"

namespace sparcoll::test {
namespace {

Options valid_single_process() {
  Options o;
  o.rank = 0;
  o.world_size = 1;
  return o;
}

// validate()'s message, "" when the options are valid.
std::string problem(const Options& o) {
  Status st = o.validate();
  if (st.ok()) return "";
  EXPECT_EQ(st.code(), ErrorCode::invalid_argument);
  return st.message();
}

TEST(ConfigValidate, DefaultsPlusIdentityAreValid) {
  EXPECT_EQ(problem(valid_single_process()), "");
  Options o = valid_single_process();
  o.world_size = 4;
  o.rank = 3;
  o.store = "node0:29501";
  EXPECT_EQ(problem(o), "");
}

TEST(ConfigValidate, MissingIdentitySaysHowToSetIt) {
  Options o;
  EXPECT_EQ(problem(o),
            "world_size=-1 (SPARCOLL_WORLD_SIZE) is not set: set it or start the job with torchrun, mpirun or srun; "
            "rank=-1 (SPARCOLL_RANK) is not set: set it or start the job with torchrun, mpirun or srun");
}

TEST(ConfigValidate, RankMustBeBelowWorldSize) {
  Options o = valid_single_process();
  o.world_size = 4;
  o.store = "node0:1";
  o.rank = 4;
  EXPECT_EQ(problem(o), "rank=4 (SPARCOLL_RANK) must be between 0 and 3 for world_size=4 (SPARCOLL_WORLD_SIZE)");
  o.rank = -2;
  EXPECT_EQ(problem(o), "rank=-2 (SPARCOLL_RANK) must be between 0 and 3 for world_size=4 (SPARCOLL_WORLD_SIZE)");
  o.rank = 0;
  o.world_size = 0;
  EXPECT_EQ(problem(o), "world_size=0 (SPARCOLL_WORLD_SIZE) must be at least 1");
}

TEST(ConfigValidate, AggregatorsAndTheirIndex) {
  Options o = valid_single_process();
  o.aggregators = -1;
  EXPECT_EQ(problem(o), "aggregators=-1 (SPARCOLL_AGGREGATORS) must be at least 0");
  o.aggregators = 2;
  o.role = Role::aggregator;
  o.rank = -1;  // aggregators have no worker rank
  o.store = "node0:29501";
  o.aggregator_index = 2;
  EXPECT_EQ(problem(o),
            "aggregator_index=2 (SPARCOLL_AGGREGATOR_INDEX) must be between 0 and 1 for aggregators=2 "
            "(SPARCOLL_AGGREGATORS)");
  o.aggregator_index = 1;
  EXPECT_EQ(problem(o), "");
  o.aggregators = 0;
  EXPECT_EQ(problem(o), "role=aggregator (SPARCOLL_ROLE) needs aggregators >= 1 (SPARCOLL_AGGREGATORS), not 0");
}

TEST(ConfigValidate, StoreIsNeededForMoreThanOneProcess) {
  Options o = valid_single_process();
  o.world_size = 2;
  EXPECT_EQ(problem(o),
            "store is empty (SPARCOLL_STORE): a job of world_size=2 needs host:port; set it, or MASTER_ADDR and "
            "MASTER_PORT");
  o.store = "nocolon";
  EXPECT_EQ(problem(o), "store='nocolon' (SPARCOLL_STORE): not host:port with a port between 1 and 65535");
  o.store = "127.0.0.1:29501";
  EXPECT_EQ(problem(o), "");
}

TEST(ConfigValidate, NumericRanges) {
  struct Case {
    void (*apply)(Options&);
    const char* message;
  };
  const Case cases[] = {
      {[](Options& o) { o.block_elems = 0; }, "block_elems=0 (SPARCOLL_BLOCK_ELEMS) must be between 1 and 1048576"},
      {[](Options& o) { o.block_elems = (1u << 20) + 1; },
       "block_elems=1048577 (SPARCOLL_BLOCK_ELEMS) must be between 1 and 1048576"},
      {[](Options& o) { o.lanes = 0; }, "lanes=0 (SPARCOLL_LANES) must be between 1 and 4096"},
      {[](Options& o) { o.lanes = 4097; }, "lanes=4097 (SPARCOLL_LANES) must be between 1 and 4096"},
      {[](Options& o) { o.fusion = 256; }, "fusion=256 (SPARCOLL_FUSION) must be between 1 and 255"},
      {[](Options& o) { o.threads = 0; }, "threads=0 (SPARCOLL_THREADS) must be between 1 and 64"},
      {[](Options& o) { o.threads = 65; }, "threads=65 (SPARCOLL_THREADS) must be between 1 and 64"},
      {[](Options& o) { o.max_inflight = 0; }, "max_inflight=0 (SPARCOLL_MAX_INFLIGHT) must be between 1 and 1024"},
      {[](Options& o) { o.max_inflight = 1025; },
       "max_inflight=1025 (SPARCOLL_MAX_INFLIGHT) must be between 1 and 1024"},
      {[](Options& o) { o.max_message = 4095; },
       "max_message=4095 (SPARCOLL_MAX_MESSAGE) must be between 4096 and 67108864"},
      {[](Options& o) { o.deadline_ms = 0; }, "deadline_ms=0 (SPARCOLL_DEADLINE_MS) must be between 1 and 4294967295"},
      {[](Options& o) { o.connect_timeout_ms = 0; },
       "connect_timeout_ms=0 (SPARCOLL_CONNECT_TIMEOUT_MS) must be between 1 and 4294967295"},
  };
  for (const Case& c : cases) {
    Options o = valid_single_process();
    c.apply(o);
    EXPECT_EQ(problem(o), c.message);
  }
}

TEST(ConfigValidate, MaxMessageAboveLimitAlsoChecksTheRing) {
  Options o = valid_single_process();
  o.max_message = (64u << 20) + 1;
  EXPECT_EQ(problem(o),
            "max_message=67108865 (SPARCOLL_MAX_MESSAGE) must be between 4096 and 67108864; shm_ring_bytes=1048576 "
            "(SPARCOLL_SHM_RING_BYTES) must be at least 4 * max_message = 268435460 (SPARCOLL_MAX_MESSAGE)");
}

TEST(ConfigValidate, PinCoresCoverEveryThread) {
  Options o = valid_single_process();
  o.threads = 3;
  o.pin_cores = {0, 1};
  EXPECT_EQ(problem(o),
            "pin_cores lists 2 cores (SPARCOLL_PIN_CORES) but threads=3 (SPARCOLL_THREADS) needs at least as many");
  o.pin_cores = {0, 1, 2, 3};
  EXPECT_EQ(problem(o), "");
  o.pin_cores = {0, -1, 2};
  EXPECT_EQ(problem(o), "pin_cores (SPARCOLL_PIN_CORES) lists core -1; cores are >= 0");
  o.pin_cores.clear();
  EXPECT_EQ(problem(o), "");
}

TEST(ConfigValidate, Enumerations) {
  Options o = valid_single_process();
  o.poll_mode = "busy";
  EXPECT_EQ(problem(o), "poll_mode='busy' (SPARCOLL_POLL_MODE) must be one of spin, yield, auto, event");
  o = valid_single_process();
  o.transport = "ib";
  EXPECT_EQ(problem(o), "transport='ib' (SPARCOLL_TRANSPORT) must be one of auto, shm, tcp, rdma, dpdk");
  o = valid_single_process();
  o.algo = "rings";
  EXPECT_EQ(problem(o),
            "algo='rings' (SPARCOLL_ALGO) must be one of block_sparse, auto, ring, butterfly, ssar_recursive_doubling, "
            "ssar_split_allgather, dsar_split_allgather, recursive_doubling, direct, hybrid, block_recursive_doubling");
  o = valid_single_process();
  o.log_level = "loud";
  EXPECT_EQ(problem(o), "log_level='loud' (SPARCOLL_LOG_LEVEL) must be one of error, warn, info, debug");
  o = valid_single_process();
  o.store_server = "rank1";
  EXPECT_EQ(problem(o), "store_server='rank1' (SPARCOLL_STORE_SERVER) must be one of rank0, external");
}

// The drivers' enumerations are checked as the core's are, when assigned in code too.
TEST(ConfigValidate, DriverEnumerations) {
  Options o = valid_single_process();
  o.shm_peer_reads = "sometimes";
  EXPECT_EQ(problem(o), "shm_peer_reads='sometimes' (SPARCOLL_SHM_PEER_READS) must be one of auto, off");
  o = valid_single_process();
  o.shm_streaming_stores = "yes";
  EXPECT_EQ(problem(o), "shm_streaming_stores='yes' (SPARCOLL_SHM_STREAMING_STORES) must be one of auto, on, off");
  o = valid_single_process();
  o.dpdk_memif_zero_copy = "on";
  EXPECT_EQ(problem(o), "dpdk_memif_zero_copy='on' (SPARCOLL_DPDK_MEMIF_ZERO_COPY) must be one of auto, off");
}

TEST(ConfigValidate, ShmRingIsAPowerOfTwoAndHoldsFourMessages) {
  Options o = valid_single_process();
  o.shm_ring_bytes = 100000;
  EXPECT_EQ(problem(o),
            "shm_ring_bytes=100000 (SPARCOLL_SHM_RING_BYTES) must be a power of two between 65536 and 1073741824");
  o.shm_ring_bytes = 32768;
  EXPECT_EQ(problem(o),
            "shm_ring_bytes=32768 (SPARCOLL_SHM_RING_BYTES) must be a power of two between 65536 and 1073741824");
  o.shm_ring_bytes = 1u << 31;
  EXPECT_NE(problem(o), "");
  o.shm_ring_bytes = 128u << 10;
  EXPECT_EQ(problem(o),
            "shm_ring_bytes=131072 (SPARCOLL_SHM_RING_BYTES) must be at least 4 * max_message = 262144 "
            "(SPARCOLL_MAX_MESSAGE)");
  o.max_message = 32u << 10;
  EXPECT_EQ(problem(o), "");
}

TEST(ConfigValidate, TcpCongestionIsAKernelName) {
  Options o = valid_single_process();
  for (const char* ok : {"auto", "system", "cubic", "bbr", "dctcp", "h_tcp2"}) {
    o.tcp_congestion = ok;
    EXPECT_EQ(problem(o), "") << ok;
  }
  for (const char* bad : {"", "Cubic", "cubic reno", "../cubic", "averyveryverylongname"}) {
    o.tcp_congestion = bad;
    EXPECT_EQ(problem(o), "tcp_congestion='" + std::string(bad) +
                              "' (SPARCOLL_TCP_CONGESTION) must be auto, system or a kernel congestion control name "
                              "(1 to 15 of a-z, 0-9, _; net.ipv4.tcp_available_congestion_control lists them)");
  }
}

TEST(ConfigValidate, JobTokenFitsTheStoreHello) {
  Options o = valid_single_process();
  o.job_token.assign(4097, 't');
  EXPECT_EQ(problem(o), "job_token (SPARCOLL_JOB_TOKEN) is 4097 bytes, at most 4096 allowed");
}

TEST(ConfigValidate, EveryProblemIsReportedAtOnce) {
  Options o = valid_single_process();
  o.lanes = 0;
  o.fusion = 0;
  EXPECT_EQ(problem(o),
            "lanes=0 (SPARCOLL_LANES) must be between 1 and 4096; fusion=0 (SPARCOLL_FUSION) must be between 1 "
            "and 255");
}

}  // namespace
}  // namespace sparcoll::test
