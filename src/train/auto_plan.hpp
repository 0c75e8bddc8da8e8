// --plan auto for a sharded run: every valid plan of the run's topology ranked by the simulated
// step on --cluster's figures (the planner of sim/), those whose predicted peak exceeds the
// memory budget dropped; the fastest that fits is chosen, with the runners-up and why. Local and
// deterministic: ranks given the same settings (which they are made to agree on) choose alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/shard_plan.hpp"
#include "topo/topology.hpp"
#include "train/train_config.hpp"

namespace strata {

struct AutoPlanChoice {
  ShardPlan plan;
  int prefetch = 1;
  std::vector<std::string> lines;  // for the run's header: the choice, the runners-up, what did not fit
};

// Refuses, naming the smallest plan's need, a budget no plan fits.
AutoPlanChoice choose_plan(const TrainConfig& config, const Topology& topology, double budget_bytes);

// The budget when none is given: the host's available memory divided among its ranks, less
// kBudgetMargin of it (for what the host's other processes and the page cache will want).
constexpr double kBudgetMargin = 0.10;
double default_memory_budget(int ranks_on_host);

// The fixed part of the memory model: --cluster's process_bytes.
std::uint64_t process_fixed_bytes(const std::string& cluster);

}  // namespace strata
