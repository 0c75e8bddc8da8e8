// Reduce-scatter as a ring of point-to-point exchanges, so every rank sends and receives exactly
// (f - 1) pieces: Open MPI's MPI_Ireduce_scatter_block (libnbc) and its default blocking choice
// for small groups reduce to one rank and scatter, which sends 1.5x the bytes between two nodes.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>

#include "comm/communicator.hpp"

namespace strata {

// Starts the ring on `comm` (size f, this rank's position c): `send` holds f pieces of `count`
// elements, `recv` (not inside `send`) gets the sum of every rank's piece c. Round k sends the
// partial sum of piece c - k to c + 1 and receives that of piece c - k - 1 from c - 1; the first
// round is posted here, the rest when the request is waited on, which the caller must do (its
// destructor does not). `waits_on` names the peers' hosts for the watchdog (see MpiWatch).
std::unique_ptr<CommRequest> start_ring_reduce_scatter(MPI_Comm comm, const void* send, void* recv, int count,
                                                       DType type, MPI_Datatype mpi_type,
                                                       const char* what, const char* waits_on);

}  // namespace strata
