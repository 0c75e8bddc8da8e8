// A half-open range of element indices inside a flat buffer: a tensor inside a unit, or a shard.
#pragma once

#include <algorithm>
#include <cstddef>

namespace strata {

struct Range {
  std::size_t begin = 0;
  std::size_t end = 0;

  std::size_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Range&) const = default;

  Range intersect(const Range& other) const {
    const std::size_t b = std::max(begin, other.begin);
    const std::size_t e = std::min(end, other.end);
    return b < e ? Range{b, e} : Range{b, b};
  }
};

}  // namespace strata
