// The planner run on the training job's own model, batch, topology and budget.
#include "train/auto_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/format_units.hpp"
#include "core/process_memory.hpp"
#include "hw/cluster_model.hpp"
#include "sim/planner.hpp"

namespace strata {

namespace {

// The run's levels with link figures: its own where it gives them (name:fanout@bandwidth), else
// the cluster's level of the same name, else the cluster's outermost (slowest) level.
Topology priced_topology(const Topology& run, const ClusterModel& cluster) {
  std::string spec;
  for (const Level& l : run.levels()) {
    double bandwidth = l.bandwidth, latency = l.latency;
    if (bandwidth <= 0.0 && !cluster.levels.empty()) {
      const LinkLevel* from = &cluster.levels.back();
      for (const LinkLevel& c : cluster.levels) {
        if (c.name == l.name) from = &c;
      }
      bandwidth = from->rank_bandwidth();
      if (latency <= 0.0) latency = from->latency;
    }
    if (!spec.empty()) spec += ',';
    spec += fmt::format("{}:{}", l.name, l.fanout);
    if (bandwidth > 0.0) spec += fmt::format("@{:.17g}MB/s", bandwidth / 1e6);
    if (latency > 0.0) spec += fmt::format("~{:.17g}ns", latency * 1e9);
  }
  return Topology::parse(spec, run.world_size());
}

std::string candidate_line(int place, const PlanCandidate& c, const Topology& t) {
  return fmt::format("#{} {} ({}): {} per step, predicted peak {}", place, c.plan.name, c.plan.spec(t),
                     format_seconds(c.result.step_seconds), format_bytes(static_cast<double>(c.result.memory.total())));
}

}  // namespace

double default_memory_budget(int ranks_on_host) {
  return static_cast<double>(host_available_bytes()) * (1.0 - kBudgetMargin) / std::max(1, ranks_on_host);
}

std::uint64_t process_fixed_bytes(const std::string& cluster) {
  return static_cast<std::uint64_t>(ClusterModel::load(cluster.empty() ? "cpu" : cluster).device.process_bytes);
}

AutoPlanChoice choose_plan(const TrainConfig& config, const Topology& run_topology, double budget) {
  const ClusterModel cluster = ClusterModel::load(config.cluster.empty() ? "cpu" : config.cluster);
  const Topology topology = priced_topology(run_topology, cluster);
  PlannerInputs in;
  SimulationInputs& s = in.base;
  s.model = config.model_config();
  s.micro_batch = config.batch_size;
  s.seq_len = config.resolved_seq_len();
  s.grad_accum = config.grad_accum;
  s.weight_dtype = s.grad_dtype = config.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  s.max_live_bytes = static_cast<std::uint64_t>(config.max_live_bytes);
  s.boundary_overlap = config.boundary_overlap != 0;
  s.activation_checkpointing = parse_activation_checkpointing(config.activation_checkpointing);
  s.overlap = config.overlap != "off" && config.overlap != "0";
  in.prefetch_depths = {config.prefetch};
  in.memory_per_device = budget;
  // Measured transfer curves belong to the cluster's levels: used only where the run has the same.
  bool same_levels = cluster.levels.size() == static_cast<std::size_t>(topology.level_count());
  for (int l = 0; same_levels && l < topology.level_count(); ++l) {
    same_levels = cluster.levels[static_cast<std::size_t>(l)].name == topology.level(l).name;
  }
  if (same_levels) in.curves = cluster.curves();
  const PlannerResult ranked = rank_plans(in, topology, cluster.device);
  if (ranked.ranked.empty()) {
    STRATA_REQUIRE(!ranked.dropped.empty(), "--plan auto found no valid plan for topology {}", topology.to_string());
    const PlanCandidate& least = ranked.dropped.front();
    fail("--plan auto: no plan fits the memory budget of {} per rank; the smallest, {} ({}), needs {} ({}): give a "
         "larger --memory-budget, a smaller --batch-size or --seq-len, --activation-checkpointing blocks, --dtype "
         "bf16, or more ranks",
         format_bytes(budget), least.plan.name, least.plan.spec(topology),
         format_bytes(static_cast<double>(least.result.memory.total())), format_memory(least.result.memory));
  }
  AutoPlanChoice choice;
  const PlanCandidate& best = ranked.ranked.front();
  choice.plan = best.plan;
  choice.prefetch = best.prefetch;
  choice.lines.push_back(fmt::format("plan auto: {} of {} plans fit the budget of {} per rank on {} (cluster '{}'); "
                                     "chose {}",
                                     ranked.ranked.size(), ranked.ranked.size() + ranked.dropped.size(),
                                     format_bytes(budget), topology.to_string(), cluster.name,
                                     candidate_line(1, best, topology)));
  const std::size_t shown = std::min<std::size_t>(3, ranked.ranked.size());
  for (std::size_t i = 1; i < shown; ++i) {
    choice.lines.push_back(fmt::format("  runner-up {}; #{} beats it: {}",
                                       candidate_line(static_cast<int>(i + 1), ranked.ranked[i], topology), i,
                                       explain_advantage(ranked.ranked[i - 1], ranked.ranked[i], topology)));
  }
  if (!ranked.dropped.empty()) {
    // The fastest that did not fit, so a user sees what the budget cost.
    const PlanCandidate* fastest = &ranked.dropped.front();
    for (const PlanCandidate& c : ranked.dropped) {
      if (c.result.step_seconds < fastest->result.step_seconds) fastest = &c;
    }
    choice.lines.push_back(fmt::format("  {} plans need more than the budget; the fastest of them, {}, would take {} "
                                       "per step and needs {}",
                                       ranked.dropped.size(), fastest->plan.name,
                                       format_seconds(fastest->result.step_seconds),
                                       format_bytes(static_cast<double>(fastest->result.memory.total()))));
  }
  return choice;
}

}  // namespace strata
