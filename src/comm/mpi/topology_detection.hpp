// --topology auto under MPI: every rank's host (MPI's shared-memory groups) and place inside it
// (hwloc, from the cores it is bound to), gathered and turned into the explicit topology.
#pragma once

#include <string>
#include <vector>

#include "topo/auto_topology.hpp"

namespace strata {

struct DetectedTopology {
  InferredTopology levels;
  std::string tree;  // "tree of 1 package, ..." for this host, or "tree unreadable here (why)"
  // What a run prints: "topology: auto found SPEC (hosts from ..., inside them hwloc's TREE)",
  // then the notes on levels left out.
  std::vector<std::string> lines() const;
};

// Collective over MPI_COMM_WORLD; every rank returns the same levels.
DetectedTopology detect_topology();

}  // namespace strata
