// The environment sparcoll-run gives each rank and aggregator (docs/launcher.md lists it).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sparcoll/status.hpp"
#include "tools/run_identity.hpp"

namespace sparcoll::run {

// What every process of the job shares.
struct JobEnvironment {
  int ranks = 0;
  int aggregators = 0;
  std::string store_address;  // "127.0.0.1:<port>" of the store the launcher hosts
  std::string job_token;
  std::string transport;      // empty: SPARCOLL_TRANSPORT is left as the launcher's environment has it
  std::vector<std::pair<std::string, std::string>> extra;  // --env KEY=VALUE
};

// The launcher's SPARCOLL_JOB_TOKEN if set and non-empty, else 128 random bits as 32 hex digits.
Status make_job_token(std::string* out);

// Variables sparcoll-run sets per process; --env may not override them.
bool is_launcher_variable(const std::string& key);

// The launcher's own environment minus the variables it manages, plus the job's and the child's
// ("KEY=VALUE" strings, ready for execve).
std::vector<std::string> child_environment(const JobEnvironment& job, const ChildIdentity& who);

}  // namespace sparcoll::run
