// Inference of the topology levels from the ranks' places.
#include "topo/auto_topology.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <map>
#include <tuple>

#include "core/error.hpp"

namespace strata {

namespace {

using Key = std::array<int, 4>;  // host, package, numa, l3; a prefix of it names a group

// The machine's groups from the outermost in; `depth` is how much of the key names the group.
struct GroupKind {
  const char* group;  // what one group of this kind is, for notes
  const char* level;  // the level counting groups of this kind inside the next outer one
  int depth;
};
constexpr std::array<GroupKind, 4> kKinds = {{{"host", "node", 1},
                                              {"package", "package", 2},
                                              {"NUMA node", "numa", 3},
                                              {"L3 cache", "l3", 4}}};

Key key_of(const RankPlace& r, int depth) {
  Key k = {r.host, r.inside.package, r.inside.numa, r.inside.l3};
  for (int i = depth; i < 4; ++i) k[static_cast<std::size_t>(i)] = 0;
  return k;
}

// The size of the groups of this kind when they are blocks of consecutive ranks of one size; 0
// otherwise. -1 when some rank's place at this depth is unknown.
int block_size(const std::vector<RankPlace>& ranks, int depth) {
  for (const RankPlace& r : ranks) {
    const Key k = key_of(r, depth);
    for (int i = 1; i < depth; ++i) {
      if (k[static_cast<std::size_t>(i)] < 0) return -1;
    }
  }
  std::map<Key, int> first;  // group -> its first rank
  int size = 0;
  const int n = static_cast<int>(ranks.size());
  for (int begin = 0; begin < n;) {
    const Key k = key_of(ranks[static_cast<std::size_t>(begin)], depth);
    if (first.count(k) != 0) return 0;  // the group came back after another one: not a block
    first[k] = begin;
    int end = begin;
    while (end < n && key_of(ranks[static_cast<std::size_t>(end)], depth) == k) ++end;
    if (size == 0) size = end - begin;
    if (end - begin != size) return 0;
    begin = end;
  }
  return size;
}

}  // namespace

InferredTopology infer_topology(const std::vector<RankPlace>& ranks) {
  STRATA_REQUIRE(!ranks.empty(), "--topology auto: no ranks to place");
  const int world = static_cast<int>(ranks.size());
  InferredTopology out;
  const int per_host = block_size(ranks, 1);
  if (per_host <= 0) {
    std::vector<int> hosts;
    for (const RankPlace& r : ranks) hosts.push_back(r.host);
    fail("--topology auto: the job's ranks are not in blocks of one size per host (host of each rank, by the "
         "lowest rank on it: {}); Strata numbers ranks host by host: launch with block placement (mpirun --map-by "
         "slot, srun --distribution=block) and the same number of ranks on every host, or give --topology levels",
         fmt::join(hosts, " "));
  }
  // Group sizes from the host inwards; a kind that cannot be used keeps the size of the next outer.
  std::vector<std::pair<const GroupKind*, int>> sizes = {{&kKinds[0], per_host}};
  for (std::size_t i = 1; i < kKinds.size(); ++i) {
    const GroupKind& kind = kKinds[i];
    const int outer = sizes.back().second;
    const int size = block_size(ranks, kind.depth);
    if (size == -1) {
      // Unknown for some rank (unbound, or a host without such groups): nothing finer is known.
      out.notes.push_back(fmt::format("--topology auto: the cores of some ranks are not inside one {} (unbound "
                                      "ranks, or hosts without them): the levels inside a {} are left out; bind "
                                      "ranks to cores (mpirun --bind-to core, srun --cpu-bind=cores) to find them",
                                      kind.group, sizes.back().first->group));
      break;
    }
    if (size == 0 || outer % size != 0) {
      out.notes.push_back(fmt::format("--topology auto: the ranks of one {} are not consecutive blocks of one size "
                                      "(ranks are placed round-robin?): the levels inside a {} are left out",
                                      kind.group, sizes.back().first->group));
      break;
    }
    sizes.emplace_back(&kind, size);
  }
  // Fan-outs from the inside: ranks in the innermost group, then groups per next outer group.
  std::vector<std::string> levels;
  const int innermost = sizes.back().second;
  if (innermost > 1) levels.push_back(fmt::format("core:{}", innermost));
  for (std::size_t i = sizes.size() - 1; i >= 1; --i) {
    const int fanout = sizes[i - 1].second / sizes[i].second;
    if (fanout > 1) levels.push_back(fmt::format("{}:{}", sizes[i].first->level, fanout));
  }
  // One rank a host: a level of fan-out 1 inside the node level, since with a single level the
  // node level would be the world (Topology::node_level) and node-scoped plans would span hosts.
  if (levels.empty() && world > 1) levels.emplace_back("core:1");
  levels.push_back(fmt::format("node:{}", world / per_host));
  out.spec = fmt::format("{}", fmt::join(levels, ","));
  return out;
}

}  // namespace strata
