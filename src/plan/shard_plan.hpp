// Where each model state is partitioned: working weights (primary), an optional secondary
// weight copy (hpZ), gradients and optimizer state, each at a topology level (or replicated).
// Every known method is a preset of this one object. A plan is validated against a topology
// when it is made and refuses a bad combination with a sentence naming the rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topo/topology.hpp"

namespace strata {

// A state partitioned "at level l" is split across the ranks of one level-l group (span(l)
// ranks); kReplicated means every rank holds it whole.
constexpr int kReplicated = -1;

struct ShardPlan {
  std::string name = "custom";
  int weights = kReplicated;    // primary working weights
  int secondary = kReplicated;  // hpZ copy kept between forward and backward (kReplicated: none)
  int grads = kReplicated;
  int optimizer = kReplicated;  // fp32 master weights and Adam moments

  bool has_secondary() const { return secondary != kReplicated; }

  // A preset name (ddp, zero1, zero2, zero3, zeropp, mics, hier3) or an explicit list such as
  // "weights=gcd,grads=node,optim=world,secondary=none" (levels by name, "world" or "none";
  // an omitted state is replicated).
  static ShardPlan parse(std::string_view spec, const Topology& topology);
  static ShardPlan preset(std::string_view name, const Topology& topology);
  static std::vector<std::string> preset_names();

  // Throws strata::Error naming the violated rule.
  void validate(const Topology& topology) const;

  // "weights=gcd(2) grads=gpu(8) optim=node(16) secondary=none"
  std::string describe(const Topology& topology) const;
};

std::string level_label(const Topology& topology, int level);

// What a plan amounts to on one topology, so a run can say so before it starts instead of
// leaving the user to wonder why, say, hier3 moves the same bytes as zero3.
struct PlanResolution {
  // The plan to run: the input, less a secondary copy that would span as many ranks as the
  // weights (it would only duplicate the primary and cost memory).
  ShardPlan plan;
  // Empty when the plan is what it says; otherwise one line (no newline) naming the plan, the
  // topology, what it effectively is and why.
  std::string note;
};

// A preset degenerates when levels it means to keep apart cover the same ranks here (one level,
// the innermost level being the node level, levels of fan-out 1); any plan may carry a useless
// secondary copy.
PlanResolution resolve_plan(const ShardPlan& plan, const Topology& topology);

}  // namespace strata
