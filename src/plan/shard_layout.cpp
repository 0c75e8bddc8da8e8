// The shard ranges of every unit for one rank.
#include "plan/shard_layout.hpp"

#include "plan/unit_padding.hpp"

namespace strata {

ShardLayout::ShardLayout(const ModelLayout& layout, const Topology& t, const ShardPlan& plan, int rank) {
  const std::vector<std::size_t> padded = padded_unit_sizes(layout, t);
  const auto range = [&](std::size_t n, int level) {
    return ShardRange{shard_offset(t, rank, n, 0, level), n / static_cast<std::size_t>(t.span(level))};
  };
  for (std::size_t i = 0; i < layout.unit_count(); ++i) {
    UnitShardRanges u;
    u.numel = layout.unit(i).numel;
    u.padded = padded[i];
    u.weights = range(u.padded, plan.weights);
    // Only blocks keep a secondary copy: the embedding and the final norm are gathered whole.
    if (plan.has_secondary() && layout.unit(i).kind == UnitKind::kBlock) u.secondary = range(u.padded, plan.secondary);
    u.grads = range(u.padded, plan.grads);
    u.optimizer = range(u.padded, plan.optimizer);
    units_.push_back(u);
  }
}

std::size_t ShardLayout::weight_elements() const {
  std::size_t n = 0;
  for (const UnitShardRanges& u : units_) n += u.weights.len;
  return n;
}

std::size_t ShardLayout::grad_elements() const {
  std::size_t n = 0;
  for (const UnitShardRanges& u : units_) n += u.grads.len;
  return n;
}

std::size_t ShardLayout::optimizer_elements() const {
  std::size_t n = 0;
  for (const UnitShardRanges& u : units_) n += u.optimizer.len;
  return n;
}

}  // namespace strata
