// Plan report: the schedule's counts beside the measurements.
#include "engine/plan_report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/format_units.hpp"

#include <algorithm>
#include <vector>

namespace strata {


nlohmann::json plan_report(const PlanReportInputs& in) {
  const Topology& t = *in.topology;
  const ShardPlan& plan = in.step->plan;
  const StepOptions& opt = *in.step;
  const MeasuredMemory& mem = in.memory;
  const ScheduleCounts& counts = *in.counts;
  nlohmann::json r;
  r["plan"] = plan.name;
  r["plan_levels"] = plan.describe(t);
  r["topology"] = t.to_string();
  r["world_size"] = t.world_size();
  r["weight_dtype"] = std::string(dtype_name(opt.weight_dtype));
  r["grad_dtype"] = std::string(dtype_name(opt.grad_dtype));
  r["grad_accum"] = opt.grad_accum;
  r["steps_measured"] = in.steps_run;
  r["schedule_ops"] = in.schedule->ops.size();

  for (const ResidentState& s : in.schedule->resident) {
    const std::uint64_t measured = s.state == "weights" ? mem.weights : s.state == "grads" ? mem.grads : mem.optimizer;
    r["memory"].push_back({{"state", s.state}, {"level", level_label(t, s.level)}, {"span", s.span},
                           {"schedule_bytes", s.bytes}, {"measured_bytes", measured}});
  }
  for (std::size_t k = 0; k < ScheduleCounts::kBuffers; ++k) {
    r["scheduled_buffers"].push_back({{"kind", buffer_kind_name(static_cast<BufferKind>(k))},
                                      {"schedule_peak_bytes", counts.peak_by_kind[k]},
                                      {"measured_peak_bytes", mem.scheduled_peak_by_kind[k]}});
  }
  r["scheduled_peak_bytes"] = counts.peak_live_bytes;
  r["measured_scheduled_peak_bytes"] = mem.scheduled_peak;
  r["collective_scratch_peak_bytes"] = mem.scratch_peak;
  r["predicted_memory"] = memory_json(in.predicted);

  const TrafficMeter& meter = *in.meter;
  const auto steps = static_cast<std::uint64_t>(std::max(1, in.steps_run));
  for (int l = 0; l < t.level_count(); ++l) {
    const auto ll = static_cast<std::size_t>(l);
    const LevelTraffic micro = meter.at(l, TrafficPhase::kMicroBatch);
    const LevelTraffic boundary = meter.at(l, TrafficPhase::kStepBoundary);
    const std::uint64_t schedule_micro = counts.bytes_in(TrafficPhase::kMicroBatch)[ll];
    const std::uint64_t schedule_boundary = counts.bytes_in(TrafficPhase::kStepBoundary)[ll];
    const double bandwidth = t.level(l).bandwidth;
    const double per_step = static_cast<double>(schedule_micro + schedule_boundary);
    r["traffic"].push_back({{"level", t.level(l).name},
                            {"fanout", t.level(l).fanout},
                            {"bandwidth", bandwidth},
                            {"schedule_step_micro_bytes", schedule_micro},
                            {"schedule_step_boundary_bytes", schedule_boundary},
                            {"measured_step_micro_sent", micro.bytes_sent / steps},
                            {"measured_step_micro_received", micro.bytes_received / steps},
                            {"measured_step_boundary_sent", boundary.bytes_sent / steps},
                            {"measured_step_boundary_received", boundary.bytes_received / steps},
                            {"measured_step_calls", (micro.calls + boundary.calls) / steps},
                            {"measured_step_seconds", (micro.seconds + boundary.seconds) / static_cast<double>(steps)},
                            {"ideal_seconds_at_bandwidth", bandwidth > 0 ? per_step / bandwidth : 0.0}});
  }
  r["flops_per_step"] = counts.forward_flops + counts.backward_flops;
  r["recompute_flops_per_step"] = counts.recompute_flops;  // hardware FLOPs beyond the model's
  const LevelTraffic control = meter.control();
  r["control"] = {{"schedule_calls_per_step", counts.control_calls}, {"measured_calls", control.calls},
                  {"measured_bytes", control.bytes_sent}};
  return r;
}

std::string format_plan_report(const nlohmann::json& r) {
  const bool measured = r["steps_measured"].get<int>() > 0;
  auto shown = [&](double bytes) { return measured ? format_bytes(bytes) : std::string("-"); };
  std::string out = fmt::format("plan {}: {} | topology {} ({} ranks) | weights {}, gradients {} | schedule of {} ops | {} "
                                "step(s) measured\n",
                                r["plan"].get<std::string>(), r["plan_levels"].get<std::string>(),
                                r["topology"].get<std::string>(), r["world_size"].get<int>(),
                                r["weight_dtype"].get<std::string>(), r["grad_dtype"].get<std::string>(),
                                r["schedule_ops"].get<std::size_t>(), r["steps_measured"].get<int>());
  out += fmt::format("  {:<18} {:<10} {:>5} {:>14} {:>14}\n", "state (per rank)", "level", "span", "schedule", "allocated");
  for (const auto& s : r["memory"]) {
    out += fmt::format("  {:<18} {:<10} {:>5} {:>14} {:>14}\n", s["state"].get<std::string>(),
                       s["level"].get<std::string>(), s["span"].get<int>(), format_bytes(s["schedule_bytes"].get<double>()),
                       format_bytes(s["measured_bytes"].get<double>()));
  }
  for (const auto& b : r["scheduled_buffers"]) {
    out += fmt::format("  {:<18} {:<10} {:>5} {:>14} {:>14}\n", b["kind"].get<std::string>(), "peak", "",
                       format_bytes(b["schedule_peak_bytes"].get<double>()), shown(b["measured_peak_bytes"].get<double>()));
  }
  out += fmt::format("  {:<18} {:<10} {:>5} {:>14} {:>14}\n", "all of them", "peak", "",
                     format_bytes(r["scheduled_peak_bytes"].get<double>()),
                     shown(r["measured_scheduled_peak_bytes"].get<double>()));
  const auto& p = r["predicted_memory"];
  const auto bytes = [&](const char* key) { return format_bytes(p[key].get<double>()); };
  out += fmt::format("  memory model (this rank, the process itself apart): resident {} + schedule buffers and collective "
                     "staging at their joint peak {} (staging alone {}, {} of it pooled, measured {}) + activations {} = "
                     "{}\n",
                     format_bytes(p["weights"].get<double>() + p["grads"].get<double>() + p["optimizer"].get<double>()),
                     bytes("scheduled_with_staging"), bytes("staging"), bytes("staging_pooled"),
                     shown(r["collective_scratch_peak_bytes"].get<double>()), bytes("activations"), bytes("total"));
  out += fmt::format("  traffic per optimizer step ({} micro-batches), bytes each rank sends (and receives):\n",
                     r["grad_accum"].get<int>());
  out += fmt::format("  {:<8} {:>6} {:>11} | {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} | {:>6} {:>9}\n", "level", "fanout",
                     "bandwidth", "micro", "sent", "received", "boundary", "sent", "received", "calls", "comm time");
  for (const auto& l : r["traffic"]) {
    const double bw = l["bandwidth"].get<double>();
    out += fmt::format("  {:<8} {:>6} {:>11} | {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} | {:>6} {:>9}\n",
                       l["level"].get<std::string>(), l["fanout"].get<int>(),
                       bw > 0 ? fmt::format("{:g} GB/s", bw / 1e9) : std::string("-"),
                       format_bytes(l["schedule_step_micro_bytes"].get<double>()), shown(l["measured_step_micro_sent"].get<double>()),
                       shown(l["measured_step_micro_received"].get<double>()),
                       format_bytes(l["schedule_step_boundary_bytes"].get<double>()),
                       shown(l["measured_step_boundary_sent"].get<double>()),
                       shown(l["measured_step_boundary_received"].get<double>()),
                       measured ? fmt::format("{}", l["measured_step_calls"].get<std::uint64_t>()) : std::string("-"),
                       measured ? fmt::format("{:.1f}ms", l["measured_step_seconds"].get<double>() * 1e3) : std::string("-"));
  }
  out += fmt::format("  (micro and boundary: the schedule's count; sent and received: the traffic meter)\n");
  out += fmt::format("  control (loss, norm and stop scalars, not above): {} all-reduces per step in the schedule; {} "
                     "over the run, {}\n",
                     r["control"]["schedule_calls_per_step"].get<std::uint64_t>(),
                     r["control"]["measured_calls"].get<std::uint64_t>(), format_bytes(r["control"]["measured_bytes"].get<double>()));
  return out;
}

nlohmann::json job_traffic_totals(Communicator& comm) {
  const Topology& t = comm.topology();
  const TrafficMeter& meter = comm.meter();
  const int levels = t.level_count(), outer = levels - 1;
  const int nodes = t.level(outer).fanout;
  // [level: sent, received, calls] [node: sent, received] [control bytes]
  std::vector<double> sums(static_cast<std::size_t>(3 * levels + 2 * nodes + 1), 0.0);
  for (int l = 0; l < levels; ++l) {
    const LevelTraffic x = meter.at(l);
    sums[static_cast<std::size_t>(3 * l)] = static_cast<double>(x.bytes_sent);
    sums[static_cast<std::size_t>(3 * l + 1)] = static_cast<double>(x.bytes_received);
    sums[static_cast<std::size_t>(3 * l + 2)] = static_cast<double>(x.calls);
  }
  const LevelTraffic mine = meter.at(outer);
  const auto node_slot = static_cast<std::size_t>(3 * levels + 2 * t.coordinate(comm.rank(), outer));
  sums[node_slot] = static_cast<double>(mine.bytes_sent);
  sums[node_slot + 1] = static_cast<double>(mine.bytes_received);
  sums.back() = static_cast<double>(meter.control().bytes_sent);
  comm.all_reduce_control(sums.data(), static_cast<int>(sums.size()), 0, outer);

  auto whole = [](double x) { return static_cast<std::uint64_t>(x); };
  nlohmann::json r;
  r["type"] = "traffic";
  r["world_size"] = t.world_size();
  for (int l = 0; l < levels; ++l) {
    r["levels"].push_back({{"level", t.level(l).name},
                           {"fanout", t.level(l).fanout},
                           {"bytes_sent", whole(sums[static_cast<std::size_t>(3 * l)])},
                           {"bytes_received", whole(sums[static_cast<std::size_t>(3 * l + 1)])},
                           {"calls", whole(sums[static_cast<std::size_t>(3 * l + 2)])}});
  }
  for (int n = 0; n < nodes; ++n) {
    const auto slot = static_cast<std::size_t>(3 * levels + 2 * n);
    r["outermost_by_node"].push_back({{"node", n}, {"bytes_sent", whole(sums[slot])},
                                      {"bytes_received", whole(sums[slot + 1])}});
  }
  r["control_bytes"] = whole(sums.back());
  return r;
}

}  // namespace strata
