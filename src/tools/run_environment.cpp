#include "tools/run_environment.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace sparcoll::run {
namespace {

constexpr std::array<const char*, 11> kLauncherVariables = {
    "SPARCOLL_RANK",      "SPARCOLL_WORLD_SIZE", "SPARCOLL_STORE",      "SPARCOLL_STORE_SERVER",
    "SPARCOLL_JOB_TOKEN", "SPARCOLL_AGGREGATORS", "SPARCOLL_ROLE",      "SPARCOLL_AGGREGATOR_INDEX",
    "SPARCOLL_TRANSPORT", "LOCAL_RANK",           "LOCAL_WORLD_SIZE",
};

std::string key_of(const char* assignment) {
  const char* eq = std::strchr(assignment, '=');
  return eq ? std::string(assignment, eq - assignment) : std::string(assignment);
}

}  // namespace

Status make_job_token(std::string* out) {
  const char* inherited = std::getenv("SPARCOLL_JOB_TOKEN");
  if (inherited && *inherited) {
    *out = inherited;
    return Status::Ok();
  }
  unsigned char bytes[16];
  std::size_t filled = 0;
  while (filled < sizeof bytes) {
    ssize_t n = getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status(ErrorCode::system_error, std::string("getrandom for the job token: ") + std::strerror(errno));
    }
    filled += static_cast<std::size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 0xf];
  }
  *out = std::move(token);
  return Status::Ok();
}

bool is_launcher_variable(const std::string& key) {
  for (const char* name : kLauncherVariables)
    if (key == name) return true;
  return false;
}

std::vector<std::string> child_environment(const JobEnvironment& job, const ChildIdentity& who) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry; ++entry) {
    std::string key = key_of(*entry);
    // An inherited SPARCOLL_TRANSPORT stays unless --transport replaces it.
    bool keep_transport = key == "SPARCOLL_TRANSPORT" && job.transport.empty();
    bool overridden = false;
    for (const auto& [extra_key, value] : job.extra) overridden |= extra_key == key;
    if ((is_launcher_variable(key) && !keep_transport) || overridden) continue;
    env.emplace_back(*entry);
  }
  auto set = [&env](const std::string& key, const std::string& value) { env.push_back(key + "=" + value); };
  set("SPARCOLL_WORLD_SIZE", std::to_string(job.ranks));
  set("SPARCOLL_STORE", job.store_address);
  // Rank 0 would otherwise host a store of its own; the launcher already hosts it.
  set("SPARCOLL_STORE_SERVER", "external");
  set("SPARCOLL_JOB_TOKEN", job.job_token);
  set("SPARCOLL_AGGREGATORS", std::to_string(job.aggregators));
  if (!job.transport.empty()) set("SPARCOLL_TRANSPORT", job.transport);
  set("LOCAL_WORLD_SIZE", std::to_string(job.ranks));
  if (who.is_aggregator()) {
    set("SPARCOLL_ROLE", "aggregator");
    set("SPARCOLL_AGGREGATOR_INDEX", std::to_string(who.index));
  } else {
    set("SPARCOLL_RANK", std::to_string(who.index));
    set("LOCAL_RANK", std::to_string(who.index));
  }
  for (const auto& [key, value] : job.extra) set(key, value);
  return env;
}

}  // namespace sparcoll::run
