// The _C module: a factory for the process group (called by sparcoll_torch's backend creator)
// and the calls torch.distributed has no hook for (shutdown on destroy_process_group).
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

namespace py = pybind11;

namespace {

sparcoll_torch::ProcessGroupSparcoll* as_sparcoll(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
  return dynamic_cast<sparcoll_torch::ProcessGroupSparcoll*>(pg.get());
}

sparcoll_torch::ProcessGroupSparcoll& expect_sparcoll(const c10::intrusive_ptr<c10d::ProcessGroup>& pg) {
  auto* s = as_sparcoll(pg);
  TORCH_CHECK(s != nullptr, "sparcoll: expected a sparcoll process group, got backend '",
              pg ? pg->getBackendName() : std::string("none"), "'");
  return *s;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "sparcoll's torch.distributed backend (use through sparcoll_torch)";
  // Returned as the base class: torch's own ProcessGroup binding is the Python type, so
  // torch.distributed calls our overrides through its virtual functions.
  m.def(
      "create_process_group",
      [](int rank, int size, const std::string& store_address, const std::string& job_token, double timeout_s) {
        return c10::intrusive_ptr<c10d::ProcessGroup>(c10::make_intrusive<sparcoll_torch::ProcessGroupSparcoll>(
            rank, size, store_address, job_token, timeout_s));
      },
      py::arg("rank"), py::arg("size"), py::arg("store_address"), py::arg("job_token"), py::arg("timeout_s") = 0.0,
      // Joining blocks until every rank has joined: other Python threads must keep running.
      py::call_guard<py::gil_scoped_release>());
  m.def(
      "shutdown", [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) { expect_sparcoll(pg).shutdown(); },
      py::arg("process_group"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "is_sparcoll", [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) { return as_sparcoll(pg) != nullptr; },
      py::arg("process_group"));
  m.def(
      "transport", [](const c10::intrusive_ptr<c10d::ProcessGroup>& pg) { return expect_sparcoll(pg).transport(); },
      py::arg("process_group"));
}
