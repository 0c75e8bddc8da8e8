// Counts, per topology level and per phase of a step, the bytes this rank sent and received,
// the calls and the seconds spent. Volumes are the per-call algorithmic volumes of a
// bandwidth-optimal algorithm at that level (all-gather and reduce-scatter of a piece p over f
// ranks: (f-1) p each way), computed from the arguments of the calls actually made, not
// sniffed from the wire. Scalar control reductions are counted apart.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace strata {

enum class TrafficPhase { kMicroBatch = 0, kStepBoundary = 1, kOther = 2, kCount = 3 };

struct LevelTraffic {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t calls = 0;
  double seconds = 0.0;

  LevelTraffic& operator+=(const LevelTraffic& o) {
    bytes_sent += o.bytes_sent;
    bytes_received += o.bytes_received;
    calls += o.calls;
    seconds += o.seconds;
    return *this;
  }
};

class TrafficMeter {
 public:
  explicit TrafficMeter(int levels = 0) : by_level_(static_cast<std::size_t>(levels)) {}

  void set_phase(TrafficPhase phase) { phase_ = phase; }
  TrafficPhase phase() const { return phase_; }

  void record(int level, std::uint64_t sent, std::uint64_t received, double seconds, bool new_call = true);
  void record_control(std::uint64_t bytes, double seconds);

  int level_count() const { return static_cast<int>(by_level_.size()); }
  LevelTraffic at(int level, TrafficPhase phase) const;
  LevelTraffic at(int level) const;  // all phases
  LevelTraffic control() const { return control_; }
  void reset();

 private:
  using PerPhase = std::array<LevelTraffic, static_cast<std::size_t>(TrafficPhase::kCount)>;
  std::vector<PerPhase> by_level_;
  LevelTraffic control_;
  TrafficPhase phase_ = TrafficPhase::kOther;
};

}  // namespace strata
