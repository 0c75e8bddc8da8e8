// Declared versus real node boundaries.
#include "comm/mpi/node_check.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <set>
#include <vector>

#include "comm/mpi/mpi_check.hpp"
#include "comm/mpi/mpi_handles.hpp"

namespace strata {

std::vector<int> host_of_each_rank() {
  int rank = 0, size = 1;
  mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  MPI_Comm raw = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &raw),
            "MPI_Comm_split_type");
  MpiComm shared(raw);
  // A host is named by the lowest world rank on it.
  int lowest = rank;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, shared.get()), "MPI_Allreduce (host id)");
  shared.reset();
  std::vector<int> hosts(static_cast<std::size_t>(size));
  mpi_check(MPI_Allgather(&lowest, 1, MPI_INT, hosts.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather (host ids)");
  return hosts;
}

std::string describe_declared_nodes(const Topology& t) {
  const std::vector<int> real = host_of_each_rank();
  const int size = static_cast<int>(real.size());
  const int node_span = t.level_count() >= 2 ? t.span(t.node_level()) : size;
  const int declared_nodes = size / node_span;
  const int real_nodes = static_cast<int>(std::set<int>(real.begin(), real.end()).size());
  bool split = false, merged = false;
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) {
      const bool same_real = real[static_cast<std::size_t>(a)] == real[static_cast<std::size_t>(b)];
      const bool same_declared = a / node_span == b / node_span;
      split |= same_real && !same_declared;
      merged |= !same_real && same_declared;
    }
  }
  if (!split && !merged) {
    if (real_nodes == 1) return "";
    return fmt::format("nodes: the topology's {} nodes of {} ranks are the job's {} hosts (ranks sharing memory, "
                       "MPI_COMM_TYPE_SHARED)",
                       declared_nodes, node_span, real_nodes);
  }
  if (real_nodes == 1) {
    return fmt::format("note: the topology declares {} nodes of {} ranks on one host (virtual nodes: fine for "
                       "testing; bytes are still attributed to the declared levels)",
                       declared_nodes, node_span);
  }
  return fmt::format("warning: the topology declares {} nodes of {} ranks but the job runs on {} hosts{}{}; "
                     "traffic attributed to inner levels may really cross the network",
                     declared_nodes, node_span, real_nodes, split ? " (it splits a host into several nodes)" : "",
                     merged ? " (it puts ranks of different hosts into one node)" : "");
}

}  // namespace strata
