// The engine's timeline as a Chrome trace.
#include "engine/engine_timeline.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/chrome_trace.hpp"
#include "core/error.hpp"

namespace strata {

nlohmann::json EngineTimeline::chrome_trace(int rank, const std::vector<TaskSpan>& collectives, bool overlap) const {
  STRATA_REQUIRE(enabled_, "the timeline was not recorded (record_timeline is off)");
  std::vector<TraceSpan> spans;
  auto add = [&](const TaskSpan& span, int lane) {
    spans.push_back({span.name, lane, static_cast<double>(span.begin_ns) * 1e-3, static_cast<double>(span.end_ns) * 1e-3});
  };
  for (const TaskSpan& span : spans_) add(span, 0);
  for (const TaskSpan& span : collectives) add(span, 1);
  return strata::chrome_trace(chrome_trace_events(
      rank, fmt::format("rank {}", rank),
      {"compute (schedule ops)", overlap ? "communication thread (or inline)" : "communication (inline)"}, spans));
}

}  // namespace strata
