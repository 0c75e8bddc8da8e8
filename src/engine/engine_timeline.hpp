// What one rank's engine ran and when: the span of every schedule op the compute thread ran,
// written out with the communication thread's spans as a Chrome trace (the rank a process, compute
// one track and collectives another), in the form the simulator writes its priced timeline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "comm/comm_thread.hpp"

namespace strata {

class EngineTimeline {
 public:
  explicit EngineTimeline(bool enabled = false) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // The start of a span (0 when not recording: no clock read).
  std::int64_t begin() const { return enabled_ ? steady_now_ns() : 0; }
  void record(std::string name, std::int64_t begin_ns) {
    if (enabled_) spans_.push_back({std::move(name), begin_ns, steady_now_ns()});
  }
  // The trace, with the collectives' spans; overlap names the second track.
  nlohmann::json chrome_trace(int rank, const std::vector<TaskSpan>& collectives, bool overlap) const;

 private:
  bool enabled_;
  std::vector<TaskSpan> spans_;
};

}  // namespace strata
