// Engine set-up from the run's settings.
#include "train/engine_setup.hpp"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>

#include <cstdio>
#include <thread>
#include <tuple>

#include "comm/local_communicator.hpp"
#include "core/error.hpp"
#include "core/format_units.hpp"
#include "core/process_memory.hpp"
#include "core/threads.hpp"
#include "engine/local_engine.hpp"
#include "engine/sharded_engine.hpp"
#include "model/cpu/gemm.hpp"
#include "model/gpt.hpp"
#include "schedule/counting_executor.hpp"
#include "schedule/step_schedule.hpp"
#include "hw/cluster_model.hpp"
#include "train/auto_plan.hpp"

namespace strata {

namespace {

// STRATA_INJECT_FAILURE=rank:step, the test hook of a failing rank. Refused when it could not
// fire, so a test of a failure never passes without one.
std::pair<int, int> injected_failure(const TrainConfig& config, int world) {
  const char* inject = std::getenv("STRATA_INJECT_FAILURE");
  if (inject == nullptr) return {-1, -1};
  int rank = -1, step = -1;
  char extra = 0;
  STRATA_REQUIRE(std::sscanf(inject, "%d:%d%c", &rank, &step, &extra) == 2,
                 "STRATA_INJECT_FAILURE must read rank:step (got '{}')", inject);
  STRATA_REQUIRE(config.sharded(world), "STRATA_INJECT_FAILURE={} needs the sharding engine (give --plan, or run "
                 "under mpirun): the one-process reference engine has no collective to fail in", inject);
  STRATA_REQUIRE(rank >= 0 && rank < world, "STRATA_INJECT_FAILURE={} names rank {}, and the job has ranks 0 .. {}",
                 inject, rank, world - 1);
  STRATA_REQUIRE(step >= 0 && step < config.steps, "STRATA_INJECT_FAILURE={} names step {} (0-based), and the run has "
                 "steps 0 .. {}", inject, step, config.steps - 1);
  return {rank, step};
}

}  // namespace

void resolve_auto_overlap(ShardedEngineOptions& o, int compute_threads, int ranks_on_host) {
  if (!o.tune_overlap || spare_core_for_communication(compute_threads, ranks_on_host)) return;
  o.overlap = o.tune_overlap = false;
  o.overlap_auto_reason = fmt::format(
      "inline: no hardware thread free for a communication thread ({} ranks on this host x ({} compute + 1), {} "
      "hardware threads, {} usable by this rank)",
      ranks_on_host, compute_threads, host_hardware_threads(), usable_hardware_threads());
}

void check_injected_failure_runs(const TrainConfig& config, int first_step) {
  const char* inject = std::getenv("STRATA_INJECT_FAILURE");
  if (inject == nullptr) return;
  int rank = -1, step = -1;
  if (std::sscanf(inject, "%d:%d", &rank, &step) != 2) return;  // refused already, when the engine was planned
  const int end = config.stop_after > 0 ? std::min(config.steps, first_step + config.stop_after) : config.steps;
  STRATA_REQUIRE(step >= first_step && step < end,
                 "STRATA_INJECT_FAILURE={} names step {} (0-based), and this run takes steps {} .. {}{}{}: it would "
                 "never fire", inject, step, first_step, end - 1, first_step > 0 ? " (resumed after step " : "",
                 first_step > 0 ? fmt::format("{})", first_step) : "");
}

namespace {

// This machine's memory and swap, in bytes (0 when unknown).
std::uint64_t machine_memory_bytes() { return host_memory_bytes() + host_swap_bytes(); }

// Refuses, before anything is allocated, a run one rank of which could not hold its states and
// activations even with all of this machine's memory and swap: a sentence instead of
// std::bad_alloc after minutes of paging.
void require_memory_fits(const TrainConfig& config, std::uint64_t states, const std::string& states_what) {
  const std::uint64_t available = machine_memory_bytes();
  if (available == 0) return;
  const GptConfig model = config.model_config();
  const int seq = config.resolved_seq_len();
  const std::uint64_t activations = Gpt::activation_bytes(model, config.batch_size, seq)
                                        .total(model.n_layer, parse_activation_checkpointing(config.activation_checkpointing));
  // The built-in corpus is generated as text, then held as 4-byte tokens.
  const std::uint64_t corpus = config.data == "builtin" ? static_cast<std::uint64_t>(config.builtin_bytes) * 5 : 0;
  const double total = static_cast<double>(states) + static_cast<double>(activations) + static_cast<double>(corpus);
  STRATA_REQUIRE(total <= static_cast<double>(available),
                 "model '{}' (L{} C{} vocab {}, {:.4g} parameters) at micro-batch {} x {} needs about {} on each rank "
                 "({} for {}, {} of activations{}), more than this machine's {} of memory and swap: choose a smaller "
                 "model, micro-batch or sequence, or a plan that partitions more",
                 model.name, model.n_layer, model.n_embd, model.vocab_size,
                 static_cast<double>(model.parameter_count()), config.batch_size, seq, format_bytes(total),
                 format_bytes(static_cast<double>(states)), states_what, format_bytes(static_cast<double>(activations)),
                 corpus > 0 ? fmt::format(", {} for the built-in corpus", format_bytes(static_cast<double>(corpus))) : "",
                 format_bytes(static_cast<double>(available)));
}

}  // namespace

Topology resolve_topology(const std::string& spec, int world) {
  return Topology::parse(expand_topology_preset(spec), world);
}

int worker_threads(int threads_flag, int ranks_on_host) {
  if (threads_flag > 0) return threads_flag;
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return 0;  // OpenMP's own reading of it
  // Eight ranks on one machine must not each start a thread per core.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, ranks_on_host));
}

EngineSetup plan_engine(const TrainConfig& config, int world, int ranks_on_host) {
  EngineSetup setup;
  const auto [fail_rank, fail_step] = injected_failure(config, world);
  if (!config.sharded(world)) {
    // The reference engine holds weights, gradients and both moments whole, in fp32.
    const auto states = static_cast<std::uint64_t>(config.model_config().stored_parameter_count()) * 16;
    require_memory_fits(config, states, "weights, gradients and the Adam moments");
    return setup;
  }
  setup.topology = std::make_unique<Topology>(resolve_topology(config.topology, world));
  ShardPlan plan;
  if (config.plan == "auto") {
    const double budget =
        config.memory_budget.empty() ? default_memory_budget(ranks_on_host) : parse_byte_size(config.memory_budget, "memory-budget");
    const auto host = static_cast<double>(host_memory_bytes());
    if (host > 0.0 && budget * ranks_on_host > host) {
      setup.notes.push_back(fmt::format("warning: a memory budget of {} per rank for {} rank{} on this host is more than "
                                        "its {} of memory: a plan chosen for it may swap or be killed",
                                        format_bytes(budget), ranks_on_host, ranks_on_host == 1 ? "" : "s",
                                        format_bytes(host)));
    }
    AutoPlanChoice choice = choose_plan(config, *setup.topology, budget);
    plan = choice.plan;
    setup.notes.insert(setup.notes.end(), choice.lines.begin(), choice.lines.end());
  } else {
    plan = ShardPlan::parse(config.plan, *setup.topology);
  }
  const PlanResolution resolved = resolve_plan(plan, *setup.topology);
  if (!resolved.note.empty()) setup.notes.push_back(resolved.note);
  ShardedEngineOptions& o = setup.options;
  o.plan = resolved.plan;
  o.grad_accum = config.grad_accum;
  o.weight_dtype = o.grad_dtype = config.dtype == "bf16" ? DType::kBF16 : DType::kF32;
  o.prefetch = config.prefetch;
  o.max_live_bytes = static_cast<std::uint64_t>(config.max_live_bytes);
  o.overlap = config.overlap != "off" && config.overlap != "0";
  o.tune_overlap = config.overlap == "auto";
  o.boundary_overlap = config.boundary_overlap != 0;
  o.activation_checkpointing = parse_activation_checkpointing(config.activation_checkpointing);
  o.record_timeline = !config.timeline.empty();
  o.fail_rank = fail_rank;
  o.fail_step = fail_step;
  // The engine's own schedule, built here once, locally: the live-memory bound is checked by the
  // builder (a bound below the largest unit is refused for all ranks, not as a mid-run abort on
  // each), and its resident states and buffer peaks are what a rank will allocate.
  const ModelLayout layout(config.model_config());
  const StepSchedule schedule =
      build_step_schedule(schedule_inputs(layout, *setup.topology, o, config.batch_size, config.resolved_seq_len()));
  std::uint64_t states = count_schedule(schedule, *setup.topology).peak_live_bytes;
  for (const ResidentState& s : schedule.resident) states += s.bytes;
  require_memory_fits(config, states, fmt::format("plan {}'s shards and gathered units", o.plan.name));
  return setup;
}

void connect_engine(EngineSetup& setup, const TrainConfig& config, const CommunicatorFactory& make_comm,
                    int ranks_on_host) {
  set_thread_count(worker_threads(config.threads, ranks_on_host));
  cpu::set_matmul(cpu::matmul_settings_from(config.matmul, config.compute_dtype));
  if (setup.sharded()) resolve_auto_overlap(setup.options, thread_count(), ranks_on_host);
  const GptConfig model = config.model_config();
  const auto seed = static_cast<std::uint64_t>(config.seed);
  if (!setup.sharded()) {
    setup.comm = std::make_unique<LocalCommunicator>();
    setup.engine = std::make_unique<LocalEngine>(model, config.batch_size, config.resolved_seq_len(), seed,
                                                 parse_activation_checkpointing(config.activation_checkpointing));
    return;
  }
  STRATA_REQUIRE(make_comm, "the sharding engine needs MPI; run it through the strata command (mpirun -np N strata "
                 "train ...)");
  setup.comm = make_comm(*setup.topology);
  setup.engine = std::make_unique<ShardedEngine>(model, config.batch_size, config.resolved_seq_len(), seed, *setup.comm,
                                                 setup.options);
}

}  // namespace strata
