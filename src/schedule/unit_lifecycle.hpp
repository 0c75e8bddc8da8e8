// A parameter unit's lifecycle, written once: its four residencies as one state machine that
// offers only the legal transitions, and the one function that applies an op's transitions (read
// from the op table). The engine keeps one per unit; the validator and the counting executor
// replay the list through the same machine, so a lifecycle rule is one change.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "schedule/step_schedule.hpp"

namespace strata {

// What may be read now is the state, never inferred from which buffers happen to be allocated.
enum class WeightResidency {
  kSharded,    // only the primary shard (no compute copy)
  kGathering,  // the compute copy is allocated and its gather posted, not waited for
  kGathered,   // the compute copy is complete: compute may read it
};
enum class SecondaryResidency {
  kNone,   // no secondary (hpZ) copy held
  kHeld,   // held, made from the current weights
  kStale,  // held, but the weights changed since (an update or a checkpoint load): never read
};
enum class PrimaryResidency {
  kCurrent,   // the primary shard holds the current weights
  kUpdating,  // the updated-weights gather that writes it is in flight (into the next step)
};
enum class GradResidency {
  kNone,      // no unit-gradient buffer
  kOpen,      // allocated; this micro-batch's backward writes into it
  kReducing,  // its reduce-scatter is in flight; nothing may touch it until the wait
};
const char* residency_name(WeightResidency r);
const char* residency_name(SecondaryResidency r);
const char* residency_name(GradResidency r);
const char* residency_name(PrimaryResidency r);

// One unit's states. Every transition checks its precondition and refuses an illegal one with a
// strata::Error naming the unit, the transition and the state it found.
class UnitLifecycle {
 public:
  explicit UnitLifecycle(std::string unit_name = "?") : name_(std::move(unit_name)) {}

  WeightResidency weights() const { return weights_; }
  SecondaryResidency secondary() const { return secondary_; }
  PrimaryResidency primary() const { return primary_; }
  GradResidency grad() const { return grad_; }
  const std::string& name() const { return name_; }

  // The weights: a gather's buckets post one after another, its last wait completes the copy.
  void begin_gather(int bucket);
  void finish_gather(bool last_bucket);
  void release();
  // The secondary (hpZ) copy: made from the gathered weights, dropped once backward gathered from
  // it, stale once the weights change.
  void keep_secondary();
  void drop_secondary();
  void invalidate_secondary();
  // The unit gradient of one micro-batch: opened by backward, reduce-scattered bucket by bucket,
  // freed at its last wait.
  void open_grad();
  void start_reduce(int bucket);
  void finish_reduce(bool last_bucket);
  void free_grad();
  // The primary shard's update: the updated-weights gather runs into the next step. A wait with
  // nothing in flight (the first step of a run, or after a flush) leaves it current.
  void begin_update(int bucket);
  void finish_update(bool last_bucket);
  void settle_update();  // a flush waited for whatever was in flight

  // The reads the op table names, refused in a state that may not be read.
  void require_gathered(const char* by) const;
  void require_secondary_readable(const char* by) const;
  void require_primary_current(const char* by) const;
  void require_grad_allocated(const char* by) const;

 private:
  std::string name_;
  WeightResidency weights_ = WeightResidency::kSharded;
  SecondaryResidency secondary_ = SecondaryResidency::kNone;
  PrimaryResidency primary_ = PrimaryResidency::kCurrent;
  GradResidency grad_ = GradResidency::kNone;
};

// The units' lifecycles for a schedule, named after its units.
std::vector<UnitLifecycle> unit_lifecycles(const StepSchedule& schedule);

// Checks the op's reads against the units' states (the op table's accesses), then applies its
// transitions in the order they happen: the buffers it allocates, its own work, the buffers it
// frees. The one place a unit's state changes.
void apply_op(const StepSchedule& schedule, const ScheduleOp& op, std::span<UnitLifecycle> units);

}  // namespace strata
