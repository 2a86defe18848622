// Options::from_env(): parsing of every variable, strictness, precedence, launcher fallbacks
// and the unknown-variable warning.
#include <gtest/gtest.h>

#include "common/config.hpp"
#include "config_env_fixture.hpp"
#include "sparcoll/options.hpp"

namespace sparcoll::test {
namespace {

using ConfigEnv = ConfigEnvFixture;

// The message from_env() throws, or "" when it does not throw.
std::string from_env_error() {
  try {
    (void)Options::from_env();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.status().message();
  }
  return "";
}

TEST_F(ConfigEnv, NothingSetGivesTheDefaults) {
  const Options o = Options::from_env();
  const Options d;
  EXPECT_EQ(o.rank, -1);
  EXPECT_EQ(o.world_size, -1);
  EXPECT_EQ(o.store, "");
  EXPECT_EQ(o.block_elems, d.block_elems);
  EXPECT_EQ(o.lanes, d.lanes);
  EXPECT_EQ(o.transport, "auto");
  EXPECT_TRUE(o.pin_cores.empty());
}

TEST_F(ConfigEnv, EveryVariableReachesItsField) {
  set("SPARCOLL_RANK", "3");
  set("SPARCOLL_WORLD_SIZE", "8");
  set("SPARCOLL_STORE", "node0:29501");
  set("SPARCOLL_JOB_TOKEN", "s3cret");
  set("SPARCOLL_STORE_SERVER", "external");
  set("SPARCOLL_ROLE", "aggregator");
  set("SPARCOLL_AGGREGATOR_INDEX", "1");
  set("SPARCOLL_TRANSPORT", "shm");
  set("SPARCOLL_ALGO", "block_sparse");
  set("SPARCOLL_AGGREGATORS", "2");
  set("SPARCOLL_BLOCK_ELEMS", "512");
  set("SPARCOLL_LANES", "128");
  set("SPARCOLL_FUSION", "16");
  set("SPARCOLL_THREADS", "2");
  set("SPARCOLL_PIN_CORES", "2,3,10");
  set("SPARCOLL_MAX_INFLIGHT", "8");
  set("SPARCOLL_MAX_MESSAGE", "8192");
  set("SPARCOLL_POLL_MODE", "yield");
  set("SPARCOLL_DEADLINE_MS", "1234");
  set("SPARCOLL_CONNECT_TIMEOUT_MS", "4321");
  set("SPARCOLL_TCP_ADDR", "10.0.0.5");
  set("SPARCOLL_TCP_CONGESTION", "reno");
  set("SPARCOLL_SHM_RING_BYTES", "131072");
  set("SPARCOLL_LOG_LEVEL", "error");
  const Options o = Options::from_env();
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.world_size, 8);
  EXPECT_EQ(o.store, "node0:29501");
  EXPECT_EQ(o.job_token, "s3cret");
  EXPECT_EQ(o.store_server, "external");
  EXPECT_EQ(o.role, Role::aggregator);
  EXPECT_EQ(o.aggregator_index, 1);
  EXPECT_EQ(o.transport, "shm");
  EXPECT_EQ(o.algo, "block_sparse");
  EXPECT_EQ(o.aggregators, 2);
  EXPECT_EQ(o.block_elems, 512u);
  EXPECT_EQ(o.lanes, 128u);
  EXPECT_EQ(o.fusion, 16u);
  EXPECT_EQ(o.threads, 2u);
  EXPECT_EQ(o.pin_cores, (std::vector<int>{2, 3, 10}));
  EXPECT_EQ(o.max_inflight, 8u);
  EXPECT_EQ(o.max_message, 8192u);
  EXPECT_EQ(o.poll_mode, "yield");
  EXPECT_EQ(o.deadline_ms, 1234u);
  EXPECT_EQ(o.connect_timeout_ms, 4321u);
  EXPECT_EQ(o.tcp_addr, "10.0.0.5");
  EXPECT_EQ(o.tcp_congestion, "reno");
  EXPECT_EQ(o.shm_ring_bytes, 131072u);
  EXPECT_EQ(o.log_level, "error");
  EXPECT_EQ(log::level(), log::Level::error);
  EXPECT_TRUE(o.validate().ok()) << o.validate().to_string();
}

TEST_F(ConfigEnv, EveryOptionsFieldHasARow) {
  // The table is the single source: one row per field of Options, plus the variables read
  // elsewhere (SIMD level, test build dir, the rdma VM scripts' knobs).
  int fields = 0;
  for (const ConfigVariable& v : config_variables()) fields += v.parse != nullptr;
  EXPECT_EQ(fields, 41);
  EXPECT_EQ(config_variables().size(), 49u);
}

TEST_F(ConfigEnv, IntegersAreStrict) {
  const std::pair<const char*, const char*> cases[] = {
      {"abc", "SPARCOLL_BLOCK_ELEMS='abc': not a positive integer"},
      {"12abc", "SPARCOLL_BLOCK_ELEMS='12abc': not a positive integer"},
      {"-4", "SPARCOLL_BLOCK_ELEMS='-4': not a positive integer"},
      {"+4", "SPARCOLL_BLOCK_ELEMS='+4': not a positive integer"},
      {" 4", "SPARCOLL_BLOCK_ELEMS=' 4': not a positive integer"},
      {"0x10", "SPARCOLL_BLOCK_ELEMS='0x10': not a positive integer"},
      {"0", "SPARCOLL_BLOCK_ELEMS='0': not a positive integer"},
      {"4294967296", "SPARCOLL_BLOCK_ELEMS='4294967296': out of range (at most 4294967295)"},
      {"99999999999999999999999", "SPARCOLL_BLOCK_ELEMS='99999999999999999999999': out of range (at most 4294967295)"},
  };
  for (const auto& [text, message] : cases) {
    set("SPARCOLL_BLOCK_ELEMS", text);
    EXPECT_EQ(from_env_error(), message);
  }
  set("SPARCOLL_BLOCK_ELEMS", "4294967295");
  EXPECT_EQ(Options::from_env().block_elems, 4294967295u);  // parses; validate() judges the range
}

TEST_F(ConfigEnv, SignedFieldsRejectNegativesAndOverflow) {
  set("SPARCOLL_RANK", "-1");
  EXPECT_EQ(from_env_error(), "SPARCOLL_RANK='-1': not a non-negative integer");
  set("SPARCOLL_RANK", "2147483648");
  EXPECT_EQ(from_env_error(), "SPARCOLL_RANK='2147483648': out of range (at most 2147483647)");
  set("SPARCOLL_RANK", "0");
  set("SPARCOLL_WORLD_SIZE", "0");
  EXPECT_EQ(from_env_error(), "SPARCOLL_WORLD_SIZE='0': not a positive integer");
  set("SPARCOLL_WORLD_SIZE", "1");
  set("SPARCOLL_AGGREGATORS", "x");
  EXPECT_EQ(from_env_error(), "SPARCOLL_AGGREGATORS='x': not a non-negative integer");
  set("SPARCOLL_AGGREGATORS", "0");
  EXPECT_EQ(Options::from_env().aggregators, 0);
}

TEST_F(ConfigEnv, EnumerationsAreChecked) {
  set("SPARCOLL_TRANSPORT", "infiniband");
  EXPECT_EQ(from_env_error(), "SPARCOLL_TRANSPORT='infiniband': expected one of auto, shm, tcp, rdma, dpdk");
  set("SPARCOLL_TRANSPORT", "tcp");
  set("SPARCOLL_POLL_MODE", "busy");
  EXPECT_EQ(from_env_error(), "SPARCOLL_POLL_MODE='busy': expected one of spin, yield, auto, event");
  set("SPARCOLL_POLL_MODE", "spin");
  set("SPARCOLL_ALGO", "rings");
  EXPECT_EQ(from_env_error(),
            "SPARCOLL_ALGO='rings': expected one of block_sparse, auto, ring, butterfly, ssar_recursive_doubling, "
            "ssar_split_allgather, dsar_split_allgather, recursive_doubling, direct, hybrid, block_recursive_doubling");
  set("SPARCOLL_ALGO", "block_sparse");
  set("SPARCOLL_ROLE", "master");
  EXPECT_EQ(from_env_error(), "SPARCOLL_ROLE='master': expected worker or aggregator");
  set("SPARCOLL_ROLE", "worker");
  set("SPARCOLL_STORE_SERVER", "rank1");
  EXPECT_EQ(from_env_error(), "SPARCOLL_STORE_SERVER='rank1': expected one of rank0, external");
  set("SPARCOLL_STORE_SERVER", "rank0");
  set("SPARCOLL_LOG_LEVEL", "verbose");
  EXPECT_EQ(from_env_error(), "SPARCOLL_LOG_LEVEL='verbose': expected one of error, warn, info, debug");
  set("SPARCOLL_LOG_LEVEL", "WARN");  // case matters, as for every enumeration
  EXPECT_NE(from_env_error(), "");
}

TEST_F(ConfigEnv, PinCoresIsACommaList) {
  set("SPARCOLL_PIN_CORES", "7");
  EXPECT_EQ(Options::from_env().pin_cores, std::vector<int>{7});
  for (const char* bad : {"2,,3", "2,", ",2", "a", "2;3", "-1", "2, 3", "1-4"}) {
    set("SPARCOLL_PIN_CORES", bad);
    EXPECT_EQ(from_env_error(),
              std::string("SPARCOLL_PIN_CORES='") + bad + "': not a comma-separated list of non-negative core numbers");
  }
}

TEST_F(ConfigEnv, StoreMustBeHostPort) {
  set("SPARCOLL_STORE", "node0");
  EXPECT_EQ(from_env_error(), "SPARCOLL_STORE='node0': not host:port with a port between 1 and 65535");
  set("SPARCOLL_STORE", "node0:0");
  EXPECT_EQ(from_env_error(), "SPARCOLL_STORE='node0:0': not host:port with a port between 1 and 65535");
  set("SPARCOLL_STORE", "[::1]:29500");
  EXPECT_EQ(from_env_error(),
            "SPARCOLL_STORE='[::1]:29500': ipv6 addresses are not supported yet, use an ipv4 address or host name");
}

TEST_F(ConfigEnv, EmptyVariablesCountAsUnset) {
  set("SPARCOLL_LANES", "");
  set("SPARCOLL_RANK", "");
  set("RANK", "5");
  const Options o = Options::from_env();
  EXPECT_EQ(o.lanes, Options().lanes);
  EXPECT_EQ(o.rank, 5);
}

TEST_F(ConfigEnv, CodeOverridesTheEnvironment) {
  set("SPARCOLL_BLOCK_ELEMS", "1024");
  set("SPARCOLL_LANES", "32");
  Options o = Options::from_env();
  EXPECT_EQ(o.block_elems, 1024u);
  o.block_elems = 512;
  EXPECT_EQ(o.block_elems, 512u);
  EXPECT_EQ(o.lanes, 32u);
}

TEST_F(ConfigEnv, TorchrunVariables) {
  set("RANK", "2");
  set("WORLD_SIZE", "4");
  set("MASTER_ADDR", "10.1.2.3");
  set("MASTER_PORT", "29500");
  const Options o = Options::from_env();
  EXPECT_EQ(o.rank, 2);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.store, "10.1.2.3:29501");  // MASTER_PORT itself is torchrun's own store
}

