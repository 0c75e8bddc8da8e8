// --topology auto: hwloc's view of made-up machines (synthetic trees) and the levels inferred from
// ranks placed on them, checked against the groups the ranks really share.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "topo/auto_topology.hpp"
#include "topo/machine_tree.hpp"
#include "topo/topology.hpp"

namespace strata {
namespace {

// Two packages, each of two NUMA nodes with one L3 and four cores of two hardware threads.
constexpr const char* kTwoSocket = "pack:2 numa:2 l3:1 core:4 pu:2";

TEST(MachineTree, SyntheticTreePlacesCoresInTheirPackageNumaNodeAndL3) {
  const MachineTree tree = MachineTree::synthetic(kTwoSocket);
  ASSERT_EQ(tree.core_count(), 16);
  EXPECT_EQ(tree.place_of_cores(0, 1), (HostPlace{0, 0, 0}));
  EXPECT_EQ(tree.place_of_cores(5, 1), (HostPlace{0, 1, 1}));
  EXPECT_EQ(tree.place_of_cores(13, 3), (HostPlace{1, 3, 3}));
  EXPECT_EQ(tree.place_of_cores(0, 8), (HostPlace{0, -1, -1}));    // a whole package
  EXPECT_EQ(tree.place_of_cores(6, 4), (HostPlace{-1, -1, -1}));   // across packages
  EXPECT_EQ(tree.place_of_cores(0, 16), (HostPlace{-1, -1, -1}));  // an unbound rank
  EXPECT_NE(tree.summary().find("2 packages, 4 NUMA nodes, 4 L3 caches, 16 cores, 32 hardware threads"),
            std::string::npos) << tree.summary();
  EXPECT_THROW(MachineTree::synthetic("pack:two"), Error);
  EXPECT_THROW(tree.place_of_cores(15, 2), Error);
}

// `hosts` hosts of the synthetic machine, `per_host` ranks on each bound to `cores` consecutive
// cores in rank order (cores 0 .. n-1 of the host for -1: unbound).
std::vector<RankPlace> block_placement(const MachineTree& tree, int hosts, int per_host, int cores) {
  std::vector<RankPlace> ranks;
  for (int h = 0; h < hosts; ++h) {
    for (int i = 0; i < per_host; ++i) {
      const HostPlace inside = cores < 0 ? tree.place_of_cores(0, tree.core_count()) : tree.place_of_cores(i * cores, cores);
      ranks.push_back({h * per_host, inside});
    }
  }
  return ranks;
}

// The inferred levels must put two ranks in one level-l group exactly when they share the
// machine group that level stands for: checked pair by pair against the places themselves.
void expect_groups_match_places(const InferredTopology& found, const std::vector<RankPlace>& ranks) {
  const Topology t = Topology::parse(found.spec, static_cast<int>(ranks.size()));
  for (int l = 0; l < t.level_count(); ++l) {
    const std::string& name = t.level(l).name;
    // The group of level l holds the units it counts: level "numa" groups the ranks of a package.
    const std::string& inner_unit = l + 1 < t.level_count() ? t.level(l + 1).name : "world";
    for (std::size_t a = 0; a < ranks.size(); ++a) {
      const RankGroup g = t.group(static_cast<int>(a), l);
      for (std::size_t b = 0; b < ranks.size(); ++b) {
        const RankPlace &x = ranks[a], &y = ranks[b];
        bool same = true;
        if (inner_unit == "world") same = true;
        else if (inner_unit == "node") same = x.host == y.host;
        else if (inner_unit == "package") same = x.host == y.host && x.inside.package == y.inside.package;
        else if (inner_unit == "numa") same = x.host == y.host && x.inside.numa == y.inside.numa;
        else if (inner_unit == "l3") same = x.host == y.host && x.inside.l3 == y.inside.l3;
        const bool in_group = std::find(g.ranks.begin(), g.ranks.end(), static_cast<int>(b)) != g.ranks.end();
        EXPECT_EQ(in_group, same) << found.spec << ": level " << name << ", ranks " << a << " and " << b;
      }
    }
  }
}

TEST(AutoTopology, RanksBoundToCoresGiveEveryLevelOfTheMachine) {
  const MachineTree tree = MachineTree::synthetic(kTwoSocket);
  const auto ranks = block_placement(tree, 2, 16, 1);
  const InferredTopology found = infer_topology(ranks);
  EXPECT_EQ(found.spec, "core:4,numa:2,package:2,node:2");
  EXPECT_TRUE(found.notes.empty());
  expect_groups_match_places(found, ranks);
}

TEST(AutoTopology, LevelsOfFanOutOneAreLeftOut) {
  const MachineTree tree = MachineTree::synthetic(kTwoSocket);
  // Two cores a rank: two ranks share an L3.
  EXPECT_EQ(infer_topology(block_placement(tree, 1, 8, 2)).spec, "core:2,numa:2,package:2,node:1");
  // A NUMA node a rank: no rank shares its L3.
  const auto per_numa = block_placement(tree, 3, 4, 4);
  EXPECT_EQ(infer_topology(per_numa).spec, "numa:2,package:2,node:3");
  expect_groups_match_places(infer_topology(per_numa), per_numa);
  // A package a rank.
  EXPECT_EQ(infer_topology(block_placement(tree, 2, 2, 8)).spec, "package:2,node:2");
  // One rank a host: the node level, inside it a level of one rank, so that the node level is
  // not the world (a single level would be both).
  const auto one_per_host = block_placement(tree, 4, 1, 16);
  EXPECT_EQ(infer_topology(one_per_host).spec, "core:1,node:4");
  const Topology t = Topology::parse("core:1,node:4", 4);
  EXPECT_EQ(t.span(t.node_level()), 1);
  expect_groups_match_places(infer_topology(one_per_host), one_per_host);
  // One rank in all: one level of one.
  EXPECT_EQ(infer_topology(block_placement(tree, 1, 1, 16)).spec, "node:1");
  // Two L3 caches in each NUMA node (one NUMA node a package).
  const MachineTree split_l3 = MachineTree::synthetic("pack:2 numa:1 l3:2 core:2 pu:1");
  const auto by_l3 = block_placement(split_l3, 2, 8, 1);
  EXPECT_EQ(infer_topology(by_l3).spec, "core:2,l3:2,package:2,node:2");
  expect_groups_match_places(infer_topology(by_l3), by_l3);
  // A machine with one package, NUMA node and L3 (this build machine's kind).
  const MachineTree small = MachineTree::synthetic("pack:1 numa:1 l3:1 core:2 pu:1");
  EXPECT_EQ(infer_topology(block_placement(small, 2, 2, 1)).spec, "core:2,node:2");
}

TEST(AutoTopology, UnboundRanksGiveTheNodeLevelWithANote) {
  const MachineTree tree = MachineTree::synthetic(kTwoSocket);
  const auto ranks = block_placement(tree, 2, 4, -1);
  const InferredTopology found = infer_topology(ranks);
  EXPECT_EQ(found.spec, "core:4,node:2");
  ASSERT_EQ(found.notes.size(), 1u);
  EXPECT_NE(found.notes[0].find("--bind-to core"), std::string::npos) << found.notes[0];
  expect_groups_match_places(found, ranks);
}

TEST(AutoTopology, RoundRobinPlacementInsideAHostKeepsOnlyTheLevelsItCanDescribe) {
  const MachineTree tree = MachineTree::synthetic(kTwoSocket);
  // Ranks alternate between the packages: a package's ranks are not consecutive.
  std::vector<RankPlace> ranks;
  for (int i = 0; i < 4; ++i) ranks.push_back({0, tree.place_of_cores((i % 2) * 8 + i / 2, 1)});
  const InferredTopology found = infer_topology(ranks);
  EXPECT_EQ(found.spec, "core:4,node:1");
  ASSERT_EQ(found.notes.size(), 1u);
  EXPECT_NE(found.notes[0].find("package are not consecutive"), std::string::npos) << found.notes[0];
}

TEST(AutoTopology, HostsThatAreNotBlocksOfOneSizeAreRefused) {
  const HostPlace any{0, 0, 0};
  const std::vector<RankPlace> alternating = {{0, any}, {1, any}, {0, any}, {1, any}};
  try {
    (void)infer_topology(alternating);
    FAIL() << "alternating hosts were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--map-by slot"), std::string::npos) << e.what();
  }
  const std::vector<RankPlace> uneven = {{0, any}, {0, any}, {0, any}, {3, any}};
  EXPECT_THROW((void)infer_topology(uneven), Error);
}

}  // namespace
}  // namespace strata
