// sparcoll-two-comms: two communicators alive at once in every rank (as a framework with two
// process groups would have), used alternately and with ops in flight on both; each gets its
// own store keys, shm segments or connections. Prints "two-comms: ok" on every rank.
#include <cstdio>
#include <vector>

#include "sparcoll/sparcoll.hpp"

int main() {
  try {
    sparcoll::Communicator a = sparcoll::Communicator::from_env();
    sparcoll::Communicator b = sparcoll::Communicator::from_env();
    const int n = a.size();
    for (int round = 0; round < 20; ++round) {
      std::vector<float> x(5000, 0.0f), y(3000, 0.0f);
      x[round * 100] = static_cast<float>(a.rank() + 1);
      y[round * 50] = 2.0f;
      sparcoll::Request ra = a.iallreduce(x.data(), x.data(), x.size(), sparcoll::DataType::f32, sparcoll::ReduceOp::sum);
      sparcoll::Request rb = b.iallreduce(y.data(), y.data(), y.size(), sparcoll::DataType::f32, sparcoll::ReduceOp::max);
      rb.wait();
      ra.wait();
      const float want_x = static_cast<float>(n * (n + 1) / 2);
      for (std::size_t i = 0; i < x.size(); ++i)
        if (x[i] != (i == static_cast<std::size_t>(round) * 100 ? want_x : 0.0f)) {
          std::fprintf(stderr, "two-comms: rank %d round %d: x[%zu] = %f\n", a.rank(), round, i, x[i]);
          return 1;
        }
      for (std::size_t i = 0; i < y.size(); ++i)
        if (y[i] != (i == static_cast<std::size_t>(round) * 50 ? 2.0f : 0.0f)) {
          std::fprintf(stderr, "two-comms: rank %d round %d: y[%zu] = %f\n", a.rank(), round, i, y[i]);
          return 1;
        }
    }
    std::printf("two-comms: ok\n");
    return 0;
  } catch (const sparcoll::Error& e) {
    std::fprintf(stderr, "two-comms: %s\n", e.what());
    return 1;
  }
}