TEST_F(ConfigEnv, OpenMpiPmiAndSlurmVariables) {
  set("OMPI_COMM_WORLD_RANK", "1");
  set("OMPI_COMM_WORLD_SIZE", "3");
  Options o = Options::from_env();
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.world_size, 3);
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  set("PMI_RANK", "4");
  set("PMI_SIZE", "6");
  o = Options::from_env();
  EXPECT_EQ(o.rank, 4);
  EXPECT_EQ(o.world_size, 6);
  ::unsetenv("PMI_RANK");
  ::unsetenv("PMI_SIZE");
  set("SLURM_PROCID", "7");
  set("SLURM_NTASKS", "16");
  o = Options::from_env();
  EXPECT_EQ(o.rank, 7);
  EXPECT_EQ(o.world_size, 16);
}

TEST_F(ConfigEnv, SparcollVariablesWinOverLauncherOnes) {
  set("SLURM_PROCID", "7");
  set("RANK", "2");  // RANK comes before SLURM_PROCID in the fallback order
  EXPECT_EQ(Options::from_env().rank, 2);
  set("SPARCOLL_RANK", "0");
  set("MASTER_ADDR", "10.1.2.3");
  set("MASTER_PORT", "29500");
  set("SPARCOLL_STORE", "store.local:4000");
  const Options o = Options::from_env();
  EXPECT_EQ(o.rank, 0);
  EXPECT_EQ(o.store, "store.local:4000");
}

