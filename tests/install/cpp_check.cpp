// sparcoll-cpp-check: the C++ API from a program built against an installed tree through
// pkg-config (install_check.sh), run under the installed sparcoll-run. Sums an i32 tensor and a
// sparse f32 tensor, checks an invalid call throws sparcoll::Error across the library boundary,
// and prints "cpp-check: ok <path of the libsparcoll loaded> ..." on every rank.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <sparcoll/sparcoll.hpp>

// The path of the libsparcoll this process mapped, so the script can tell which copy ran.
std::string loaded_library() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const auto path = line.find('/');
    if (path != std::string::npos && line.find("libsparcoll.so", path) != std::string::npos) return line.substr(path);
  }
  return "(unknown)";
}

int main() {
  try {
    if (std::strcmp(sparcoll::version(), SPARCOLL_VERSION_STRING) != 0) {
      std::fprintf(stderr, "cpp-check: library %s, headers %s\n", sparcoll::version(), SPARCOLL_VERSION_STRING);
      return 1;
    }
    // install_check.sh sets SPARCOLL_BLOCK_ELEMS=128 for every process of the job (it must agree
    // with the aggregator's); the deadline is this process's own.
    sparcoll::Options options = sparcoll::Options::from_env();
    options.set("deadline_ms", "30000");
    sparcoll::Communicator comm(options);
    const int rank = comm.rank(), size = comm.size();
    if (comm.options().block_elems != 128 || comm.options().deadline_ms != 30000) {
      std::fprintf(stderr, "cpp-check: options not applied: block_elems %u, deadline_ms %u\n",
                   comm.options().block_elems, comm.options().deadline_ms);
      return 1;
    }

    std::vector<float> grad(8192, 0.0f);
    for (std::size_t i = static_cast<std::size_t>(rank) * 128; i < grad.size(); i += 1024) grad[i] = 1.0f;
    auto request = comm.iallreduce(grad.data(), grad.data(), grad.size(), sparcoll::DataType::f32, sparcoll::ReduceOp::sum);
    request.wait();
    for (std::size_t i = 0; i < grad.size(); ++i) {
      const bool touched = i % 1024 % 128 == 0 && i % 1024 / 128 < static_cast<std::size_t>(size);
      if (grad[i] != (touched ? 1.0f : 0.0f)) {
        std::fprintf(stderr, "cpp-check: wrong sum at %zu: %f\n", i, grad[i]);
        return 1;
      }
    }
    int value = rank + 1;
    comm.allreduce(&value, &value, 1, sparcoll::DataType::i32, sparcoll::ReduceOp::sum);
    if (value != size * (size + 1) / 2) {
      std::fprintf(stderr, "cpp-check: wrong i32 sum %d\n", value);
      return 1;
    }
    try {
      comm.register_buffer(nullptr, 16);
      std::fprintf(stderr, "cpp-check: register_buffer(nullptr) did not throw\n");
      return 1;
    } catch (const sparcoll::Error& e) {
      if (e.code() != sparcoll::ErrorCode::invalid_argument) {
        std::fprintf(stderr, "cpp-check: wrong error %s\n", e.what());
        return 1;
      }
    }
    comm.barrier();
    std::printf("cpp-check: ok %s rank %d of %d, sparcoll %s\n", loaded_library().c_str(), rank, size,
                sparcoll::version());
    return 0;
  } catch (const sparcoll::Error& e) {
    std::fprintf(stderr, "cpp-check: %s\n", e.what());
    return 1;
  }
}
