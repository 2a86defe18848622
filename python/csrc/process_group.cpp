#include "process_group.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <Python.h>

#include <ATen/core/ivalue.h>

#include <stdexcept>
#include <utility>

namespace sparcoll_torch {
namespace {

// The names torch users know (torch.float64, torch.sparse_coo), not c10's (Double, Sparse).
const char* dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "torch.float32";
    case c10::kDouble: return "torch.float64";
    case c10::kHalf: return "torch.float16";
    case c10::kBFloat16: return "torch.bfloat16";
    case c10::kInt: return "torch.int32";
    case c10::kLong: return "torch.int64";
    case c10::kShort: return "torch.int16";
    case c10::kChar: return "torch.int8";
    case c10::kByte: return "torch.uint8";
    case c10::kBool: return "torch.bool";
    case c10::kComplexFloat: return "torch.complex64";
    case c10::kComplexDouble: return "torch.complex128";
    case c10::kComplexHalf: return "torch.complex32";
    default: return c10::toString(t);
  }
}

const char* layout_name(c10::Layout l) {
  switch (l) {
    case c10::kStrided: return "torch.strided";
    case c10::kSparse: return "torch.sparse_coo";
    case c10::kSparseCsr: return "torch.sparse_csr";
    case c10::kMkldnn: return "torch._mkldnn";
    default: return "a non-strided layout";
  }
}

const char* reduce_op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// Device, layout and contiguity; every collective's tensors pass through here first.
void check_tensor(const char* op, const std::string& name, const at::Tensor& t, bool sparse_ok = false) {
  TORCH_CHECK(t.defined(), "sparcoll: ", op, ": ", name, " is an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "sparcoll: ", op, ": ", name, " is on device ", t.device(),
              "; the sparcoll backend takes CPU tensors only");
  TORCH_CHECK(t.layout() == c10::kStrided || (sparse_ok && t.layout() == c10::kSparse), "sparcoll: ", op, ": ", name,
              " has layout ", layout_name(t.layout()), "; ", op, " takes ",
              sparse_ok ? "torch.strided or torch.sparse_coo" : "torch.strided", " tensors");
  if (t.layout() == c10::kStrided) {
    TORCH_CHECK(t.is_contiguous(), "sparcoll: ", op, ": ", name, " is not contiguous (sizes ", t.sizes(),
                ", strides ", t.strides(), "); pass tensor.contiguous()");
  }
}

std::string tensor_name(std::size_t i) { return "tensor " + std::to_string(i); }

sparcoll::DataType reducible_dtype(const char* op, const std::string& name, const at::Tensor& t) {
  switch (t.scalar_type()) {
    case c10::kFloat: return sparcoll::DataType::f32;
    case c10::kHalf: return sparcoll::DataType::f16;
    case c10::kBFloat16: return sparcoll::DataType::bf16;
    case c10::kInt: return sparcoll::DataType::i32;
    case c10::kDouble: return sparcoll::DataType::f64;
    case c10::kLong: return sparcoll::DataType::i64;
    default:
      TORCH_CHECK(false, "sparcoll: ", op, ": ", name, " has dtype ", dtype_name(t.scalar_type()), "; ", op,
                  " reduces torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32 "
                  "(and through it int16, int8, uint8, bool) and complex64/complex128 (SUM, AVG)");
  }
}

}  // namespace

// A tensor as sparcoll reduces it: itself (float32, float64, float16, bfloat16, int32, int64),
// its float view (complex64, complex128; SUM and AVG: the real and imaginary parts add apart), or
// an int32 copy (bool, int8,
// uint8, int16: every op then gives what the narrow type would, sums and products wrapping
// modulo 2^8 or 2^16 once narrowed back) that `widened` says to copy back when done.
struct Reducible {
  at::Tensor view;
  sparcoll::DataType dtype;
  bool widened;
};

namespace {

Reducible as_reducible(const char* op, const std::string& name, const at::Tensor& t, sparcoll::ReduceOp code) {
  switch (t.scalar_type()) {
    case c10::kChar:
    case c10::kByte:
    case c10::kShort: return Reducible{t.to(c10::kInt), sparcoll::DataType::i32, true};
    case c10::kBool:
      // As 0 and 1 in int32, narrowed back (non-zero is true): SUM and MAX give OR, MIN and
      // PRODUCT AND, as gloo's bool reductions do. AVG has no bool meaning.
      TORCH_CHECK(code != sparcoll::ReduceOp::avg, "sparcoll: ", op, ": ", name,
                  " is torch.bool, which does not reduce with AVG");
      return Reducible{t.to(c10::kInt), sparcoll::DataType::i32, true};
    case c10::kComplexFloat:
    case c10::kComplexDouble:
      TORCH_CHECK(code == sparcoll::ReduceOp::sum || code == sparcoll::ReduceOp::avg, "sparcoll: ", op, ": ", name,
                  " is ", dtype_name(t.scalar_type()), ", which reduces with SUM and AVG only");
      return Reducible{at::view_as_real(t),
                       t.scalar_type() == c10::kComplexFloat ? sparcoll::DataType::f32 : sparcoll::DataType::f64, false};
    default: return Reducible{t, reducible_dtype(op, name, t), false};
  }
}

sparcoll::ReduceOp reduce_op(const char* op, const c10d::ReduceOp& r) {
  switch (r.op_) {
    case c10d::ReduceOp::SUM: return sparcoll::ReduceOp::sum;
    case c10d::ReduceOp::AVG: return sparcoll::ReduceOp::avg;
    case c10d::ReduceOp::MIN: return sparcoll::ReduceOp::min;
    case c10d::ReduceOp::MAX: return sparcoll::ReduceOp::max;
    case c10d::ReduceOp::PRODUCT: return sparcoll::ReduceOp::product;
    case c10d::ReduceOp::BAND: return sparcoll::ReduceOp::band;  // on int32 (sparcoll checks)
    case c10d::ReduceOp::BOR: return sparcoll::ReduceOp::bor;
    case c10d::ReduceOp::BXOR: return sparcoll::ReduceOp::bxor;
    default:
      TORCH_CHECK(false, "sparcoll: ", op, ": ReduceOp.", reduce_op_name(r.op_),
                  " is not supported; use SUM, AVG, MIN, MAX, PRODUCT, BAND, BOR or BXOR");
  }
}

void check_same_shape_and_dtype(const char* op, const std::string& name, const at::Tensor& t,
                                const at::Tensor& expected, std::int64_t numel) {
  TORCH_CHECK(t.scalar_type() == expected.scalar_type(), "sparcoll: ", op, ": ", name, " has dtype ",
              dtype_name(t.scalar_type()), ", the input has ", dtype_name(expected.scalar_type()));
  TORCH_CHECK(t.numel() == numel, "sparcoll: ", op, ": ", name, " has ", t.numel(), " elements, ", numel,
              " expected");
}

// dense -> coalesced COO with `sparse_dim` index dimensions, keeping the index positions that
// are non-zero somewhere. Tensor::to_sparse(sparse_dim) does the same but took 640 ms for a
// 200000x16 table here; a mask, nonzero() and one boolean gather take about 30.
at::Tensor nonzero_rows(const at::Tensor& dense, int64_t sparse_dim) {
  const at::Tensor nonzero = dense != 0;
  const at::Tensor mask = dense.dim() > sparse_dim ? nonzero.flatten(sparse_dim).any(-1) : nonzero;
  at::Tensor indices = mask.nonzero().t().contiguous();
  at::Tensor values = dense.index({mask});
  return at::sparse_coo_tensor(indices, values, dense.sizes())._coalesced_(true);
}

// A sparse tensor goes to iallreduce_sparse on the collective thread, dense ones to block-sparse
// allreduce on the progress threads: a rank failing the checks must abort the sequence its peers
// (given a valid call) are in.
bool has_sparse(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors)
    if (t.defined() && t.layout() == c10::kSparse) return true;
  return false;
}

