// Plan report: formulas beside measurements.
#include "zero/plan_report.hpp"

#include <fmt/format.h>

#include "zero/plan_formulas.hpp"

namespace strata {

namespace {

std::string human(double bytes) {
  if (bytes >= 1e9) return fmt::format("{:.2f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.2f} MB", bytes / 1e6);
  if (bytes >= 1e3) return fmt::format("{:.2f} kB", bytes / 1e3);
  return fmt::format("{:.0f} B", bytes);
}

}  // namespace

nlohmann::json plan_report(ShardedEngine& engine, int grad_accum) {
  const Topology& t = engine.communicator().topology();
  const ShardPlan& plan = engine.plan();
  const ShardedEngineOptions& opt = engine.options();
  const MeasuredMemory mem = engine.measured_memory();
  nlohmann::json r;
  r["plan"] = plan.name;
  r["plan_levels"] = plan.describe(t);
  r["topology"] = t.to_string();
  r["world_size"] = t.world_size();
  r["weight_dtype"] = std::string(dtype_name(opt.weight_dtype));
  r["grad_dtype"] = std::string(dtype_name(opt.grad_dtype));
  r["grad_accum"] = grad_accum;
  r["steps_measured"] = engine.steps_run();

  for (const StateMemory& s : memory_formula(engine.layout(), plan, t, opt.weight_dtype)) {
    std::uint64_t measured = 0;
    if (s.state == "weights") measured = mem.weights;
    if (s.state == "secondary") measured = mem.secondary;
    if (s.state == "grads") measured = mem.grads;
    if (s.state == "optimizer") measured = mem.optimizer;
    r["memory"].push_back({{"state", s.state}, {"level", level_label(t, s.level)}, {"span", s.span},
                           {"formula_bytes", s.bytes}, {"formula", s.formula}, {"measured_bytes", measured}});
  }
  r["scratch_peak_bytes"] = mem.scratch_peak;

  const TrafficFormula f = traffic_formula(engine.layout(), plan, t, opt.weight_dtype, opt.grad_dtype);
  const TrafficMeter& meter = engine.communicator().meter();
  const auto steps = static_cast<std::uint64_t>(std::max(1, engine.steps_run()));
  for (int l = 0; l < t.level_count(); ++l) {
    const LevelTraffic micro = meter.at(l, TrafficPhase::kMicroBatch);
    const LevelTraffic boundary = meter.at(l, TrafficPhase::kStepBoundary);
    const std::uint64_t formula_micro = f.micro_batch[static_cast<std::size_t>(l)] * static_cast<std::uint64_t>(grad_accum);
    const std::uint64_t formula_boundary = f.boundary[static_cast<std::size_t>(l)];
    const double bandwidth = t.level(l).bandwidth;
    const double per_step = static_cast<double>(formula_micro + formula_boundary);
    r["traffic"].push_back({{"level", t.level(l).name},
                            {"fanout", t.level(l).fanout},
                            {"bandwidth", bandwidth},
                            {"formula_micro_batch_bytes", f.micro_batch[static_cast<std::size_t>(l)]},
                            {"formula_step_micro_bytes", formula_micro},
                            {"formula_step_boundary_bytes", formula_boundary},
                            {"measured_step_micro_sent", micro.bytes_sent / steps},
                            {"measured_step_micro_received", micro.bytes_received / steps},
                            {"measured_step_boundary_sent", boundary.bytes_sent / steps},
                            {"measured_step_boundary_received", boundary.bytes_received / steps},
                            {"measured_step_calls", (micro.calls + boundary.calls) / steps},
                            {"measured_step_seconds", (micro.seconds + boundary.seconds) / static_cast<double>(steps)},
                            {"ideal_seconds_at_bandwidth", bandwidth > 0 ? per_step / bandwidth : 0.0}});
  }
  const LevelTraffic control = meter.control();
  r["control"] = {{"calls", control.calls}, {"bytes", control.bytes_sent}};
  return r;
}

std::string format_plan_report(const nlohmann::json& r) {
  std::string out = fmt::format("plan {}: {} | topology {} ({} ranks) | weights {}, gradients {} | {} step(s) measured\n",
                                r["plan"].get<std::string>(), r["plan_levels"].get<std::string>(),
                                r["topology"].get<std::string>(), r["world_size"].get<int>(),
                                r["weight_dtype"].get<std::string>(), r["grad_dtype"].get<std::string>(),
                                r["steps_measured"].get<int>());
  out += fmt::format("  {:<10} {:<10} {:>5} {:>14} {:>14}   {}\n", "state", "level", "span", "formula/rank",
                     "measured/rank", "formula (bytes per element x padded elements / span)");
  for (const auto& s : r["memory"]) {
    out += fmt::format("  {:<10} {:<10} {:>5} {:>14} {:>14}   {}\n", s["state"].get<std::string>(),
                       s["level"].get<std::string>(), s["span"].get<int>(), human(s["formula_bytes"].get<double>()),
                       human(s["measured_bytes"].get<double>()), s["formula"].get<std::string>());
  }
  out += fmt::format("  scratch peak (gathered units, staging, unit gradients): {}\n",
                     human(r["scratch_peak_bytes"].get<double>()));
  out += fmt::format("  traffic per optimizer step ({} micro-batches), bytes per rank (the formula is both sent and "
                     "received):\n",
                     r["grad_accum"].get<int>());
  out += fmt::format("  {:<8} {:>6} {:>11} | {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} | {:>6} {:>9}\n", "level", "fanout",
                     "bandwidth", "micro form", "sent", "received", "boundary", "sent", "received", "calls", "comm time");
  for (const auto& l : r["traffic"]) {
    const double bw = l["bandwidth"].get<double>();
    out += fmt::format("  {:<8} {:>6} {:>11} | {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} | {:>6} {:>7.1f}ms\n",
                       l["level"].get<std::string>(), l["fanout"].get<int>(),
                       bw > 0 ? fmt::format("{:g} GB/s", bw / 1e9) : std::string("-"),
                       human(l["formula_step_micro_bytes"].get<double>()), human(l["measured_step_micro_sent"].get<double>()),
                       human(l["measured_step_micro_received"].get<double>()),
                       human(l["formula_step_boundary_bytes"].get<double>()),
                       human(l["measured_step_boundary_sent"].get<double>()),
                       human(l["measured_step_boundary_received"].get<double>()),
                       l["measured_step_calls"].get<std::uint64_t>(), l["measured_step_seconds"].get<double>() * 1e3);
  }
  out += fmt::format("  control (loss and norm scalars, not above): {} all-reduces, {} over the run\n",
                     r["control"]["calls"].get<std::uint64_t>(), human(r["control"]["bytes"].get<double>()));
  return out;
}

}  // namespace strata
