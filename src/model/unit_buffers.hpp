// One flat fp32 buffer per unit of a layout: the whole model's parameters (or gradients, or an
// optimizer moment) held by a single process.
#pragma once

#include <vector>

#include "core/aligned_buffer.hpp"
#include "model/parameter_layout.hpp"

namespace strata {

class UnitBuffers {
 public:
  UnitBuffers() = default;
  explicit UnitBuffers(const ModelLayout& layout) {
    for (const auto& u : layout.units()) buffers_.emplace_back(u.numel);
  }

  std::size_t size() const { return buffers_.size(); }
  float* unit(std::size_t i) { return buffers_.at(i).data(); }
  const float* unit(std::size_t i) const { return buffers_.at(i).data(); }
  AlignedBuffer<float>& buffer(std::size_t i) { return buffers_.at(i); }
  const AlignedBuffer<float>& buffer(std::size_t i) const { return buffers_.at(i); }

  void fill_zero() {
    for (auto& b : buffers_) b.fill_zero();
  }

 private:
  std::vector<AlignedBuffer<float>> buffers_;
};

}  // namespace strata
