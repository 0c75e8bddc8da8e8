// Building the engine a run asks for, out of the training loop: the topology and plan parsed and
// resolved from the settings (local work, so every rank can refuse a bad setting alike), then the
// communicator and the engine (collective). The trainer is handed both. No MPI here: the command
// line makes the communicator (comm/mpi) and hands a factory in.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "engine/sharded_engine.hpp"
#include "engine/training_engine.hpp"
#include "topo/topology.hpp"
#include "train/train_config.hpp"

namespace strata {

struct EngineSetup {
  std::unique_ptr<Topology> topology;  // set when the run is sharded
  ShardedEngineOptions options;        // the resolved plan and every setting of the sharded engine
  std::vector<std::string> notes;      // lines for the run's header (what the plan became, node check)
  std::unique_ptr<Communicator> comm;  // the engine's (one rank's own for the reference engine)
  std::unique_ptr<TrainingEngine> engine;
  bool sharded() const { return topology != nullptr; }
};

// The run's topology: a cluster preset's levels (frontier, dgx-a100, dgx-h100, cpu; dgx is
// dgx-a100), "flat", or levels written out.
Topology resolve_topology(const std::string& spec, int world);

// Local: no collective call. `world` is the job's rank count, `ranks_on_host` how many share this
// host (for --plan auto's default budget). Refuses, before anything is allocated, a run that one
// rank could not hold.
EngineSetup plan_engine(const TrainConfig& config, int world, int ranks_on_host = 1);

using CommunicatorFactory = std::function<std::unique_ptr<Communicator>(const Topology&)>;

// The worker threads a rank computes with: --threads, else OMP_NUM_THREADS when set, else the
// host's cores shared among the ranks on it.
int worker_threads(int threads_flag, int ranks_on_host);

// --overlap auto before the first step: where the host has no hardware thread for a communication
// thread beside each rank's compute threads, inline at once (and the engine says why); elsewhere
// the options are left to the engine's trial.
void resolve_auto_overlap(ShardedEngineOptions& options, int compute_threads, int ranks_on_host);

// STRATA_INJECT_FAILURE's step must be one this run takes (after a resume, within --stop-after):
// a test of a failure never passes because the failure could not fire.
void check_injected_failure_runs(const TrainConfig& config, int first_step);

// Collective under MPI: thread count, the communicator (from make_comm for a sharded run), the
// engine.
void connect_engine(EngineSetup& setup, const TrainConfig& config, const CommunicatorFactory& make_comm = {},
                    int ranks_on_host = 1);

}  // namespace strata