// `finish` holding a reference to `tensor`: the completion queue keeps a finish (run or not)
// until the request is done, so the tensor's memory stays valid while sparcoll reads it.
std::function<void()> keeping(const at::Tensor& tensor, std::function<void()> finish) {
  return [tensor, finish = std::move(finish)] {
    if (finish) finish();
  };
}

// The tensors' bytes back to back at `dst`, and the reverse: several tensors as one collective's
// buffer (broadcast of a list, allgather_coalesced). The tensors are contiguous (check_tensor).
void pack_bytes(const std::vector<at::Tensor>& tensors, std::byte* dst) {
  for (const at::Tensor& t : tensors) {
    if (t.nbytes() != 0) std::memcpy(dst, t.data_ptr(), t.nbytes());
    dst += t.nbytes();
  }
}
void unpack_bytes(const std::byte* src, const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    if (t.nbytes() != 0) std::memcpy(t.data_ptr(), src, t.nbytes());
    src += t.nbytes();
  }
}

// Completed from the CompletionQueue thread; Work::wait() and the Future both wait on it.
class SparcollWork final : public c10d::Work {
 public:
  SparcollWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::shared_ptr<int> source)
      : Work(rank, type),
        outputs_(std::move(outputs)),
        source_(std::move(source)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  std::vector<at::Tensor> result() override { return outputs_; }
  // A recv's sender, valid once it completed (torch reads it after wait()).
  int sourceRank() const override {
    TORCH_CHECK(source_ != nullptr, "sparcoll: sourceRank() is only defined for a recv's Work");
    return *source_;
  }
  // DDP's reducer waits here, not on wait(): its default hook is allreduce(...)->getFuture().
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // The Future first: whoever returns from wait() may call get_future().value() at once.
  void complete(std::exception_ptr error) {
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
    finish(error);
  }

 private:
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<int> source_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace

ProcessGroupSparcoll::ProcessGroupSparcoll(int rank, int size, const std::string& store_address,
                                           const std::string& job_token, double timeout_s)
    : ProcessGroup(rank, size) {
  sparcoll::Options options;
  try {
    options = sparcoll::Options::from_env();
  } catch (const sparcoll::Error& e) {
    TORCH_CHECK(false, "sparcoll: bad SPARCOLL_* setting: ", e.what());
  }
  // Idle sparcoll threads sleep at once instead of polling for 5 ms after each collective: DDP's
  // collectives come in bursts inside backward, and between them the training's own threads
  // (autograd, optimizer) need the cores; the 5 ms polls of the progress and collective threads
  // cost a rank about 30 ms of CPU per DDP step here (docs/pytorch.md, "The sparse COO path").
  // A local submission wakes a sleeping thread at once. SPARCOLL_IDLE_SPIN_US overrides.
  if (std::getenv("SPARCOLL_IDLE_SPIN_US") == nullptr) options.idle_spin_us = 0;
  // The group's timeout is each operation's deadline, as with gloo (a collective or a recv that
  // waits longer fails with a timeout); SPARCOLL_DEADLINE_MS, when set, wins.
  if (timeout_s > 0 && std::getenv("SPARCOLL_DEADLINE_MS") == nullptr)
    options.deadline_ms = static_cast<std::uint32_t>(std::min(timeout_s * 1000.0, 4.0e9));
  // The torch group decides who is who: a new_group() is not the job's RANK / WORLD_SIZE.
  options.rank = rank;
  options.world_size = size;
  options.store = store_address;
  options.job_token = job_token;
  try {
    comm_ = std::make_unique<sparcoll::Communicator>(options);
  } catch (const sparcoll::Error& e) {
    TORCH_CHECK(false, "sparcoll: rank ", rank, " of ", size, " could not join the process group (store ",
                store_address, "): ", e.what());
  }
  completions_ = std::make_unique<CompletionQueue>();
  init();
}

ProcessGroupSparcoll::~ProcessGroupSparcoll() {
  // Python drops the last reference to a group with the GIL held. Waiting here for the
  // completion thread with it held would deadlock: that thread takes the GIL to free the tensors
  // of the Works it completes (and a Future's Python callbacks). So wait without it.
  const bool held = Py_IsInitialized() && PyGILState_Check();
  PyThreadState* saved = held ? PyEval_SaveThread() : nullptr;
  try {
    shutdown();
  } catch (...) {
    // A destructor must not throw; a failed goodbye was logged by sparcoll.
  }
  completions_.reset();  // joins the thread, here rather than after the GIL is back
  if (saved) PyEval_RestoreThread(saved);
}

void ProcessGroupSparcoll::shutdown() {
  std::unique_ptr<sparcoll::Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comm = std::move(comm_);
  }
  if (completions_) completions_->drain();
  comm.reset();  // leaves the sparcoll job: a store barrier with every rank
}

std::string ProcessGroupSparcoll::transport() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return comm_ ? comm_->transport_name() : std::string("none (destroyed)");
}

