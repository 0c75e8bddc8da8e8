// Chrome trace events.
#include "core/chrome_trace.hpp"

#include <nlohmann/json.hpp>

namespace strata {

nlohmann::json chrome_trace_events(int pid, const std::string& process, const std::vector<std::string>& lanes,
                                   const std::vector<TraceSpan>& spans) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", process}}}});
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", static_cast<int>(i)},
                      {"args", {{"name", lanes[i]}}}});
  }
  for (const TraceSpan& s : spans) {
    events.push_back({{"ph", "X"}, {"name", s.name}, {"pid", pid}, {"tid", s.lane}, {"ts", s.begin_us},
                      {"dur", s.end_us - s.begin_us}});
  }
  return events;
}

nlohmann::json chrome_trace(nlohmann::json events) {
  // otherData (serialised before traceEvents, keys being sorted) says who wrote the file, so an
  // output check can tell an earlier Strata timeline from a file it must not replace.
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", {{"generator", "strata"}}}};
}

}  // namespace strata
