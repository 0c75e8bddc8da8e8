// Reusable full-unit buffers (gathered weights, staging, unit gradients): blocks share a size, so
// a handful of buffers serve a whole step without reallocating. Tracks live and peak bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/aligned_buffer.hpp"

namespace strata {

class ScratchPool {
 public:
  using Buffer = std::unique_ptr<AlignedBuffer<unsigned char>>;

  // A buffer of exactly `bytes` bytes; zeroed when asked.
  Buffer acquire(std::size_t bytes, bool zeroed);
  void release(Buffer buffer);

  std::uint64_t live_bytes() const { return live_; }
  std::uint64_t peak_bytes() const { return peak_; }
  void reset_peak() { peak_ = live_; }

 private:
  std::vector<Buffer> free_;
  std::uint64_t live_ = 0;
  std::uint64_t peak_ = 0;
};

}  // namespace strata
