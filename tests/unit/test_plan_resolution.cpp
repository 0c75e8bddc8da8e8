// What a shard plan resolves to on topologies where its levels collapse: the plan that runs and
// the one-line note saying what it effectively is and why. No MPI needed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "train/engine_setup.hpp"

#include <string>

#include "plan/shard_plan.hpp"
#include "topo/topology.hpp"

namespace strata {
namespace {

bool same_levels(const ShardPlan& a, const ShardPlan& b) {
  return a.weights == b.weights && a.secondary == b.secondary && a.grads == b.grads && a.optimizer == b.optimizer;
}

bool mentions(const std::string& note, const std::string& phrase) { return note.find(phrase) != std::string::npos; }

class OnFlatTopology : public ::testing::TestWithParam<const char*> {};

TEST_P(OnFlatTopology, HierarchicalPresetsRunAsZero3) {
  const Topology t = Topology::parse("flat", 8);
  const ShardPlan plan = ShardPlan::preset(GetParam(), t);
  const PlanResolution r = resolve_plan(plan, t);

  EXPECT_EQ(r.plan.name, plan.name);
  EXPECT_EQ(r.plan.weights, 0);
  EXPECT_EQ(r.plan.grads, 0);
  EXPECT_EQ(r.plan.optimizer, 0);
  EXPECT_FALSE(r.plan.has_secondary());
  EXPECT_TRUE(mentions(r.note, fmt::format("plan {} on topology world:8", GetParam()))) << r.note;
  EXPECT_TRUE(mentions(r.note, "runs as zero3")) << r.note;
  EXPECT_TRUE(mentions(r.note, "all over 8 ranks")) << r.note;
  EXPECT_TRUE(mentions(r.note, "with one level")) << r.note;
  EXPECT_EQ(r.note.find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Presets, OnFlatTopology, ::testing::Values("hier3", "mics", "zeropp"));

TEST(PlanResolutionTest, Hier3OnThreeRealLevelsIsWhatItSays) {
  const Topology t = Topology::parse("gcd:2,gpu:4,node:2", 16);
  const ShardPlan plan = ShardPlan::preset("hier3", t);
  const PlanResolution r = resolve_plan(plan, t);

  EXPECT_TRUE(r.note.empty()) << r.note;
  EXPECT_TRUE(same_levels(r.plan, plan));
  EXPECT_EQ(r.plan.weights, 0);
  EXPECT_EQ(r.plan.grads, 1);
  EXPECT_EQ(r.plan.optimizer, 2);
}

TEST(PlanResolutionTest, ZeroppWithinRealNodesIsWhatItSays) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const ShardPlan plan = ShardPlan::preset("zeropp", t);
  const PlanResolution r = resolve_plan(plan, t);

  EXPECT_TRUE(r.note.empty()) << r.note;
  EXPECT_TRUE(same_levels(r.plan, plan));
  EXPECT_EQ(r.plan.secondary, 1);
}

TEST(PlanResolutionTest, Hier3OnDgxSharesTheNodeLevelAndMatchesNoOtherPreset) {
  const Topology t = resolve_topology("dgx", 16);
  const ShardPlan plan = ShardPlan::preset("hier3", t);
  const PlanResolution r = resolve_plan(plan, t);

  EXPECT_TRUE(same_levels(r.plan, plan));
  EXPECT_EQ(t.span(r.plan.weights), 8);
  EXPECT_EQ(t.span(r.plan.grads), 8);
  EXPECT_EQ(t.span(r.plan.optimizer), 16);
  EXPECT_TRUE(mentions(r.note, "plan hier3 on topology " + t.to_string())) << r.note;
  EXPECT_TRUE(mentions(r.note, "the innermost level is the node level")) << r.note;
  EXPECT_TRUE(mentions(r.note, "weights and grads over 8 ranks")) << r.note;
  EXPECT_TRUE(mentions(r.note, "optimizer over 16 ranks")) << r.note;
  // mics keeps the optimizer within a node (8 ranks), zero3 spreads the weights over 16.
  EXPECT_TRUE(mentions(r.note, "no other preset")) << r.note;
  EXPECT_FALSE(mentions(r.note, "runs as")) << r.note;
}

TEST(PlanResolutionTest, LevelOfFanOutOneIsNamed) {
  // gcd:1 leaves hier3's weights whole on every rank.
  const Topology t = Topology::parse("gcd:1,gpu:4,node:2", 8);
  const PlanResolution r = resolve_plan(ShardPlan::preset("hier3", t), t);

  EXPECT_TRUE(mentions(r.note, "level gcd has fan-out 1")) << r.note;
  EXPECT_TRUE(mentions(r.note, "weights replicated")) << r.note;
  EXPECT_TRUE(mentions(r.note, "grads over 4 ranks")) << r.note;
  EXPECT_TRUE(mentions(r.note, "optimizer over 8 ranks")) << r.note;
}

TEST(PlanResolutionTest, SingleNodeMicsRunsAsZero3) {
  const Topology t = resolve_topology("dgx", 8);
  const PlanResolution r = resolve_plan(ShardPlan::preset("mics", t), t);

  EXPECT_TRUE(mentions(r.note, "runs as zero3")) << r.note;
  EXPECT_TRUE(mentions(r.note, "level node has fan-out 1")) << r.note;
}

TEST(PlanResolutionTest, SingleNodeZeroppDropsItsSecondaryAndRunsAsZero3) {
  const Topology t = resolve_topology("dgx", 8);
  const ShardPlan plan = ShardPlan::preset("zeropp", t);
  ASSERT_TRUE(plan.has_secondary());
  const PlanResolution r = resolve_plan(plan, t);

  EXPECT_FALSE(r.plan.has_secondary());
  EXPECT_EQ(r.plan.weights, plan.weights);
  EXPECT_TRUE(mentions(r.note, "runs as zero3")) << r.note;
  EXPECT_TRUE(mentions(r.note, "dropped")) << r.note;
}

TEST(PlanResolutionTest, Zero3IsNotReportedAsTheHierarchicalPresetsItEqualsOnOneNode) {
  // On one node mics and zeropp collapse to zero3; zero3 itself is still exactly zero3.
  const Topology t = resolve_topology("dgx", 8);
  EXPECT_TRUE(resolve_plan(ShardPlan::preset("zero3", t), t).note.empty());
  EXPECT_TRUE(resolve_plan(ShardPlan::preset("ddp", t), t).note.empty());
}

TEST(PlanResolutionTest, ExplicitSecondaryWithTheWeightsSpanIsDropped) {
  // gpu:1 makes the gpu group the gcd group: secondary and weights both over 2 ranks.
  const Topology t = Topology::parse("gcd:2,gpu:1,node:4", 8);
  const ShardPlan plan = ShardPlan::parse("weights=gpu,secondary=gcd,grads=world,optim=world", t);
  const PlanResolution r = resolve_plan(plan, t);

  EXPECT_FALSE(r.plan.has_secondary());
  EXPECT_EQ(r.plan.secondary, kReplicated);
  EXPECT_EQ(r.plan.weights, plan.weights);
  EXPECT_EQ(r.plan.grads, plan.grads);
  EXPECT_EQ(r.plan.optimizer, plan.optimizer);
  EXPECT_EQ(r.plan.name, plan.name);
  EXPECT_TRUE(mentions(r.note, "plan weights=gpu,secondary=gcd,grads=world,optim=world on topology gcd:2,gpu:1,node:4"))
      << r.note;
  EXPECT_TRUE(mentions(r.note, "secondary copy at gcd(2)")) << r.note;
  EXPECT_TRUE(mentions(r.note, "weights at gpu(2)")) << r.note;
  EXPECT_TRUE(mentions(r.note, "dropped")) << r.note;
  EXPECT_FALSE(mentions(r.note, "runs as")) << r.note;
}

TEST(PlanResolutionTest, ExplicitSecondaryOverFewerRanksIsKept) {
  // gcd:1 gives the secondary one rank against the weights' four: a whole copy, but a smaller group.
  const Topology t = Topology::parse("gcd:1,gpu:4,node:2", 8);
  const ShardPlan plan = ShardPlan::parse("weights=gpu,secondary=gcd,grads=world,optim=world", t);
  const PlanResolution r = resolve_plan(plan, t);

  EXPECT_TRUE(r.note.empty()) << r.note;
  EXPECT_TRUE(same_levels(r.plan, plan));
}

TEST(PlanResolutionTest, ExplicitPlanIsNotComparedWithPresets) {
  // hier3's levels on dgx, which as the preset get a note; asked for by level, they are what they say.
  const Topology t = resolve_topology("dgx", 16);
  const ShardPlan plan = ShardPlan::parse("weights=gpu,grads=gpu,optim=world", t);
  ASSERT_TRUE(same_levels(plan, ShardPlan::preset("hier3", t)));
  const PlanResolution r = resolve_plan(plan, t);

  EXPECT_TRUE(r.note.empty()) << r.note;
  EXPECT_TRUE(same_levels(r.plan, plan));
}

}  // namespace
}  // namespace strata