void ProcessGroupSparcoll::abort_peers(Sequence sequence) {
  // The peers are inside the same collective. This rank joins it with a null buffer: sparcoll's
  // own argument check fails it here and sends an abort, so the peers fail now ("rank N aborted
  // op K" on the block-sparse path, "rank N failed it" on the collective thread) instead of
  // waiting for SPARCOLL_DEADLINE_MS, and every rank stays in step for the next collective.
  // The completion queue recognises the null buffer in the peers' message and points them here.
  try {
    std::vector<sparcoll::Request> requests;
    if (sequence == Sequence::block_sparse)
      requests.push_back(comm_->iallreduce(nullptr, nullptr, 1, sparcoll::DataType::f32, sparcoll::ReduceOp::sum));
    else
      requests.push_back(comm_->ibroadcast(nullptr, 1, sparcoll::DataType::i32, 0));
    completions_->push(std::move(requests), std::string(), nullptr);
  } catch (...) {
    // Broken communicator: the caller's own error is the one to report.
  }
}

template <typename Prepare>
c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::run(const char* op, c10d::OpType type, Sequence sequence,
                                                         Prepare&& prepare) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(comm_ != nullptr, "sparcoll: ", op,
              " on a process group that was destroyed (torch.distributed.destroy_process_group); "
              "create a new one with init_process_group or new_group");
  Issued issued;
  try {
    issued = prepare();
  } catch (const c10::Error&) {
    // Bad input, found before anything was started (prepare validates first).
    if (sequence != Sequence::none) abort_peers(sequence);
    throw;
  } catch (const sparcoll::Error& e) {
    throw std::runtime_error(std::string("sparcoll: ") + op + ": " + e.what());
  }
  auto work = c10::make_intrusive<SparcollWork>(rank_, type, issued.outputs, issued.source);
  std::vector<sparcoll::Request> requests;
  std::vector<std::function<void()>> finishes;
  for (Started& s : issued.ops) {
    requests.push_back(std::move(s.request));
    if (s.finish) finishes.push_back(std::move(s.finish));
  }
  completions_->push(std::move(requests), std::string("sparcoll: ") + op + ": ",
                     [work, finishes = std::move(finishes)](std::exception_ptr error) {
                       if (!error) {
                         try {
                           for (const auto& finish : finishes) finish();
                         } catch (...) {
                           error = std::current_exception();
                         }
                       }
                       work->complete(error);
                     });
  return work;
}

// --- allreduce ---------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
  return run("allreduce", c10d::OpType::ALLREDUCE,
             has_sparse(tensors) ? Sequence::collective : Sequence::block_sparse,
             [&] { return issue_allreduce("allreduce", tensors, opts.reduceOp); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                         const c10d::AllreduceCoalescedOptions& opts) {
  return run("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED,
             has_sparse(tensors) ? Sequence::collective : Sequence::block_sparse,
             [&] { return issue_allreduce("allreduce_coalesced", tensors, opts.reduceOp); });
}

ProcessGroupSparcoll::Issued ProcessGroupSparcoll::issue_allreduce(const char* op, std::vector<at::Tensor>& tensors,
                                                                   const c10d::ReduceOp& r) {
  TORCH_CHECK(!tensors.empty(), "sparcoll: ", op, ": the tensor list is empty");
  const sparcoll::ReduceOp code = reduce_op(op, r);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].defined() && tensors[i].layout() == c10::kSparse) {
      TORCH_CHECK(tensors.size() == 1, "sparcoll: ", op, ": tensor ", i, " is torch.sparse_coo; a sparse tensor "
                  "must be the only tensor of its call (got ", tensors.size(), ")");
      check_tensor(op, tensor_name(0), tensors[0], /*sparse_ok=*/true);
      return issue_sparse_allreduce(op, tensors[0], code);
    }
  }
  // Validate everything before starting anything: a failure then aborts exactly one collective.
  std::vector<sparcoll::DataType> dtypes;
  std::vector<at::Tensor> originals = tensors, views;
  std::vector<std::size_t> widened;
  for (std::size_t i = 0; i < originals.size(); ++i) {
    check_tensor(op, tensor_name(i), originals[i]);
    Reducible r = as_reducible(op, tensor_name(i), originals[i], code);
    dtypes.push_back(r.dtype);
    views.push_back(r.view);
    if (r.widened) widened.push_back(i);
  }
  Issued issued = issue_dense_allreduce(views, dtypes, code);
  issued.outputs = originals;
  if (!widened.empty()) {
    // Narrowed back into the caller's tensors once every operation succeeded (finishes run in
    // order, after all of them).
    Started& last = issued.ops.back();
    last.finish = [inner = std::move(last.finish), originals, views, widened] {
      if (inner) inner();
      for (std::size_t i : widened) originals[i].copy_(views[i]);
    };
  }
  return issued;
}

ProcessGroupSparcoll::Issued ProcessGroupSparcoll::issue_dense_allreduce(std::vector<at::Tensor>& tensors,
                                                                         const std::vector<sparcoll::DataType>& dtypes,
                                                                         sparcoll::ReduceOp code) {
  Issued issued;
  issued.outputs = tensors;
  // Each tensor is reduced on its own (coalesced), but tensors of one dtype go out as one flat
  // sparcoll operation: one bitmap scan and one round of windows instead of one per tensor.
  std::vector<bool> taken(tensors.size(), false);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (taken[i]) continue;
    std::vector<at::Tensor> group;
    for (std::size_t j = i; j < tensors.size(); ++j) {
      if (!taken[j] && dtypes[j] == dtypes[i]) {
        taken[j] = true;
        group.push_back(tensors[j]);
      }
    }
    if (group.size() == 1) {
      at::Tensor& t = group.front();
      issued.ops.push_back(
          Started{comm_->iallreduce(t.data_ptr(), t.data_ptr(), static_cast<std::size_t>(t.numel()), dtypes[i], code),
                  nullptr});
      continue;
    }
    // Communicator::iallreduce_coalesced packs them into one collective and copies the results
    // back when the request finishes (on the completion thread); the tensors stay referenced
    // through issued.outputs until then.
    std::vector<const void*> send;
    std::vector<void*> recv;
    std::vector<std::size_t> counts;
    for (at::Tensor& t : group) {
      send.push_back(t.data_ptr());
      recv.push_back(t.data_ptr());
      counts.push_back(static_cast<std::size_t>(t.numel()));
    }
    issued.ops.push_back(
        Started{comm_->iallreduce_coalesced(send.data(), recv.data(), counts.data(), group.size(), dtypes[i], code),
                nullptr});
  }
  return issued;
}

