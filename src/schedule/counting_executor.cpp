// The counting executor.
#include "schedule/counting_executor.hpp"

#include "core/error.hpp"
#include "schedule/op_effects.hpp"

namespace strata {

CountingExecutor::CountingExecutor(const StepSchedule& schedule, const Topology& topology)
    : schedule_(schedule), topology_(topology), units_(unit_lifecycles(schedule)) {
  for (auto& v : counts_.bytes) v.assign(static_cast<std::size_t>(topology.level_count()), 0);
  for (auto& v : counts_.calls) v.assign(static_cast<std::size_t>(topology.level_count()), 0);
}

void CountingExecutor::execute(const ScheduleOp& op, OpContext& /*context: nothing runs*/) {
  // What it counts must be what the op kind may do (schedule/op_effects).
  const OpKindInfo& info = op_kind_info(op.kind);
  for (const BufferEffect& b : op.alloc) {
    STRATA_CHECK(info.allocates[static_cast<std::size_t>(b.kind)], "{} allocates {} memory, which its kind may not",
                 op_kind_name(op.kind), buffer_kind_name(b.kind));
  }
  for (const BufferEffect& b : op.free) {
    STRATA_CHECK(info.frees[static_cast<std::size_t>(b.kind)], "{} frees {} memory, which its kind may not",
                 op_kind_name(op.kind), buffer_kind_name(b.kind));
  }
  apply_op(schedule_, op, units_);
  for (const BufferEffect& b : op.alloc) ledger_.allocate(b);
  counts_.peak_live_bytes = ledger_.peak_bytes();
  counts_.peak_by_kind = ledger_.peak_by_kind();
  if (op.comm.is_control()) {
    if (!op.comm.empty()) {
      ++counts_.control_calls;
      counts_.control_bytes += op.comm.elements * dtype_size(op.comm.dtype);
    }
  } else {
    const auto phase = static_cast<std::size_t>(op.phase);
    const auto bytes = collective_bytes_by_level(topology_, op.comm);
    const auto calls = collective_calls_by_level(topology_, op.comm);
    for (std::size_t l = 0; l < bytes.size(); ++l) {
      counts_.bytes[phase][l] += bytes[l];
      counts_.calls[phase][l] += calls[l];
    }
  }
  if (op.kind == OpKind::kForward) counts_.forward_flops += op.flops;
  if (op.kind == OpKind::kBackward) counts_.backward_flops += op.flops;
  if (op.kind == OpKind::kRecompute) counts_.recompute_flops += op.flops;
  for (const BufferEffect& b : op.free) ledger_.free(b);
}

ScheduleCounts count_schedule(const StepSchedule& schedule, const Topology& topology) {
  CountingExecutor counter(schedule, topology);
  run_all(schedule, counter);
  return counter.counts();
}

}  // namespace strata
