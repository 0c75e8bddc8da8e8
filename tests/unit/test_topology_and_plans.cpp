// Topology parsing and group arithmetic, shard plans and their refusals, and the closed-form
// traffic against both a hand derivation and the step schedule's own byte count. No MPI needed.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/error.hpp"
#include "support/error_text.hpp"
#include "topo/topology.hpp"
#include "support/plan_formulas.hpp"
#include "plan/shard_plan.hpp"

namespace strata {
namespace {

using testing::error_of;

TEST(TopologyTest, ParsesLevelsBandwidthsAndStar) {
  const Topology t = Topology::parse("gcd:2@200GB/s~1us,gpu:4@50GB/s,node:*@100Gb/s", 32);
  ASSERT_EQ(t.level_count(), 3);
  EXPECT_EQ(t.level(2).fanout, 4);
  EXPECT_DOUBLE_EQ(t.level(0).bandwidth, 200e9);
  EXPECT_DOUBLE_EQ(t.level(0).latency, 1e-6);
  EXPECT_DOUBLE_EQ(t.level(2).bandwidth, 12.5e9);
  EXPECT_EQ(t.span(1), 8);
  EXPECT_EQ(t.find_level("world"), 2);
  EXPECT_EQ(t.node_level(), 1);
  EXPECT_EQ(t.to_string(), "gcd:2@200GB/s~1us,gpu:4@50GB/s,node:4@12.5GB/s");
}

TEST(TopologyTest, PresetsFitTheWorld) {
  EXPECT_EQ(Topology::preset("frontier", 16).to_string(), "gcd:2@200GB/s~1us,gpu:4@50GB/s~2us,node:2@12.5GB/s~5us");
  EXPECT_EQ(Topology::parse("dgx", 16).level(1).fanout, 2);
  EXPECT_EQ(Topology::parse("flat", 5).level_count(), 1);
}

TEST(TopologyTest, RefusesBadSpecsWithASentence) {
  EXPECT_NE(error_of([] { Topology::parse("gcd:2,gpu:2,node:2", 4); }).find("describes 8 ranks but the job has 4"),
            std::string::npos);
  EXPECT_NE(error_of([] { Topology::parse("gcd:2,gpu:3,node:*", 8); }).find("does not divide the world size 8"),
            std::string::npos);
  EXPECT_NE(error_of([] { Topology::parse("gcd:*,gpu:2", 8); }).find("only the outermost"), std::string::npos);
  EXPECT_NE(error_of([] { Topology::parse("gcd:0,gpu:2", 8); }).find("positive integer"), std::string::npos);
  EXPECT_NE(error_of([] { Topology::parse("gpu:2,gpu:4", 8); }).find("appears twice"), std::string::npos);
  EXPECT_NE(error_of([] { Topology::parse("gpu:2@fast,node:*", 8); }).find("needs a unit"), std::string::npos);
  EXPECT_NE(error_of([] { Topology::parse("cluster", 8); }).find("unknown topology preset"), std::string::npos);
}

TEST(TopologyTest, GroupsFollowContiguousPlacement) {
  const Topology t = Topology::parse("gcd:2,gpu:3,node:2", 12);
  EXPECT_EQ(t.coordinates(7), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(t.group(7, 0).ranks, (std::vector<int>{6, 7}));
  EXPECT_EQ(t.group(7, 1).ranks, (std::vector<int>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(t.cross_group(7, 0).ranks, (std::vector<int>{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(t.cross_group(7, 1).ranks, (std::vector<int>{1, 7}));
  EXPECT_EQ(t.levels_group(7, 1, 1).ranks, (std::vector<int>{7, 9, 11}));
}

TEST(TopologyTest, ShardIndexIsAPermutationAndShardsNest) {
  const Topology t = Topology::parse("gcd:2,gpu:3,node:2", 12);
  for (int last = 0; last < 3; ++last) {
    std::set<int> seen;
    for (int r : t.group(0, last).ranks) seen.insert(t.shard_index(r, 0, last));
    EXPECT_EQ(static_cast<int>(seen.size()), t.span(last));
    EXPECT_EQ(*seen.rbegin(), t.span(last) - 1);
  }
  // The shard over levels 0..l+1 lies inside the shard over 0..l.
  const std::size_t n = 12 * 5;
  for (int r = 0; r < 12; ++r) {
    for (int l = 0; l + 1 < 3; ++l) {
      const std::size_t outer = n / t.span(l), inner = n / t.span(l + 1);
      const std::size_t a = t.shard_index(r, 0, l) * outer, b = t.shard_index(r, 0, l + 1) * inner;
      EXPECT_GE(b, a);
      EXPECT_LE(b + inner, a + outer);
    }
  }
}

TEST(ShardPlanTest, PresetsFollowTheDesignTable) {
  const Topology f = Topology::preset("frontier", 16);
  const ShardPlan hier3 = ShardPlan::preset("hier3", f);
  EXPECT_EQ(hier3.describe(f), "weights=gcd(2) secondary=none grads=gpu(8) optim=node(16)");
  EXPECT_EQ(ShardPlan::preset("zeropp", f).describe(f), "weights=node(16) secondary=gpu(8) grads=node(16) optim=node(16)");
  EXPECT_EQ(ShardPlan::preset("mics", f).describe(f), "weights=gpu(8) secondary=none grads=gpu(8) optim=gpu(8)");
  EXPECT_EQ(ShardPlan::preset("zero1", f).describe(f), "weights=none secondary=none grads=none optim=node(16)");
  // On dgx the innermost level is already the node level.
  const Topology d = Topology::preset("dgx", 16);
  EXPECT_EQ(ShardPlan::preset("hier3", d).describe(d), "weights=gpu(8) secondary=none grads=gpu(8) optim=node(16)");
  const ShardPlan explicit_plan = ShardPlan::parse("weights=gcd,grads=gpu,optim=world,secondary=none", f);
  EXPECT_EQ(explicit_plan.describe(f), hier3.describe(f));
}

TEST(ShardPlanTest, RefusesBadPlansNamingTheRule) {
  const Topology f = Topology::preset("frontier", 16);
  EXPECT_NE(error_of([&] { ShardPlan::parse("weights=node,grads=node,optim=gpu", f); }).find("at least as finely as the gradients"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("weights=gpu,secondary=node,grads=node,optim=node", f); }).find("smaller group than the primary"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("secondary=gcd,grads=node,optim=node", f); }).find("needs partitioned weights"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("weights=rack", f); }).find("is not a level of topology"), std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("weights=gcd,weights=gpu", f); }).find("given twice"), std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("optim=gcd,optimizer=node", f); }).find("given twice"), std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("gradients=gcd", f); }).find("unknown state"), std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("zero4", f); }).find("unknown plan"), std::string::npos);
}

