// A cluster the simulator prices a schedule on, as data: its device (compute rate, memory
// bandwidth and capacity) and its levels (fan-out, link bandwidth, how many ranks share a link,
// latency). Presets (frontier, dgx-a100, dgx-h100, cpu) are TOML text read by the same loader
// as a user's file, which may start from a preset and override any key.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "schedule/step_schedule.hpp"
#include "topo/topology.hpp"

namespace strata {

struct DeviceModel {
  std::string name = "device";
  double peak_flops = 0.0;        // FLOP/s of dense matrix work in the training dtype
  double efficiency = 1.0;        // fraction of peak the model's matrix work reaches
  // Per compute stage ("block_forward", "head_backward", ...): a factor on top of `efficiency`
  // (1 when absent), for stages that run faster or slower than the rest.
  std::map<std::string, double> stage_efficiency;
  double memory_bandwidth = 0.0;  // bytes/s, for the memory-bound work (optimizer, quantization)
  double memory_bytes = 0.0;      // capacity; 0: unknown (nothing is refused for size)
  // Whether communication proceeds while the device computes (a GPU's copy engines, a CPU with a
  // core to spare for the communication thread). When false every collective is exposed.
  bool overlaps_communication = true;

  double stage_rate(std::string_view stage) const;  // FLOP/s a compute stage reaches
};

struct LinkLevel {
  std::string name;
  int fanout = 1;                // 0: the outermost level's "*" (the node count given to the simulator)
  double link_bandwidth = 0.0;   // bytes/s of one link, one direction
  int ranks_per_link = 1;        // ranks whose traffic at this level shares one link at once
  double latency = 0.0;          // seconds per message
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

  // A preset name, or a path to a TOML file (which may name `base = "<preset>"` to start from).
  static ClusterModel load(std::string_view name_or_path);
  static ClusterModel preset(std::string_view name);
  static std::vector<std::string> preset_names();
  // `source` names the text in error messages (a file path, or "preset 'frontier'").
  static ClusterModel from_toml(std::string_view text, const std::string& source);
  std::string to_toml() const;
};

// A --topology value with a cluster preset's name in it (dgx: dgx-a100) as the preset's levels
// (topology_spec); any other text unchanged, for Topology::parse.
std::string expand_topology_preset(std::string_view spec);

// The stage key a compute op is priced under: "block_forward", "head_backward", ...
std::string stage_key(const ScheduleOp& op);

}  // namespace strata
