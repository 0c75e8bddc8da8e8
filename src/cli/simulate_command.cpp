// `strata simulate`: per plan and node count, step time, exposed communication, TFLOP/s per
// device, scaling efficiency against the smallest node count, memory per device by state and
// bytes per level; optionally the simulated timelines as one Chrome trace.
#include "cli/simulate_command.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

#include "cli/simulation_options.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "sim/engine_profile.hpp"
#include "train/output_policy.hpp"

namespace strata {

namespace {

struct SimulateState {
  SimulationFlags flags;
  std::string nodes = "1";
  std::string plans = "zero3,zeropp,hier3";
  int prefetch = 1;
  std::string timeline;
  bool force = false;
};

struct Row {
  std::string engine;
  std::string plan;
  int nodes = 0;
  int ranks = 0;
  int grad_accum = 0;
  SimulationResult r;
  double tokens_per_device_second = 0.0;
};

void run_simulate(const SimulateState& st) {
  const ClusterModel cluster = ClusterModel::load(st.flags.cluster);
  const std::vector<int> node_counts = parse_int_list(st.nodes, "--nodes");
  const std::vector<std::string> plans = split_plan_list(st.plans);
  const std::vector<std::string> engines = parse_engine_list(st.flags.engine);
  STRATA_REQUIRE(st.prefetch >= 0 && st.prefetch <= 64, "--prefetch must be between 0 and 64 (got {})", st.prefetch);
  if (!st.timeline.empty()) require_output(st.timeline, "--timeline", trace_output(), {st.flags.cluster}, st.force);
  fmt::print("{}\n", describe_cluster(cluster));
  {
    const SimulationInputs first = simulation_inputs(st.flags, cluster, cluster.ranks_per_node() * node_counts.front());
    fmt::print("{}\n", describe_model(first, cluster.ranks_per_node() * node_counts.front()));
    for (const std::string& e : engines) fmt::print("engine {}\n", describe_engine_profile(e));
    fmt::print("\n");
  }
  std::vector<Row> rows;
  nlohmann::json events = nlohmann::json::array();
  for (const std::string& engine : engines) {
    for (const std::string& spec : plans) {
      for (int nodes : node_counts) {
        const Topology topology = cluster.topology(nodes);
        SimulationInputs in = simulation_inputs(st.flags, cluster, topology.world_size());
        in.plan = resolve_plan(ShardPlan::parse(spec, topology), topology).plan;
        in.prefetch = st.prefetch;
        in.record_timeline = !st.timeline.empty();
        in = with_engine_profile(engine, in);
        Row row{engine, spec, nodes, topology.world_size(), in.grad_accum,
                simulate(in, topology, cluster.device, cluster.curves()), 0.0};
        row.tokens_per_device_second = static_cast<double>(in.micro_batch) * in.seq_len * in.grad_accum / row.r.step_seconds;
        if (in.record_timeline) {
          const nlohmann::json e = simulated_timeline(
              row.r, fmt::format("{} ({}) on {} nodes ({} devices)", spec, engine, nodes, row.ranks));
          for (nlohmann::json ev : e["traceEvents"]) {
            ev["pid"] = static_cast<int>(rows.size());
            events.push_back(std::move(ev));
          }
          row.r.spans.clear();
        }
        rows.push_back(std::move(row));
      }
    }
  }
  const std::string per = cluster.device.name;
  fmt::print("{:<9} {:<28} {:>5} {:>7} {:>6} {:>10} {:>10} {:>10} {:>9} {:>8} {:>10} {:>5}\n", "engine", "plan", "nodes",
             "devices", "accum", "step s", "exposed s", "hidden s", "TFLOP/s", "scaling", "memory GB", "fits");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const Row* base = &row;
    for (const Row& r : rows) {
      if (r.plan == row.plan && r.engine == row.engine) {
        base = &r;
        break;
      }
    }
    const double memory = gb(row.r.memory.total());
    const bool fits = cluster.device.memory_bytes <= 0.0 || static_cast<double>(row.r.memory.total()) <= cluster.device.memory_bytes;
    fmt::print("{:<9} {:<28} {:>5} {:>7} {:>6} {:>10.4g} {:>10.4g} {:>10.4g} {:>9.4g} {:>7.1f}% {:>10.4g} {:>5}\n",
               row.engine, row.plan, row.nodes, row.ranks, row.grad_accum, row.r.step_seconds, row.r.exposed_seconds,
               std::max(0.0, row.r.communication_seconds - row.r.exposed_seconds),
               row.r.tflops_per_device(), 100.0 * row.tokens_per_device_second / base->tokens_per_device_second, memory,
               fits ? "yes" : "NO");
  }
  fmt::print("\nTFLOP/s are model FLOPs (6N + 12LCT per token) per {} per second; scaling is tokens per device per "
             "second against the plan's first node count ({} node{}).\n",
             per, node_counts.front(), node_counts.front() == 1 ? "" : "s");

