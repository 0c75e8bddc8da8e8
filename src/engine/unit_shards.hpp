// What one rank holds of each parameter unit: the element ranges of its shards (weights,
// gradients, optimizer slice, secondary copy) in unit coordinates, the resident buffers, and the
// transient ones the schedule allocates (gathered copy, secondary copy, unit gradient). Which of
// them may be read is the unit's state (schedule/unit_lifecycle), not the buffers' presence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "core/aligned_buffer.hpp"
#include "core/bf16.hpp"
#include "core/dtype.hpp"
#include "engine/scratch_pool.hpp"
#include "engine/unit_collectives.hpp"
#include "model/parameter_layout.hpp"
#include "plan/shard_plan.hpp"

namespace strata {

struct UnitShard {
  std::size_t numel = 0, padded = 0;
  // Element ranges of this rank's shards, in unit coordinates.
  std::size_t weight_offset = 0, weight_len = 0;
  std::size_t secondary_offset = 0, secondary_len = 0;  // blocks under a plan with a secondary level
  std::size_t grad_offset = 0, grad_len = 0;
  std::size_t optim_offset = 0, optim_len = 0;
  std::size_t reduced_offset = 0;  // where the optimizer slice starts inside the gradient shard

  // Resident for the whole run.
  AlignedBuffer<unsigned char> primary;  // weight_len working-dtype elements
  AlignedBuffer<float> grad_shard;       // grad_len, fp32 accumulation
  AlignedBuffer<float> master, m, v;     // optim_len

  // Allocated and freed by the schedule's ops.
  ScratchPool::Buffer compute;    // fp32, padded: the gathered unit
  // Where the gather lands before compute reads it: the quantized blobs of every rank (qwZ), or the
  // padded working-dtype copy of an unquantized bf16 gather, widened at the wait.
  ScratchPool::Buffer staging;
  ScratchPool::Buffer secondary;  // secondary_len working-dtype elements
  // The gathered unit in bf16 as well, where a gather leaves it so (the staging of an unquantized,
  // unbucketed bf16 gather, or a replicated bf16 unit's primary): bf16 compute reads it unconverted.
  // Null otherwise, and from the unit's release.
  const bf16* working_bf16 = nullptr;
  ScratchPool::Buffer grad;       // fp32, padded: this micro-batch's unit gradient (sharded gradients)

  // The gradient after the boundary's replica reduction: the optimizer slice's values, which sit
  // inside the gradient shard (one index system: the shard, and this slice of it).
  float* reduced_grad() { return grad_shard.data() + reduced_offset; }
  const float* reduced_grad() const { return grad_shard.data() + reduced_offset; }

  // Collectives in flight, one per bucket of the op that started them (one when unbucketed).
  std::vector<std::unique_ptr<CommRequest>> gathers;
  std::vector<std::unique_ptr<CommRequest>> replica_tasks;  // the boundary's replica reduction (from the last micro-batch)
  std::vector<std::unique_ptr<CommRequest>> updated_tasks;  // the updated-weights gather (into the next step)
  struct Reduction {
    std::unique_ptr<PendingReduction> reduction;  // made and completed by task's job
    std::unique_ptr<CommRequest> task;            // declared last: destroyed (waited for) first
  };
  std::vector<Reduction> reductions;
};

// The shards of every unit for this rank, with the fp32 master slice and the primary weight shard
// initialised from the model's deterministic draw (every rank draws each unit whole and keeps its
// slices, so every plan starts from the same weights as the single-process reference).
std::vector<std::unique_ptr<UnitShard>> make_unit_shards(const ModelLayout& layout, const Topology& topology,
                                                         const ShardPlan& plan, int rank, DType weight_dtype,
                                                         std::uint64_t seed);

}  // namespace strata
