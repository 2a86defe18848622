#include "tools/run_program_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace sparcoll::run {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

Status resolve_program(const std::string& name, std::string* path) {
  if (name.find('/') != std::string::npos) {
    if (!is_executable_file(name))
      return Status(ErrorCode::invalid_argument, "program " + name + " is not an executable file");
    *path = name;
    return Status::Ok();
  }
  const char* search = std::getenv("PATH");
  // execvp's default search path when PATH is unset.
  std::string_view dirs = search ? search : "/bin:/usr/bin";
  while (true) {
    std::size_t colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    // An empty PATH entry means the current directory.
    std::string candidate = (dir.empty() ? std::string(".") : std::string(dir)) + "/" + name;
    if (is_executable_file(candidate)) {
      *path = std::move(candidate);
      return Status::Ok();
    }
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return Status(ErrorCode::invalid_argument, "program " + name + " not found in PATH");
}

Status sibling_executable(const std::string& name, std::string* path) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0)
    return Status(ErrorCode::system_error, std::string("readlink /proc/self/exe: ") + std::strerror(errno));
  std::string dir(self, static_cast<std::size_t>(n));
  dir.erase(dir.rfind('/') + 1);
  std::string candidate = dir + name;
  if (!is_executable_file(candidate))
    return Status(ErrorCode::invalid_argument, candidate + " is not an executable file");
  *path = std::move(candidate);
  return Status::Ok();
}

}  // namespace sparcoll::run
