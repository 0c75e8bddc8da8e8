// Engine set-up from the run's settings.
#include "train/engine_setup.hpp"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "comm/mpi/mpi_communicator.hpp"
#include "comm/mpi/mpi_runtime.hpp"
#include "comm/mpi/node_check.hpp"
#include "core/error.hpp"
#include "core/threads.hpp"
#include "engine/local_engine.hpp"
#include "engine/sharded_engine.hpp"
#include "schedule/step_schedule.hpp"

namespace strata {

namespace {

// --threads 0: OMP_NUM_THREADS when set; otherwise the host's cores shared among the ranks on
// it, so eight ranks on one machine do not each start a thread per core.
// Collective under MPI on every rank, whatever its environment says, so ranks with and without
// OMP_NUM_THREADS make the same calls.
int default_thread_count() {
  if (!MpiRuntime::initialized()) return 0;
  const int ranks_here = MpiRuntime::ranks_on_this_host();
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return 0;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, ranks_here));
}

}  // namespace

EngineSetup plan_engine(const TrainConfig& config, int world) {
  EngineSetup setup;
  STRATA_REQUIRE(!config.sharded(world) || MpiRuntime::initialized(),
                 "the sharding engine needs MPI; run it through the strata command (mpirun -np N strata train ...)");
  if (!config.sharded(world)) return setup;
  setup.topology = std::make_unique<Topology>(Topology::parse(config.topology, world));
  const PlanResolution resolved =
      resolve_plan(ShardPlan::parse(config.plan == "auto" ? "hier3" : config.plan, *setup.topology), *setup.topology);
  setup.plan = resolved.plan;
  if (!resolved.note.empty()) setup.notes.push_back(resolved.note);
  if (config.max_live_bytes > 0) {
    // The bound is checked by the schedule builder; building one here refuses a bound below the
    // largest unit before any collective, once for all ranks, not as a mid-run abort on each.
    const ModelLayout layout(config.model_config());
    ScheduleInputs in;
    in.layout = &layout;
    in.topology = setup.topology.get();
    in.plan = setup.plan;
    in.weight_dtype = in.grad_dtype = config.dtype == "bf16" ? DType::kBF16 : DType::kF32;
    in.prefetch = config.prefetch;
    in.max_live_bytes = static_cast<std::uint64_t>(config.max_live_bytes);
    build_step_schedule(in);
  }
  return setup;
}

void connect_engine(EngineSetup& setup, const TrainConfig& config) {
  set_thread_count(config.threads > 0 ? config.threads : default_thread_count());
  const GptConfig model = config.model_config();
  const auto seed = static_cast<std::uint64_t>(config.seed);
  if (!setup.topology) {
    setup.engine = std::make_unique<LocalEngine>(model, config.batch_size, config.resolved_seq_len(), seed);
    return;
  }
  ShardedEngineOptions options;
  options.plan = setup.plan;
  options.weight_dtype = options.grad_dtype = config.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  options.prefetch = config.prefetch;
  options.max_live_bytes = static_cast<std::uint64_t>(config.max_live_bytes);
  options.overlap = config.overlap != 0;
  options.record_timeline = !config.timeline.empty();
  options.grad_accum = config.grad_accum;
  setup.comm = std::make_unique<MpiCommunicator>(*setup.topology);
  const std::string nodes = describe_declared_nodes(*setup.topology);
  if (!nodes.empty()) setup.notes.push_back(nodes);
  setup.engine = std::make_unique<ShardedEngine>(model, config.batch_size, config.resolved_seq_len(), seed, *setup.comm,
                                                 options);
}

}  // namespace strata
