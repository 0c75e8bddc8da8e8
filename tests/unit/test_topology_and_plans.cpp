// Topology parsing and group arithmetic, shard plans and their refusals, and the closed-form
// traffic against both a hand derivation and the step schedule's own byte count. No MPI needed.
#include <gtest/gtest.h>

#include "hw/cluster_model.hpp"
#include "train/engine_setup.hpp"

#include <set>
#include <string>
#include <tuple>

#include "core/error.hpp"
#include "support/error_text.hpp"
#include "topo/topology.hpp"
#include "support/plan_formulas.hpp"
#include "comm/collective_spec.hpp"
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
  // --topology's presets are the cluster models' levels: one source of the hardware facts.
  EXPECT_EQ(resolve_topology("frontier", 16).to_string(), ClusterModel::preset("frontier").topology(2).to_string());
  EXPECT_EQ(resolve_topology("dgx", 16).to_string(), ClusterModel::preset("dgx-a100").topology(2).to_string());
  EXPECT_EQ(resolve_topology("dgx", 16).level(1).fanout, 2);
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
  EXPECT_NE(error_of([] { Topology::parse("cluster", 8); }).find("unknown topology 'cluster'"), std::string::npos);
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
  const Topology f = resolve_topology("frontier", 16);
  const ShardPlan hier3 = ShardPlan::preset("hier3", f);
  EXPECT_EQ(hier3.describe(f), "weights=gcd(2) secondary=none grads=gpu(8) optim=node(16)");
  EXPECT_EQ(ShardPlan::preset("zeropp", f).describe(f),
            "weights=node(16) secondary=gpu(8) grads=node(16) optim=node(16) quant weights=int8/256 (forward) "
            "grads=int4/64");
  EXPECT_EQ(ShardPlan::preset("mics", f).describe(f), "weights=gpu(8) secondary=none grads=gpu(8) optim=gpu(8)");
  EXPECT_EQ(ShardPlan::preset("zero1", f).describe(f), "weights=none secondary=none grads=none optim=node(16)");
  // On dgx the innermost level is already the node level.
  const Topology d = resolve_topology("dgx", 16);
  EXPECT_EQ(ShardPlan::preset("hier3", d).describe(d), "weights=gpu(8) secondary=none grads=gpu(8) optim=node(16)");
  const ShardPlan explicit_plan = ShardPlan::parse("weights=gcd,grads=gpu,optim=world,secondary=none", f);
  EXPECT_EQ(explicit_plan.describe(f), hier3.describe(f));
}

TEST(ShardPlanTest, RefusesBadPlansNamingTheRule) {
  const Topology f = resolve_topology("frontier", 16);
  EXPECT_NE(error_of([&] { ShardPlan::parse("weights=node,grads=node,optim=gpu", f); }).find("at least as finely as the gradients"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("weights=gpu,secondary=node,grads=node,optim=node", f); }).find("smaller group than the primary"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("secondary=gcd,grads=node,optim=node", f); }).find("needs partitioned weights"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("weights=rack", f); }).find("is not a level of topology"), std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("weights=gcd,weights=gpu", f); }).find("given twice"), std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("optim=gcd,optimizer=node", f); }).find("given twice"), std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("gradients=gcd", f); }).find("unknown key 'gradients'"), std::string::npos);
  EXPECT_NE(error_of([&] { ShardPlan::parse("zero4", f); }).find("unknown plan"), std::string::npos);
}

