// sparcoll_comm_init_from_env under each launcher's variables, as real 2-process jobs of
// sparcoll-c-check: torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI's mpirun
// (OMPI_COMM_WORLD_*), MPICH/Intel MPI (PMI_*) and Slurm's srun (SLURM_PROCID, SLURM_NTASKS).
// The processes start with nothing but PATH and the launcher's variables, so no SPARCOLL_*
// variable of the test's own environment can make them pass; where the real mpirun or torchrun
// is installed, the job also runs under it.
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../control/store_test_util.hpp"
#include "launch_util.hpp"

namespace {

using sparcoll::control::test::unused_port;
using sparcoll::testing::build_path;
using sparcoll::testing::LaunchResult;
using sparcoll::testing::Launcher;
using sparcoll::testing::run_program;

std::string c_check() { return build_path("tests/integration/sparcoll-c-check"); }

std::size_t count_ok(const std::string& out) {
  std::size_t n = 0;
  for (std::size_t at = out.find("c-api: ok"); at != std::string::npos; at = out.find("c-api: ok", at + 1)) ++n;
  return n;
}

// Launcher style: the variables rank `rank` of `size` gets; `port` is free for the store.
struct Style {
  const char* name;
  std::vector<std::string> (*variables)(int rank, int size, int port);
};

std::vector<std::string> torchrun(int rank, int size, int port) {
  // torchrun's own store holds MASTER_PORT; sparcoll's takes MASTER_PORT + 1, the free port.
  return {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(size), "LOCAL_RANK=" + std::to_string(rank),
          "LOCAL_WORLD_SIZE=" + std::to_string(size), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port - 1)};
}

std::vector<std::string> open_mpi(int rank, int size, int port) {
  // mpirun hands out no address for a store: the job script sets SPARCOLL_STORE.
  return {"OMPI_COMM_WORLD_RANK=" + std::to_string(rank), "OMPI_COMM_WORLD_SIZE=" + std::to_string(size),
          "OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(rank), "SPARCOLL_STORE=127.0.0.1:" + std::to_string(port)};
}

std::vector<std::string> pmi(int rank, int size, int port) {
  return {"PMI_RANK=" + std::to_string(rank), "PMI_SIZE=" + std::to_string(size),
          "SPARCOLL_STORE=127.0.0.1:" + std::to_string(port)};
}

std::vector<std::string> slurm(int rank, int size, int port) {
  // Batch scripts export MASTER_ADDR / MASTER_PORT (from scontrol show hostnames) for PyTorch.
  return {"SLURM_PROCID=" + std::to_string(rank), "SLURM_NTASKS=" + std::to_string(size),
          "SLURM_LOCALID=" + std::to_string(rank), "SLURM_JOB_ID=4242", "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port - 1)};
}

class LauncherEnv : public ::testing::TestWithParam<Style> {};

TEST_P(LauncherEnv, TwoRanksJoinAndSum) {
  constexpr int kSize = 2;
  const int port = unused_port();
  std::vector<std::unique_ptr<Launcher>> ranks;
  for (int rank = kSize - 1; rank >= 0; --rank) {  // rank 0, the store's host, last: the others wait for it
    std::vector<std::string> argv = {"/usr/bin/env", "-i", std::string("PATH=") + (getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin")};
    for (const std::string& v : GetParam().variables(rank, kSize, port)) argv.push_back(v);
    argv.push_back(c_check());
    ranks.push_back(std::make_unique<Launcher>(argv, std::vector<std::string>{}, std::chrono::seconds(60), true));
  }
  for (auto& rank : ranks) {
    const LaunchResult r = rank->finish();
    EXPECT_EQ(r.exit_code, 0) << GetParam().name << ": " << r.out << r.err;
    EXPECT_EQ(count_ok(r.out), 1u) << GetParam().name << ": " << r.out << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Styles, LauncherEnv,
                         ::testing::Values(Style{"torchrun", &torchrun}, Style{"open_mpi", &open_mpi},
                                           Style{"pmi", &pmi}, Style{"slurm", &slurm}),
                         [](const ::testing::TestParamInfo<Style>& info) { return std::string(info.param.name); });

bool installed(const char* program) {
  return run_program({"/bin/sh", "-c", std::string("command -v ") + program}).exit_code == 0;
}

TEST(RealLauncher, Mpirun) {
  if (!installed("mpirun")) GTEST_SKIP() << "mpirun is not installed";
  std::vector<std::string> argv = {"mpirun", "-n", "2", "--oversubscribe"};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  const std::vector<std::string> rest = {"-x", "SPARCOLL_STORE=127.0.0.1:" + std::to_string(unused_port()), c_check()};
  argv.insert(argv.end(), rest.begin(), rest.end());
  argv.insert(argv.begin(), "/usr/bin/env");
  const LaunchResult r = run_program(argv, {}, std::chrono::seconds(90));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_ok(r.out), 2u) << r.out << r.err;
}

TEST(RealLauncher, Torchrun) {
  if (!installed("torchrun")) GTEST_SKIP() << "torchrun is not installed";
  const int port = unused_port();
  const LaunchResult r = run_program({"/usr/bin/env", "torchrun", "--nnodes", "1", "--nproc_per_node", "2",
                                      "--master_addr", "127.0.0.1", "--master_port", std::to_string(port - 1),
                                      // torch 1.13's torchrun fails parsing its own default
                                      // redirects under Python 3.11 unless they are given.
                                      "--redirects", "1", "--tee", "1", "--no_python", c_check()},
                                     {}, std::chrono::seconds(150));
  // A torchrun that cannot start any worker (a broken install) is the launcher's fault, not ours.
  const std::string all = r.out + r.err;
  if (r.exit_code != 0 && all.find("c-api") == std::string::npos && all.find("Traceback") != std::string::npos) {
    const std::string trimmed = all.substr(0, all.find_last_not_of('\n') + 1);
    GTEST_SKIP() << "torchrun failed before starting a worker: " << trimmed.substr(trimmed.rfind('\n') + 1);
  }
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count_ok(r.out), 2u) << r.out << r.err;
}

}  // namespace
