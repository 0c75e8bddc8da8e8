// Unit padding.
#include "plan/unit_padding.hpp"

namespace strata {

std::vector<std::size_t> padded_unit_sizes(const ModelLayout& layout, const Topology& t) {
  const auto multiple = static_cast<std::size_t>(t.span(t.level_count() - 1));
  std::vector<std::size_t> sizes;
  for (const auto& u : layout.units()) sizes.push_back((u.numel + multiple - 1) / multiple * multiple);
  return sizes;
}

}  // namespace strata