// A sparse allreduce's result back into the torch.sparse_coo tensor (sizes, sparse_dim, inner as
// issue_sparse_allreduce flattened it). The copies own their memory: `result` may go after.
namespace {

void write_sparse_result(at::Tensor& tensor, sparcoll::SparseResult& result, const std::vector<std::int64_t>& sizes,
                       std::int64_t sparse_dim, std::int64_t inner) {
  const at::TensorOptions vopt = at::TensorOptions().dtype(tensor.scalar_type());
  if (result.dense) {
    // Some range of the result passed the break-even density and came back dense.
    at::Tensor dense = at::from_blob(result.values.data(), sizes, vopt);
    tensor.copy_(nonzero_rows(dense, sparse_dim));
    return;
  }
  const auto n = static_cast<std::int64_t>(result.indices.size());
  const at::TensorOptions iopt = at::TensorOptions().dtype(at::kLong);
  const at::Tensor element = at::from_blob(result.indices.data(), {n}, iopt);
  const at::Tensor value = at::from_blob(result.values.data(), {n}, vopt);
  // Back to index positions: the unique positions present, each with its inner values.
  at::Tensor kept = element, packed = value;
  if (inner != 1) {
    const at::Tensor position = element.div(inner, "floor");
    auto unique = at::unique_consecutive(position, /*return_inverse=*/true);
    kept = std::get<0>(unique);
    if (kept.numel() * inner != n) {
      // Some position lacks elements (not from this backend's own input): they are 0.
      packed = at::zeros({kept.numel() * inner}, vopt);
      packed.index_put_({std::get<1>(unique) * inner + element.remainder(inner)}, value);
    }
  }
  std::vector<std::int64_t> value_sizes{kept.numel()};
  value_sizes.insert(value_sizes.end(), sizes.begin() + sparse_dim, sizes.end());
  at::Tensor indices = at::empty({sparse_dim, kept.numel()}, iopt);
  at::Tensor rest = kept;
  for (std::int64_t d = sparse_dim - 1; d >= 0; --d) {
    indices[d].copy_(rest.remainder(sizes[static_cast<std::size_t>(d)]));
    rest = rest.div(sizes[static_cast<std::size_t>(d)], "floor");
  }
  tensor.copy_(at::sparse_coo_tensor(indices, packed.view(value_sizes), sizes)._coalesced_(true));
}

}  // namespace

ProcessGroupSparcoll::Issued ProcessGroupSparcoll::issue_sparse_allreduce(const char* op, at::Tensor& tensor,
                                                                          sparcoll::ReduceOp code) {
  TORCH_CHECK(code == sparcoll::ReduceOp::sum || code == sparcoll::ReduceOp::avg, "sparcoll: ", op,
              ": torch.sparse_coo tensors reduce with SUM or AVG only");
  const sparcoll::DataType dtype = reducible_dtype(op, "tensor 0 (sparse values)", tensor);
  TORCH_CHECK(!(dtype == sparcoll::DataType::i64 && code == sparcoll::ReduceOp::avg), "sparcoll: ", op,
              ": AVG of int64 values is refused (an integer mean would round; gloo refuses it too)");
  // Communicator::iallreduce_sparse (SparCML) reduces one vector of scalars, so the tensor is
  // flattened: element k of index position (i0, ..., i_sd-1) is element
  // (row-major linear position) * inner + k, inner = the product of the dense dimensions (an
  // embedding gradient's row r, column c is r * cols + c). Every element of a present row is
  // sent, zeros included, so the result again holds whole rows. A coalesced tensor's positions
  // are sorted and unique, so the element indices are strictly increasing as sparcoll requires.
  const at::Tensor coo = tensor.is_coalesced() ? tensor : tensor.coalesce();
  const std::int64_t sparse_dim = coo.sparse_dim();
  const std::vector<std::int64_t> sizes = coo.sizes().vec();
  std::int64_t positions = 1, inner = 1;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(sizes.size()); ++d)
    (d < sparse_dim ? positions : inner) *= sizes[static_cast<std::size_t>(d)];
  TORCH_CHECK(positions * inner <= (std::int64_t{1} << 32), "sparcoll: ", op, ": the torch.sparse_coo tensor of ",
              "shape ", coo.sizes(), " has ", positions * inner, " elements; the sparse allreduce takes at most 2^32");
  const at::Tensor index = coo._indices();
  at::Tensor linear = at::zeros({index.size(1)}, index.options());
  for (std::int64_t d = 0; d < sparse_dim; ++d) linear = linear * sizes[static_cast<std::size_t>(d)] + index[d];
  const at::Tensor elements =
      inner == 1 ? linear.contiguous()
                 : (linear.unsqueeze(1) * inner + at::arange(inner, index.options()).unsqueeze(0)).view({-1});
  const at::Tensor values = coo._values().contiguous();
  auto result = std::make_shared<sparcoll::SparseResult>();
  Issued issued;
  issued.outputs = {tensor};
  // DDP (torch 1.13) copies the Future's tensor into the sparse gradient (copy_ between sparse
  // tensors only), so the tensor stays torch.sparse_coo, reduced in place, whatever form the
  // result came back in.
  auto write_back = [tensor, result, sizes, sparse_dim, inner]() mutable {
    write_sparse_result(tensor, *result, sizes, sparse_dim, inner);
  };
  if (sparcoll::dtype_is_wide(dtype)) {
    issued.ops.push_back(start_wide_sparse_allreduce(elements, values, positions * inner, dtype, code, result,
                                                     std::move(write_back)));
    return issued;
  }
  // The indices and values are copied into the operation by the call: nothing to keep alive.
  issued.ops.push_back(Started{
      comm_->iallreduce_sparse(elements.data_ptr<std::int64_t>(), values.data_ptr(),
                               static_cast<std::size_t>(elements.numel()),
                               static_cast<std::size_t>(positions * inner), dtype, code, result.get()),
      std::move(write_back)});
  return issued;
}

