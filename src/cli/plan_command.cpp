// `strata plan`: enumerates the plans (levels of each state, secondary copy, quantization) at
// each prefetch depth, drops those over the memory budget, and prints the fastest with why each
// beats the next.
#include "cli/plan_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cli/simulation_options.hpp"
#include "core/error.hpp"
#include "sim/engine_profile.hpp"
#include "sim/planner.hpp"

namespace strata {

namespace {

struct PlanState {
  SimulationFlags flags;
  int nodes = 1;
  std::string memory = "";
  std::string prefetch = "1,2";
  int top = 5;
  bool largest = false;
  int n_embd = 0;  // --largest over layer counts at this width (0: over the model presets)
};

// --largest: per preset plan and recomputation setting, the largest model preset (or, with
// --n-embd, layer count at that width) whose predicted peak fits the budget.
void run_largest(const PlanState& st, const ClusterModel& cluster, const Topology& topology, double limit) {
  STRATA_REQUIRE(limit > 0.0, "--largest needs a memory budget: give --memory-per-device (cluster '{}' states no "
                 "device memory)", cluster.name);
  const SimulationInputs base = simulation_inputs(st.flags, cluster, topology.world_size());
  std::vector<GptConfig> models;
  if (st.n_embd > 0) {
    STRATA_REQUIRE(st.n_embd % 64 == 0, "--n-embd must be a multiple of 64 (heads of 64; got {})", st.n_embd);
  } else {
    for (const std::string& name : GptConfig::preset_names()) models.push_back(GptConfig::preset(name));
    std::stable_sort(models.begin(), models.end(),
                     [](const GptConfig& a, const GptConfig& b) { return a.parameter_count() < b.parameter_count(); });
  }
  auto shaped = [&](int layers) {
    GptConfig m = base.model;
    m.name = fmt::format("L{}-C{}", layers, st.n_embd);
    m.n_layer = layers;
    m.n_embd = st.n_embd;
    m.n_head = st.n_embd / 64;
    return m;
  };
  auto need = [&](const ShardPlan& plan, const std::string& recompute, const GptConfig& model) {
    SimulationInputs in = base;
    in.model = model;
    in.seq_len = std::min(base.seq_len, model.context_length);
    in.plan = plan;
    in.activation_checkpointing = parse_activation_checkpointing(recompute);
    return simulate(in, topology, cluster.device, cluster.curves()).memory;
  };
  fmt::print("{}\nbudget {} per device on {} ({} ranks), micro-batch {} x {} tokens, {}\n\n", describe_cluster(cluster),
             format_bytes(limit), topology.to_string(), topology.world_size(), base.micro_batch, base.seq_len,
             dtype_name(base.weight_dtype));
  fmt::print("{:<8} {:<10} {:<16} {:>12} {:>14}  {}\n", "plan", "recompute", "largest", "parameters", "predicted", "next");
  for (const std::string& name : ShardPlan::preset_names()) {
    const ShardPlan plan = resolve_plan(ShardPlan::preset(name, topology), topology).plan;
    for (const std::string recompute : {"none", "blocks"}) {
      std::optional<GptConfig> best;
      SimulatedMemory best_memory;
      std::string next = "-";
      if (st.n_embd > 0) {
        // The peak grows with the layer count: the largest that fits, by bisection. The bisection
        // has simulated both the largest and the one past it; each count is simulated once.
        std::map<int, SimulatedMemory> simulated;
        auto at = [&](int layers) -> const SimulatedMemory& {
          auto it = simulated.find(layers);
          if (it == simulated.end()) it = simulated.emplace(layers, need(plan, recompute, shaped(layers))).first;
          return it->second;
        };
        int lo = 0, hi = 1;
        while (hi <= 4096 && at(hi).total() <= limit) lo = hi, hi *= 2;
        while (hi - lo > 1) {
          const int mid = (lo + hi) / 2;
          (at(mid).total() <= limit ? lo : hi) = mid;
        }
        if (lo > 0) best = shaped(lo), best_memory = at(lo);
        next = fmt::format("{} layers need {}", lo + 1, format_bytes(static_cast<double>(at(lo + 1).total())));
      } else {
        for (const GptConfig& m : models) {
          const SimulatedMemory mem = need(plan, recompute, m);
          if (mem.total() <= limit) {
            best = m, best_memory = mem;
          } else {
            next = fmt::format("{} needs {}", m.name, format_bytes(static_cast<double>(mem.total())));
            break;
          }
        }
      }
      fmt::print("{:<8} {:<10} {:<16} {:>12} {:>14}  {}\n", name, recompute, best ? best->name : "none fits",
                 best ? fmt::format("{:.4g}M", static_cast<double>(best->parameter_count()) / 1e6) : "-",
                 best ? format_bytes(static_cast<double>(best_memory.total())) : "-", next);
    }
  }
  fmt::print("\npredicted peak per device: resident shards + the schedule's buffers + collective staging + "
             "activations + the process's fixed part (strata simulate prints each)\n");
}

void run_plan(const PlanState& st) {
  const ClusterModel cluster = ClusterModel::load(st.flags.cluster);
  STRATA_REQUIRE(st.nodes >= 1, "--nodes must be at least 1 (got {})", st.nodes);
  STRATA_REQUIRE(st.top >= 1, "--top must be at least 1 (got {})", st.top);
  const Topology topology = cluster.topology(st.nodes);
  if (st.largest) {
    run_largest(st, cluster, topology,
                st.memory.empty() ? cluster.device.memory_bytes : parse_byte_size(st.memory, "--memory-per-device"));
    return;
  }
  PlannerInputs in;
  in.base = simulation_inputs(st.flags, cluster, topology.world_size());
  in.prefetch_depths = parse_int_list(st.prefetch, "--prefetch");
  in.memory_per_device = st.memory.empty() ? 0.0 : parse_byte_size(st.memory, "--memory-per-device");
  const std::vector<std::string> engines = parse_engine_list(st.flags.engine);
  STRATA_REQUIRE(engines.size() == 1, "strata plan ranks plans under one --engine profile (got '{}')", st.flags.engine);
  in.engine = engines.front();
  in.curves = cluster.curves();
  fmt::print("{}\n{}\nengine {}\n", describe_cluster(cluster), describe_model(in.base, topology.world_size()),
             describe_engine_profile(in.engine));
  const PlannerResult result = rank_plans(in, topology, cluster.device);
  const std::size_t total = result.ranked.size() + result.dropped.size();
  const std::size_t depths = in.engine == "strata" ? in.prefetch_depths.size() : 1;
  fmt::print("{} candidates ({} plans x {} prefetch depths) on {} nodes ({}); memory limit {}: {} fit, {} do not\n\n",
             total, total / depths, depths, st.nodes, topology.to_string(),
             result.memory_limit > 0 ? fmt::format("{:.4g} GB per device", result.memory_limit / 1e9) : "none",
             result.ranked.size(), result.dropped.size());
  if (result.ranked.empty()) {
    fmt::print("no plan fits. The smallest needs {:.4g} GB per device ({}, prefetch {}: {}); try a smaller "
               "--micro-batch, --activation-checkpointing or more nodes.\n",
               gb(result.dropped.front().result.memory.total()), result.dropped.front().plan.spec(topology),
               result.dropped.front().prefetch, format_memory(result.dropped.front().result.memory));
    return;
  }
  const std::size_t shown = std::min<std::size_t>(static_cast<std::size_t>(st.top), result.ranked.size());
  fmt::print("{:>3} {:<16} {:>8} {:>10} {:>10} {:>9} {:>10}  {}\n", "#", "name", "prefetch", "step s", "exposed s",
             "TFLOP/s", "memory GB", "plan (--plan value)");
  for (std::size_t i = 0; i < shown; ++i) {
    const PlanCandidate& c = result.ranked[i];
    fmt::print("{:>3} {:<16} {:>8} {:>10.4g} {:>10.4g} {:>9.4g} {:>10.4g}  {}\n", i + 1, c.plan.name, c.prefetch,
               c.result.step_seconds, c.result.exposed_seconds, c.result.tflops_per_device(), gb(c.result.memory.total()),
               c.plan.spec(topology));
  }
  fmt::print("\nmemory per device of #1: {}\n\n", format_memory(result.ranked.front().result.memory));
  for (std::size_t i = 0; i < shown && i + 1 < result.ranked.size(); ++i) {
    fmt::print("#{} beats #{}: {}\n", i + 1, i + 2, explain_advantage(result.ranked[i], result.ranked[i + 1], topology));
  }
  // Where each preset landed, so a user sees why the one they know is or is not on top.
  fmt::print("\npresets:");
  for (const std::string& name : ShardPlan::preset_names()) {
    std::string where = "not distinct here";
    for (std::size_t i = 0; i < result.ranked.size(); ++i) {
      if (result.ranked[i].plan.name == name) {
        where = fmt::format("#{}", i + 1);
        break;
      }
    }
    if (where == "not distinct here") {
      for (const PlanCandidate& c : result.dropped) {
        if (c.plan.name == name) where = fmt::format("does not fit ({:.4g} GB)", gb(c.result.memory.total()));
      }
    }
    fmt::print(" {} {};", name, where);
  }
  fmt::print("\n");
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto st = std::make_shared<PlanState>();
  CLI::App* c = app.add_subcommand(
      "plan",
      "Enumerate every valid shard plan (levels of each state, secondary copy, int8/int4 quantization) at each "
      "prefetch depth, simulate each on the cluster, drop those over the memory budget, rank the rest by step time.");
  add_simulation_options(*c, st->flags);
  c->add_option("--nodes", st->nodes, "node count")->capture_default_str()->group("cluster");
  c->add_option("--memory-per-device", st->memory, "memory budget per device, e.g. 64GB (default: the device's capacity)")
      ->group("cluster");
  c->add_option("--prefetch", st->prefetch, "prefetch depths to try, comma-separated")->capture_default_str()->group("executor");
  c->add_option("--top", st->top, "how many plans to print")->capture_default_str()->group("output");
  c->add_flag("--largest", st->largest,
              "instead of ranking plans for --model: for each preset plan, with and without activation "
              "recomputation, the largest model preset whose predicted peak fits the memory budget")
      ->group("output");
  c->add_option("--n-embd", st->n_embd,
                "with --largest: search the layer count at this width (heads of 64; --model gives the vocabulary "
                "and context) instead of the presets")
      ->group("output");
  c->callback([st]() { run_single_process([&] { run_plan(*st); }); });
}

}  // namespace strata
