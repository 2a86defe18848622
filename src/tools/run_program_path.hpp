// Finding the executables sparcoll-run starts, before anything is forked, so a missing program
// is a usage error rather than N failed ranks.
#pragma once

#include <string>

#include "sparcoll/status.hpp"

namespace sparcoll::run {

// A name containing '/' is used as is; otherwise it is looked up in PATH like execvp does.
// Fails with invalid_argument unless the result is an executable regular file.
Status resolve_program(const std::string& name, std::string* path);

// `name` in the directory holding the running executable (/proc/self/exe), e.g. the
// sparcoll-aggregator installed next to sparcoll-run.
Status sibling_executable(const std::string& name, std::string* path);

}  // namespace sparcoll::run
