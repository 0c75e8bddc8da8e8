// The sharding engine's reports: its description, the plan report's inputs, the memory it
// measured, the overlap it reached and its timeline.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/plan_report.hpp"
#include "engine/sharded_engine.hpp"

namespace strata {

MeasuredMemory ShardedEngine::measured_memory() const {
  MeasuredMemory m;
  for (const auto& u : units_) {
    m.weights += u->primary.size();
    m.grads += u->grad_shard.size() * sizeof(float);
    m.optimizer += (u->master.size() + u->m.size() + u->v.size()) * sizeof(float);
  }
  m.scheduled_peak = scheduled_.peak_bytes();
  m.scheduled_peak_by_kind = ledger_.peak_by_kind();
  m.scratch_peak = scratch_.peak_bytes();
  return m;
}

MemoryPrediction ShardedEngine::predicted_memory(std::uint64_t fixed) const {
  return predict_memory(schedule_, counts_, gpt_.config(), gpt_.batch(), gpt_.seq_len(), fixed);
}

std::uint64_t ShardedEngine::allocated_peak_bytes() const {
  const MeasuredMemory m = measured_memory();
  return m.weights + m.grads + m.optimizer + m.scheduled_peak + m.scratch_peak + gpt_.allocated_activation_bytes();
}

std::string ShardedEngine::overlap_mode() const {
  if (!options_.overlap_auto_reason.empty()) return "auto: " + options_.overlap_auto_reason;
  if (!options_.overlap) return "off";
  const std::string now = comm_thread_->threaded() ? "communication thread" : "inline";
  if (!options_.tune_overlap) return "on (" + now + ")";
  if (tuner_.deciding()) return "auto (measuring the communication thread against inline; now " + now + ")";
  return "auto: " + tuner_.verdict();
}

OverlapStats ShardedEngine::overlap_stats() const {
  return {comm_thread_->busy_seconds(), comm_thread_->exposed_seconds(), comm_thread_->tasks_run()};
}

nlohmann::json ShardedEngine::timeline() const {
  return timeline_.chrome_trace(comm_.rank(), comm_thread_->spans(), options_.overlap);
}

std::string ShardedEngine::description() const {
  const Topology& t = comm_.topology();
  const std::string bound =
      options_.max_live_bytes == 0 ? "" : fmt::format(" (at most {} gathered bytes)", options_.max_live_bytes);
  const std::string recompute =
      options_.activation_checkpointing.enabled()
          ? " | activation checkpointing " + activation_checkpointing_name(options_.activation_checkpointing)
          : std::string();
  return fmt::format("sharded | topology {} | plan {}: {} | {} | prefetch {}{} | overlap {} | boundary overlap {}{}",
                     t.to_string(), options_.plan.name, options_.plan.describe(t), dtype_name(options_.weight_dtype),
                     options_.prefetch, bound, overlap_mode(), options_.boundary_overlap ? "on" : "off", recompute);
}

std::string ShardedEngine::timeline_json() const { return timeline().dump(); }

nlohmann::json ShardedEngine::traffic_totals() {
  flush();
  return job_traffic_totals(comm_);
}

PlanReportInputs ShardedEngine::report_inputs() const {
  PlanReportInputs in;
  in.topology = &comm_.topology();
  in.step = &options_;
  in.schedule = &schedule_;
  in.counts = &counts_;
  in.memory = measured_memory();
  in.predicted = predicted_memory(0);
  in.meter = &comm_.meter();
  in.steps_run = steps_run_;
  return in;
}

std::string ShardedEngine::report() {
  flush();
  std::string out = format_plan_report(plan_report(report_inputs()));
  const OverlapStats o = overlap_stats();
  if (o.collectives > 0) {
    out += fmt::format(
        "communication (this rank): {:.3f} s in {} collectives, of which compute waited {:.3f} s: {:.0f}% hidden "
        "(overlap {})\n",
        o.communication_s, o.collectives, o.exposed_s, 100.0 * o.hidden_fraction(), overlap_mode());
  }
  return out;
}

}  // namespace strata
