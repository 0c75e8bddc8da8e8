// Timelines as Chrome trace JSON (chrome://tracing, Perfetto): one process per rank, one track
// per lane (compute, communication). The engine writes the spans it measured, the simulator the
// spans it priced, in the same form so the two open side by side.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace strata {

struct TraceSpan {
  std::string name;
  int lane = 0;          // index into the lane names
  double begin_us = 0.0;
  double end_us = 0.0;
};

// The events of one process (pid) with its name, its lanes' names and its spans.
nlohmann::json chrome_trace_events(int pid, const std::string& process, const std::vector<std::string>& lanes,
                                   const std::vector<TraceSpan>& spans);
// A whole trace file from the events of one or more processes.
nlohmann::json chrome_trace(nlohmann::json events);

}  // namespace strata
