// Plan enumeration and ranking.
#include "sim/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "core/format_units.hpp"
#include "sim/engine_profile.hpp"

namespace strata {

namespace {

// Two plans are the same plan on this topology when every state spans the same ranks.
auto signature(const ShardPlan& p, const Topology& t) {
  auto span = [&](int l) { return l == kReplicated ? 1 : t.span(l); };
  return std::make_tuple(span(p.weights), p.has_secondary() ? span(p.secondary) : 0, span(p.grads), span(p.optimizer),
                         p.quant_weights, p.quant_grads);
}

bool same_plan(const ShardPlan& a, const ShardPlan& b, const Topology& t) { return signature(a, t) == signature(b, t); }

std::uint64_t level_bytes(const SimulationResult& r, int level) {
  std::uint64_t n = 0;
  for (const auto& phase : r.counts.bytes) n += phase.at(static_cast<std::size_t>(level));
  return n;
}

}  // namespace

std::vector<ShardPlan> enumerate_plans(const Topology& t) {
  std::vector<ShardPlan> presets;
  for (const std::string& name : ShardPlan::preset_names()) presets.push_back(ShardPlan::preset(name, t));
  std::vector<int> levels{kReplicated};
  for (int l = 0; l < t.level_count(); ++l) levels.push_back(l);

  std::vector<ShardPlan> plans;
  std::set<decltype(signature(ShardPlan{}, t))> seen;
  for (int w : levels) {
    for (int s : levels) {
      if (s != kReplicated && (w == kReplicated || s >= w)) continue;
      for (int g : levels) {
        for (int o : levels) {
          if (o < g) continue;
          for (QuantBits qw : {QuantBits::kNone, QuantBits::kInt8}) {
            if (qw != QuantBits::kNone && w == kReplicated) continue;
            for (QuantBits qg : {QuantBits::kNone, QuantBits::kInt4}) {
              ShardPlan p;
              p.weights = w, p.secondary = s, p.grads = g, p.optimizer = o;
              p.quant_weights = qw, p.quant_grads = qg;
              // A secondary copy spanning as many ranks as the weights only duplicates them.
              if (p.has_secondary() && t.span(s) == t.span(w)) continue;
              try {
                p.validate(t);
              } catch (const Error&) {
                continue;
              }
              if (!seen.insert(signature(p, t)).second) continue;
              p.name = "";
              for (const ShardPlan& preset : presets) {
                if (same_plan(p, preset, t)) {
                  p.name = preset.name;
                  break;
                }
              }
              if (p.name.empty()) {
                // A preset plus quantization reads as such; anything else by its levels.
                ShardPlan bare = p;
                bare.quant_weights = bare.quant_grads = QuantBits::kNone;
                for (const ShardPlan& preset : presets) {
                  if (same_plan(bare, preset, t)) p.name = preset.name + "+q";
                }
                if (p.name.empty()) p.name = "custom";
                if (p.quant_weights != QuantBits::kNone || p.quant_grads != QuantBits::kNone) {
                  p.name += fmt::format("[{}{}{}]", p.quant_weights != QuantBits::kNone ? "w8" : "",
                                        p.quant_weights != QuantBits::kNone && p.quant_grads != QuantBits::kNone ? "," : "",
                                        p.quant_grads != QuantBits::kNone ? "g4" : "");
                }
              }
              plans.push_back(p);
            }
          }
        }
      }
    }
  }
  return plans;
}

PlannerResult rank_plans(const PlannerInputs& in, const Topology& t, const DeviceModel& device) {
  STRATA_REQUIRE(!in.prefetch_depths.empty(), "the planner needs at least one prefetch depth");
  PlannerResult out;
  out.memory_limit = in.memory_per_device > 0.0 ? in.memory_per_device : device.memory_bytes;
  const bool own_depth = in.engine != "strata";  // the profile fixes the prefetch depth
  for (const ShardPlan& plan : enumerate_plans(t)) {
    for (int depth : in.prefetch_depths) {
      SimulationInputs s = in.base;
      s.plan = plan;
      s.prefetch = depth;
      s = with_engine_profile(in.engine, s);
      if (own_depth && depth != in.prefetch_depths.front()) continue;
      PlanCandidate c;
      c.plan = plan;
      c.prefetch = s.prefetch;
      c.result = simulate(s, t, device, in.curves);
      c.fits = out.memory_limit <= 0.0 || static_cast<double>(c.result.memory.total()) <= out.memory_limit;
      (c.fits ? out.ranked : out.dropped).push_back(std::move(c));
    }
  }
  // Ties (equal time) go to less memory, then to the shallower prefetch.
  std::stable_sort(out.ranked.begin(), out.ranked.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.result.step_seconds != b.result.step_seconds) return a.result.step_seconds < b.result.step_seconds;
    if (a.result.memory.total() != b.result.memory.total()) return a.result.memory.total() < b.result.memory.total();
    return a.prefetch < b.prefetch;
  });
  std::stable_sort(out.dropped.begin(), out.dropped.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    return a.result.memory.total() < b.result.memory.total();
  });
  return out;
}

std::string explain_advantage(const PlanCandidate& a, const PlanCandidate& b, const Topology& t) {
  const SimulationResult& x = a.result;
  const SimulationResult& y = b.result;
  const double gain = y.step_seconds - x.step_seconds;
  if (gain <= 0.0) {
    const double saved = static_cast<double>(y.memory.total()) - static_cast<double>(x.memory.total());
    if (saved > 0.0) return fmt::format("as fast, and holds {} less per device", format_bytes(saved));
    return "as fast and as large (an equivalent choice)";
  }
  const double comm = y.exposed_seconds - x.exposed_seconds;
  const double compute = y.compute_seconds - x.compute_seconds;
  if (comm >= compute) {
    // The level whose traffic fell the most, priced at that level's bandwidth.
    int level = -1;
    double best = 0.0;
    for (int l = 0; l < t.level_count(); ++l) {
      const double saved = (static_cast<double>(level_bytes(y, l)) - static_cast<double>(level_bytes(x, l))) /
                           std::max(1.0, t.level(l).bandwidth);
      if (saved > best) best = saved, level = l;
    }
    std::string why = fmt::format("{} faster: {} less exposed communication ({} vs {})", format_seconds(gain),
                                  format_seconds(comm), format_seconds(x.exposed_seconds),
                                  format_seconds(y.exposed_seconds));
    if (level >= 0) {
      why += fmt::format(", {} less over the {} level per step",
                         format_bytes(static_cast<double>(level_bytes(y, level)) - static_cast<double>(level_bytes(x, level))),
                         t.level(level).name);
    } else if (a.prefetch != b.prefetch) {
      why += fmt::format(", the same bytes hidden better by prefetch depth {} (vs {})", a.prefetch, b.prefetch);
    }
    return why;
  }
  return fmt::format("{} faster: {} less compute-stream work (memory-bound accumulation, optimizer, quantization)",
                     format_seconds(gain), format_seconds(compute));
}

}  // namespace strata
