// Shard ranges and the initial weights of every unit.
#include "engine/unit_shards.hpp"

#include <cstring>

#include "comm/hierarchical.hpp"
#include "model/init.hpp"
#include "plan/shard_layout.hpp"

namespace strata {

std::vector<std::unique_ptr<UnitShard>> make_unit_shards(const ModelLayout& layout, const Topology& t,
                                                         const ShardPlan& plan, int rank, DType weight_dtype,
                                                         std::uint64_t seed) {
  const ShardLayout shards(layout, t, plan, rank);
  const std::size_t ew = dtype_size(weight_dtype);
  std::vector<std::unique_ptr<UnitShard>> units;
  AlignedBuffer<float> full;
  for (std::size_t i = 0; i < layout.unit_count(); ++i) {
    auto u = std::make_unique<UnitShard>();
    const UnitShardRanges& r = shards.unit(static_cast<int>(i));
    u->numel = r.numel;
    u->padded = r.padded;
    u->weight_offset = r.weights.offset;
    u->weight_len = r.weights.len;
    u->secondary_offset = r.secondary.offset;
    u->secondary_len = r.secondary.len;
    u->grad_offset = r.grads.offset;
    u->grad_len = r.grads.len;
    u->optim_offset = r.optimizer.offset;
    u->optim_len = r.optimizer.len;
    u->reduced_offset = r.reduced_offset();
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
