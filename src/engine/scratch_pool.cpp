// Scratch pool.
#include "engine/scratch_pool.hpp"

#include <algorithm>

namespace strata {

ScratchPool::Buffer ScratchPool::acquire(std::size_t bytes, bool zeroed) {
  const std::lock_guard<std::mutex> lock(mutex_);
  Buffer b;
  auto it = std::find_if(free_.begin(), free_.end(), [&](const Buffer& f) { return f->size() == bytes; });
  if (it != free_.end()) {
    b = std::move(*it);
    free_.erase(it);
    if (zeroed) b->fill_zero();
  } else {
    b = std::make_unique<AlignedBuffer<unsigned char>>(bytes);  // zeroed on allocation
  }
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  return b;
}

void ScratchPool::release(Buffer buffer) {
  if (!buffer) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  live_ -= buffer->size();
  free_.push_back(std::move(buffer));
  // Keep the pool small: a few distinct sizes, two of each, is all a step needs.
  if (free_.size() > 8) free_.erase(free_.begin());
}

std::uint64_t ScratchPool::peak_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

}  // namespace strata
