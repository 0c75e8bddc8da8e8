// `strata train`: parse, merge the config file under the flags, print the resolved settings, run.
// Under MPI the set-up is agreed on by all ranks before any collective call, so a bad setting
// or a missing file on one rank ends the job with the reason instead of a hang.
#include "cli/train_command.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <cmath>
#include <sstream>

#include <iostream>
#include <string>

#include "core/exit_codes.hpp"
#include "cli/train_options.hpp"
#include "comm/agreement.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "comm/mpi/mpi_runtime.hpp"
#include "comm/mpi/node_check.hpp"
#include "comm/mpi/topology_detection.hpp"
#include "comm/mpi/mpi_watchdog.hpp"
#include "core/error.hpp"
#include "train/auto_plan.hpp"
#include "train/engine_setup.hpp"
#include "train/trainer.hpp"

namespace strata {

namespace {

struct TrainCommandState {
  TrainConfig config;
  std::string config_file;
  std::string thread_wait = "auto";  // --thread-wait, acted on at start-up
  std::vector<OptionSpec> specs;
};

// The first line where this rank's resolved configuration differs from rank 0's, as a sentence;
// empty when they agree. Collective.
std::string configuration_difference(Communicator& job, const std::string& mine) {
  if (all_equal(job, XXH3_64bits(mine.data(), mine.size()))) return "";
  const std::string root = text_of_rank0(job, mine);
  if (root == mine) return "";
  std::istringstream a(mine), b(root);
  std::string group, la, lb;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, la)), more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a && !more_b) return "";
    if (la.rfind('[', 0) == 0) group = la;
    if (la != lb) {
      const std::string key = la.substr(0, la.find(" = "));
      return fmt::format("rank {} was started with other settings than rank 0: {} '{}' is {} here and {} on rank 0 "
                         "(every rank must run the same configuration)",
                         job.rank(), group, key, la.empty() ? "(missing)" : la.substr(la.find(" = ") + 3),
                         lb.find(" = ") == std::string::npos ? lb : lb.substr(lb.find(" = ") + 3));
    }
  }
}

// --topology auto: replaces the setting with the levels found, and says what it found.
std::vector<std::string> find_topology(TrainConfig& config) {
  const DetectedTopology found = detect_topology();
  std::vector<std::string> notes = found.lines();
  notes.front() += "; bandwidths unknown: give --topology with @bandwidth to compare plans by cost";
  config.topology = found.levels.spec;
  return notes;
}

void run_train(TrainCommandState& state, const CLI::App& command) {
  const int world = MpiRuntime::world_size();
  // From the start: a rank that stopped or left early never leaves the others waiting forever.
  if (world > 1) {
    const double t = state.config.collective_timeout;
    start_mpi_watchdog(std::isfinite(t) && t >= 0.0 ? t : 300.0);
  }
  // Every agreement before the engine exists goes over the whole job.
  MpiCommunicator job(Topology::parse("flat", world));
  std::unique_ptr<Trainer> trainer;
  EngineSetup setup;
  std::string problem;
  try {
    if (!state.config_file.empty()) apply_config_file(state.config_file, state.specs, command);
    state.config.validate();
    state.config.resolve_defaults();
  } catch (const std::exception& e) {  // strata::Error, and std::bad_alloc or the like
    problem = e.what();
  }
  exit_if_any_failed(job, problem, kExitUsage);
  // Ranks launched with different flags or files (an MPMD launch) would go on until a collective
  // failed to match: they agree on one configuration first.
  if (world > 1) exit_if_any_failed(job, configuration_difference(job, options_as_toml(state.specs)), kExitUsage);
  std::vector<std::string> found_notes;
  try {
    // Collective: only once every rank has said "auto" alike. The levels found stand in the
    // resolved configuration (and the checkpoint) as the explicit spec a user could give.
    if (state.config.topology == "auto") found_notes = find_topology(state.config);
    const int ranks_here = MpiRuntime::ranks_on_this_host();
    if (state.config.plan == "auto" && state.config.memory_budget.empty() && world > 1) {
      // The default budget follows each host's available memory: the ranks take the smallest,
      // so all choose the same plan.
      double budget = -default_memory_budget(ranks_here);
      job.all_reduce_control(&budget, 1, 0, 0, ControlOp::kMax);
      state.config.memory_budget = fmt::format("{:.0f}", -budget);
    }
    setup = plan_engine(state.config, world, ranks_here);
    trainer = std::make_unique<Trainer>(state.config, job.rank(), world);
  } catch (const std::exception& e) {
    problem = e.what();
  }
  exit_if_any_failed(job, problem, kExitUsage);
  if (world > 1 && setup.sharded()) {
    // Every rank chose its plan alone (--plan auto): they must have chosen the same one.
    const std::string chosen = setup.options.plan.spec(*setup.topology);
    if (!all_equal(job, XXH3_64bits(chosen.data(), chosen.size()))) {
      problem = fmt::format("rank {} chose plan {}, and rank 0 {}: every rank must run the same plan", job.rank(), chosen,
                            text_of_rank0(job, chosen));
    }
    exit_if_any_failed(job, problem, kExitUsage);
  }
  setup.notes.insert(setup.notes.begin(), found_notes.begin(), found_notes.end());
  if (job.rank() == 0) {
    fmt::print("resolved configuration (TOML, reusable with --config):\n{}\n", options_as_toml(state.specs));
  }
  // From here ranks make collective calls: a failure on one must end them all at once, before
  // the trainer's destructors could wait on collectives the peers will never join.
  try {
    if (world > 1) start_mpi_watchdog(state.config.collective_timeout);  // the value agreed on
    const int ranks_here = MpiRuntime::ranks_on_this_host();
    connect_engine(
        setup, state.config,
        [](const Topology& topology) { return std::make_unique<MpiCommunicator>(topology); }, ranks_here);
    if (setup.sharded()) {
      if (const std::string nodes = describe_declared_nodes(*setup.topology); !nodes.empty()) setup.notes.push_back(nodes);
    }
    trainer->run(*setup.engine, *setup.comm, std::cout, setup.notes);
  } catch (const std::exception& e) {
    MpiRuntime::abort(e.what(), kExitFailure);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto state = std::make_shared<TrainCommandState>();
  state->specs = train_option_specs(state->config);
  CLI::App* train = app.add_subcommand(
      "train",
      "Train a GPT-2 model. With no flags: the tiny model on the built-in corpus for 1000 steps (seconds on 2 cores).\n"
      "Every flag is also a key of the optional TOML file given with --config (flags win).\n"
      "Under mpirun the ranks are data-parallel replicas partitioned by --topology and --plan.");
  train->add_option("--config", state->config_file, "TOML file of settings; keys are the flag names below")
      ->check(CLI::ExistingFile);
  register_options(*train, state->specs);
  // Read at start-up, before the OpenMP runtime's threads exist (cli/thread_wait_startup); here it
  // is only checked and documented.
  train->add_option("--thread-wait", state->thread_wait,
                    "how idle worker threads wait between parallel regions: spin, passive (sleep) or auto "
                    "(passive where this job's threads or the work already running leave no core free for "
                    "them; a set OMP_WAIT_POLICY or GOMP_SPINCOUNT wins)")
      ->check(CLI::IsMember({"auto", "spin", "passive"}))
      ->capture_default_str();
  train->callback([state, train]() { run_train(*state, *train); });
}

}  // namespace strata
