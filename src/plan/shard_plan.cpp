// Shard plan presets (named by role, so they fit any topology), parsing and validation.
#include "zero/shard_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.hpp"

namespace strata {

namespace {

int parse_level(std::string_view name, std::string_view state, const Topology& t, std::string_view spec) {
  if (name == "none") return kReplicated;
  const int l = t.find_level(name);
  std::vector<std::string> names = {"none"};
  for (const auto& lv : t.levels()) names.push_back(lv.name);
  if (t.level(t.level_count() - 1).name != "world") names.emplace_back("world");
  STRATA_REQUIRE(l >= 0, "plan '{}': {} level '{}' is not a level of topology {} (use one of: {})", spec, state, name,
                 t.to_string(), fmt::join(names, ", "));
  return l;
}

}  // namespace

std::string level_label(const Topology& topology, int level) {
  if (level == kReplicated) return "none";
  return fmt::format("{}({})", topology.level(level).name, topology.span(level));
}

std::vector<std::string> ShardPlan::preset_names() {
  return {"ddp", "zero1", "zero2", "zero3", "zeropp", "mics", "hier3"};
}

ShardPlan ShardPlan::preset(std::string_view name, const Topology& t) {
  const int inner = 0, node = t.node_level(), world = t.level_count() - 1;
  ShardPlan p;
  p.name = std::string(name);
  if (name == "ddp") {
  } else if (name == "zero1") {
    p.optimizer = world;
  } else if (name == "zero2") {
    p.grads = p.optimizer = world;
  } else if (name == "zero3") {
    p.weights = p.grads = p.optimizer = world;
  } else if (name == "zeropp") {
    p.weights = p.grads = p.optimizer = world;
    p.secondary = node < world ? node : kReplicated;  // with one level there is nothing below the world
  } else if (name == "mics") {
    p.weights = p.grads = p.optimizer = node;
  } else if (name == "hier3") {
    p.weights = inner;
    p.grads = node;
    p.optimizer = world;
  } else {
    fail("unknown plan '{}'; presets: {} (or an explicit list like weights=gcd,grads=gpu,optim=world)", name,
         fmt::join(preset_names(), ", "));
  }
  p.validate(t);
  return p;
}

ShardPlan ShardPlan::parse(std::string_view spec, const Topology& t) {
  if (spec.find('=') == std::string_view::npos) return preset(spec, t);
  ShardPlan p;
  p.name = std::string(spec);
  std::size_t start = 0;
  std::vector<std::string> seen;
  while (start <= spec.size()) {
    const std::size_t comma = spec.find(',', start);
    const std::string_view item = spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::size_t eq = item.find('=');
    STRATA_REQUIRE(eq != std::string_view::npos, "plan '{}': '{}' must read state=level", spec, item);
    std::string key(item.substr(0, eq));
    if (key == "optimizer") key = "optim";  // one state, two spellings
    const std::string_view value = item.substr(eq + 1);
    STRATA_REQUIRE(std::find(seen.begin(), seen.end(), key) == seen.end(), "plan '{}': '{}' is given twice", spec, key);
    seen.push_back(key);
    if (key == "weights") p.weights = parse_level(value, key, t, spec);
    else if (key == "secondary") p.secondary = parse_level(value, key, t, spec);
    else if (key == "grads") p.grads = parse_level(value, key, t, spec);
    else if (key == "optim") p.optimizer = parse_level(value, key, t, spec);
    else fail("plan '{}': unknown state '{}' (weights, secondary, grads, optim)", spec, key);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  p.validate(t);
  return p;
}

void ShardPlan::validate(const Topology& t) const {
  const int top = t.level_count() - 1;
  for (int l : {weights, secondary, grads, optimizer}) {
    STRATA_REQUIRE(l >= kReplicated && l <= top, "plan '{}': level index {} is outside the topology", name, l);
  }
  // The optimizer updates its slice from the reduced gradient, so its slice must lie inside
  // this rank's gradient shard.
  STRATA_REQUIRE(optimizer >= grads,
                 "plan '{}': the optimizer state ({}) must be partitioned at least as finely as the gradients ({}); "
                 "otherwise the optimizer would need gradient elements no rank reduced for it",
                 name, level_label(t, optimizer), level_label(t, grads));
  if (has_secondary()) {
    STRATA_REQUIRE(weights != kReplicated, "plan '{}': a secondary weight copy needs partitioned weights", name);
    STRATA_REQUIRE(secondary < weights,
                   "plan '{}': the secondary copy ({}) must be partitioned over a smaller group than the primary "
                   "weights ({}), or it saves no traffic",
                   name, level_label(t, secondary), level_label(t, weights));
  }
}

std::string ShardPlan::describe(const Topology& t) const {
  return fmt::format("weights={} secondary={} grads={} optim={}", level_label(t, weights), level_label(t, secondary),
                     level_label(t, grads), level_label(t, optimizer));
}

}  // namespace strata