// A model whose units are all the same size makes the hand derivation short.
struct Fixture {
  GptConfig config = [] {
    GptConfig c = GptConfig::preset("tiny");
    return c;
  }();
  ModelLayout layout{config};
};

TEST(PlanFormulas, Zero3OnAFlatWorldIsThreeTimesPsiPerMicroBatch) {
  Fixture fx;
  const Topology flat = Topology::parse("flat", 8);
  const ShardPlan zero3 = ShardPlan::preset("zero3", flat);
  const auto padded = padded_unit_sizes(fx.layout, flat);
  std::uint64_t psi = 0, embedding = padded[0], final_norm = padded.back();
  for (auto n : padded) psi += n;
  const TrafficFormula f = traffic_formula(fx.layout, zero3, flat, DType::kF32, DType::kF32);
  // forward all-gather of every unit (the tied token table twice), backward all-gather of the
  // blocks, gradient reduce-scatter: each moves 7/8 of its bytes; the head needs no second gather
  // of the final norm and the embedding backward no gather at all.
  const std::uint64_t gathered = (psi + embedding) + (psi - embedding - final_norm);
  EXPECT_EQ(f.micro_batch[0], 7 * (gathered + psi) / 8 * 4);
  EXPECT_EQ(f.boundary[0], 0u);
}

TEST(PlanFormulas, DdpIsOneAllReducePerStepAndEqualsZero1) {
  Fixture fx;
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const TrafficFormula ddp = traffic_formula(fx.layout, ShardPlan::preset("ddp", t), t, DType::kF32, DType::kF32);
  const TrafficFormula zero1 = traffic_formula(fx.layout, ShardPlan::preset("zero1", t), t, DType::kF32, DType::kF32);
  const auto padded = padded_unit_sizes(fx.layout, t);
  std::uint64_t psi = 0;
  for (auto n : padded) psi += n;
  EXPECT_EQ(ddp.micro_batch, (std::vector<std::uint64_t>{0, 0, 0}));
  // Hierarchical all-reduce: reduce-scatter and all-gather each move (f-1)/f of the block still
  // in play at each level: psi/2 at gcd, psi/4 at gpu, psi/8 at node, twice, in fp32.
  EXPECT_EQ(ddp.boundary, (std::vector<std::uint64_t>{2 * psi / 2 * 4, 2 * psi / 4 * 4, 2 * psi / 8 * 4}));
  EXPECT_EQ(zero1.boundary, ddp.boundary);
}

TEST(PlanFormulas, Hier3KeepsTheOutermostLevelQuietDuringMicroBatches) {
  Fixture fx;
  const Topology t = Topology::preset("frontier", 16);
  const auto top = static_cast<std::size_t>(t.level_count() - 1);
  const auto outer = [&](const char* name) {
    return traffic_formula(fx.layout, ShardPlan::preset(name, t), t, DType::kBF16, DType::kBF16).micro_batch[top];
  };
  EXPECT_EQ(outer("hier3"), 0u);
  EXPECT_LT(outer("zeropp"), outer("zero3"));
}

TEST(PlanFormulas, PaddingMakesEveryShardWhole) {
  Fixture fx;
  const Topology t = Topology::parse("gcd:2,gpu:3,node:1", 6);
  const auto padded = padded_unit_sizes(fx.layout, t);
  for (std::size_t u = 0; u < padded.size(); ++u) {
    EXPECT_EQ(padded[u] % 6, 0u);
    EXPECT_LT(padded[u] - fx.layout.unit(u).numel, 6u);
  }
  EXPECT_NE(fx.layout.unit(fx.layout.final_norm_unit()).numel % 6, 0u) << "the test needs a unit that does not divide";
}

}  // namespace
}  // namespace strata
