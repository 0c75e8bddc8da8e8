// This host's hardware tree (hwloc): which package, NUMA node and L3 cache hold a set of cores.
// A synthetic tree (hwloc's description language) stands in for other machines in tests.
#pragma once

#include <memory>
#include <string>

#include "topo/auto_topology.hpp"

namespace strata {

class MachineTree {
 public:
  // The host this process runs on.
  static MachineTree this_host();
  // A made-up machine, e.g. "pack:2 numa:2 l3:1 core:4 pu:2".
  static MachineTree synthetic(const std::string& description);
  ~MachineTree();
  MachineTree(MachineTree&&) noexcept;
  MachineTree& operator=(MachineTree&&) noexcept;

  int core_count() const;
  // The place of cores first .. first+count-1 (logical indexes), as a rank bound to them has.
  HostPlace place_of_cores(int first, int count) const;
  // The place of the cores this process is bound to (the whole host when unbound).
  HostPlace place_of_this_process() const;
  // "2 packages, 2 NUMA nodes, 2 L3 caches, 16 cores", for logs.
  std::string summary() const;

 private:
  struct Impl;
  explicit MachineTree(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata
