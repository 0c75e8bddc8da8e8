// Building the engine a run asks for, out of the training loop: the topology and plan parsed and
// resolved from the settings (local work, so every rank can refuse a bad setting alike), then the
// communicators and the engine (collective). The trainer is handed the engine.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "engine/training_engine.hpp"
#include "plan/shard_plan.hpp"
#include "topo/topology.hpp"
#include "train/train_config.hpp"

namespace strata {

struct EngineSetup {
  std::unique_ptr<Topology> topology;  // set when the run is sharded
  ShardPlan plan;                      // as resolved for the topology
  std::vector<std::string> notes;      // lines for the run's header (what the plan became, node check)
  std::pair<int, int> injected_failure{-1, -1};  // rank, step of STRATA_INJECT_FAILURE (-1: none)
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<TrainingEngine> engine;
};

// Local: no collective call. `world` is the job's rank count.
EngineSetup plan_engine(const TrainConfig& config, int world);

// Collective under MPI: thread count, communicators, the engine.
void connect_engine(EngineSetup& setup, const TrainConfig& config);

}  // namespace strata
