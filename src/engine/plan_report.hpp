// The report a sharded run prints at its end (and --report prints instead of training): per
// resident state its level, span and bytes per rank; the peak of the buffers the schedule
// allocates; per level the bytes one step sends, per micro-batch and at the boundary. Every
// figure comes from the counting executor's replay of the schedule, beside what this rank
// measured (allocated buffers, the traffic meter) when steps have run. Plain data in, so the
// engine includes this and not the other way round.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "comm/communicator.hpp"
#include "comm/traffic_meter.hpp"
#include "schedule/counting_executor.hpp"
#include "schedule/memory_model.hpp"
#include "schedule/step_schedule.hpp"

namespace strata {

struct MeasuredMemory {
  std::uint64_t weights = 0;
  std::uint64_t grads = 0;
  std::uint64_t optimizer = 0;
  // Buffers the schedule allocates (gathered units, secondary copies, unit gradients): the peak
  // of all together and of each kind, from the sizes of the buffers actually held.
  std::uint64_t scheduled_peak = 0;
  std::array<std::uint64_t, ScheduleCounts::kBuffers> scheduled_peak_by_kind{};
  std::uint64_t scratch_peak = 0;  // collective staging (narrowed copies, received pieces)
};

struct PlanReportInputs {
  const Topology* topology = nullptr;
  const StepOptions* step = nullptr;      // plan, dtypes, accumulation
  const StepSchedule* schedule = nullptr;
  const ScheduleCounts* counts = nullptr;  // the counting executor's replay of one step
  MeasuredMemory memory;
  MemoryPrediction predicted;  // the memory model's figures (its fixed part left out: 0)
  const TrafficMeter* meter = nullptr;
  int steps_run = 0;  // measured steps (the meter's total is divided by them)
};

// Per optimizer step of the schedule (its grad_accum micro-batches).
nlohmann::json plan_report(const PlanReportInputs& in);
std::string format_plan_report(const nlohmann::json& report);

// Collective: the meters of every rank summed since the engine started: per level the bytes
// sent and received and the calls, and for the outermost level the bytes each node's ranks sent
// and received (node n: the ranks whose outermost coordinate is n), which is what crosses that
// node's network link; plus the control reductions' bytes. Integers, exact below 2^53.
nlohmann::json job_traffic_totals(Communicator& comm);

}  // namespace strata
