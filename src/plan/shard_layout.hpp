// Where one rank's shards of every unit lie: the padded length of each unit and, for each state
// (weights, secondary copy, gradients, optimizer slice), the offset and length of this rank's
// piece in unit coordinates. The one computation of shard geometry, read by the engine (its
// buffers), the schedule builder (collective sizes, resident bytes) and the simulator.
#pragma once

#include <cstddef>
#include <vector>

#include "model/parameter_layout.hpp"
#include "plan/shard_plan.hpp"
#include "topo/topology.hpp"

namespace strata {

struct ShardRange {
  std::size_t offset = 0, len = 0;
};

struct UnitShardRanges {
  std::size_t numel = 0, padded = 0;
  ShardRange weights;
  ShardRange secondary;  // blocks under a plan with a secondary level; empty otherwise
  ShardRange grads;
  ShardRange optimizer;
  // Where the optimizer slice starts inside the gradient shard (the optimizer level spans the
  // gradient level, so the slice is a part of the shard).
  std::size_t reduced_offset() const { return optimizer.offset - grads.offset; }
};

class ShardLayout {
 public:
  // Lengths are the same on every rank; offsets are `rank`'s.
  ShardLayout(const ModelLayout& layout, const Topology& topology, const ShardPlan& plan, int rank);

  int unit_count() const { return static_cast<int>(units_.size()); }
  const UnitShardRanges& unit(int u) const { return units_.at(static_cast<std::size_t>(u)); }
  // Elements of each state one rank holds, over every unit.
  std::size_t weight_elements() const;
  std::size_t grad_elements() const;
  std::size_t optimizer_elements() const;

 private:
  std::vector<UnitShardRanges> units_;
};

}  // namespace strata
