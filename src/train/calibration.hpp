// `strata calibrate`'s measurements: every rank at once (so a shared host's contention is in the
// figures) times the model's compute stages, a streaming add, the slowdown of compute while a
// collective runs beside it, and an all-gather and a reduce-scatter at each level of the declared
// topology over a sweep of sizes; the result is a cluster model the simulator reads.
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "hw/cluster_model.hpp"

namespace strata {

struct CalibrationSettings {
  std::string model = "small";
  int batch = 1;
  int seq_len = 0;  // 0: the model's context length
  int repeats = 5;
  std::size_t large_piece_bytes = 1u << 20;  // per rank, for the bandwidth fit (at least; a unit's piece when larger)
  std::size_t small_piece_bytes = 64;        // per rank, for the latency fit
  // A cluster file whose device (stage rates, memory bandwidth, fitted efficiency, overlap) is
  // kept: only the links are measured. The device is a property of the hosts, best fitted where
  // the links do not dominate the reference step; the links change with the network.
  std::string device_from;
  int ranks_on_host = 1;  // ranks sharing this host (the launcher knows; for the overlap verdict)
};

struct LevelMeasurement {
  std::string name;
  int fanout = 1;
  double small_seconds = 0.0, large_seconds = 0.0;  // medians of one call, the sweep's ends
  double bandwidth = 0.0;                           // bytes/s per rank
  double latency = 0.0;                             // seconds per message
  TransferCurve curve;                              // the sweep: bytes one rank sends per call, seconds
};

// A figure timed repeatedly: the median, and the spread of the samples around it (the interquartile
// range over the median), which says how far a second calibration could land.
struct TimedFigure {
  double median = 0.0;
  double spread = 0.0;
};

struct StageMeasurement {
  std::string stage;  // "block_forward", ...
  double seconds = 0.0;
  double flops = 0.0;
};

struct Calibration {
  ClusterModel cluster;
  std::vector<StageMeasurement> stages;
  std::vector<LevelMeasurement> levels;
  // The reference run the efficiency is fitted on (plan ddp): its measured median step (and the
  // spread of its steps), and what the micro-benchmarked figures alone (efficiency 1) simulated.
  double reference_measured_seconds = 0.0;
  double reference_spread = 0.0;
  int reference_steps = 0;
  double reference_simulated_seconds = 0.0;
  // The second reference (plan zero3, inline): measured, and simulated from the figures alone.
  double second_measured_seconds = 0.0, second_simulated_seconds = 0.0;
  // Where the communication thread has no core of its own: a zero3 run inline and with the thread
  // forced on, and the collectives per step handed to it (the difference per collective is the
  // device's handoff_seconds). 0 when not measured.
  double inline_zero3_seconds = 0.0, threaded_zero3_seconds = 0.0;
  int collectives_handed = 0;
  // Compute timed alone and with collectives running on a communication thread beside it (the
  // level they ran at); their ratio less one is the device's interference. Unmeasured with one rank.
  TimedFigure compute_alone, compute_beside_collectives;
  std::string interference_level;
  // Spreads above this are worth a warning: a second calibration may land that far off.
  static constexpr double kWideSpread = 0.10;
  std::string device_source;  // non-empty: the device came from this file, nothing was fitted
  int ranks_on_host = 1;
  unsigned hardware_threads = 1;
};

// Collective: every rank calls it and gets the same result (figures are averaged over ranks).
Calibration calibrate(Communicator& comm, const CalibrationSettings& settings);

}  // namespace strata
