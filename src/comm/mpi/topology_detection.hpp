// --topology auto under MPI: every rank's host (MPI's shared-memory groups) and place inside it
// (hwloc, from the cores it is bound to), gathered and turned into the explicit topology.
#pragma once

#include "topo/auto_topology.hpp"

namespace strata {

// Collective over MPI_COMM_WORLD; every rank returns the same result.
InferredTopology detect_topology();

}  // namespace strata