// ZeRO++'s quantized collectives are options of any plan: on in zeropp, off elsewhere unless asked.
TEST(ShardPlanTest, QuantizationIsAnOptionOfEveryPlan) {
  const Topology f = resolve_topology("frontier", 16);
  const ShardPlan zeropp = ShardPlan::preset("zeropp", f);
  EXPECT_EQ(zeropp.weight_quant(false), (QuantFormat{QuantBits::kInt8, kDefaultWeightQuantBlock}));
  // Its backward gathers read the hpZ copy, which already holds the forward's decoded weights.
  EXPECT_FALSE(zeropp.weight_quant(true).enabled());
  EXPECT_EQ(zeropp.grad_quant(), (QuantFormat{QuantBits::kInt4, kDefaultGradQuantBlock}));
  EXPECT_FALSE(ShardPlan::preset("hier3", f).quantized());

  const ShardPlan hier3q = ShardPlan::parse("hier3,quant_weights=int8,quant_grads=int4,quant_block=4096", f);
  const ShardPlan hier3 = ShardPlan::preset("hier3", f);
  EXPECT_EQ(std::tie(hier3q.weights, hier3q.secondary, hier3q.grads, hier3q.optimizer),
            std::tie(hier3.weights, hier3.secondary, hier3.grads, hier3.optimizer));
  EXPECT_EQ(hier3q.weight_quant(false), (QuantFormat{QuantBits::kInt8, 4096}));
  EXPECT_EQ(hier3q.grad_quant(), (QuantFormat{QuantBits::kInt4, 4096}));
  const ShardPlan blocks = ShardPlan::parse("zeropp,quant_weights_block=1024,quant_grads_block=32", f);
  EXPECT_EQ(blocks.weight_quant(false).block, 1024u);
  EXPECT_EQ(blocks.grad_quant().block, 32u);
  // Without a secondary copy backward gathers the primary again: quantized alike (auto), so it
  // computes with the very weights forward used.
  EXPECT_EQ(hier3q.weight_quant(true), hier3q.weight_quant(false));
  EXPECT_FALSE(ShardPlan::parse("hier3,quant_weights=int8,quant_backward=off", f).weight_quant(true).enabled());
  EXPECT_TRUE(ShardPlan::parse("zeropp,quant_backward=on", f).weight_quant(true).enabled());
  const ShardPlan off = ShardPlan::parse("zeropp,quant=none", f);
  EXPECT_FALSE(off.quantized());
  EXPECT_EQ(off.secondary, zeropp.secondary);
  // Off is one value, whatever the block size, so unquantized collective specs compare equal.
  EXPECT_EQ((QuantFormat{QuantBits::kNone, 64}), (QuantFormat{QuantBits::kNone, 0}));
  EXPECT_NE((QuantFormat{QuantBits::kInt8, 64}), (QuantFormat{QuantBits::kInt8, 128}));
  EXPECT_EQ(ShardPlan::parse("weights=node,grads=node,optim=node,quant_grads=int8", f).grad_quant().bits, QuantBits::kInt8);
}

TEST(ShardPlanTest, RefusesBadQuantizationNamingTheRule) {
  const Topology f = resolve_topology("frontier", 16);
  auto refuses = [&](const char* spec, const char* words) {
    const std::string e = error_of([&] { ShardPlan::parse(spec, f); });
    EXPECT_NE(e.find(words), std::string::npos) << spec << ": " << e;
  };
  refuses("ddp,quant_weights=int8", "quant_weights needs partitioned weights");
  refuses("zero3,quant_backward=on", "quant_backward has no effect without quant_weights");
  refuses("zero3,quant_backward=maybe", "must be auto, on or off");
  refuses("zero3,quant_grads=int2", "'int2' is not a quantization (int8, int4 or none)");
  refuses("zero3,quant_block=7", "must be even and between 16 and");
  refuses("zero3,quant_block=4096x", "is not a whole number");
  refuses("zero3,quant_block=0", "must be even");
  refuses("zeropp,quant=int8", "only quant=none");
  refuses("zero3,quant_grads=int4,quant=none", "contradict");
  refuses("zero3,quant=none,quant_weights=int8", "contradict");  // in either order
  refuses("zeropp,quant_backward=on,quant=none", "contradict");
  refuses("zero3,quant_grads_block=64", "quant_grads_block has no effect without quant_grads");
  refuses("zero3,quant_backward=off", "quant_backward has no effect without quant_weights");
  refuses("zero3,quant_block=64", "quant_block has no effect");
  refuses("zero3,", "item 2 is empty");
  refuses("auto,quant_grads=int4", "'auto' takes no overrides");
  refuses("zeropp,zero3", "only the first item may be a preset name");
  refuses("zeropp,quant_block=128,quant_grads_block=64", "quant_block sets both block sizes");
  refuses("zeropp,quant_weights_block=128,quant_block=64", "quant_block sets both block sizes");
  refuses("zeropp,quant_grads_block=30000000", "must be even and between");
  refuses("zeropp,quant_grads=int8,quant_grads=int4", "given twice");
  refuses("zero3,bucket_bytes=100", "below the 4096 a bucket must hold");
  refuses("zero3,bucket_bytes=8192,reduce_bucket_bytes=4096", "bucket_bytes sets both bucket sizes");
  refuses("zero3,gather_bucket_bytes=8192,bucket_bytes=4096", "bucket_bytes sets both bucket sizes");
  refuses("zero3,collectives=ring", "must be hierarchical or flat");
}

