#include "runner.hpp"

#include <algorithm>

namespace sparcoll::soak {

namespace {

// Every buffer at its largest size, its pages touched: resize writes every byte, clear keeps the
// capacity.
template <typename T>
void touch(std::vector<T>* v, std::size_t n) {
  v->resize(n);
  v->clear();
}

}  // namespace

void presize(Slot* s, const SlotSizes& z) {
  touch(&s->send, z.bytes);
  touch(&s->recv, z.bytes);
  touch(&s->want, z.bytes);
  touch(&s->scratch, z.scratch_bytes);
  touch(&s->indices, z.sparse_elements);
  touch(&s->mask, z.sparse_elements);
  touch(&s->before, z.compressed_elements);
  touch(&s->sparse.indices, z.sparse_elements);
  touch(&s->sparse.values, z.sparse_elements * sizeof(float));
}

Runner::Runner(Communicator& comm, std::size_t max_bytes, int max_batch)
    : ctx_{comm, comm.rank(), comm.size()}, tensors_(compressed_tensors(max_bytes)) {
  // Slot 0 runs every single call; the others only calls of a batch, which stay smaller (mix.hpp).
  std::size_t compressed = 0;
  for (const CompressedTensor& t : tensors_) compressed = std::max(compressed, t.count);
  const auto world = static_cast<std::size_t>(ctx_.world);
  SlotSizes first;
  first.bytes = max_bytes;
  first.scratch_bytes = std::max(max_bytes, compressed * sizeof(float) * world);
  first.sparse_elements = std::min(max_bytes, kSparseMaxBytes) / 2;  // 2-byte dtypes have the most
  first.compressed_elements = compressed;
  slots_.resize(static_cast<std::size_t>(max_batch));
  presize(&slots_[0], first);
  SlotSizes batch;
  batch.bytes = batch.scratch_bytes = std::min(max_bytes, kBatchMaxBytes);
  batch.sparse_elements = batch.bytes / 2;
  for (std::size_t i = 1; i < slots_.size(); ++i) presize(&slots_[i], batch);
}

std::string Runner::run(const Step& step, bool check) {
  if (slots_.size() < step.calls.size()) slots_.resize(step.calls.size());
  std::string first_wrong;
  auto note = [&first_wrong](std::string what) {
    if (first_wrong.empty()) first_wrong = std::move(what);
  };
  for (std::size_t i = 0; i < step.calls.size(); ++i) {
    const Call& c = step.calls[i];
    Slot& s = slots_[i];
    switch (c.kind) {
      case Kind::barrier: ctx_.comm.barrier(); break;
      case Kind::sparse: start_sparse(ctx_, s, c); break;
      case Kind::compressed: start_compressed(ctx_, s, c, tensors_[static_cast<std::size_t>(c.tensor)]); break;
      case Kind::rejected: note(run_rejected(ctx_, s, c)); break;
      case Kind::reduce:
      case Kind::gather:
      case Kind::scatter: start_rooted(ctx_, s, c); break;
      case Kind::all_to_all:
      case Kind::p2p:
      case Kind::coalesced: start_exchange(ctx_, s, c); break;
      default: start_dense(ctx_, s, c); break;
    }
  }
  // Every call is completed, even after a wrong one: a call left in flight would outlive its slot.
  for (std::size_t i = 0; i < step.calls.size(); ++i) {
    const Call& c = step.calls[i];
    Slot& s = slots_[i];
    switch (c.kind) {
      case Kind::barrier:
      case Kind::rejected: break;
      case Kind::sparse: note(finish_sparse(ctx_, s, c, check)); break;
      case Kind::compressed:
        note(finish_compressed(ctx_, s, c, tensors_[static_cast<std::size_t>(c.tensor)], check));
        break;
      case Kind::reduce:
      case Kind::gather:
      case Kind::scatter: note(finish_rooted(ctx_, s, c, check)); break;
      case Kind::all_to_all:
      case Kind::p2p:
      case Kind::coalesced: note(finish_exchange(ctx_, s, c, check)); break;
      default: note(finish_dense(ctx_, s, c, check)); break;
    }
  }
  return first_wrong;
}

}  // namespace sparcoll::soak
