// The predicted peak, from the schedule's resident states and counted peaks and the model's activations.
#include "schedule/memory_model.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/format_units.hpp"
#include "model/gpt.hpp"

namespace strata {

MemoryPrediction predict_memory(const StepSchedule& schedule, const ScheduleCounts& counts, const GptConfig& model,
                                int micro_batch, int seq_len, std::uint64_t fixed) {
  MemoryPrediction m;
  for (const ResidentState& s : schedule.resident) {
    if (s.state == "weights") m.weights = s.bytes;
    if (s.state == "grads") m.grads = s.bytes;
    if (s.state == "optimizer") m.optimizer = s.bytes;
  }
  m.scheduled = counts.peak_live_bytes;
  m.staging = counts.staging_peak_bytes;
  m.staging_pooled = counts.staging_pool_peak_bytes;
  m.scheduled_with_staging = counts.peak_with_staging_bytes;
  m.activations = Gpt::activation_bytes(model, micro_batch, seq_len).total(model.n_layer, schedule.activation_checkpointing);
  m.fixed = fixed;
  return m;
}

MemoryPrediction predict_reference_memory(const GptConfig& model, int micro_batch, int seq_len,
                                          const ActivationCheckpointing& checkpointing, bool bf16_working_copy,
                                          std::uint64_t fixed) {
  MemoryPrediction m;
  const auto whole = static_cast<std::uint64_t>(model.stored_parameter_count()) * sizeof(float);
  m.weights = whole + (bf16_working_copy ? whole / 2 : 0);
  m.grads = whole;
  m.optimizer = 2 * whole;
  m.activations = Gpt::activation_bytes(model, micro_batch, seq_len).total(model.n_layer, checkpointing);
  m.fixed = fixed;
  return m;
}

nlohmann::json memory_json(const MemoryPrediction& m) {
  return {{"weights", m.weights},
          {"grads", m.grads},
          {"optimizer", m.optimizer},
          {"scheduled_buffers", m.scheduled},
          {"staging", m.staging},
          {"staging_pooled", m.staging_pooled},
          {"scheduled_with_staging", m.scheduled_with_staging},
          {"activations", m.activations},
          {"fixed", m.fixed},
          {"engine_allocated", m.engine_allocated()},
          {"total", m.total()}};
}

std::string format_memory(const MemoryPrediction& m) {
  auto b = [](std::uint64_t x) { return format_bytes(static_cast<double>(x)); };
  return fmt::format("weights {} + gradients {} + optimizer {} + schedule buffers and staging {} (peaks {} and {}) + "
                     "activations {} + process {} = {}",
                     b(m.weights), b(m.grads), b(m.optimizer), b(m.scheduled_with_staging), b(m.scheduled), b(m.staging),
                     b(m.activations), b(m.fixed), b(m.total()));
}

}  // namespace strata
