// The C++ API: thin wrappers that turn Status into sparcoll::Error.
#include "sparcoll/communicator.hpp"

#include "api/coalesced.hpp"
#include "api/communicator_impl.hpp"

namespace sparcoll {

Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    settle();
    comm_ = std::move(other.comm_);
    state_ = std::move(other.state_);
    coalesced_ = std::move(other.coalesced_);
  }
  return *this;
}

Request::~Request() {
  // The engine may still read the caller's buffers: never let them go while it runs.
  settle();
}

void Request::settle() noexcept {
  if (!state_) return;
  const Status s = detail::CommunicatorImpl::wait(*state_);
  if (!coalesced_) return;
  try {
    (void)finish_coalesced(s);
  } catch (...) {  // out of memory for an error's text: the outcome is lost, not the process
  }
}

void Request::wait() {
  if (!state_) throw Error(Status(ErrorCode::invalid_argument, "wait() on an empty request"));
  Status s = detail::CommunicatorImpl::wait(*state_);
  if (coalesced_) s = finish_coalesced(s);
  throw_if_error(s);
}

bool Request::test() {
  if (!state_) throw Error(Status(ErrorCode::invalid_argument, "test() on an empty request"));
  if (state_->done.load(std::memory_order_acquire) == 0) return false;
  if (coalesced_) {
    const Request& agreement = coalesced_->agreement_request;
    if (agreement.state_ && agreement.state_->done.load(std::memory_order_acquire) == 0) return false;
    throw_if_error(finish_coalesced(state_->status));
    return true;
  }
  throw_if_error(state_->status);
  return true;
}

OpStats Request::stats() const { return state_ ? state_->stats : OpStats{}; }

Communicator::Communicator(const Options& options) {
  throw_if_error(detail::CommunicatorImpl::create(options, &impl_));
}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

int Communicator::rank() const noexcept { return impl_->rank(); }
int Communicator::size() const noexcept { return impl_->size(); }
const Options& Communicator::options() const noexcept { return impl_->options(); }
std::string Communicator::transport_name() const { return impl_->transport(); }

Request Communicator::iallreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op) {
  return iallreduce(send, recv, count, dtype, op, Algorithm::from_options);
}

OpStats Communicator::allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op) {
  return allreduce(send, recv, count, dtype, op, Algorithm::from_options);
}

Request Communicator::iallreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                 Algorithm algo) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->iallreduce(send, recv, count, dtype, op, algo, &state));
  return Request(impl_, std::move(state));
}

OpStats Communicator::allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                                Algorithm algo) {
  // The caller waits: the collective may run in this thread (CommunicatorImpl::submit).
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->iallreduce(send, recv, count, dtype, op, algo, &state, /*caller_waits=*/true));
  Request request(impl_, std::move(state));
  request.wait();
  return request.stats();
}

Request Communicator::iallreduce_sparse(const std::int64_t* indices, const void* values, std::size_t nnz,
                                        std::size_t dim, DataType dtype, ReduceOp op, SparseResult* result,
                                        Algorithm algo) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->iallreduce_sparse(indices, values, nnz, dim, dtype, op, result, algo, &state));
  return Request(impl_, std::move(state));
}

void Communicator::allreduce_sparse(const std::int64_t* indices, const void* values, std::size_t nnz, std::size_t dim,
                                    DataType dtype, ReduceOp op, SparseResult* result, Algorithm algo) {
  iallreduce_sparse(indices, values, nnz, dim, dtype, op, result, algo).wait();
}

Request Communicator::iallreduce_compressed(std::uint64_t tensor_id, const float* grad, float* out, std::size_t count,
                                            const Compression& c) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->iallreduce_compressed(tensor_id, grad, out, count, c, &state));
  return Request(impl_, std::move(state));
}

void Communicator::allreduce_compressed(std::uint64_t tensor_id, const float* grad, float* out, std::size_t count,
                                        const Compression& c) {
  iallreduce_compressed(tensor_id, grad, out, count, c).wait();
}

std::vector<float> Communicator::compression_residual(std::uint64_t tensor_id) const {
  return impl_->compression_residual(tensor_id);
}

Request Communicator::ibroadcast(void* buffer, std::size_t count, DataType dtype, int root) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->ibroadcast(buffer, count, dtype, root, &state));
  return Request(impl_, std::move(state));
}
void Communicator::broadcast(void* buffer, std::size_t count, DataType dtype, int root) {
  ibroadcast(buffer, count, dtype, root).wait();
}

