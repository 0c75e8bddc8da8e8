// Compares the declared topology's nodes with the real ones (ranks sharing memory, found with
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)). Declared "virtual" nodes on one host are allowed:
// they are how multi-node plans are tested on one machine.
#pragma once

#include <string>
#include <vector>

#include "topo/topology.hpp"

namespace strata {

// Collective. For each world rank, the lowest world rank on its host: equal for ranks on one host.
std::vector<int> host_of_each_rank();

// Collective. A line for the log: a confirmation when the declared nodes are the real hosts (empty
// on one host), a note for virtual nodes on one host, a warning when the declaration splits or
// merges real nodes.
std::string describe_declared_nodes(const Topology& topology);

}  // namespace strata