// 64-bit values: sparcoll's sparse allreduce carries 32-bit ones, so these go as gloo's sparse
// allreduce goes: every rank's (element, value) pairs to every rank (an all_to_all_v of one
// piece sent to all, after an allgather of the counts), summed locally in rank order by
// coalesce(), so that every rank computes the same bits.
Started ProcessGroupSparcoll::start_wide_sparse_allreduce(const at::Tensor& elements, const at::Tensor& values,
                                                          std::int64_t numel, sparcoll::DataType dtype,
                                                          sparcoll::ReduceOp code,
                                                          std::shared_ptr<sparcoll::SparseResult> result,
                                                          std::function<void()> write_back) {
  const std::int64_t nnz = elements.numel();
  const std::size_t pair = sizeof(std::int64_t) + sparcoll::dtype_size(dtype);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(size_));
  comm_->allgather(&nnz, counts.data(), 2, sparcoll::DataType::i32);  // an int64 as two words
  // This rank's piece: its elements, then its values.
  auto send = std::make_shared<std::vector<std::byte>>(static_cast<std::size_t>(nnz) * pair);
  if (nnz > 0) {
    std::memcpy(send->data(), elements.data_ptr(), static_cast<std::size_t>(nnz) * sizeof(std::int64_t));
    std::memcpy(send->data() + static_cast<std::size_t>(nnz) * sizeof(std::int64_t), values.data_ptr(),
                static_cast<std::size_t>(nnz) * sparcoll::dtype_size(dtype));
  }
  const auto n = static_cast<std::size_t>(size_);
  std::vector<std::size_t> send_bytes(n, send->size()), send_offsets(n, 0), recv_bytes(n), recv_offsets(n);
  std::size_t total = 0;
  for (std::size_t p = 0; p < n; ++p) {
    recv_bytes[p] = static_cast<std::size_t>(counts[p]) * pair;
    recv_offsets[p] = total;
    total += recv_bytes[p];
  }
  auto received = std::make_shared<std::vector<std::byte>>(total);
  Started s{comm_->iall_to_all_v(send->data(), send_bytes.data(), send_offsets.data(), received->data(),
                                 recv_bytes.data(), recv_offsets.data()),
            nullptr};
  const at::ScalarType scalar = values.scalar_type();
  const int world = size_;
  s.finish = [send, received, counts, recv_offsets, pair, numel, scalar, code, world, result,
              write_back = std::move(write_back)] {
    std::vector<at::Tensor> all_elements, all_values;
    for (std::size_t p = 0; p < counts.size(); ++p) {
      const std::int64_t k = counts[p];
      std::byte* piece = received->data() + recv_offsets[p];
      all_elements.push_back(at::from_blob(piece, {k}, at::TensorOptions().dtype(at::kLong)));
      all_values.push_back(at::from_blob(piece + static_cast<std::size_t>(k) * sizeof(std::int64_t), {k},
                                         at::TensorOptions().dtype(scalar)));
    }
    at::Tensor summed = at::sparse_coo_tensor(at::cat(all_elements).unsqueeze(0), at::cat(all_values), {numel}).coalesce();
    at::Tensor v = summed._values();
    if (code == sparcoll::ReduceOp::avg) v = v / world;
    v = v.contiguous();
    const at::Tensor idx = summed._indices()[0].contiguous();
    result->dense = false;
    result->indices.assign(idx.data_ptr<std::int64_t>(), idx.data_ptr<std::int64_t>() + idx.numel());
    const auto* vb = static_cast<const std::byte*>(v.data_ptr());
    result->values.assign(vb, vb + v.nbytes());
    write_back();
  };
  return s;
}

// --- broadcast -------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
  return run("broadcast", c10d::OpType::BROADCAST, Sequence::collective, [&] {
    TORCH_CHECK(!tensors.empty(), "sparcoll: broadcast: the tensor list is empty");
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "sparcoll: broadcast: root rank ", opts.rootRank,
                " is not a rank of this group (0..", size_ - 1, ")");
    TORCH_CHECK(opts.rootTensor == 0, "sparcoll: broadcast: rootTensor ", opts.rootTensor,
                " (one tensor per device) is not supported; every tensor of the list is broadcast from the root");
    for (std::size_t i = 0; i < tensors.size(); ++i) check_tensor("broadcast", tensor_name(i), tensors[i]);
    const int root = static_cast<int>(opts.rootRank);
    Issued issued;
    issued.outputs = tensors;
    if (tensors.size() == 1) {
      issued.ops.push_back(start_broadcast(*comm_, tensors[0].data_ptr(), tensors[0].nbytes(), root));
      return issued;
    }
    // Several tensors go out as one collective (their bytes back to back), so a call is always
    // one sparcoll operation and a rank whose input failed the checks aborts exactly that one.
    std::int64_t total = 0;
    for (const at::Tensor& t : tensors) total += static_cast<std::int64_t>(t.nbytes());
    at::Tensor flat = at::empty({total}, at::TensorOptions().dtype(at::kByte));
    auto* flat_bytes = static_cast<std::byte*>(flat.data_ptr());
    if (rank_ == root) pack_bytes(tensors, flat_bytes);
    Started s = start_broadcast(*comm_, flat_bytes, static_cast<std::size_t>(total), root);
    std::function<void()> staged = std::move(s.finish);
    s.finish = [flat, flat_bytes, tensors, staged, copy_out = rank_ != root] {
      if (staged) staged();
      if (copy_out) unpack_bytes(flat_bytes, tensors);
    };
    issued.ops.push_back(std::move(s));
    return issued;
  });
}

