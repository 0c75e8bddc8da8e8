// A machine as data, in the hardware room (below the simulator and training, which both read it):
// a cluster the simulator prices a schedule on and --topology names for real training: its device (compute rate, memory
// bandwidth and capacity) and its levels (fan-out, link bandwidth, how many ranks share a link,
// latency). Presets (frontier, dgx-a100, dgx-h100, cpu) are TOML text read by the same loader
// as a user's file, which may start from a preset and override any key.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "topo/topology.hpp"

namespace strata {

// A level's measured time of one single-level collective call (a ring all-gather or reduce-scatter
// among the level's fan-out) by the bytes one rank sends in it, ascending: what `strata calibrate`
// sweeps. Between points the time is interpolated; past the last, the last segment's rate goes on.
struct TransferPoint {
  double bytes = 0.0;
  double seconds = 0.0;
  bool operator==(const TransferPoint&) const = default;
};
using TransferCurve = std::vector<TransferPoint>;

struct DeviceModel {
  std::string name = "device";
  double peak_flops = 0.0;        // FLOP/s of dense matrix work in the training dtype
  double efficiency = 1.0;        // fraction of peak the model's matrix work reaches
  // Per compute stage ("block_forward", "head_backward", ...): a factor on top of `efficiency`
  // (1 when absent), for stages that run faster or slower than the rest.
  std::map<std::string, double> stage_efficiency;
  double memory_bandwidth = 0.0;  // bytes/s, for the memory-bound work (optimizer, quantization)
  double memory_bytes = 0.0;      // capacity; 0: unknown (nothing is refused for size)
  // Memory each rank's process holds beyond what the engine allocates (program, MPI, thread
  // stacks, allocator): the fixed part of the memory model, measured by calibrate.
  double process_bytes = 0.0;
  // Whether communication proceeds while the device computes (a GPU's copy engines, a CPU with a
  // core to spare for the communication thread). When false every collective is exposed.
  bool overlaps_communication = true;
  // The compute rate's factor by the tokens of a micro-batch ([[tokens, factor]], ascending; the
  // calibrated shape's factor is 1): matrix products of more rows run nearer the peak. Linear
  // between points, the nearest end's factor outside. Empty: 1 at every size.
  struct RatePoint {
    double tokens = 0.0;
    double factor = 1.0;
    bool operator==(const RatePoint&) const = default;
  };
  std::vector<RatePoint> rate_by_tokens;
  // The fraction of their link figures' speed collectives reach inside a step, where peers reach a
  // call at different times (on a host whose ranks share cores they drift apart), as `efficiency`
  // is for compute. Fitted by calibrate on a collective-heavy run; 1 in the presets, whose link
  // figures are already achieved rates.
  double collective_efficiency = 1.0;
  // Seconds each collective costs the compute stream where a communication thread runs it without
  // a core of its own (overlaps_communication false, overlap forced on): the hand-offs between the
  // two threads on a shared core. Measured by calibrate; 0 where the thread has its own core.
  double handoff_seconds = 0.0;
  // How much slower work on the compute stream runs while a collective is in flight beside it: 0.2
  // is 20% longer (a GPU's collective kernels take compute units and memory bandwidth; a CPU's
  // communication thread takes a core's share and memory bandwidth).
  double interference = 0.0;

  // FLOP/s a compute stage reaches on a micro-batch of `tokens` (0: the calibrated shape's).
  double stage_rate(std::string_view stage, double tokens = 0.0) const;
};


struct LinkLevel {
  std::string name;
  int fanout = 1;                // 0: the outermost level's "*" (the node count given to the simulator)
  double link_bandwidth = 0.0;   // bytes/s of one link, one direction
  int ranks_per_link = 1;        // ranks whose traffic at this level shares one link at once
  double latency = 0.0;          // seconds per message
  TransferCurve curve;           // measured; empty: latency and bandwidth alone
  // Bytes/s each rank gets when every rank of the level moves data at once (collectives are
  // SPMD, so they always do): the link shared among its ranks.
  double rank_bandwidth() const { return link_bandwidth / ranks_per_link; }
};

struct ClusterModel {
  std::string name = "custom";
  std::string description;
  std::string dtype = "bf16";  // the training dtype the device figures are for
  DeviceModel device;
  std::vector<LinkLevel> levels;  // innermost first

  int ranks_per_node() const;  // product of the fan-outs inside the outermost level
  // The levels as a topology spec, the outermost "*", each level's bandwidth the per-rank share
  // of its link: what --topology <preset> stands for.
  std::string topology_spec() const;
  // The topology of `nodes` nodes.
  Topology topology(int nodes) const;
  // Each level's measured curve (empty where there is none), innermost first, for the cost model.
  std::vector<TransferCurve> curves() const;

  // A preset name, or a path to a TOML file (which may name `base = "<preset>"` to start from).
  static ClusterModel load(std::string_view name_or_path);
  static ClusterModel preset(std::string_view name);
  static std::vector<std::string> preset_names();
  // The names as help texts list them: "frontier, dgx-a100, dgx-h100, cpu".
  static std::string preset_list();
  // `source` names the text in error messages (a file path, or "preset 'frontier'").
  static ClusterModel from_toml(std::string_view text, const std::string& source);
  std::string to_toml() const;
};

// A --topology value with a cluster preset's name in it (dgx: dgx-a100) as the preset's levels
// (topology_spec); any other text unchanged, for Topology::parse.
std::string expand_topology_preset(std::string_view spec);

}  // namespace strata
