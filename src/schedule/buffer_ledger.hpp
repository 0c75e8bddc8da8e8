// The memory the schedule's ops allocate, counted once: live and peak bytes, in all and by buffer
// kind. The engine keeps one beside its real buffers and the counting executor one beside none,
// so the report's measured and counted peaks come from the same arithmetic.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/error.hpp"
#include "schedule/step_schedule.hpp"

namespace strata {

class BufferLedger {
 public:
  static constexpr std::size_t kKinds = static_cast<std::size_t>(BufferKind::kCount);

  void allocate(const BufferEffect& b) {
    const auto k = static_cast<std::size_t>(b.kind);
    live_ += b.bytes;
    live_by_kind_[k] += b.bytes;
    peak_ = std::max(peak_, live_);
    peak_by_kind_[k] = std::max(peak_by_kind_[k], live_by_kind_[k]);
  }
  void free(const BufferEffect& b) {
    const auto k = static_cast<std::size_t>(b.kind);
    STRATA_CHECK(live_by_kind_[k] >= b.bytes, "the schedule frees more {} memory than it allocated",
                 buffer_kind_name(b.kind));
    live_ -= b.bytes;
    live_by_kind_[k] -= b.bytes;
  }

  std::uint64_t live_bytes() const { return live_; }
  std::uint64_t peak_bytes() const { return peak_; }
  const std::array<std::uint64_t, kKinds>& peak_by_kind() const { return peak_by_kind_; }

 private:
  std::uint64_t live_ = 0, peak_ = 0;
  std::array<std::uint64_t, kKinds> live_by_kind_{}, peak_by_kind_{};
};

}  // namespace strata
