// Traffic meter bookkeeping.
#include "comm/traffic_meter.hpp"

namespace strata {

void TrafficMeter::record(int level, std::uint64_t sent, std::uint64_t received, double seconds, bool new_call) {
  LevelTraffic& t = by_level_.at(static_cast<std::size_t>(level))[static_cast<std::size_t>(phase_)];
  t.bytes_sent += sent;
  t.bytes_received += received;
  t.calls += new_call ? 1 : 0;
  t.seconds += seconds;
}

void TrafficMeter::record_control(std::uint64_t bytes, double seconds) {
  control_.bytes_sent += bytes;
  control_.bytes_received += bytes;
  control_.calls += 1;
  control_.seconds += seconds;
}

LevelTraffic TrafficMeter::at(int level, TrafficPhase phase) const {
  return by_level_.at(static_cast<std::size_t>(level))[static_cast<std::size_t>(phase)];
}

LevelTraffic TrafficMeter::at(int level) const {
  LevelTraffic total;
  for (const auto& t : by_level_.at(static_cast<std::size_t>(level))) total += t;
  return total;
}

void TrafficMeter::reset() {
  for (auto& p : by_level_) p.fill(LevelTraffic{});
  control_ = LevelTraffic{};
}

}  // namespace strata
