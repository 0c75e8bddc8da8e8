// Gathering the ranks' places for --topology auto.
#include "comm/mpi/topology_detection.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <array>
#include <vector>

#include "comm/mpi/mpi_check.hpp"
#include "comm/mpi/node_check.hpp"
#include "topo/machine_tree.hpp"

namespace strata {

std::vector<std::string> DetectedTopology::lines() const {
  std::vector<std::string> out = {fmt::format(
      "topology: auto found {} (hosts from MPI's shared-memory groups, inside them hwloc's {})", levels.spec, tree)};
  out.insert(out.end(), levels.notes.begin(), levels.notes.end());
  return out;
}

DetectedTopology detect_topology() {
  const std::vector<int> hosts = host_of_each_rank();
  // A host whose tree hwloc cannot read still has its node level: its places stay unknown.
  DetectedTopology detected;
  HostPlace mine;
  try {
    const MachineTree tree = MachineTree::this_host();
    mine = tree.place_of_this_process();
    detected.tree = "tree of " + tree.summary();
  } catch (const std::exception& e) {
    detected.tree = fmt::format("tree unreadable here ({})", e.what());
  }
  const std::array<int, 3> local = {mine.package, mine.numa, mine.l3};
  std::vector<int> all(hosts.size() * local.size());
  mpi_check(MPI_Allgather(local.data(), static_cast<int>(local.size()), MPI_INT, all.data(),
                          static_cast<int>(local.size()), MPI_INT, MPI_COMM_WORLD),
            "MPI_Allgather (places inside hosts)");
  std::vector<RankPlace> ranks(hosts.size());
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    ranks[r].host = hosts[r];
    ranks[r].inside = {all[3 * r], all[3 * r + 1], all[3 * r + 2]};
  }
  detected.levels = infer_topology(ranks);
  return detected;
}

}  // namespace strata