TEST_F(ConfigEnv, MalformedLauncherVariablesNameThemselves) {
  set("OMPI_COMM_WORLD_RANK", "one");
  EXPECT_EQ(from_env_error(), "OMPI_COMM_WORLD_RANK='one': not a non-negative integer (read for SPARCOLL_RANK)");
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  set("MASTER_ADDR", "10.1.2.3");
  set("MASTER_PORT", "65535");
  EXPECT_EQ(from_env_error(),
            "MASTER_PORT='65535': not a port between 1 and 65534 (SPARCOLL_STORE defaults to "
            "MASTER_ADDR:MASTER_PORT+1); set SPARCOLL_STORE");
  set("SPARCOLL_STORE", "10.1.2.3:4000");  // an explicit store makes MASTER_PORT irrelevant
  EXPECT_EQ(Options::from_env().store, "10.1.2.3:4000");
}

TEST_F(ConfigEnv, UnknownVariablesAreWarnedAboutWithASuggestion) {
  set("SPARCOLL_BLOCK_ELEM", "512");
  set("SPARCOLL_LANSE", "8");
  set("SPARCOLL_COMPLETELY_DIFFERENT_THING", "1");
  set("SPARCOLL_SIMD", "avx2");  // read elsewhere, so known
  testing::internal::CaptureStderr();
  const Options o = Options::from_env();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(o.block_elems, Options().block_elems);
  EXPECT_NE(log.find("unknown variable SPARCOLL_BLOCK_ELEM ignored (did you mean SPARCOLL_BLOCK_ELEMS?)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("unknown variable SPARCOLL_LANSE ignored (did you mean SPARCOLL_LANES?)"), std::string::npos)
      << log;
  EXPECT_NE(log.find("unknown variable SPARCOLL_COMPLETELY_DIFFERENT_THING ignored\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("SPARCOLL_SIMD"), std::string::npos) << log;
}

TEST_F(ConfigEnv, LogLevelErrorSilencesTheUnknownVariableWarning) {
  set("SPARCOLL_LOG_LEVEL", "error");
  set("SPARCOLL_TYPO", "1");
  testing::internal::CaptureStderr();
  (void)Options::from_env();
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(log::level(), log::Level::error);
}

TEST(ConfigTable, ClosestVariable) {
  EXPECT_EQ(closest_config_variable("SPARCOLL_THREAD"), "SPARCOLL_THREADS");
  EXPECT_EQ(closest_config_variable("SPARCOLL_DEADLINE"), "SPARCOLL_DEADLINE_MS");
  EXPECT_EQ(closest_config_variable("SPARCOLL_WORLDSIZE"), "SPARCOLL_WORLD_SIZE");
  EXPECT_EQ(closest_config_variable("SPARCOLL_XYZ"), "");
}

}  // namespace
}  // namespace sparcoll::test
