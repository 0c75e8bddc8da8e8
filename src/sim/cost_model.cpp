// The cost model.
#include "sim/cost_model.hpp"

#include <cmath>

#include "core/error.hpp"

namespace strata {

CostModel::CostModel(const Topology& topology, const DeviceModel& device) : topology_(topology), device_(device) {
  for (const Level& l : topology.levels()) {
    STRATA_REQUIRE(l.bandwidth > 0.0 || l.fanout == 1,
                   "the simulator needs the bandwidth of every level; level '{}' of {} has none", l.name,
                   topology.to_string());
  }
  STRATA_REQUIRE(device.peak_flops > 0.0 && device.memory_bandwidth > 0.0,
                 "the simulator needs the device's peak FLOP/s and memory bandwidth");
}

double CostModel::level_seconds(int level, std::uint64_t bytes, std::uint64_t calls) const {
  const Level& l = topology_.level(level);
  if (l.fanout <= 1) return 0.0;
  return static_cast<double>(calls) * (l.fanout - 1) * l.latency + static_cast<double>(bytes) / l.bandwidth;
}

double CostModel::quantization_seconds(const CollectiveSpec& c) const {
  if (!c.quant.enabled()) return 0.0;
  const double element = static_cast<double>(dtype_size(c.dtype));
  const double code = c.quant.bits == QuantBits::kInt4 ? 0.5 : 1.0;
  const double span = topology_.span(c.first_level, c.last_level);
  double bytes = 0.0;
  // All-gather: encode this rank's piece, decode every piece into fp32.
  if (c.kind == CollectiveKind::kAllGather || c.kind == CollectiveKind::kAllReduce) {
    bytes += static_cast<double>(c.elements) / span * (element + code) + static_cast<double>(c.elements) * (code + 4.0);
  }
  // Reduce-scatter: at each level the block still being reduced is encoded once and the kept
  // chunk's fan-out pieces are decoded and summed.
  if (c.kind == CollectiveKind::kReduceScatter || c.kind == CollectiveKind::kAllReduce) {
    double block = static_cast<double>(c.elements);
    for (int l = c.first_level; l <= c.last_level; ++l) {
      const int f = topology_.level(l).fanout;
      if (f > 1) bytes += block * (4.0 + code) + block * (code + 8.0) / f;
      block /= f;
    }
  }
  return memory_seconds(bytes);
}

double CostModel::collective_seconds(const CollectiveSpec& c) const {
  if (c.empty()) return 0.0;
  if (c.is_control()) {
    double seconds = 0.0;
    for (int l = c.first_level; l <= c.last_level; ++l) {
      const Level& level = topology_.level(l);
      if (level.fanout > 1) seconds += 2.0 * std::ceil(std::log2(level.fanout)) * level.latency;
    }
    return seconds;
  }
  const auto bytes = collective_bytes_by_level(topology_, c);
  const auto calls = collective_calls_by_level(topology_, c);
  double seconds = quantization_seconds(c);
  for (int l = 0; l < topology_.level_count(); ++l) {
    seconds += level_seconds(l, bytes[static_cast<std::size_t>(l)], calls[static_cast<std::size_t>(l)]);
  }
  return seconds;
}

double CostModel::memory_seconds(double bytes) const { return bytes / device_.memory_bandwidth; }

double CostModel::compute_seconds(const ScheduleOp& op) const {
  if (op.flops <= 0.0) return 0.0;
  return op.flops / device_.stage_rate(stage_key(op));
}

}  // namespace strata
