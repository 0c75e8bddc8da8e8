// The sharding engine's checkpoint path: the full model is assembled from the optimizer slices
// (gathered over the optimizer levels) and written by rank 0 in the format every engine reads;
// loading keeps each rank's slices and invalidates every secondary copy.
#include <cstring>

#include "comm/hierarchical.hpp"
#include "engine/sharded_engine.hpp"
#include "engine/unit_collectives.hpp"

namespace strata {

void ShardedEngine::gather_full(const AlignedBuffer<float>& slice, UnitShard& u, float* full) {
  std::memcpy(full + u.optim_offset, slice.data(), slice.size() * sizeof(float));
  hierarchical_all_gather(comm_, full, u.padded, DType::kF32, 0, options_.plan.optimizer);
}

std::vector<float> ShardedEngine::gather_master(int unit) {
  UnitShard& u = shard(unit);
  comm_.meter().set_phase(TrafficPhase::kOther);
  std::vector<float> full(u.padded);
  gather_full(u.master, u, full.data());
  full.resize(u.numel);
  return full;
}

void ShardedEngine::save_checkpoint(const std::string& path, int completed_steps) {
  comm_.meter().set_phase(TrafficPhase::kOther);
  const bool writer = comm_.rank() == 0;
  UnitBuffers params, m, v;
  if (writer) params = UnitBuffers(layout()), m = UnitBuffers(layout()), v = UnitBuffers(layout());
  for (std::size_t i = 0; i < units_.size(); ++i) {
    UnitShard& u = *units_[i];
    AlignedBuffer<float> full(u.padded);
    const std::pair<const AlignedBuffer<float>*, UnitBuffers*> states[] = {{&u.master, &params}, {&u.m, &m}, {&u.v, &v}};
    for (const auto& [slice, into] : states) {
      gather_full(*slice, u, full.data());
      if (writer) std::memcpy(into->unit(i), full.data(), u.numel * sizeof(float));
    }
  }
  if (writer) strata::save_checkpoint(path, layout(), completed_steps, {params, m, v});
  comm_.barrier();
}

int ShardedEngine::load_checkpoint(const Checkpoint& checkpoint) {
  UnitBuffers params(layout()), m(layout()), v(layout());
  restore_checkpoint(checkpoint, layout(), {params, m, v});
  for (std::size_t i = 0; i < units_.size(); ++i) {
    UnitShard& u = *units_[i];
    AlignedBuffer<float> full(u.padded);
    auto slice_of = [&](const UnitBuffers& from, AlignedBuffer<float>& into) {
      full.fill_zero();
      std::memcpy(full.data(), from.unit(i), u.numel * sizeof(float));
      std::memcpy(into.data(), full.data() + u.optim_offset, u.optim_len * sizeof(float));
    };
    slice_of(params, u.master);
    slice_of(m, u.m);
    slice_of(v, u.v);
    std::memcpy(full.data(), params.unit(i), u.numel * sizeof(float));
    narrow_to(u.primary.data(), full.data() + u.weight_offset, u.weight_len, options_.weight_dtype);
    u.grad_shard.fill_zero();
  }
  ++epoch_;  // every secondary copy predates the loaded weights
  micro_ = 0;
  reduced_ = false;
  return checkpoint.completed_steps;
}

}  // namespace strata