// Gathers and reductions each have a bucket size (DeepSpeed's prefetch and reduce buckets);
// bucket_bytes sets both, and a plan's text form gives back the same sizes.
TEST(ShardPlanTest, BucketSizesParseAndRoundTrip) {
  const Topology f = resolve_topology("frontier", 16);
  const ShardPlan both = ShardPlan::parse("zero3,bucket_bytes=8192", f);
  EXPECT_EQ(both.gather_bucket_bytes, 8192u);
  EXPECT_EQ(both.reduce_bucket_bytes, 8192u);
  const ShardPlan apart = ShardPlan::parse("zero3,gather_bucket_bytes=8192,reduce_bucket_bytes=65536,collectives=flat", f);
  EXPECT_EQ(apart.gather_bucket_bytes, 8192u);
  EXPECT_EQ(apart.reduce_bucket_bytes, 65536u);
  for (const ShardPlan& p : {both, apart}) {
    const ShardPlan back = ShardPlan::parse(p.spec(f), f);
    EXPECT_EQ(back.gather_bucket_bytes, p.gather_bucket_bytes) << p.spec(f);
    EXPECT_EQ(back.reduce_bucket_bytes, p.reduce_bucket_bytes) << p.spec(f);
    EXPECT_EQ(back.collectives, p.collectives) << p.spec(f);
  }
  EXPECT_NE(apart.describe(f).find("gather buckets of 8192 bytes reduction buckets of 65536 bytes"), std::string::npos)
      << apart.describe(f);
}

// Quantized collectives move one blob per piece: codes plus a 4-byte scale per started block.
// Hand-derived on gcd:2,gpu:3,node:2 (12 ranks) for 12000 elements in blocks of 256.
TEST(CollectiveSpecTest, QuantizedBytesPerLevelByHand) {
  const Topology t = Topology::parse("gcd:2,gpu:3,node:2", 12);
  const QuantFormat int8{QuantBits::kInt8, 256}, int4{QuantBits::kInt4, 256};
  // All-gather: each piece is 1000 elements = 1000 code bytes + 4 blocks x 4 = 1016 bytes. Outermost
  // first: node sends its 1 blob to 1 peer, gpu its 2 blobs to 2 peers, gcd its 6 blobs to 1.
  const CollectiveSpec gather{CollectiveKind::kAllGather, 0, 2, 12000, DType::kF32, int8};
  EXPECT_EQ(collective_bytes_by_level(t, gather), (std::vector<std::uint64_t>{6 * 1016, 2 * 2 * 1016, 1016}));
  // Reduce-scatter, innermost first: gcd chunks of 6000 (3000 + 24 x 4 = 3096 bytes) to 1 peer,
  // gpu chunks of 2000 (1000 + 8 x 4 = 1032) to 2 peers, node chunks of 1000 (500 + 4 x 4 = 516).
  const CollectiveSpec reduce{CollectiveKind::kReduceScatter, 0, 2, 12000, DType::kF32, int4};
  EXPECT_EQ(collective_bytes_by_level(t, reduce), (std::vector<std::uint64_t>{3096, 2 * 1032, 516}));
  // An all-reduce is the two; an odd piece of int4 takes a last half byte.
  const CollectiveSpec all{CollectiveKind::kAllReduce, 1, 1, 3 * 333, DType::kF32, int4};
  // Reduce: chunks of 333 (167 + 2 x 4 = 175) to 2 peers; gather: the 175-byte piece to 2 peers.
  EXPECT_EQ(collective_bytes_by_level(t, all), (std::vector<std::uint64_t>{0, 2 * 175 + 2 * 175, 0}));
  EXPECT_EQ(collective_calls_by_level(t, all), (std::vector<std::uint64_t>{0, 2, 0}));
  EXPECT_EQ(describe_collective(t, reduce), "reduce-scatter over gcd..node of 12000 f32 as int4/256");
  // The unquantized count is unchanged by the spec's new field.
  const CollectiveSpec plain{CollectiveKind::kAllGather, 0, 2, 12000, DType::kBF16};
  EXPECT_EQ(collective_bytes_by_level(t, plain), (std::vector<std::uint64_t>{6000 * 2, 2 * 2000 * 2, 1000 * 2}));
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
  const Topology t = resolve_topology("frontier", 16);
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
