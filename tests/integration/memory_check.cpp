// sparcoll-memory-check ELEMENTS MAX_MIB: under sparcoll-run, three block-sparse allreduces of
// ELEMENTS dense floats, checked; then the process's peak resident memory (VmHWM) must stay
// under MAX_MIB. Exits 0 and prints "memory-check: ok <peak> KiB", or 1 naming what failed.
// (allreduce_test.cpp: 4096 lanes and a 400 KB tensor once cost 552 MB per rank.)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "sparcoll/sparcoll.hpp"

namespace {

long peak_resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: sparcoll-memory-check ELEMENTS MAX_MIB\n");
    return 2;
  }
  const std::size_t elements = std::strtoull(argv[1], nullptr, 10);
  const long max_kib = std::strtol(argv[2], nullptr, 10) * 1024;
  auto comm = sparcoll::Communicator::from_env();
  std::vector<float> v(elements);
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < elements; ++i) v[i] = static_cast<float>(i % 7 + 1);
    comm.allreduce(v.data(), v.data(), v.size(), sparcoll::DataType::f32, sparcoll::ReduceOp::sum);
    for (std::size_t i = 0; i < elements; ++i)
      if (v[i] != static_cast<float>((i % 7 + 1) * static_cast<std::size_t>(comm.size()))) {
        std::printf("memory-check: rank %d: element %zu is %g\n", comm.rank(), i, static_cast<double>(v[i]));
        return 1;
      }
  }
  const long peak = peak_resident_kib();
  if (peak < 0 || peak > max_kib) {
    std::printf("memory-check: rank %d: peak resident memory %ld KiB, more than %ld KiB\n", comm.rank(), peak, max_kib);
    return 1;
  }
  std::printf("memory-check: ok %ld KiB\n", peak);
  return 0;
}
