// Test oracle: closed-form memory and traffic of a shard plan, derived from the plan alone (not
// from the schedule or the engine), so the schedule's and the engine's figures are checked against
// an independent derivation. Nothing in src/ uses it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "model/parameter_layout.hpp"
#include "topo/topology.hpp"
#include "plan/shard_plan.hpp"
#include "plan/unit_padding.hpp"

namespace strata {

struct StateMemory {
  std::string state;   // "weights", "secondary", "grads", "optimizer"
  int level = kReplicated;
  int span = 1;
  std::uint64_t bytes = 0;  // per rank
  std::string formula;      // e.g. "2 x 124.4M / 8"
};

// weights: Psi_w / S_w; secondary (blocks only, the units gathered again in backward):
// Psi_w(blocks) / S_sec; grads: 4 N / S_g (fp32 accumulation shard); optimizer: 12 N / S_o (fp32
// master, Adam m and v). N counts padded elements.
std::vector<StateMemory> memory_formula(const ModelLayout& layout, const ShardPlan& plan, const Topology& t,
                                        DType weight_dtype);

struct TrafficFormula {
  std::vector<std::uint64_t> micro_batch;  // per level, bytes one rank sends per micro-batch
  std::vector<std::uint64_t> boundary;     // per level, bytes one rank sends per optimizer step boundary
  std::vector<std::uint64_t> per_step(int grad_accum) const;
};

// Per micro-batch: forward gathers (embedding twice: lookup and tied head; each block; final
// norm) over the weight levels, backward gathers of each block over the secondary levels (or
// the weight levels), a reduce-scatter of every unit's gradient over the gradient levels. Per
// step: reduce-scatter over the levels between gradient and optimizer, all-reduce above the
// optimizer, all-gather of the updated weights over the levels between weights and optimizer.
// Received bytes equal sent bytes for all of these. Quantized collectives (the plan's qwZ and
// qgZ) move blobs: codes plus 4 bytes per started block of each piece.
TrafficFormula traffic_formula(const ModelLayout& layout, const ShardPlan& plan, const Topology& t,
                               DType weight_dtype, DType grad_dtype);

}  // namespace strata
