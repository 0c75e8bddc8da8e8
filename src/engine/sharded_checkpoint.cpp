// The sharding engine's checkpoint path: each rank hands over its optimizer slices (the first
// replica of a replicated slice only) and reads back whatever slices and weight range the new
// run's plan gives it, from a checkpoint of any world size or plan. Loading bumps the weight
// epoch, so no secondary (hpZ) copy made before it can be read after it.
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
  flush();
  UnitShard& u = shard(unit);
  comm_.meter().set_phase(TrafficPhase::kOther);
  std::vector<float> full(u.padded);
  gather_full(u.master, u, full.data());
  full.resize(u.numel);
  return full;
}

UnitBuffers ShardedEngine::whole_weights() {
  UnitBuffers whole(layout());
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const std::vector<float> unit = gather_master(static_cast<int>(u));
    std::copy(unit.begin(), unit.end(), whole.unit(u));
  }
  return whole;
}

std::vector<CheckpointPiece> ShardedEngine::checkpoint_pieces() {
  flush();  // the pieces are read on this thread while nothing is in flight
  const Topology& t = comm_.topology();
  // The first replica of this rank's optimizer slice: coordinate 0 on every level above it.
  const std::vector<int> coords = t.coordinates(comm_.rank());
  for (int l = options_.plan.optimizer + 1; l < t.level_count(); ++l) {
    if (coords[static_cast<std::size_t>(l)] != 0) return {};
  }
  std::vector<CheckpointPiece> pieces;
  for (std::size_t i = 0; i < units_.size(); ++i) {
    const UnitShard& u = *units_[i];
    const std::size_t begin = u.optim_offset, end = std::min(u.optim_offset + u.optim_len, u.numel);
    if (begin >= end) continue;  // a slice of padding only
    const int unit = static_cast<int>(i);
    pieces.push_back({"master", unit, begin, end, u.master.data()});
    pieces.push_back({"adam_m", unit, begin, end, u.m.data()});
    pieces.push_back({"adam_v", unit, begin, end, u.v.data()});
  }
  return pieces;
}

void ShardedEngine::load_state(const StateSource& reader) {
  flush();  // no update in flight may write the primary shards after the loaded weights
  for (std::size_t i = 0; i < units_.size(); ++i) {
    UnitShard& u = *units_[i];
    const int unit = static_cast<int>(i);
    reader.read("master", unit, u.optim_offset, u.optim_offset + u.optim_len, u.master.data());
    reader.read("adam_m", unit, u.optim_offset, u.optim_offset + u.optim_len, u.m.data());
    reader.read("adam_v", unit, u.optim_offset, u.optim_offset + u.optim_len, u.v.data());
    // The working weights are the master narrowed, as the update's gather leaves them.
    std::vector<float> weights(u.weight_len);
    reader.read("master", unit, u.weight_offset, u.weight_offset + u.weight_len, weights.data());
    narrow_to(u.primary.data(), weights.data(), u.weight_len, options_.weight_dtype);
    u.grad_shard.fill_zero();
  }
  invalidate_secondaries();  // every secondary copy predates the loaded weights
  micro_ = 0;
  reduced_ = false;
  steps_before_ = reader.completed_steps();
}

CheckpointRun ShardedEngine::checkpoint_run() const {
  CheckpointRun run;
  run.engine = "sharded";
  run.world = comm_.world_size();
  run.plan = options_.plan.spec(comm_.topology());
  run.topology = comm_.topology().to_string();
  run.weight_dtype = std::string(dtype_name(options_.weight_dtype));
  run.batch_size = gpt_.batch();
  run.seq_len = gpt_.seq_len();
  run.grad_accum = options_.grad_accum;
  return run;
}

}  // namespace strata
