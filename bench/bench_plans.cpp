// strata_bench plans: under mpirun, trains a few steps of each plan in turn on one virtual
// topology and prints, from rank 0, one JSON line per plan: median ms/step and the measured and
// schedule-counted bytes per level (per micro-batch and per step), with each state's bytes per rank.
#include "bench/bench_plans.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

#include "comm/mpi/mpi_communicator.hpp"
#include "comm/mpi/mpi_runtime.hpp"
#include "core/rng.hpp"
#include "core/median.hpp"
#include "core/stopwatch.hpp"
#include "train/train_step.hpp"
#include "engine/plan_report.hpp"
#include "engine/sharded_engine.hpp"
#include "sim/simulator.hpp"
#include "core/threads.hpp"
#include "train/engine_setup.hpp"

namespace strata {

void bench_overlap(const OverlapBenchSettings& s) {
  const Topology topology = Topology::parse("flat", MpiRuntime::world_size());
  for (const std::string& model : s.models) {
    const GptConfig config = GptConfig::preset(model);
    for (bool overlap : {false, true}) {
      MpiCommunicator comm(topology);
      ShardedEngineOptions options;
      options.plan = ShardPlan::parse(s.plan, topology);
      options.overlap = overlap;
      ShardedEngine engine(config, s.batch, s.seq_len, 1, comm, options);
      // The engine's totals include the warm-up: the figures are the difference over the timed steps.
      if (s.warmup > 0) median_step_seconds(engine, comm, config.vocab_size, s.batch, s.seq_len, 1, s.warmup, 0);
      const OverlapStats before = engine.overlap_stats();
      const double ms = 1e3 * median_step_seconds(engine, comm, config.vocab_size, s.batch, s.seq_len, 1, s.steps, 0);
      const OverlapStats after = engine.overlap_stats();
      const double comm_ms = (after.communication_s - before.communication_s) * 1e3 / s.steps;
      const double exposed_ms = (after.exposed_s - before.exposed_s) * 1e3 / s.steps;
      nlohmann::json line = {{"bench", "overlap"}, {"model", model}, {"plan", s.plan},
                             {"world_size", comm.world_size()}, {"batch_per_rank", s.batch}, {"seq_len", s.seq_len},
                             {"overlap", overlap}, {"median_ms", ms}, {"comm_ms_per_step", comm_ms},
                             {"exposed_ms_per_step", exposed_ms},
                             {"hidden_fraction", comm_ms > 0 ? 1.0 - exposed_ms / comm_ms : 0.0},
                             {"compute_threads", 1}};
      if (comm.rank() == 0) fmt::print("{}\n", line.dump());
    }
  }
}

void bench_plans(const PlanBenchSettings& s) {
  GptConfig config = GptConfig::preset(s.model);
  if (s.vocab > 0) config.vocab_size = s.vocab;
  const Topology topology = Topology::parse(s.topology, MpiRuntime::world_size());
  const DType dtype = s.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  for (const std::string& name : s.plans) {
    MpiCommunicator comm(topology);
    ShardedEngineOptions options;
    options.plan = ShardPlan::parse(name, topology);
    options.weight_dtype = options.grad_dtype = dtype;
    options.grad_accum = s.grad_accum;
    options.overlap = s.overlap != "off" && s.overlap != "0";
    options.tune_overlap = s.overlap == "auto";
    resolve_auto_overlap(options, thread_count(), MpiRuntime::ranks_on_this_host());
    options.boundary_overlap = s.boundary_overlap;
    ShardedEngine engine(config, s.batch, s.seq_len, 1, comm, options);
    if (s.warmup > 0) median_step_seconds(engine, comm, config.vocab_size, s.batch, s.seq_len, s.grad_accum, s.warmup, 0);
    const OverlapStats before = engine.overlap_stats();
    const double ms = 1e3 * median_step_seconds(engine, comm, config.vocab_size, s.batch, s.seq_len, s.grad_accum, s.steps, 0);
    const OverlapStats after = engine.overlap_stats();
    nlohmann::json report = plan_report(engine.report_inputs());
    report["bench"] = "plans";
    report["model"] = s.model;
    report["batch_per_rank"] = s.batch;
    report["seq_len"] = s.seq_len;
    report["median_ms"] = ms;
    report["overlap"] = s.overlap;
    report["overlap_mode"] = engine.overlap_mode();
    report["boundary_overlap"] = s.boundary_overlap;
    // This rank's mean exposed communication per measured step (compute waiting on collectives).
    report["exposed_ms"] = (after.exposed_s - before.exposed_s) * 1e3 / s.steps;
    if (!s.cluster.empty() && comm.rank() == 0) {
      // The engine's own list, priced on the calibrated cluster of the same shape.
      const ClusterModel cluster = ClusterModel::load(s.cluster);
      const Topology simulated = cluster.topology(topology.world_size() / cluster.ranks_per_node());
      SimulationInputs in;
      in.model = config;
      in.plan = options.plan;
      in.micro_batch = s.batch;
      in.seq_len = s.seq_len;
      in.grad_accum = s.grad_accum;
      in.weight_dtype = in.grad_dtype = dtype;
      in.overlap = options.overlap;  // as resolved (auto: inline where no core is free)
      in.boundary_overlap = s.boundary_overlap;
      const CostModel cost(simulated, cluster.device, cluster.curves());
      const SimulationResult r = replay_schedule(engine.schedule(), in, cost);
      report["simulated_ms"] = r.step_seconds * 1e3;
      report["simulated_exposed_ms"] = r.exposed_seconds * 1e3;
      report["simulated_compute_ms"] = r.compute_seconds * 1e3;
      report["cluster"] = s.cluster;
      report["bench"] = "simulate";  // its own table: measured beside simulated
    }
    if (comm.rank() == 0) fmt::print("{}\n", report.dump());
  }
}

}  // namespace strata