  fmt::print("\nmemory per device (GB): resident shards, the schedule's peaks (each kind on its own, then together), "
             "collective staging's peak, activations, the process's fixed part; the total counts the schedule's buffers "
             "and the staging at their joint peak\n");
  fmt::print("{:<9} {:<28} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9}\n", "engine", "plan",
             "nodes", "weights", "grads", "optimizer", "gathered", "secondary", "unit grads", "schedule", "staging",
             "activations", "process", "total");
  for (const Row& row : rows) {
    const SimulatedMemory& m = row.r.memory;
    fmt::print("{:<9} {:<28} {:>5} {:>9.4g} {:>9.4g} {:>9.4g} {:>9.4g} {:>9.4g} {:>9.4g} {:>9.4g} {:>9.4g} {:>11.4g} {:>9.4g} "
               "{:>9.4g}\n",
               row.engine, row.plan, row.nodes, gb(m.weights), gb(m.grads), gb(m.optimizer), gb(m.gathered),
               gb(m.secondary), gb(m.unit_grads), gb(m.scheduled), gb(m.staging), gb(m.activations), gb(m.fixed),
               gb(m.total()));
  }

  const Topology names = cluster.topology(node_counts.front());
  fmt::print("\nbytes one device sends per step, by level (GB)\n{:<9} {:<28} {:>5}", "engine", "plan", "nodes");
  for (const Level& l : names.levels()) fmt::print(" {:>10}", l.name);
  fmt::print("\n");
  for (const Row& row : rows) {
    fmt::print("{:<9} {:<28} {:>5}", row.engine, row.plan, row.nodes);
    for (int l = 0; l < names.level_count(); ++l) {
      std::uint64_t bytes = 0;
      for (const auto& phase : row.r.counts.bytes) bytes += phase.at(static_cast<std::size_t>(l));
      fmt::print(" {:>10.4g}", gb(bytes));
    }
    fmt::print("\n");
  }
  if (!st.timeline.empty()) {
    write_file_atomically(st.timeline, chrome_trace(std::move(events)).dump() + "\n");
    fmt::print("\ntimeline: {} (one process per plan and node count; open in chrome://tracing or Perfetto)\n", st.timeline);
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto st = std::make_shared<SimulateState>();
  CLI::App* c = app.add_subcommand(
      "simulate",
      "Replay the engine's step schedule of each plan on a cluster model at each node count (no training, one "
      "process): step time, exposed communication, TFLOP/s and memory per device, bytes per level.");
  add_simulation_options(*c, st->flags);
  c->add_option("--nodes", st->nodes, "node counts, comma-separated (e.g. 1,2,4,8)")->capture_default_str()->group("cluster");
  c->add_option("--plan", st->plans,
                "plans separated by ';', or by ',' between presets (a key=value item belongs to the plan before it)")
      ->capture_default_str()->group("plan");
  c->add_option("--prefetch", st->prefetch, "stages whose gathers start before the current one computes")
      ->capture_default_str()->group("executor");
  c->add_option("--timeline", st->timeline, "write the simulated timelines to this Chrome trace file")->group("output");
  c->add_flag("--force", st->force,
              "replace the --timeline file even when it is not an earlier Strata timeline, an input or in a checkpoint")
      ->group("output");
  c->callback([st]() { run_single_process([&] { run_simulate(*st); }); });
}

}  // namespace strata
