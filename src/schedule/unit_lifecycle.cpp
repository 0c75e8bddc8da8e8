// The unit state machine and the application of an op's transitions.
#include "schedule/unit_lifecycle.hpp"

#include "core/error.hpp"
#include "schedule/op_effects.hpp"

namespace strata {

namespace {

// An illegal transition is a schedule (or an executor) that breaks the lifecycle: a bug, said as
// the sentence itself rather than a source line, since the validator quotes it for any schedule.
template <class... Args>
void refuse_unless(bool legal, fmt::format_string<Args...> format, Args&&... args) {
  if (!legal) throw InternalError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace

const char* residency_name(WeightResidency r) {
  switch (r) {
    case WeightResidency::kSharded: return "sharded";
    case WeightResidency::kGathering: return "gathering";
    case WeightResidency::kGathered: return "gathered";
  }
  return "?";
}

const char* residency_name(SecondaryResidency r) {
  switch (r) {
    case SecondaryResidency::kNone: return "not held";
    case SecondaryResidency::kHeld: return "held";
    case SecondaryResidency::kStale: return "stale";
  }
  return "?";
}

const char* residency_name(PrimaryResidency r) { return r == PrimaryResidency::kCurrent ? "current" : "being updated"; }

const char* residency_name(GradResidency r) {
  switch (r) {
    case GradResidency::kNone: return "none";
    case GradResidency::kOpen: return "open";
    case GradResidency::kReducing: return "reducing";
  }
  return "?";
}

void UnitLifecycle::begin_gather(int bucket) {
  // A later bucket joins the gather its first bucket began.
  const WeightResidency expected = bucket == 0 ? WeightResidency::kSharded : WeightResidency::kGathering;
  refuse_unless(weights_ == expected, "bucket {} of a gather of unit '{}' would begin while its weights are {} (expected {})",
               bucket, name_, residency_name(weights_), residency_name(expected));
  weights_ = WeightResidency::kGathering;
}

void UnitLifecycle::finish_gather(bool last_bucket) {
  refuse_unless(weights_ == WeightResidency::kGathering, "a gather wait of unit '{}' whose weights are {} (no gather in flight)",
               name_, residency_name(weights_));
  if (last_bucket) weights_ = WeightResidency::kGathered;
}

void UnitLifecycle::release() {
  refuse_unless(weights_ != WeightResidency::kGathering, "unit '{}' is released while its gather is in flight", name_);
  weights_ = WeightResidency::kSharded;
}

void UnitLifecycle::keep_secondary() {
  refuse_unless(weights_ == WeightResidency::kGathered,
               "the secondary copy of unit '{}' would be kept from weights that are {}, not gathered", name_,
               residency_name(weights_));
  refuse_unless(secondary_ == SecondaryResidency::kNone, "the secondary copy of unit '{}' is kept again while it is {}",
               name_, residency_name(secondary_));
  secondary_ = SecondaryResidency::kHeld;
}

void UnitLifecycle::drop_secondary() {
  refuse_unless(secondary_ != SecondaryResidency::kNone, "the secondary copy of unit '{}' is dropped while not held", name_);
  secondary_ = SecondaryResidency::kNone;
}

void UnitLifecycle::invalidate_secondary() {
  if (secondary_ == SecondaryResidency::kHeld) secondary_ = SecondaryResidency::kStale;
}

void UnitLifecycle::open_grad() {
  refuse_unless(grad_ == GradResidency::kNone, "the unit gradient of unit '{}' is opened while it is {}", name_,
               residency_name(grad_));
  grad_ = GradResidency::kOpen;
}

void UnitLifecycle::start_reduce(int bucket) {
  refuse_unless(grad_ == GradResidency::kOpen || (bucket > 0 && grad_ == GradResidency::kReducing),
               "bucket {} of a reduce-scatter of unit '{}' whose gradient is {}", bucket, name_, residency_name(grad_));
  grad_ = GradResidency::kReducing;
}

void UnitLifecycle::finish_reduce(bool last_bucket) {
  refuse_unless(grad_ == GradResidency::kReducing, "a reduce-scatter wait of unit '{}' whose gradient is {} (no reduction in "
               "flight)", name_, residency_name(grad_));
  if (last_bucket) grad_ = GradResidency::kOpen;
}

void UnitLifecycle::free_grad() {
  refuse_unless(grad_ != GradResidency::kReducing, "the gradient of unit '{}' is freed while its reduction is in flight",
               name_);
  refuse_unless(grad_ != GradResidency::kNone, "the gradient of unit '{}' is freed while not allocated", name_);
  grad_ = GradResidency::kNone;
}

void UnitLifecycle::begin_update(int bucket) {
  refuse_unless(bucket > 0 || primary_ == PrimaryResidency::kCurrent,
               "a second update of the primary shard of unit '{}' in flight", name_);
  primary_ = PrimaryResidency::kUpdating;
}

void UnitLifecycle::finish_update(bool last_bucket) {
  if (last_bucket) primary_ = PrimaryResidency::kCurrent;
}

void UnitLifecycle::settle_update() { primary_ = PrimaryResidency::kCurrent; }

void UnitLifecycle::require_gathered(const char* by) const {
  refuse_unless(weights_ == WeightResidency::kGathered,
               "{} reads the gathered weights of unit '{}', which are {} (the schedule computes with a unit before its "
               "gather completed)",
               by, name_, residency_name(weights_));
}

void UnitLifecycle::require_secondary_readable(const char* by) const {
  STRATA_REQUIRE(secondary_ != SecondaryResidency::kNone,
                 "{}: the secondary copy of unit '{}' is not held: it is made in forward and dropped once backward has "
                 "gathered from it",
                 by, name_);
  STRATA_REQUIRE(secondary_ != SecondaryResidency::kStale,
                 "{} uses a stale secondary copy of unit '{}': the copy is stale: made before the weights last changed "
                 "(an update or a checkpoint load)",
                 by, name_);
}

void UnitLifecycle::require_primary_current(const char* by) const {
  // A read of the primary shard while its update is in flight would see half the new weights.
  refuse_unless(primary_ == PrimaryResidency::kCurrent, "{} reads the primary weight shard of unit '{}', which is {}", by,
               name_, residency_name(primary_));
}

void UnitLifecycle::require_grad_allocated(const char* by) const {
  refuse_unless(grad_ != GradResidency::kNone, "{} touches the unit gradient of unit '{}', which is not allocated", by, name_);
}

std::vector<UnitLifecycle> unit_lifecycles(const StepSchedule& schedule) {
  std::vector<UnitLifecycle> units;
  units.reserve(static_cast<std::size_t>(schedule.unit_count));
  for (int u = 0; u < schedule.unit_count; ++u) {
    units.emplace_back(u < static_cast<int>(schedule.unit_names.size()) ? schedule.unit_names[static_cast<std::size_t>(u)]
                                                                         : std::to_string(u));
  }
  return units;
}

void apply_op(const StepSchedule& schedule, const ScheduleOp& op, std::span<UnitLifecycle> units) {
  const auto unit = [&](int u) -> UnitLifecycle& {
    refuse_unless(u >= 0 && static_cast<std::size_t>(u) < units.size(), "{} names unit {} of {}", op_kind_name(op.kind), u,
                 units.size());
    return units[static_cast<std::size_t>(u)];
  };
  const char* by = op_kind_info(op.kind).name;
  const bool last = op.bucket + 1 == op.buckets;
  // The buffers the op allocates come first: a backward writes the unit gradient it opens. A
  // gathered copy and a secondary copy are allocated only by the ops whose own transitions
  // (begin_gather, keep_secondary) refuse a second one.
  for (const BufferEffect& b : op.alloc) {
    if (b.kind == BufferKind::kUnitGrad) unit(b.unit).open_grad();
  }
  // The op table's reads, against the states.
  for (const Access& a : op_accesses(schedule, op)) {
    if (a.unit < 0) continue;
    UnitLifecycle& u = unit(a.unit);
    switch (a.resource) {
      case Resource::kGathered:
        if (a.read && a.after != After::kInFlight) u.require_gathered(by);
        break;
      case Resource::kSecondary:
        if (a.read) u.require_secondary_readable(by);
        break;
      case Resource::kPrimary:
        if (a.read) u.require_primary_current(by);
        break;
      case Resource::kUnitGrad: u.require_grad_allocated(by); break;
      default: break;
    }
  }
  // The op's own transitions.
  switch (op.kind) {
    case OpKind::kGatherStart: unit(op.unit).begin_gather(op.bucket); break;
    case OpKind::kGatherWait: unit(op.unit).finish_gather(last); break;
    case OpKind::kKeepSecondary: unit(op.unit).keep_secondary(); break;
    case OpKind::kRelease: unit(op.unit).release(); break;
    case OpKind::kReduceScatterStart: unit(op.unit).start_reduce(op.bucket); break;
    case OpKind::kReduceScatterWait: unit(op.unit).finish_reduce(last); break;
    case OpKind::kGatherUpdatedStart: unit(op.unit).begin_update(op.bucket); break;
    case OpKind::kGatherUpdatedWait: unit(op.unit).finish_update(last); break;
    case OpKind::kInvalidateSecondaries:
      for (UnitLifecycle& u : units) u.invalidate_secondary();
      break;
    default: break;  // compute, the replica reductions, the norm, the update, control: no unit state
  }
  // The buffers it frees: a gather from the secondary copy drops it, a reduction's last wait frees
  // the unit gradient. Only a release frees a gathered copy, and release() above said so.
  for (const BufferEffect& b : op.free) {
    switch (b.kind) {
      case BufferKind::kSecondary: unit(b.unit).drop_secondary(); break;
      case BufferKind::kUnitGrad: unit(b.unit).free_grad(); break;
      case BufferKind::kGathered:
      case BufferKind::kCount: break;
    }
  }
}

}  // namespace strata
