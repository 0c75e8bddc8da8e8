// The step schedule's entry points: the builder's inputs from the step's settings, the build (its
// passes are in schedule_builder.cpp and the *_pass.cpp files), and the words that describe an op.
#include "schedule/step_schedule.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "schedule/schedule_builder.hpp"

namespace strata {

std::string buffer_kind_name(BufferKind kind) {
  switch (kind) {
    case BufferKind::kGathered: return "gathered weights";
    case BufferKind::kSecondary: return "secondary copy";
    case BufferKind::kUnitGrad: return "unit gradient";
    case BufferKind::kCount: break;
  }
  return "?";
}

std::string describe_op(const StepSchedule& s, int index) {
  if (index < 0 || index >= static_cast<int>(s.ops.size())) return fmt::format("op {} (not in the list)", index);
  const ScheduleOp& op = s.ops[static_cast<std::size_t>(index)];
  std::string what = op_kind_name(op.kind);
  if (op.unit >= 0 && op.unit < static_cast<int>(s.unit_names.size())) {
    what += " of " + s.unit_names[static_cast<std::size_t>(op.unit)];
  }
  if (op.source == WeightSource::kSecondary && (op.kind == OpKind::kGatherStart || op.kind == OpKind::kGatherWait)) {
    what += " from the secondary copy";
  }
  if (op.buckets > 1) what += fmt::format(", bucket {} of {}", op.bucket + 1, op.buckets);
  const std::string when = op.micro >= 0 ? fmt::format("step {} micro-batch {}", op.step, op.micro)
                                         : fmt::format("step {} boundary", op.step);
  return fmt::format("op {} ({}, {})", index, what, when);
}

ScheduleInputs schedule_inputs(const ModelLayout& layout, const Topology& topology, const StepOptions& step,
                               int micro_batch, int seq_len, ScheduleMode mode) {
  ScheduleInputs in;
  static_cast<StepOptions&>(in) = step;
  in.layout = &layout;
  in.topology = &topology;
  in.mode = mode;
  in.tokens_per_micro = static_cast<std::size_t>(micro_batch) * static_cast<std::size_t>(seq_len);
  in.seq_len = seq_len;
  return in;
}

StepSchedule build_step_schedule(const ScheduleInputs& in) {
  STRATA_REQUIRE(in.layout != nullptr && in.topology != nullptr, "schedule inputs need a layout and a topology");
  STRATA_REQUIRE(in.grad_accum >= 1 && in.steps >= 1, "a schedule needs at least one micro-batch and one step");
  in.plan.validate(*in.topology);
  return ScheduleBuilder(in).build();
}

}  // namespace strata
