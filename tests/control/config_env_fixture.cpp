#include "config_env_fixture.hpp"

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace sparcoll::test {

std::vector<std::string> ConfigEnvFixture::managed_names() {
  std::vector<std::string> names = {"RANK",     "OMPI_COMM_WORLD_RANK", "PMI_RANK",     "SLURM_PROCID",
                                    "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",   "SLURM_NTASKS",
                                    "MASTER_ADDR", "MASTER_PORT"};
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "SPARCOLL_", 9) == 0) {
      const char* eq = std::strchr(*entry, '=');
      names.emplace_back(*entry, eq ? static_cast<std::size_t>(eq - *entry) : std::strlen(*entry));
    }
  }
  return names;
}

void ConfigEnvFixture::SetUp() {
  saved_level_ = log::level();
  for (const std::string& name : managed_names()) {
    if (const char* value = std::getenv(name.c_str())) saved_.emplace_back(name, value);
    ::unsetenv(name.c_str());
  }
}

void ConfigEnvFixture::TearDown() {
  for (const std::string& name : managed_names()) ::unsetenv(name.c_str());
  for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  log::set_level(saved_level_);
}

void ConfigEnvFixture::set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

}  // namespace sparcoll::test
