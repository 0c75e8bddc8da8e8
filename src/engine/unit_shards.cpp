// Shard ranges and the initial weights of every unit.
#include "engine/unit_shards.hpp"

#include <cstring>

#include "comm/hierarchical.hpp"
#include "model/init.hpp"
#include "plan/unit_padding.hpp"

namespace strata {

std::vector<std::unique_ptr<UnitShard>> make_unit_shards(const ModelLayout& layout, const Topology& t,
                                                         const ShardPlan& plan, int rank, DType weight_dtype,
                                                         std::uint64_t seed) {
  const std::vector<std::size_t> padded = padded_unit_sizes(layout, t);
  const std::size_t ew = dtype_size(weight_dtype);
  std::vector<std::unique_ptr<UnitShard>> units;
  AlignedBuffer<float> full;
  for (std::size_t i = 0; i < layout.unit_count(); ++i) {
    auto u = std::make_unique<UnitShard>();
    u->numel = layout.unit(i).numel;
    u->padded = padded[i];
    u->weight_len = u->padded / static_cast<std::size_t>(t.span(plan.weights));
    u->weight_offset = shard_offset(t, rank, u->padded, 0, plan.weights);
    if (plan.has_secondary() && layout.unit(i).kind == UnitKind::kBlock) {
      u->secondary_len = u->padded / static_cast<std::size_t>(t.span(plan.secondary));
      u->secondary_offset = shard_offset(t, rank, u->padded, 0, plan.secondary);
    }
    u->grad_len = u->padded / static_cast<std::size_t>(t.span(plan.grads));
    u->grad_offset = shard_offset(t, rank, u->padded, 0, plan.grads);
    u->optim_len = u->padded / static_cast<std::size_t>(t.span(plan.optimizer));
    u->optim_offset = shard_offset(t, rank, u->padded, 0, plan.optimizer);
    u->reduced_offset = u->optim_offset - u->grad_offset;
    u->primary = AlignedBuffer<unsigned char>(u->weight_len * ew);
    u->grad_shard = AlignedBuffer<float>(u->grad_len);
    u->master = AlignedBuffer<float>(u->optim_len);
    u->m = AlignedBuffer<float>(u->optim_len);
    u->v = AlignedBuffer<float>(u->optim_len);

    if (full.size() != u->padded) full = AlignedBuffer<float>(u->padded);
    full.fill_zero();
    init_unit(layout, i, seed, full.data());
    std::memcpy(u->master.data(), full.data() + u->optim_offset, u->optim_len * sizeof(float));
    narrow_to(u->primary.data(), full.data() + u->weight_offset, u->weight_len, weight_dtype);
    units.push_back(std::move(u));
  }
  return units;
}

}  // namespace strata
