// strata_bench plans: under mpirun, trains a few steps of each plan in turn on one virtual
// topology and prints, from rank 0, one JSON line per plan: median ms/step and the measured and
// schedule-counted bytes per level (per micro-batch and per step), with each state's bytes per rank.
#include "bench/bench_plans.hpp"

#include <fmt/format.h>

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

namespace strata {

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
    ShardedEngine engine(config, s.batch, s.seq_len, 1, comm, options);
    const std::size_t n = static_cast<std::size_t>(s.batch) * s.seq_len;
    std::vector<std::int32_t> in(n), tgt(n);
    Rng rng(static_cast<std::uint64_t>(comm.rank()) + 1);
    const StepRecipe recipe{LrSchedule{1e-4, 0, s.steps + s.warmup, 1.0}, AdamWHyper{}, 1.0, s.grad_accum};
    auto fill = [&](int, std::span<std::int32_t> a, std::span<std::int32_t> b) {
      for (auto& x : a) x = static_cast<std::int32_t>(rng.below(config.vocab_size));
      for (auto& x : b) x = static_cast<std::int32_t>(rng.below(config.vocab_size));
    };
    std::vector<double> ms;
    for (int step = 0; step < s.warmup + s.steps; ++step) {
      comm.barrier();
      Stopwatch watch;
      train_step(engine, recipe, step, fill, in, tgt);
      comm.barrier();
      if (step >= s.warmup) ms.push_back(watch.milliseconds());
    }
    nlohmann::json report = plan_report(engine);
    report["bench"] = "plans";
    report["model"] = s.model;
    report["batch_per_rank"] = s.batch;
    report["seq_len"] = s.seq_len;
    report["median_ms"] = median(ms);
    if (comm.rank() == 0) fmt::print("{}\n", report.dump());
  }
}

}  // namespace strata
