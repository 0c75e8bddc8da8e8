// Reusable full-unit buffers (gathered weights, staging, unit gradients): blocks share a size, so
// a handful of buffers serve a whole step without reallocating. Tracks live and peak bytes.
// Thread-safe: the communication thread's collectives stage through it while the compute thread
// releases finished reductions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/aligned_buffer.hpp"

namespace strata {

class ScratchPool {
 public:
  using Buffer = std::unique_ptr<AlignedBuffer<unsigned char>>;

  // A buffer of exactly `bytes` bytes; zeroed when asked.
  Buffer acquire(std::size_t bytes, bool zeroed);
  void release(Buffer buffer);

  std::uint64_t peak_bytes() const;  // of the buffers in use
  // Of the buffers in use and kept for reuse together: what the pool itself holds at its most,
  // kept at most the in-use peak by dropping kept buffers before allocating beside them.
  std::uint64_t held_peak_bytes() const;

 private:
  void trim(std::size_t incoming);

  mutable std::mutex mutex_;
  std::vector<Buffer> free_;
  std::uint64_t free_bytes_ = 0;
  std::uint64_t live_ = 0;
  std::uint64_t peak_ = 0;
  std::uint64_t held_peak_ = 0;
};

}  // namespace strata