// --- allgather -------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions&) {
  return run("allgather", c10d::OpType::ALLGATHER, Sequence::collective, [&] {
    TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, "sparcoll: allgather: takes one input tensor and one "
                "output list per call (got ", inputs.size(), " and ", outputs.size(), ")");
    check_tensor("allgather", "the input tensor", inputs[0]);
    std::vector<at::Tensor>& outs = outputs[0];
    TORCH_CHECK(static_cast<int>(outs.size()) == size_, "sparcoll: allgather: the output list has ", outs.size(),
                " tensors; it needs one per rank (", size_, ")");
    for (std::size_t r = 0; r < outs.size(); ++r) {
      check_tensor("allgather", "output tensor " + std::to_string(r), outs[r]);
      check_same_shape_and_dtype("allgather", "output tensor " + std::to_string(r), outs[r], inputs[0],
                                 inputs[0].numel());
    }
    std::vector<void*> recv;
    for (at::Tensor& t : outs) recv.push_back(t.data_ptr());
    return issue_allgather(inputs[0], std::move(recv), outs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::AllgatherOptions&) {
  return run("_allgather_base", c10d::OpType::_ALLGATHER_BASE, Sequence::collective, [&] {
    check_tensor("_allgather_base", "the input tensor", input);
    check_tensor("_allgather_base", "the output tensor", output);
    check_same_shape_and_dtype("_allgather_base", "the output tensor", output, input, input.numel() * size_);
    std::vector<void*> recv;
    for (int r = 0; r < size_; ++r) recv.push_back(static_cast<std::byte*>(output.data_ptr()) + r * input.nbytes());
    return issue_allgather(input, std::move(recv), {output});
  });
}

ProcessGroupSparcoll::Issued ProcessGroupSparcoll::issue_allgather(const at::Tensor& input, std::vector<void*> recv,
                                                                   std::vector<at::Tensor> outputs) {
  Issued issued;
  issued.outputs = std::move(outputs);
  Started s = start_allgather(*comm_, input.data_ptr(), input.nbytes(), std::move(recv));
  s.finish = keeping(input, std::move(s.finish));  // sparcoll's iallgather reads it until done
  issued.ops.push_back(std::move(s));
  return issued;
}

// Every rank's list of tensors (any dtypes and sizes, the same on every rank) into outputs[r]:
// one allgather of the inputs' bytes back to back, each rank's block then cut into its list.
c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  return run("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED, Sequence::collective, [&] {
    const char* op = "allgather_coalesced";
    TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "sparcoll: ", op, ": the output has ", outputs.size(),
                " lists; it needs one per rank (", size_, ")");
    std::size_t total = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      check_tensor(op, "input " + tensor_name(i), inputs[i]);
      total += inputs[i].nbytes();
    }
    std::vector<at::Tensor> flat_outputs;
    for (std::size_t r = 0; r < outputs.size(); ++r) {
      TORCH_CHECK(outputs[r].size() == inputs.size(), "sparcoll: ", op, ": output list ", r, " has ",
                  outputs[r].size(), " tensors, the input list ", inputs.size());
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const std::string name = "output list " + std::to_string(r) + " " + tensor_name(i);
        check_tensor(op, name, outputs[r][i]);
        check_same_shape_and_dtype(op, name, outputs[r][i], inputs[i], inputs[i].numel());
        flat_outputs.push_back(outputs[r][i]);
      }
    }
    auto send = std::make_shared<std::vector<std::byte>>(total);
    pack_bytes(inputs, send->data());
    auto gathered = std::make_shared<std::vector<std::byte>>(total * static_cast<std::size_t>(size_));
    std::vector<void*> recv;
    for (int r = 0; r < size_; ++r) recv.push_back(gathered->data() + static_cast<std::size_t>(r) * total);
    Issued issued;
    issued.outputs = std::move(flat_outputs);
    Started s = start_allgather(*comm_, send->data(), total, std::move(recv));
    s.finish = [inner = std::move(s.finish), send, gathered, outs = outputs, total] {
      if (inner) inner();
      for (std::size_t r = 0; r < outs.size(); ++r) unpack_bytes(gathered->data() + r * total, outs[r]);
    };
    issued.ops.push_back(std::move(s));
    return issued;
  });
}

// --- reduce_scatter --------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                                    const c10d::ReduceScatterOptions& opts) {
  return run("reduce_scatter", c10d::OpType::REDUCE_SCATTER, Sequence::collective, [&] {
    TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1, "sparcoll: reduce_scatter: takes one output tensor and "
                "one input list per call (got ", outputs.size(), " and ", inputs.size(), ")");
    const char* op = "reduce_scatter";
    at::Tensor& out = outputs[0];
    check_tensor(op, "the output tensor", out);
    const sparcoll::ReduceOp code = reduce_op(op, opts.reduceOp);
    const Reducible rout = as_reducible(op, "the output tensor", out, code);
    std::vector<at::Tensor>& ins = inputs[0];
    TORCH_CHECK(static_cast<int>(ins.size()) == size_, "sparcoll: reduce_scatter: the input list has ", ins.size(),
                " tensors; it needs one per rank (", size_, ")");
    for (std::size_t r = 0; r < ins.size(); ++r) {
      check_tensor(op, "input tensor " + std::to_string(r), ins[r]);
      check_same_shape_and_dtype(op, "input tensor " + std::to_string(r), ins[r], out, out.numel());
    }
    // The inputs back to back in a kept staging buffer (at::cat would take fresh memory per call).
    const std::int64_t n = out.numel();
    std::shared_ptr<void> keep = staging_buffer(static_cast<std::size_t>(n) * ins.size() * out.element_size());
    at::Tensor packed = at::from_blob(
        keep.get(), {n * static_cast<std::int64_t>(ins.size())}, [keep](void*) mutable { keep.reset(); },
        out.options());
    for (std::size_t r = 0; r < ins.size(); ++r) packed.narrow(0, n * static_cast<std::int64_t>(r), n).copy_(ins[r].reshape({-1}));
    const at::Tensor flat = as_reducible(op, "the input list", packed, code).view;
    return issue_reduce_scatter(flat.reshape({-1}), out, rout, code);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                          const c10d::ReduceScatterOptions& opts) {
  return run("_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, Sequence::collective, [&] {
    const char* op = "_reduce_scatter_base";
    check_tensor(op, "the output tensor", output);
    check_tensor(op, "the input tensor", input);
    const sparcoll::ReduceOp code = reduce_op(op, opts.reduceOp);
    const Reducible rout = as_reducible(op, "the output tensor", output, code);
    check_same_shape_and_dtype(op, "the input tensor", input, output, output.numel() * size_);
    const at::Tensor flat = as_reducible(op, "the input tensor", input, code).view;
    return issue_reduce_scatter(flat.reshape({-1}), output, rout, code);
  });
}

ProcessGroupSparcoll::Issued ProcessGroupSparcoll::issue_reduce_scatter(const at::Tensor& input, at::Tensor output,
                                                                        const Reducible& out,
                                                                        sparcoll::ReduceOp code) {
  Issued issued;
  issued.outputs = {output};
  Started s = start_reduce_scatter(*comm_, input.data_ptr(), out.view.data_ptr(),
                                   static_cast<std::size_t>(out.view.numel()), out.dtype, code);
  // sparcoll's ireduce_scatter reads the input until done; a widened output is narrowed back.
  s.finish = [input, inner = std::move(s.finish), output, view = out.view, widened = out.widened]() mutable {
    if (inner) inner();
    if (widened) output.copy_(view);
  };
  issued.ops.push_back(std::move(s));
  return issued;
}

