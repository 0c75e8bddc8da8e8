// The median of a sample: what step lines and benchmarks quote on noisy machines.
#pragma once

#include <algorithm>
#include <vector>

namespace strata {

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace strata
