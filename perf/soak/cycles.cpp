#include "cycles.hpp"

#include <vector>

namespace sparcoll::soak {

std::string run_cycle(const Options& options, std::uint64_t cycle) {
  Communicator comm(options);
  const int n = comm.size();
  const std::size_t hot = cycle % 1000;
  for (Algorithm algo : {Algorithm::block_sparse, Algorithm::ring}) {
    std::vector<float> x(1000, 0.0f);
    x[hot] = static_cast<float>(comm.rank() + 1);
    comm.allreduce(x.data(), x.data(), x.size(), DataType::f32, ReduceOp::sum, algo);
    const float want = static_cast<float>(n * (n + 1) / 2);
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i] != (i == hot ? want : 0.0f))
        return std::string("wrong result: ") + std::string(algorithm_name(algo)) + " allreduce on a new communicator: element " +
               std::to_string(i) + " is " + std::to_string(x[i]);
  }
  return std::string();
}

}  // namespace sparcoll::soak