// --- barrier ---------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::barrier(const c10d::BarrierOptions&) {
  return run("barrier", c10d::OpType::BARRIER, Sequence::block_sparse, [&] {
    // Asynchronous like every other Work: an allreduce cannot complete before every rank joined it.
    auto token = std::make_shared<std::int32_t>(1);
    Issued issued;
    issued.ops.push_back(
        Started{comm_->iallreduce(token.get(), token.get(), 1, sparcoll::DataType::i32, sparcoll::ReduceOp::sum),
                [token] {}});
    return issued;
  });
}

// --- reduce, gather, scatter -------------------------------------------------------------------

namespace {

void check_root(const char* op, std::int64_t root, int size) {
  TORCH_CHECK(root >= 0 && root < size, "sparcoll: ", op, ": root rank ", root, " is not a rank of this group (0..",
              size - 1, ")");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::reduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::ReduceOptions& opts) {
  return run("reduce", c10d::OpType::REDUCE, Sequence::collective, [&] {
    const char* op = "reduce";
    TORCH_CHECK(tensors.size() == 1, "sparcoll: reduce: takes one tensor per call (got ", tensors.size(), ")");
    check_root(op, opts.rootRank, size_);
    TORCH_CHECK(opts.rootTensor == 0, "sparcoll: reduce: rootTensor ", opts.rootTensor,
                " (one tensor per device) is not supported");
    at::Tensor& t = tensors[0];
    check_tensor(op, "the tensor", t);
    const sparcoll::ReduceOp code = reduce_op(op, opts.reduceOp);
    const Reducible r = as_reducible(op, "the tensor", t, code);
    const int root = static_cast<int>(opts.rootRank);
    Issued issued;
    issued.outputs = tensors;
    // In place on the root; the other ranks' tensors are only read (as gloo leaves them).
    Started s{comm_->ireduce(r.view.data_ptr(), rank_ == root ? r.view.data_ptr() : nullptr,
                             static_cast<std::size_t>(r.view.numel()), r.dtype, code, root),
              nullptr};
    if (r.widened) {
      s.finish = [t, view = r.view, narrow = rank_ == root]() mutable {
        if (narrow) t.copy_(view);
      };
    }
    issued.ops.push_back(std::move(s));
    return issued;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::GatherOptions& opts) {
  return run("gather", c10d::OpType::GATHER, Sequence::collective, [&] {
    const char* op = "gather";
    check_root(op, opts.rootRank, size_);
    const int root = static_cast<int>(opts.rootRank);
    TORCH_CHECK(inputs.size() == 1, "sparcoll: gather: takes one input tensor per call (got ", inputs.size(), ")");
    check_tensor(op, "the input tensor", inputs[0]);
    std::vector<void*> recv;
    Issued issued;
    if (rank_ == root) {
      TORCH_CHECK(outputs.size() == 1, "sparcoll: gather: the root takes one output list (got ", outputs.size(), ")");
      TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, "sparcoll: gather: the output list has ",
                  outputs[0].size(), " tensors; it needs one per rank (", size_, ")");
      for (std::size_t r = 0; r < outputs[0].size(); ++r) {
        const std::string name = "output tensor " + std::to_string(r);
        check_tensor(op, name, outputs[0][r]);
        check_same_shape_and_dtype(op, name, outputs[0][r], inputs[0], inputs[0].numel());
        recv.push_back(outputs[0][r].data_ptr());
      }
      issued.outputs = outputs[0];
    } else {
      TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), "sparcoll: gather: rank ", rank_,
                  " is not the root (", root, ") and takes no output list");
    }
    Started s = start_gather(*comm_, inputs[0].data_ptr(), inputs[0].nbytes(), std::move(recv), root);
    s.finish = keeping(inputs[0], std::move(s.finish));  // sparcoll's igather reads it until done
    issued.ops.push_back(std::move(s));
    return issued;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ScatterOptions& opts) {
  return run("scatter", c10d::OpType::SCATTER, Sequence::collective, [&] {
    const char* op = "scatter";
    check_root(op, opts.rootRank, size_);
    const int root = static_cast<int>(opts.rootRank);
    TORCH_CHECK(outputs.size() == 1, "sparcoll: scatter: takes one output tensor per call (got ", outputs.size(), ")");
    check_tensor(op, "the output tensor", outputs[0]);
    std::vector<const void*> send;
    std::vector<at::Tensor> kept;
    if (rank_ == root) {
      TORCH_CHECK(inputs.size() == 1, "sparcoll: scatter: the root takes one input list (got ", inputs.size(), ")");
      TORCH_CHECK(static_cast<int>(inputs[0].size()) == size_, "sparcoll: scatter: the input list has ",
                  inputs[0].size(), " tensors; it needs one per rank (", size_, ")");
      for (std::size_t r = 0; r < inputs[0].size(); ++r) {
        const std::string name = "input tensor " + std::to_string(r);
        check_tensor(op, name, inputs[0][r]);
        check_same_shape_and_dtype(op, name, inputs[0][r], outputs[0], outputs[0].numel());
        send.push_back(inputs[0][r].data_ptr());
      }
      kept = inputs[0];
    } else {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), "sparcoll: scatter: rank ", rank_,
                  " is not the root (", root, ") and takes no input list");
    }
    Issued issued;
    issued.outputs = outputs;
    Started s = start_scatter(*comm_, std::move(send), outputs[0].data_ptr(), outputs[0].nbytes(), root);
    // sparcoll's iscatter reads the root's inputs until done.
    s.finish = [kept, inner = std::move(s.finish)] {
      if (inner) inner();
    };
    issued.ops.push_back(std::move(s));
    return issued;
  });
}

// --- all_to_all ----------------------------------------------------------------------------------

