// What each schedule op costs on a cluster: a level-by-level collective as its single-level
// steps, each latency x messages + bytes / per-rank bandwidth (the bytes already carry the
// algorithm's factor, (p-1)/p of the buffer for a ring all-gather), or the level's measured time
// by call size where calibration swept it; a flat collective as one ring over all its ranks, each
// of its p-1 steps as slow as the slowest level it crosses; a compute stage as FLOPs over the
// device's rate; memory-bound work (accumulation, the optimizer, quantization) as bytes over the
// memory bandwidth. The bytes come from the same count the traffic meter must equal.
#pragma once

#include "comm/collective_spec.hpp"
#include "hw/cluster_model.hpp"
#include "schedule/step_schedule.hpp"

namespace strata {

class CostModel {
 public:
  // The topology carries each level's per-rank bandwidth and latency (ClusterModel::topology);
  // `curves`, when given, each level's measured time by call size (ClusterModel::curves).
  CostModel(const Topology& topology, const DeviceModel& device, std::vector<TransferCurve> curves = {});

  // `calls` single-level ring calls at level l sending `bytes` in all: (fanout - 1) messages of
  // latency each plus the bytes over the bandwidth, or the measured curve at each call's size.
  double level_seconds(int level, std::uint64_t bytes, std::uint64_t calls) const;
  // Data collectives: every single-level step in turn (flat: the ring over all of them), plus the
  // encode and decode passes of a quantized one. Control sums: a recursive-doubling all-reduce per
  // level (2 log2 p messages).
  double collective_seconds(const CollectiveSpec& c) const;
  // Bytes read plus written over the memory bandwidth.
  double memory_seconds(double bytes) const;
  // FLOPs over the stage's rate at this micro-batch's tokens (0: the calibrated shape's rate).
  double compute_seconds(const ScheduleOp& op, double tokens = 0.0) const;

  const Topology& topology() const { return topology_; }
  const DeviceModel& device() const { return device_; }

 private:
  double quantization_seconds(const CollectiveSpec& c) const;
  double flat_ring_seconds(const CollectiveSpec& c) const;

  const Topology& topology_;
  DeviceModel device_;
  std::vector<TransferCurve> curves_;  // per level; empty entries (or none): latency and bandwidth
};

// The stage key a compute op is priced under ("block_forward", "head_backward", ...): the keys of
// DeviceModel::stage_efficiency.
std::string stage_key(const ScheduleOp& op);

}  // namespace strata
