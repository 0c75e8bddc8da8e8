// Replays the very step schedule the engine executes on a cost model, with the executor's rules:
// ops run in list order on one compute stream; a collective's start posts it to the one
// communication stream (first in, first out, one at a time, as the engine's communication
// thread runs them), its wait holds compute until it is done; a blocking collective waits for
// the stream to drain and for itself. With overlap off, or on a device that cannot compute while
// it communicates, every collective runs inline. Answers step time, exposed communication,
// TFLOP/s, memory per device by state and bytes per level, for any cluster and model size.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"
#include "core/chrome_trace.hpp"
#include "hw/cluster_model.hpp"
#include "sim/cost_model.hpp"
#include "schedule/counting_executor.hpp"
#include "schedule/memory_model.hpp"

namespace strata {

// The step's settings (plan, accumulation, dtypes, prefetch, live bound; bf16 by default, as
// the clusters compute), then the model, the micro-batch and the executor's.
struct SimulationInputs : StepOptions {
  SimulationInputs() { weight_dtype = grad_dtype = DType::kBF16; }
  GptConfig model;
  int micro_batch = 1;  // sequences per rank per micro-batch
  int seq_len = 0;      // 0: the model's context length
  bool overlap = true;
  bool record_timeline = false;
};

// Bytes one device holds, by category (schedule/memory_model), with the schedule's peaks of
// each buffer kind on its own.
struct SimulatedMemory : MemoryPrediction {
  std::uint64_t gathered = 0, secondary = 0, unit_grads = 0;
};

struct SimulationResult {
  double step_seconds = 0.0;
  double compute_seconds = 0.0;        // busy time of the compute stream
  double communication_seconds = 0.0;  // busy time of the communication stream
  double exposed_seconds = 0.0;        // compute waiting for communication
  double model_flops = 0.0;            // per device per step (6N + attention per token; no recompute)
  double hardware_flops = 0.0;         // model_flops plus the recomputed forwards
  double tflops_per_device() const { return step_seconds > 0 ? model_flops / step_seconds / 1e12 : 0.0; }
  ScheduleCounts counts;  // bytes and calls per phase and level, from the counting executor
  SimulatedMemory memory;
  std::size_t ops = 0;
  std::vector<TraceSpan> spans;  // when recorded: lane 0 compute, lane 1 communication
};

// Replays a schedule (the engine's own, or one built by schedule_inputs) on the cost model.
// `in` gives the plan, the model shape and the executor's options.
SimulationResult replay_schedule(const StepSchedule& schedule, const SimulationInputs& in, const CostModel& cost);

// Builds the schedule exactly as the engine does for these inputs and replays it; `curves` are
// the levels' measured transfer curves, if any (ClusterModel::curves).
SimulationResult simulate(const SimulationInputs& in, const Topology& topology, const DeviceModel& device,
                          std::vector<TransferCurve> curves = {});

// The simulated timeline as a Chrome trace of one device.
nlohmann::json simulated_timeline(const SimulationResult& result, const std::string& label);

}  // namespace strata
