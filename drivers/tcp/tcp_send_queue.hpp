// Bounded byte ring holding frames not yet written to a socket. send() copies a whole frame in
// or nothing (back-pressure); poll() hands the queued bytes to sendmsg as at most two iovecs.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace sparcoll::transport::tcp {

class SendQueue {
 public:
  SendQueue() = default;
  // capacity: a power of two.
  explicit SendQueue(std::size_t capacity) : data_(new std::byte[capacity]), capacity_(capacity) {}

  std::size_t free_bytes() const { return capacity_ - static_cast<std::size_t>(tail_ - head_); }
  bool empty() const { return head_ == tail_; }

  // Appends len bytes; the caller checked free_bytes().
  void push(const void* bytes, std::size_t len) {
    // An empty message's iovec may have a null base, and memcpy from null is undefined even for
    // 0 bytes (UBSan reports it; the compiler may assume the pointer non-null).
    if (len == 0) return;
    const std::size_t pos = static_cast<std::size_t>(tail_) & (capacity_ - 1);
    const std::size_t first = len < capacity_ - pos ? len : capacity_ - pos;
    std::memcpy(data_.get() + pos, bytes, first);
    std::memcpy(data_.get(), static_cast<const std::byte*>(bytes) + first, len - first);
    tail_ += len;
  }

  // The queued bytes as one or two iovecs; returns how many.
  int readable(struct iovec* iov) const {
    const std::size_t pos = static_cast<std::size_t>(head_) & (capacity_ - 1);
    const std::size_t queued = static_cast<std::size_t>(tail_ - head_);
    const std::size_t first = queued < capacity_ - pos ? queued : capacity_ - pos;
    iov[0] = {data_.get() + pos, first};
    if (first == queued) return 1;
    iov[1] = {data_.get(), queued - first};
    return 2;
  }
  void consume(std::size_t len) { head_ += len; }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t capacity_ = 0;
  std::uint64_t head_ = 0;  // bytes written to the socket
  std::uint64_t tail_ = 0;  // bytes queued
};

}  // namespace sparcoll::transport::tcp
