#include "block_sparse/self_channel.hpp"

#include <cstring>

namespace sparcoll::block_sparse {

transport::SendResult SelfChannel::send(const struct iovec* iov, int iovcnt) {
  std::size_t bytes = 0;
  for (int i = 0; i < iovcnt; ++i) bytes += iov[i].iov_len;
  const std::size_t words = 1 + (bytes + 7) / 8;
  if ((inbox_.size() + words) * 8 > max_bytes_ && !inbox_.empty()) return transport::SendResult::no_resource;
  const std::size_t at = inbox_.size();
  inbox_.resize(at + words);  // grows only until the working set fits (capacity is kept)
  inbox_[at] = bytes;
  auto* dst = reinterpret_cast<std::byte*>(&inbox_[at + 1]);
  for (int i = 0; i < iovcnt; ++i) {
    std::memcpy(dst, iov[i].iov_base, iov[i].iov_len);
    dst += iov[i].iov_len;
  }
  return transport::SendResult::ok;
}

int SelfChannel::poll(transport::ReceivedMessage* out, int max) {
  if (read_pos_ >= reading_.size()) {
    if (inbox_.empty()) return 0;
    reading_.swap(inbox_);
    inbox_.clear();
    read_pos_ = 0;
  }
  int n = 0;
  while (n < max && read_pos_ < reading_.size()) {
    const std::uint64_t bytes = reading_[read_pos_];
    out[n].peer = self_;
    out[n].data = reinterpret_cast<const std::byte*>(&reading_[read_pos_ + 1]);
    out[n].size = static_cast<std::uint32_t>(bytes);
    read_pos_ += 1 + (bytes + 7) / 8;
    ++n;
  }
  return n;
}

}  // namespace sparcoll::block_sparse
