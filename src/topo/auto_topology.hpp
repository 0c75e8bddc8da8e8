// --topology auto: the levels of a job found from where its ranks run (which host, and inside it
// which package, NUMA node and L3 cache each rank is bound to), as the explicit spec they stand for.
#pragma once

#include <string>
#include <vector>

namespace strata {

// Where one rank's cores lie inside its host: logical indexes of the package, NUMA node and L3
// cache that hold all of them; -1 where they span several (an unbound rank) or the host has none.
struct HostPlace {
  int package = -1;
  int numa = -1;
  int l3 = -1;
  bool operator==(const HostPlace&) const = default;
};

// One rank's place in the job: the host (any id shared by exactly the ranks on one host, e.g. its
// lowest world rank) and the place inside it.
struct RankPlace {
  int host = 0;
  HostPlace inside;
};

struct InferredTopology {
  std::string spec;                 // e.g. "core:4,numa:2,package:2,node:2"; Topology::parse reads it
  std::vector<std::string> notes;   // why a level of the machine was left out, one sentence each
};

// Levels innermost first: "core" (ranks sharing the innermost group found), "l3" (L3 groups per
// NUMA node), "numa" (NUMA nodes per package), "package" (packages per host), "node" (hosts; always
// present, outermost). A level of fan-out 1 is left out (but "core:1" stands inside the node
// level when every host has one rank, so the node level is not the world); so is a level whose groups are not blocks
// of consecutive ranks of one size (Topology places ranks in blocks), with a note. Hosts that are
// not blocks of consecutive ranks of one size are refused with a sentence saying how to launch.
InferredTopology infer_topology(const std::vector<RankPlace>& ranks);

}  // namespace strata