namespace {

// Bytes per rank of a tensor cut along dim 0 by `splits` (rows per rank; empty: equal rows),
// and their offsets; `name` in errors.
void cut_rows(const char* op, const std::string& name, const at::Tensor& t, const std::vector<int64_t>& splits,
              int size, std::vector<std::size_t>* bytes, std::vector<std::size_t>* offsets) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const std::size_t row_bytes = rows == 0 ? 0 : t.nbytes() / static_cast<std::size_t>(rows);
  bytes->assign(static_cast<std::size_t>(size), 0);
  offsets->assign(static_cast<std::size_t>(size), 0);
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "sparcoll: ", op, ": ", name, " has ", rows, " rows (dim 0), which do not split ",
                "equally across ", size, " ranks; pass split sizes");
    for (int p = 0; p < size; ++p) {
      (*bytes)[static_cast<std::size_t>(p)] = static_cast<std::size_t>(rows / size) * row_bytes;
      (*offsets)[static_cast<std::size_t>(p)] = static_cast<std::size_t>(p) * (*bytes)[static_cast<std::size_t>(p)];
    }
    return;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "sparcoll: ", op, ": ", splits.size(), " split sizes for ",
              name, "; it needs one per rank (", size, ")");
  int64_t at = 0;
  for (int p = 0; p < size; ++p) {
    const int64_t s = splits[static_cast<std::size_t>(p)];
    TORCH_CHECK(s >= 0, "sparcoll: ", op, ": split size ", p, " of ", name, " is negative (", s, ")");
    (*bytes)[static_cast<std::size_t>(p)] = static_cast<std::size_t>(s) * row_bytes;
    (*offsets)[static_cast<std::size_t>(p)] = static_cast<std::size_t>(at) * row_bytes;
    at += s;
  }
  TORCH_CHECK(at == rows, "sparcoll: ", op, ": the split sizes of ", name, " add up to ", at, " rows, it has ", rows);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                   std::vector<int64_t>& output_split_sizes,
                                                                   std::vector<int64_t>& input_split_sizes,
                                                                   const c10d::AllToAllOptions&) {
  return run("alltoall_base", c10d::OpType::ALLTOALL_BASE, Sequence::collective, [&] {
    const char* op = "alltoall_base";
    check_tensor(op, "the input tensor", input);
    check_tensor(op, "the output tensor", output);
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "sparcoll: ", op, ": the output tensor has dtype ",
                dtype_name(output.scalar_type()), ", the input ", dtype_name(input.scalar_type()));
    std::vector<std::size_t> sb, so, rb, ro;
    cut_rows(op, "the input tensor", input, input_split_sizes, size_, &sb, &so);
    cut_rows(op, "the output tensor", output, output_split_sizes, size_, &rb, &ro);
    Issued issued;
    issued.outputs = {output};
    // sparcoll wants the buffers apart: an input that overlaps the output goes from a copy.
    at::Tensor source = input;
    const auto* in = static_cast<const std::byte*>(input.data_ptr());
    const auto* out = static_cast<const std::byte*>(output.data_ptr());
    if (input.nbytes() != 0 && output.nbytes() != 0 && in < out + output.nbytes() && out < in + input.nbytes())
      source = input.clone();
    Started s{comm_->iall_to_all_v(source.data_ptr(), sb.data(), so.data(), output.data_ptr(), rb.data(), ro.data()),
              nullptr};
    s.finish = keeping(source, nullptr);  // sparcoll reads it until done
    issued.ops.push_back(std::move(s));
    return issued;
  });
}

// input[p] goes to rank p, output[p] comes from rank p (any shapes, one dtype): one all_to_all
// of the inputs' bytes back to back, cut into the outputs.
c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::alltoall(std::vector<at::Tensor>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllToAllOptions&) {
  return run("alltoall", c10d::OpType::ALLTOALL, Sequence::collective, [&] {
    const char* op = "alltoall";
    TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_, "sparcoll: ",
                op, ": the input and output lists have ", inputs.size(), " and ", outputs.size(),
                " tensors; each needs one per rank (", size_, ")");
    const auto n = static_cast<std::size_t>(size_);
    std::vector<std::size_t> sb(n), so(n), rb(n), ro(n);
    std::size_t sat = 0, rat = 0;
    for (std::size_t p = 0; p < n; ++p) {
      check_tensor(op, "input " + tensor_name(p), inputs[p]);
      check_tensor(op, "output " + tensor_name(p), outputs[p]);
      TORCH_CHECK(outputs[p].scalar_type() == inputs[0].scalar_type(), "sparcoll: ", op, ": output ", tensor_name(p),
                  " has dtype ", dtype_name(outputs[p].scalar_type()), ", the inputs ",
                  dtype_name(inputs[0].scalar_type()));
      sb[p] = inputs[p].nbytes(), so[p] = sat, sat += sb[p];
      rb[p] = outputs[p].nbytes(), ro[p] = rat, rat += rb[p];
    }
    auto send = std::make_shared<std::vector<std::byte>>(sat);
    pack_bytes(inputs, send->data());
    auto received = std::make_shared<std::vector<std::byte>>(rat);
    Issued issued;
    issued.outputs = outputs;
    Started s{comm_->iall_to_all_v(send->data(), sb.data(), so.data(), received->data(), rb.data(), ro.data()),
              [send, received, outs = outputs] { unpack_bytes(received->data(), outs); }};
    issued.ops.push_back(std::move(s));
    return issued;
  });
}

// --- send, recv --------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  return run("send", c10d::OpType::SEND, Sequence::none, [&] {
    TORCH_CHECK(tensors.size() == 1, "sparcoll: send: takes one tensor per call (got ", tensors.size(), ")");
    check_tensor("send", "the tensor", tensors[0]);
    Issued issued;
    issued.outputs = tensors;
    // The bytes as they are (any dtype); sparcoll's isend reads the tensor until done.
    Started s{comm_->isend(tensors[0].data_ptr(), tensors[0].nbytes(), dst_rank, tag), nullptr};
    s.finish = keeping(tensors[0], nullptr);
    issued.ops.push_back(std::move(s));
    return issued;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  return run("recv", c10d::OpType::RECV, Sequence::none, [&] { return issue_recv("recv", tensors, src_rank, tag); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupSparcoll::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return run("recv", c10d::OpType::RECVANYSOURCE, Sequence::none,
             [&] { return issue_recv("recv", tensors, sparcoll::kAnySource, tag); });
}

ProcessGroupSparcoll::Issued ProcessGroupSparcoll::issue_recv(const char* op, std::vector<at::Tensor>& tensors,
                                                              int src_rank, int tag) {
  TORCH_CHECK(tensors.size() == 1, "sparcoll: ", op, ": takes one tensor per call (got ", tensors.size(), ")");
  check_tensor(op, "the tensor", tensors[0]);
  Issued issued;
  issued.outputs = tensors;
  issued.source = std::make_shared<int>(src_rank);
  Started s{comm_->irecv(tensors[0].data_ptr(), tensors[0].nbytes(), src_rank, tag, issued.source.get()), nullptr};
  s.finish = keeping(tensors[0], [source = issued.source] {});  // *source is written until done
  issued.ops.push_back(std::move(s));
  return issued;
}


}  // namespace sparcoll_torch
