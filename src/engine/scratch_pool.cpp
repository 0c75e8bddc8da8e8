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
    free_bytes_ -= b->size();
    free_.erase(it);
    if (zeroed) b->fill_zero();
  } else {
    // Room first: the buffers kept for other sizes go before the pool holds more than its peak.
    trim(bytes);
    b = std::make_unique<AlignedBuffer<unsigned char>>(bytes);  // zeroed on allocation
  }
  live_ += bytes;
  peak_ = std::max(peak_, live_);
  held_peak_ = std::max(held_peak_, live_ + free_bytes_);
  return b;
}

void ScratchPool::release(Buffer buffer) {
  if (!buffer) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  live_ -= buffer->size();
  free_bytes_ += buffer->size();
  free_.push_back(std::move(buffer));
  // Keep the pool small: a few distinct sizes, two of each, is all a step needs.
  if (free_.size() > 8) {
    free_bytes_ -= free_.front()->size();
    free_.erase(free_.begin());
  }
}

// Drops the oldest kept buffers until `incoming` more bytes fit under the live peak: kept buffers
// of sizes the step does not need now would otherwise add to its footprint (a 154 MB embedding
// buffer kept while the blocks' own were allocated beside it held 40% more than the schedule's
// peak), and what the engine holds must be what the schedule says.
void ScratchPool::trim(std::size_t incoming) {
  const std::uint64_t bound = std::max(peak_, live_ + incoming);
  while (!free_.empty() && live_ + free_bytes_ + incoming > bound) {
    free_bytes_ -= free_.front()->size();
    free_.erase(free_.begin());
  }
}

std::uint64_t ScratchPool::peak_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

std::uint64_t ScratchPool::held_peak_bytes() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return held_peak_;
}

}  // namespace strata
