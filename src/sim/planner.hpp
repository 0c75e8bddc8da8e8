// The planner: every valid shard plan for a topology (the level of each state, the secondary
// copy, the quantization of weights and gradients) at each prefetch depth, simulated, the ones
// that do not fit the device's memory dropped, the rest ranked by step time.
#pragma once

#include <string>
#include <vector>

#include "sim/simulator.hpp"

namespace strata {

// Every distinct valid plan: states at levels where the spans differ (levels of fan-out 1 would
// only repeat a plan), a secondary copy only below the weights, quantization on or off for the
// weight gathers (int8) and the gradient reductions (int4). Named after the preset it equals.
std::vector<ShardPlan> enumerate_plans(const Topology& topology);

struct PlanCandidate {
  ShardPlan plan;
  int prefetch = 1;
  SimulationResult result;
  bool fits = true;
};

struct PlannerInputs {
  SimulationInputs base;             // model, batch, dtype, overlap; plan and prefetch are varied
  std::vector<int> prefetch_depths = {1, 2};  // an engine profile with its own depth tries only that
  double memory_per_device = 0.0;    // bytes; 0: the device's capacity (0 there too: no limit)
  std::string engine = "strata";     // the engine profile each plan is run as (sim/engine_profile)
  std::vector<TransferCurve> curves; // the cluster's measured transfer curves, if any
};

struct PlannerResult {
  std::vector<PlanCandidate> ranked;   // those that fit, fastest first
  std::vector<PlanCandidate> dropped;  // those that do not fit, smallest first
  double memory_limit = 0.0;
};

PlannerResult rank_plans(const PlannerInputs& in, const Topology& topology, const DeviceModel& device);

// One sentence on why `better` beats `next`: the dominant difference in exposed communication
// (and the level whose bytes fell most), compute, or memory when they tie.
std::string explain_advantage(const PlanCandidate& better, const PlanCandidate& next, const Topology& topology);

}  // namespace strata
