// The cost model.
#include "sim/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace strata {

namespace {

// Seconds of one call sending `bytes` on a measured curve: linear between points, the first
// point's time below it (latency dominates there), the last segment's rate past the last point.
double curve_seconds(const TransferCurve& curve, double bytes) {
  if (bytes <= curve.front().bytes) return curve.front().seconds;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    const TransferPoint &a = curve[i - 1], &b = curve[i];
    if (bytes <= b.bytes) return a.seconds + (b.seconds - a.seconds) * (bytes - a.bytes) / (b.bytes - a.bytes);
  }
  const TransferPoint& last = curve.back();
  if (curve.size() < 2) return last.seconds * bytes / last.bytes;
  const TransferPoint& before = curve[curve.size() - 2];
  const double rate = (last.bytes - before.bytes) / std::max(1e-30, last.seconds - before.seconds);
  return last.seconds + (bytes - last.bytes) / rate;
}

}  // namespace

CostModel::CostModel(const Topology& topology, const DeviceModel& device, std::vector<TransferCurve> curves)
    : topology_(topology), device_(device), curves_(std::move(curves)) {
  STRATA_REQUIRE(curves_.empty() || static_cast<int>(curves_.size()) == topology.level_count(),
                 "{} transfer curves for the {} levels of {}", curves_.size(), topology.level_count(),
                 topology.to_string());
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
  if (l.fanout <= 1 || calls == 0) return 0.0;
  if (!curves_.empty() && !curves_[static_cast<std::size_t>(level)].empty()) {
    const double per_call = static_cast<double>(bytes) / static_cast<double>(calls);
    return static_cast<double>(calls) * curve_seconds(curves_[static_cast<std::size_t>(level)], per_call);
  }
  return static_cast<double>(calls) * (l.fanout - 1) * l.latency + static_cast<double>(bytes) / l.bandwidth;
}

// One ring over every rank of the levels (what NCCL, RCCL and most MPI libraries run for a large
// flat all-gather or reduce-scatter): p - 1 steps, each moving one rank's piece to its neighbour.
// Every step waits for the slowest edge of the ring, and a ring over several levels has edges at
// each of them, so a step costs what one piece costs on the slowest level the ring crosses (the
// per-rank share of its link: every rank sends at once). An all-reduce is two rings.
double CostModel::flat_ring_seconds(const CollectiveSpec& c) const {
  const auto span = static_cast<std::size_t>(topology_.span(c.first_level, c.last_level));
  const double piece = c.quant.enabled() ? static_cast<double>(quantized_bytes(c.quant, c.elements / span))
                                         : static_cast<double>(c.elements / span * dtype_size(c.dtype));
  double step = 0.0;
  for (int l = c.first_level; l <= c.last_level; ++l) {
    const int f = topology_.level(l).fanout;
    if (f <= 1) continue;
    // One piece at level l: a single-level call of f - 1 such pieces, per message.
    step = std::max(step, level_seconds(l, static_cast<std::uint64_t>(piece * (f - 1)), 1) / (f - 1));
  }
  const double passes = c.kind == CollectiveKind::kAllReduce ? 2.0 : 1.0;
  return passes * static_cast<double>(span - 1) * step;
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
  double seconds = quantization_seconds(c);
  if (c.flat) return seconds + flat_ring_seconds(c);
  const auto bytes = collective_bytes_by_level(topology_, c);
  const auto calls = collective_calls_by_level(topology_, c);
  for (int l = 0; l < topology_.level_count(); ++l) {
    seconds += level_seconds(l, bytes[static_cast<std::size_t>(l)], calls[static_cast<std::size_t>(l)]);
  }
  return seconds;
}

double CostModel::memory_seconds(double bytes) const { return bytes / device_.memory_bandwidth; }

double CostModel::compute_seconds(const ScheduleOp& op, double tokens) const {
  if (op.flops <= 0.0) return 0.0;
  return op.flops / device_.stage_rate(stage_key(op), tokens);
}

std::string stage_key(const ScheduleOp& op) {
  const char* stage = op.stage == ComputeStage::kEmbedding ? "embedding"
                      : op.stage == ComputeStage::kHead    ? "head"
                                                           : "block";
  return fmt::format("{}_{}", stage, op.kind == OpKind::kBackward ? "backward" : "forward");
}

}  // namespace strata
