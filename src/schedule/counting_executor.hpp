// An executor that runs nothing and counts: bytes each rank sends per level and phase, calls,
// control reductions, model FLOPs, and the peak of the memory the ops allocate. It is how
// `--report` answers without running a step, and what the MPI meter must equal, byte for byte.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "comm/collective_staging.hpp"
#include "schedule/buffer_ledger.hpp"
#include "schedule/op_executor.hpp"
#include "schedule/unit_lifecycle.hpp"

namespace strata {

struct ScheduleCounts {
  static constexpr std::size_t kPhases = static_cast<std::size_t>(TrafficPhase::kCount);
  static constexpr std::size_t kBuffers = static_cast<std::size_t>(BufferKind::kCount);
  // [phase][level]: bytes one rank sends (= receives) and single-level calls it makes.
  std::array<std::vector<std::uint64_t>, kPhases> bytes;
  std::array<std::vector<std::uint64_t>, kPhases> calls;
  std::uint64_t control_calls = 0;
  std::uint64_t control_bytes = 0;
  double forward_flops = 0.0;
  double backward_flops = 0.0;
  double recompute_flops = 0.0;  // hardware FLOPs beyond the model's: the recomputed forwards
  std::uint64_t peak_live_bytes = 0;                  // all scheduled buffers together
  std::array<std::uint64_t, kBuffers> peak_by_kind{};  // each kind on its own
  // Collective staging (comm/collective_staging): the reductions in flight hold theirs from start
  // to wait, every other collective only while it runs; its peak, on its own.
  std::uint64_t staging_peak_bytes = 0;
  std::uint64_t staging_pool_peak_bytes = 0;  // the engine's pooled part alone (its scratch pool's peak)
  // The scheduled buffers and the staging together. The engine's two pools keep what they freed
  // (until a request past their peak trims them), so their peaks stay resident together; the
  // level primitives' own staging is freed at once, so it adds where it runs: the larger of the
  // pools' peaks together and, op by op, the schedule's live buffers plus all the staging live.
  std::uint64_t peak_with_staging_bytes = 0;

  const std::vector<std::uint64_t>& bytes_in(TrafficPhase p) const { return bytes[static_cast<std::size_t>(p)]; }
};

class CountingExecutor final : public OpExecutor {
 public:
  // Replays the units' lifecycle as it counts: an op in a state that may not run it is refused.
  CountingExecutor(const StepSchedule& schedule, const Topology& topology);
  using OpExecutor::execute;
  void execute(const ScheduleOp& op, OpContext& context) override;
  const ScheduleCounts& counts() const { return counts_; }

 private:
  void count_staging(const ScheduleOp& op);
  const StepSchedule& schedule_;
  const Topology& topology_;
  ScheduleCounts counts_;
  BufferLedger ledger_;
  std::vector<UnitLifecycle> units_;
  std::map<std::pair<int, int>, StagingBytes> staging_held_;  // per (unit, bucket) reduction in flight
  StagingBytes staging_live_;
  std::uint64_t live_with_staging_peak_ = 0;
};

// Runs the whole list through a CountingExecutor.
ScheduleCounts count_schedule(const StepSchedule& schedule, const Topology& topology);

}  // namespace strata
