// One unit's history while a schedule is written or read: the ops its next ops must follow, the
// collective starts posted and not yet waited for, and the bytes its buffers hold. The builder keeps
// one per unit to know what each op it adds depends on; the validator keeps one per unit to check
// what a list says about the same things.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "schedule/op_effects.hpp"

namespace strata {

class UnitTimeline {
 public:
  // The last op of each role on the unit (-1: none yet). The builder's dependencies are these.
  int released = -1;        // the release of its last gathered copy
  int kept = -1;            // the last keep_secondary
  int secondary_read = -1;  // the last gather wait that read the secondary copy
  int grad_freed = -1;      // the wait that freed its last unit-gradient buffer
  int grad_written = -1;    // the last op that wrote its gradient shard
  int updated = -1;         // the last update of its primary shard
  bool gather_issued = false;      // a gather started and its copy not yet released
  bool grad_open = false;          // a unit-gradient buffer of this micro-batch is live
  bool update_carried_in = false;  // its next updated-weights wait is for the previous run of the list

  // The starts of one kind (every bucket's) posted and not yet waited for, in order.
  std::vector<int>& pending(OpKind start) { return pending_[static_cast<std::size_t>(start)]; }
  const std::vector<int>& pending(OpKind start) const { return pending_[static_cast<std::size_t>(start)]; }
  // Takes them: the waits about to be written complete them.
  std::vector<int> take_pending(OpKind start) {
    std::vector<int> out = std::move(pending(start));
    pending(start).clear();
    return out;
  }

  // The bytes of its buffer of one kind; 0 when none is live.
  std::uint64_t live(BufferKind kind) const { return live_[index(kind)].value_or(0); }
  bool is_live(BufferKind kind) const { return live_[index(kind)].has_value(); }
  // False (and nothing changes) when a buffer of the kind is live already.
  bool allocate(const BufferEffect& b) {
    if (is_live(b.kind)) return false;
    live_[index(b.kind)] = b.bytes;
    return true;
  }
  // The bytes the buffer held; nothing when none was live.
  std::optional<std::uint64_t> free(BufferKind kind) {
    const std::optional<std::uint64_t> held = live_[index(kind)];
    live_[index(kind)].reset();
    return held;
  }

 private:
  static std::size_t index(BufferKind kind) { return static_cast<std::size_t>(kind); }
  std::array<std::vector<int>, kOpKindCount> pending_;
  std::array<std::optional<std::uint64_t>, static_cast<std::size_t>(BufferKind::kCount)> live_{};
};

}  // namespace strata
