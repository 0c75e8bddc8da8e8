// The counting executor.
#include "schedule/counting_executor.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "schedule/op_effects.hpp"

namespace strata {

CountingExecutor::CountingExecutor(const Topology& topology) : topology_(topology) {
  for (auto& v : counts_.bytes) v.assign(static_cast<std::size_t>(topology.level_count()), 0);
  for (auto& v : counts_.calls) v.assign(static_cast<std::size_t>(topology.level_count()), 0);
}

void CountingExecutor::execute(const ScheduleOp& op) {
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
  for (const BufferEffect& b : op.alloc) {
    live_ += b.bytes;
    auto& kind = live_by_kind_[static_cast<std::size_t>(b.kind)];
    kind += b.bytes;
    counts_.peak_by_kind[static_cast<std::size_t>(b.kind)] = std::max(counts_.peak_by_kind[static_cast<std::size_t>(b.kind)], kind);
  }
  counts_.peak_live_bytes = std::max(counts_.peak_live_bytes, live_);
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
  for (const BufferEffect& b : op.free) {
    STRATA_CHECK(live_ >= b.bytes && live_by_kind_[static_cast<std::size_t>(b.kind)] >= b.bytes,
                 "the schedule frees more {} memory than it allocated", buffer_kind_name(b.kind));
    live_ -= b.bytes;
    live_by_kind_[static_cast<std::size_t>(b.kind)] -= b.bytes;
  }
}

ScheduleCounts count_schedule(const StepSchedule& schedule, const Topology& topology) {
  CountingExecutor counter(topology);
  run_all(schedule, counter);
  return counter.counts();
}

}  // namespace strata
