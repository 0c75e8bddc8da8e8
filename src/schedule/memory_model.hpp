// The memory one rank holds at its peak, by category, predicted from the step schedule the
// engine runs: resident shards, the schedule's buffers (gathered units, secondary copies, unit
// gradients, from the counting executor), collective staging, the model's activations for one
// micro-batch (with the recompute's shared block), and the process's fixed part (program, MPI,
// threads, allocator), which `strata calibrate` measures. `strata plan`, `--report`, `--plan
// auto` and the end of `strata train` all read this one figure.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "model/gpt_config.hpp"
#include "schedule/counting_executor.hpp"
#include "schedule/step_schedule.hpp"

namespace strata {

struct MemoryPrediction {
  std::uint64_t weights = 0, grads = 0, optimizer = 0;  // resident shards
  std::uint64_t scheduled = 0;    // the schedule's buffers together, at their peak
  std::uint64_t staging = 0;      // collective staging at its peak
  std::uint64_t staging_pooled = 0;  // the engine's pooled part of it, at its own peak (not added)
  // Schedule buffers and staging together (schedule/counting_executor: the pools' peaks held
  // together, or the joint peak with the primitives' own staging): what the total counts.
  std::uint64_t scheduled_with_staging = 0;
  std::uint64_t activations = 0;  // one micro-batch's (kept blocks, recomputed block, head, logits)
  std::uint64_t fixed = 0;        // the process itself
  std::uint64_t engine() const { return weights + grads + optimizer + scheduled_with_staging; }
  // What the engine's own buffers and the model's activations come to, as the engine counts its
  // allocations (the level primitives' internal staging is theirs, not the engine's).
  std::uint64_t engine_allocated() const { return weights + grads + optimizer + scheduled + staging_pooled + activations; }
  std::uint64_t total() const { return engine() + activations + fixed; }
};

// `counts` is the counting executor's replay of `schedule`; `fixed` the calibrated (or preset)
// fixed part.
MemoryPrediction predict_memory(const StepSchedule& schedule, const ScheduleCounts& counts, const GptConfig& model,
                                int micro_batch, int seq_len, std::uint64_t fixed);

// The reference engine (one process): every state whole in fp32, no schedule; bf16 compute adds
// a bf16 copy of the weights (counted with them).
MemoryPrediction predict_reference_memory(const GptConfig& model, int micro_batch, int seq_len,
                                          const ActivationCheckpointing& checkpointing, bool bf16_working_copy,
                                          std::uint64_t fixed);

// {"weights": bytes, ...,"total": bytes}, and one line "weights 1.2 GB + ... = 3.4 GB".
nlohmann::json memory_json(const MemoryPrediction& m);
std::string format_memory(const MemoryPrediction& m);

}  // namespace strata
