// The flags `strata simulate` and `strata plan` share: cluster, model, batch, dtype and the
// executor's options, resolved into the simulator's inputs with every bad value refused.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "core/format_units.hpp"

#include "sim/simulator.hpp"

namespace strata {

struct SimulationFlags {
  std::string cluster = "frontier";
  std::string model = "gpt-20b";
  int seq_len = 0;
  int micro_batch = 1;
  long long global_batch = 0;
  int grad_accum = 0;
  std::string dtype;  // empty: the cluster's
  int overlap = 1;
  std::string activation_checkpointing = "none";  // none, blocks or every:K
  std::string max_live_bytes = "0";
  std::string engine = "strata";  // engine profiles (sim/engine_profile), comma-separated for simulate
};

void add_simulation_options(CLI::App& command, SimulationFlags& flags);

// Everything but the plan and the prefetch depth, for a run on `ranks` ranks.
SimulationInputs simulation_inputs(const SimulationFlags& flags, const ClusterModel& cluster, int ranks);

// "strata,deepspeed": each a known engine profile, none twice.
std::vector<std::string> parse_engine_list(const std::string& text);
// "1,2,4,8"; each a positive integer.
std::vector<int> parse_int_list(const std::string& text, const std::string& what, int minimum = 1);
// Plans separated by ';', or by ',' between presets: a key=value item belongs to the plan before
// it ("zero3,hier3,quant_weights=int8" is zero3 and hier3 with int8 weights).
std::vector<std::string> split_plan_list(const std::string& text);

// The one-line description of a cluster and a model for the head of a table.
std::string describe_cluster(const ClusterModel& cluster);
std::string describe_model(const SimulationInputs& in, int ranks);

// Bytes as decimal gigabytes, the unit of the tables.
inline double gb(std::uint64_t bytes) { return static_cast<double>(bytes) / 1e9; }

// Runs a command's body on rank 0 (the others wait), turning a strata::Error into the usage
// exit with the sentence on stderr.
void run_single_process(const std::function<void()>& body);

}  // namespace strata
