// An executor that runs nothing and counts: bytes each rank sends per level and phase, calls,
// control reductions, model FLOPs, and the peak of the memory the ops allocate. It is how
// `--report` answers without running a step, and what the MPI meter must equal, byte for byte.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "schedule/op_executor.hpp"

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
  std::uint64_t peak_live_bytes = 0;                  // all scheduled buffers together
  std::array<std::uint64_t, kBuffers> peak_by_kind{};  // each kind on its own

  const std::vector<std::uint64_t>& bytes_in(TrafficPhase p) const { return bytes[static_cast<std::size_t>(p)]; }
};

class CountingExecutor final : public OpExecutor {
 public:
  explicit CountingExecutor(const Topology& topology);
  void execute(const ScheduleOp& op) override;
  const ScheduleCounts& counts() const { return counts_; }

 private:
  const Topology& topology_;
  ScheduleCounts counts_;
  std::uint64_t live_ = 0;
  std::array<std::uint64_t, ScheduleCounts::kBuffers> live_by_kind_{};
};

// Runs the whole list through a CountingExecutor.
ScheduleCounts count_schedule(const StepSchedule& schedule, const Topology& topology);

}  // namespace strata