Request Communicator::iallgather(const void* send, void* recv, std::size_t count, DataType dtype) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->iallgather(send, recv, count, dtype, &state));
  return Request(impl_, std::move(state));
}
void Communicator::allgather(const void* send, void* recv, std::size_t count, DataType dtype) {
  iallgather(send, recv, count, dtype).wait();
}

Request Communicator::ireduce_scatter(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->ireduce_scatter(send, recv, count, dtype, op, &state));
  return Request(impl_, std::move(state));
}
void Communicator::reduce_scatter(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op) {
  ireduce_scatter(send, recv, count, dtype, op).wait();
}

Request Communicator::ireduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op, int root) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->ireduce(send, recv, count, dtype, op, root, &state));
  return Request(impl_, std::move(state));
}
void Communicator::reduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op, int root) {
  ireduce(send, recv, count, dtype, op, root).wait();
}

Request Communicator::igather(const void* send, void* recv, std::size_t count, DataType dtype, int root) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->igather(send, recv, count, dtype, root, &state));
  return Request(impl_, std::move(state));
}
void Communicator::gather(const void* send, void* recv, std::size_t count, DataType dtype, int root) {
  igather(send, recv, count, dtype, root).wait();
}

Request Communicator::iscatter(const void* send, void* recv, std::size_t count, DataType dtype, int root) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->iscatter(send, recv, count, dtype, root, &state));
  return Request(impl_, std::move(state));
}
void Communicator::scatter(const void* send, void* recv, std::size_t count, DataType dtype, int root) {
  iscatter(send, recv, count, dtype, root).wait();
}

Request Communicator::iall_to_all_v(const void* send, const std::size_t* send_bytes, const std::size_t* send_offsets,
                                    void* recv, const std::size_t* recv_bytes, const std::size_t* recv_offsets) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->iall_to_all(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets, &state));
  return Request(impl_, std::move(state));
}
void Communicator::all_to_all_v(const void* send, const std::size_t* send_bytes, const std::size_t* send_offsets,
                                void* recv, const std::size_t* recv_bytes, const std::size_t* recv_offsets) {
  iall_to_all_v(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets).wait();
}

Request Communicator::iall_to_all(const void* send, void* recv, std::size_t bytes_per_rank) {
  const auto n = static_cast<std::size_t>(size());
  std::vector<std::size_t> bytes(n, bytes_per_rank), offsets(n);
  for (std::size_t p = 0; p < n; ++p) offsets[p] = p * bytes_per_rank;
  return iall_to_all_v(send, bytes.data(), offsets.data(), recv, bytes.data(), offsets.data());
}
void Communicator::all_to_all(const void* send, void* recv, std::size_t bytes_per_rank) {
  iall_to_all(send, recv, bytes_per_rank).wait();
}

Request Communicator::isend(const void* data, std::size_t bytes, int peer, int tag) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->isend(data, bytes, peer, tag, &state));
  return Request(impl_, std::move(state));
}
void Communicator::send(const void* data, std::size_t bytes, int peer, int tag) {
  isend(data, bytes, peer, tag).wait();
}

Request Communicator::irecv(void* data, std::size_t bytes, int peer, int tag, int* source) {
  std::shared_ptr<detail::RequestState> state;
  throw_if_error(impl_->irecv(data, bytes, peer, tag, source, &state));
  return Request(impl_, std::move(state));
}
void Communicator::recv(void* data, std::size_t bytes, int peer, int tag, int* source) {
  irecv(data, bytes, peer, tag, source).wait();
}

void Communicator::barrier() {
  std::int32_t token = 0;
  allreduce(&token, &token, 1, DataType::i32, ReduceOp::sum);
}

void Communicator::register_buffer(const void* buffer, std::size_t bytes) {
  throw_if_error(impl_->register_buffer(buffer, bytes));
}

void Communicator::deregister_buffer(const void* buffer) { throw_if_error(impl_->deregister_buffer(buffer)); }

TrafficStats Communicator::traffic() const { return impl_->traffic(); }
std::vector<TransportCounter> Communicator::transport_counters() const { return impl_->transport_counters(); }

void run_aggregator(const Options& options) {
  if (options.role != Role::aggregator)
    throw Error(Status(ErrorCode::invalid_argument, "run_aggregator needs role=aggregator (SPARCOLL_ROLE=aggregator)"));
  std::shared_ptr<detail::CommunicatorImpl> impl;
  throw_if_error(detail::CommunicatorImpl::create(options, &impl));
  throw_if_error(impl->serve());
}

}  // namespace sparcoll
