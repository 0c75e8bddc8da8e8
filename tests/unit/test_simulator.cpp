// The simulator against closed forms: a ring all-gather, a two-level reduce-scatter, links shared
// by several ranks, perfect overlap and no overlap on a hand-made schedule; cluster files (strict
// keys, overrides of a preset, round trip); the activation bytes against what the model
// allocates; and the planner (every plan it emits validates and parses back; every preset appears
// when it fits; nothing over the budget is ranked).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "model/gpt.hpp"
#include "sim/engine_profile.hpp"
#include "sim/planner.hpp"
#include "sim/simulator.hpp"
#include "support/error_text.hpp"

namespace strata {
namespace {

using testing::error_of;
#define EXPECT_THROW_WITH(expr, text) \
  EXPECT_NE(error_of([&] { expr; }).find(text), std::string::npos) << error_of([&] { expr; })

DeviceModel device(double flops = 1e12, double memory_bandwidth = 1e11) {
  DeviceModel d;
  d.peak_flops = flops;
  d.efficiency = 0.5;
  d.memory_bandwidth = memory_bandwidth;
  return d;
}

void expect_close_rel(double got, double want) { EXPECT_NEAR(got, want, 1e-12 * std::abs(want)) << want; }

CollectiveSpec spec(CollectiveKind kind, int first, int last, std::size_t elements) {
  CollectiveSpec c;
  c.kind = kind;
  c.first_level = first;
  c.last_level = last;
  c.elements = elements;
  c.dtype = DType::kF32;
  return c;
}

TEST(CostModel, ARingAllGatherIsLatencyTimesStepsPlusTheFractionOfTheBufferOverBandwidth) {
  const Topology t = Topology::parse("world:8@10GB/s~5us", 8);
  const CostModel cost(t, device());
  const std::size_t n = 8 * 1000003;
  const double bytes = 4.0 * n;
  // p - 1 steps of latency, and (p - 1) / p of the buffer crosses each rank's link.
  const double expected = 7 * 5e-6 + (7.0 / 8.0) * bytes / 10e9;
  EXPECT_NEAR(cost.collective_seconds(spec(CollectiveKind::kAllGather, 0, 0, n)), expected, 1e-12 * expected);
  // An all-reduce is a reduce-scatter then an all-gather: twice the ring.
  EXPECT_NEAR(cost.collective_seconds(spec(CollectiveKind::kAllReduce, 0, 0, n)), 2 * expected, 2e-12 * expected);
}

TEST(CostModel, ATwoLevelReduceScatterPricesEachLevelWithThePieceThatCrossesIt) {
  const Topology t = Topology::parse("a:2@100GB/s~1us,b:4@10GB/s~10us", 8);
  const CostModel cost(t, device());
  const std::size_t n = 8 * 4096;
  // Innermost first: half the buffer crosses level a once; then the half splits into 4 and
  // 3 of those quarters cross level b.
  const double expected = (1 * 1e-6 + 1 * (n / 2.0) * 4 / 100e9) + (3 * 10e-6 + 3 * (n / 8.0) * 4 / 10e9);
  EXPECT_NEAR(cost.collective_seconds(spec(CollectiveKind::kReduceScatter, 0, 1, n)), expected, 1e-12 * expected);
  // Only the upper level: the whole buffer splits four ways there.
  const double upper = 3 * 10e-6 + 3 * (n / 4.0) * 4 / 10e9;
  EXPECT_NEAR(cost.collective_seconds(spec(CollectiveKind::kReduceScatter, 1, 1, n)), upper, 1e-12 * upper);
}

TEST(CostModel, ControlSumsCostRecursiveDoublingLatencyOnly) {
  const Topology t = Topology::parse("a:2@100GB/s~1us,b:4@10GB/s~10us", 8);
  const CostModel cost(t, device());
  CollectiveSpec c = spec(CollectiveKind::kControlSum, 0, 1, 1);
  EXPECT_DOUBLE_EQ(cost.collective_seconds(c), 2 * 1 * 1e-6 + 2 * 2 * 10e-6);
}

// A flat collective is one ring over every rank it covers: p - 1 steps, each a piece of the buffer
// on the slowest level the ring crosses (a per-rank share of that link), whatever the levels' order.
TEST(CostModel, AFlatRingPaysEveryStepAtTheSlowestLevelItCrosses) {
  const Topology t = Topology::parse("a:2@100GB/s~1us,b:4@10GB/s~10us", 8);
  const CostModel cost(t, device());
  const std::size_t n = 8 * 4096;
  CollectiveSpec c = spec(CollectiveKind::kAllGather, 0, 1, n);
  c.flat = true;
  const double piece = n / 8.0 * 4;
  const double step = 10e-6 + piece / 10e9;  // level b's step is the slower of the two
  expect_close_rel(cost.collective_seconds(c), 7 * step);
  c.kind = CollectiveKind::kAllReduce;  // a reduce-scatter ring then an all-gather ring
  expect_close_rel(cost.collective_seconds(c), 2 * 7 * step);
  // Level by level the slow level moves only its own share: far cheaper at this size.
  c.kind = CollectiveKind::kAllGather;
  c.flat = false;
  EXPECT_LT(cost.collective_seconds(c), 0.6 * 7 * step);
  // Over one level, flat and level-by-level are the same ring.
  CollectiveSpec one = spec(CollectiveKind::kAllGather, 1, 1, n);
  const double by_level = cost.collective_seconds(one);
  one.flat = true;
  expect_close_rel(cost.collective_seconds(one), by_level);
}

// A measured curve replaces latency + bytes / bandwidth: exact at its points, linear between
// them, the first point's time below it, the last segment's rate beyond it; per call, so a
// collective cut into buckets pays each call's size on the curve.
TEST(CostModel, AMeasuredCurveIsInterpolatedPerCall) {
  const Topology t = Topology::parse("a:2@1GB/s~1us", 2);
  const TransferCurve curve = {{64, 2e-6}, {4096, 6e-6}, {65536, 30e-6}};
  const CostModel cost(t, device(), {curve});
  expect_close_rel(cost.level_seconds(0, 4096, 1), 6e-6);
  expect_close_rel(cost.level_seconds(0, 2080, 1), 4e-6);       // halfway between 64 and 4096
  expect_close_rel(cost.level_seconds(0, 8, 1), 2e-6);          // below the curve: its first time
  expect_close_rel(cost.level_seconds(0, 2 * 65536, 1), 30e-6 + 65536 / ((65536.0 - 4096) / 24e-6));
  expect_close_rel(cost.level_seconds(0, 4 * 4096, 4), 4 * 6e-6);  // four calls of 4096 bytes
  // Without a curve, the same call is latency + bytes / bandwidth.
  const CostModel plain(t, device());
  expect_close_rel(plain.level_seconds(0, 4096, 1), 1e-6 + 4096 / 1e9);
  EXPECT_THROW_WITH(CostModel(t, device(), {curve, curve}), "2 transfer curves for the 1 levels");
}

// Buckets: the same bytes in more calls, so only the latency grows, by one ring per extra call.
TEST(CostModel, BucketsPayOneRingOfLatencyPerCall) {
  const Topology t = Topology::parse("world:8@10GB/s~5us", 8);
  const CostModel cost(t, device());
  const std::size_t n = 8 * 1024 * 64;
  const double whole = cost.collective_seconds(spec(CollectiveKind::kAllGather, 0, 0, n));
  double bucketed = 0.0;
  for (int b = 0; b < 4; ++b) {
    CollectiveSpec c = spec(CollectiveKind::kAllGather, 0, 0, n / 4);
    c.bucket_offset = static_cast<std::size_t>(b) * (n / 32);
    c.bucket_piece = n / 8;
    bucketed += cost.collective_seconds(c);
  }
  expect_close_rel(bucketed - whole, 3 * 7 * 5e-6);
}

TEST(ClusterModel, RanksSharingALinkEachGetTheirShare) {
  const ClusterModel frontier = ClusterModel::preset("frontier");
  const Topology t = frontier.topology(4);
  EXPECT_EQ(t.world_size(), 32);
  EXPECT_EQ(t.level(2).fanout, 4);
  EXPECT_DOUBLE_EQ(t.level(2).bandwidth, 12.5e9);  // 25 GB/s NIC for the 2 GCDs of a GPU
  const ClusterModel own_nic =
      ClusterModel::from_toml("base = \"frontier\"\n[level.node]\nranks_per_link = 1\n", "an override");
  const Topology u = own_nic.topology(4);
  EXPECT_DOUBLE_EQ(u.level(2).bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(u.level(0).bandwidth, 200e9);  // untouched keys keep the preset's figures
  // The node-level part of a world all-gather takes twice as long when two ranks share the NIC.
  const CostModel shared(t, frontier.device), alone(u, own_nic.device);
  CollectiveSpec c = spec(CollectiveKind::kAllGather, 2, 2, 4 * 1000000);
  const double latency = 3 * t.level(2).latency;
  EXPECT_NEAR(shared.collective_seconds(c) - latency, 2 * (alone.collective_seconds(c) - latency), 1e-12);
}

TEST(ClusterModel, PresetsRoundTripThroughTheirToml) {
  for (const std::string& name : ClusterModel::preset_names()) {
    const ClusterModel c = ClusterModel::preset(name);
    const ClusterModel back = ClusterModel::from_toml(c.to_toml(), "round trip of " + name);
    ASSERT_EQ(back.levels.size(), c.levels.size()) << name;
    for (std::size_t i = 0; i < c.levels.size(); ++i) {
      EXPECT_EQ(back.levels[i].name, c.levels[i].name) << name;
      EXPECT_EQ(back.levels[i].fanout, c.levels[i].fanout) << name;
      EXPECT_NEAR(back.levels[i].rank_bandwidth(), c.levels[i].rank_bandwidth(), 1e-5 * c.levels[i].rank_bandwidth()) << name;
    }
    EXPECT_NEAR(back.device.peak_flops, c.device.peak_flops, 1e-5 * c.device.peak_flops) << name;
    EXPECT_EQ(back.device.overlaps_communication, c.device.overlaps_communication) << name;
    EXPECT_NEAR(back.device.interference, c.device.interference, 1e-6) << name;
  }
}

// What calibrate writes (an interference and a measured curve per level) reads back as written,
// and a curve that is not ascending is refused naming the point.
TEST(ClusterModel, ACalibratedFileWithCurvesRoundTrips) {
  ClusterModel c = ClusterModel::preset("cpu");
  c.device.interference = 0.3125;
  c.device.handoff_seconds = 2.5e-4;
  c.device.collective_efficiency = 0.875;
  c.device.rate_by_tokens = {{32, 0.75}, {64, 1.0}, {256, 1.25}};
  c.levels[0].curve = {{64, 1.5e-6}, {256, 2.25e-6}, {1048576, 3.125e-4}};
  c.levels[1].curve = {{64, 2e-6}, {65536, 4e-5}};
  const ClusterModel back = ClusterModel::from_toml(c.to_toml(), "round trip");
  EXPECT_EQ(back.device.interference, 0.3125);
  EXPECT_EQ(back.device.handoff_seconds, 2.5e-4);
  EXPECT_EQ(back.device.collective_efficiency, 0.875);
  EXPECT_EQ(back.device.rate_by_tokens, c.device.rate_by_tokens);
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"cpu\"\n[device]\nrate_by_tokens = [[64, 1], [64, 2]]\n", "f"),
                    "'device.rate_by_tokens[1]' must have more tokens than the point before it");
  EXPECT_EQ(back.levels[0].curve, c.levels[0].curve);
  EXPECT_EQ(back.levels[1].curve, c.levels[1].curve);
  EXPECT_EQ(back.curves().size(), 2u);
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"cpu\"\n[level.core]\ncurve = [[64, 1e-6], [32, 2e-6]]\n", "f"),
                    "'level.core.curve[1]' must have more bytes than the point before it");
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"cpu\"\n[level.core]\ncurve = [[64, 1e-6], [128, 0.5e-6]]\n", "f"),
                    "'level.core.curve[1]' must not take less time");
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"cpu\"\n[level.core]\ncurve = [[64]]\n", "f"),
                    "'level.core.curve[0]' must be a [bytes, seconds] pair");
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"cpu\"\n[device]\ninterference = -0.1\n", "f"),
                    "'device.interference' must be at least 0");
}

TEST(ClusterModel, BadFilesAreRefusedNamingTheKey) {
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"frontier\"\n[device]\npeak_flop = 1e12\n", "file 'x.toml'"),
                    "cluster file 'x.toml': 'device.peak_flop' is not a device key");
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"frontier\"\nbandwidth = 3\n", "file 'x.toml'"),
                    "'bandwidth' is not a cluster key");
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"frontier\"\n[level.node]\nlink_bandwidth = -1\n", "f"),
                    "'level.node.link_bandwidth' must be above 0");
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"frontier\"\n[level.nic]\nfanout = 2\n", "f"),
                    "'level.nic' is not in the 'levels' list");
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"frontier\"\n[device]\nefficiency = nan\n", "f"),
                    "'device.efficiency' must be finite");
  EXPECT_THROW_WITH(ClusterModel::from_toml("base = \"frontier\"\n[level.gpu]\nfanout = \"*\"\n", "f"),
                    "may be \"*\" only on the outermost level");
  EXPECT_THROW_WITH(ClusterModel::load("no-such-cluster"), "unknown cluster 'no-such-cluster'");
}

// A hand-made list: gather unit 1 while unit 0 computes, then compute unit 1.
StepSchedule two_stage_schedule(std::size_t gather_elements, double flops) {
  StepSchedule s;
  s.unit_count = 2;
  s.padded_numel = {gather_elements, gather_elements};
  s.unit_names = {"u0", "u1"};
  ScheduleOp start;
  start.kind = OpKind::kGatherStart;
  start.unit = 1;
  start.comm = spec(CollectiveKind::kAllGather, 0, 0, gather_elements);
  ScheduleOp compute0;
  compute0.kind = OpKind::kForward;
  compute0.stage = ComputeStage::kBlock;
  compute0.unit = 0;
  compute0.flops = flops;
  ScheduleOp wait;
  wait.kind = OpKind::kGatherWait;
  wait.unit = 1;
  ScheduleOp compute1 = compute0;
  compute1.unit = 1;
  s.ops = {start, compute0, wait, compute1};
  return s;
}

// The simulator measures the second of two runs of the list (the steady state): its times are
// differences of clocks, exact to rounding, not to the bit.
void expect_close(double got, double want) { EXPECT_NEAR(got, want, 1e-12 * std::max(std::abs(want), 1e-9)); }

SimulationInputs tiny_inputs(bool overlap) {
  SimulationInputs in;
  in.model = GptConfig::preset("tiny");
  in.seq_len = 8;
  in.overlap = overlap;
  in.weight_dtype = in.grad_dtype = DType::kF32;  // bf16 would add the widening of the gathered copy
  return in;
}

TEST(Simulator, AGatherShorterThanTheComputeItOverlapsIsHiddenCompletely) {
  const Topology t = Topology::parse("world:4@1GB/s~1us", 4);
  const DeviceModel d = device(1e12);
  const CostModel cost(t, d);
  const StepSchedule s = two_stage_schedule(4 * 1000, 1e9);  // 2 ms of compute per stage
  const double gather = cost.collective_seconds(s.ops[0].comm);
  const double stage = 1e9 / (1e12 * 0.5);
  ASSERT_LT(gather, stage);
  const SimulationResult r = replay_schedule(s, tiny_inputs(true), cost);
  expect_close(r.step_seconds, 2 * stage);
  expect_close(r.exposed_seconds, 0.0);
  expect_close(r.communication_seconds, gather);
}

TEST(Simulator, WithoutOverlapEveryCollectiveAddsToTheStep) {
  const Topology t = Topology::parse("world:4@1GB/s~1us", 4);
  const CostModel cost(t, device(1e12));
  const StepSchedule s = two_stage_schedule(4 * 1000, 1e9);
  const double gather = cost.collective_seconds(s.ops[0].comm);
  const double stage = 1e9 / (1e12 * 0.5);
  const SimulationResult r = replay_schedule(s, tiny_inputs(false), cost);
  expect_close(r.step_seconds, gather + 2 * stage);
  expect_close(r.exposed_seconds, gather);
  // A device that cannot compute while communicating serializes the same way with overlap on.
  DeviceModel serial = device(1e12);
  serial.overlaps_communication = false;
  const CostModel serial_cost(t, serial);
  expect_close(replay_schedule(s, tiny_inputs(true), serial_cost).step_seconds, gather + 2 * stage);
}

TEST(Simulator, AGatherLongerThanTheComputeIsExposedByTheDifference) {
  const Topology t = Topology::parse("world:4@1GB/s~1us", 4);
  const CostModel cost(t, device(1e12));
  const StepSchedule s = two_stage_schedule(4 * 1000000, 1e9);
  const double gather = cost.collective_seconds(s.ops[0].comm);
  const double stage = 1e9 / (1e12 * 0.5);
  ASSERT_GT(gather, stage);
  const SimulationResult r = replay_schedule(s, tiny_inputs(true), cost);
  expect_close(r.step_seconds, gather + stage);
  EXPECT_NEAR(r.exposed_seconds, gather - stage, 1e-15);
}

// Compute beside a collective in flight runs 1 + interference times longer for as long as the
// collective runs, at full speed after it; inline (no overlap) nothing runs beside it.
TEST(Simulator, ComputeBesideACollectiveIsSlowedByTheInterference) {
  const Topology t = Topology::parse("world:4@1GB/s~1us", 4);
  DeviceModel d = device(1e12);
  d.interference = 0.25;
  const CostModel cost(t, d);
  const StepSchedule s = two_stage_schedule(4 * 100000, 1e9);
  const double gather = cost.collective_seconds(s.ops[0].comm);
  const double stage = 1e9 / (1e12 * 0.5);
  ASSERT_LT(gather * 1.25, stage);
  // The first stage computes at 1/1.25 of its speed while the gather runs, then at full speed.
  const SimulationResult r = replay_schedule(s, tiny_inputs(true), cost);
  expect_close(r.step_seconds, (gather + (stage - gather / 1.25)) + stage);
  expect_close(r.exposed_seconds, 0.0);
  // A collective longer than the stage slows all of it.
  const StepSchedule longer = two_stage_schedule(4 * 10000000, 1e9);
  const double g2 = cost.collective_seconds(longer.ops[0].comm);
  ASSERT_GT(g2, 1.25 * stage);
  const SimulationResult r2 = replay_schedule(longer, tiny_inputs(true), cost);
  expect_close(r2.step_seconds, g2 + stage);
  expect_close(r2.exposed_seconds, g2 - 1.25 * stage);
  // Inline, nothing overlaps: no slowdown.
  expect_close(replay_schedule(s, tiny_inputs(false), cost).step_seconds, gather + 2 * stage);
}

// A device's rate by tokens scales the compute of a micro-batch of that size (linear between the
// points, the nearest end's factor outside); a thread forced onto a shared core costs each started
// collective its hand-offs on the compute stream, and nothing when overlap is off or the device has
// a core for it; collectives run at the device's collective efficiency.
TEST(Simulator, ComputeFollowsTheRateByTokensAndForcedThreadsPayTheirHandOffs) {
  DeviceModel d = device(1e12);
  d.rate_by_tokens = {{32, 0.5}, {64, 1.0}, {128, 1.5}};
  const std::string stage = "block_forward";
  EXPECT_DOUBLE_EQ(d.stage_rate(stage, 64), 0.5e12);
  EXPECT_DOUBLE_EQ(d.stage_rate(stage, 96), 0.5e12 * 1.25);
  EXPECT_DOUBLE_EQ(d.stage_rate(stage, 16), 0.5e12 * 0.5);
  EXPECT_DOUBLE_EQ(d.stage_rate(stage, 1024), 0.5e12 * 1.5);
  EXPECT_DOUBLE_EQ(d.stage_rate(stage), 0.5e12);  // no size given: the calibrated shape's

  const Topology t = Topology::parse("world:4@1GB/s~1us", 4);
  DeviceModel shared = device(1e12);
  shared.overlaps_communication = false;
  shared.handoff_seconds = 3e-4;
  const StepSchedule s = two_stage_schedule(4 * 1000, 1e9);
  const CostModel cost(t, shared);
  const double gather = cost.collective_seconds(s.ops[0].comm);
  const double stage_s = 1e9 / (1e12 * 0.5);
  expect_close(replay_schedule(s, tiny_inputs(true), cost).step_seconds, 3e-4 + gather + 2 * stage_s);
  expect_close(replay_schedule(s, tiny_inputs(false), cost).step_seconds, gather + 2 * stage_s);
  shared.overlaps_communication = true;  // a core of its own: no hand-off priced, the gather hidden
  expect_close(replay_schedule(s, tiny_inputs(true), CostModel(t, shared)).step_seconds, 2 * stage_s);
  // Collectives inside a step at half their measured speed take twice as long.
  DeviceModel slow = device(1e12);
  slow.collective_efficiency = 0.5;
  expect_close(replay_schedule(s, tiny_inputs(false), CostModel(t, slow)).step_seconds, 2 * gather + 2 * stage_s);
}

TEST(Simulator, StepsComputeFlopsAndMemoryAgreeWithTheModel) {
  const ClusterModel c = ClusterModel::preset("dgx-h100");
  const Topology t = c.topology(2);
  SimulationInputs in;
  in.model = GptConfig::preset("gpt2-350m");
  in.micro_batch = 2;
  in.grad_accum = 3;
  in.plan = ShardPlan::preset("zero3", t);
  const SimulationResult r = simulate(in, t, c.device);
  const double tokens = 2.0 * 1024 * 3;
  EXPECT_NEAR(r.model_flops, in.model.flops_per_token(1024) * tokens, 1e-3 * r.model_flops);
  // Step time is at least the compute and at most compute plus every collective.
  EXPECT_GE(r.step_seconds, r.compute_seconds);
  EXPECT_LE(r.step_seconds, r.compute_seconds + r.communication_seconds + 1e-12);
  EXPECT_NEAR(r.step_seconds, r.compute_seconds + r.exposed_seconds, 1e-9 * r.step_seconds);
  EXPECT_EQ(r.memory.activations, Gpt::activation_bytes(in.model, 2, 1024).total(in.model.n_layer));
  // Recomputation keeps less and runs one more forward per block (but its MLP output product:
  // (16 C^2 + 4 T C) / (24 C^2 + 4 T C) of a block forward, about a fifth more compute here).
  in.activation_checkpointing = ActivationCheckpointing{1};
  const SimulationResult rc = simulate(in, t, c.device);
  EXPECT_LT(rc.memory.activations, r.memory.activations / 4);
  EXPECT_GT(rc.compute_seconds, r.compute_seconds * 1.15);
  EXPECT_EQ(rc.model_flops, r.model_flops);
  // The recompute ops' FLOPs per token: a block's forward (2 x its 12 C^2 matrix weights, and 4 T C
  // for attention) but its MLP output product (2 x 4 C^2).
  const double width = in.model.n_embd;
  EXPECT_NEAR(rc.hardware_flops - rc.model_flops, in.model.n_layer * (16.0 * width * width + 4.0 * 1024 * width) * tokens,
              1e-9 * rc.model_flops);
}

TEST(Simulator, ActivationBytesInClosedFormEqualWhatTheModelAllocates) {
  for (const auto& [name, batch, seq] : {std::tuple{"tiny", 3, 64}, std::tuple{"small", 2, 17}, std::tuple{"tiny", 1, 1}}) {
    const GptConfig c = GptConfig::preset(name);
    const Gpt gpt(c, batch, seq);
    EXPECT_EQ(Gpt::activation_bytes(c, batch, seq).total(c.n_layer), gpt.allocated_activation_bytes()) << name;
  }
}

// The DeepSpeed profile issues the same plan as DeepSpeed ZeRO does with its documented defaults:
// flat calls, gathers in 5e7-element prefetch buckets under ZeRO-3 (5e8 otherwise), reductions in
// 5e8-element buckets, one unit prefetched, no boundary overlap, overlap_comm only under ZeRO-3.
// The strata profile changes nothing.
TEST(EngineProfile, DeepSpeedRunsThePlanFlatInItsDefaultBucketsWithoutBoundaryOverlap) {
  const ClusterModel c = ClusterModel::preset("frontier");
  const Topology t = c.topology(2);
  SimulationInputs in;
  in.model = GptConfig::preset("gpt-1.3b");
  in.seq_len = 512;
  in.prefetch = 3;
  in.plan = ShardPlan::preset("zero3", t);
  const SimulationInputs same = with_engine_profile("strata", in);
  EXPECT_EQ(same.plan.spec(t), in.plan.spec(t));
  EXPECT_EQ(same.prefetch, 3);
  EXPECT_TRUE(same.boundary_overlap);
  const SimulationInputs ds = with_engine_profile("deepspeed", in);
  EXPECT_EQ(ds.plan.collectives, CollectiveAlgorithm::kFlat);
  EXPECT_EQ(ds.plan.gather_bucket_bytes, 5e7 * 2);  // bf16 working weights
  EXPECT_EQ(ds.plan.reduce_bucket_bytes, 5e8 * 2);
  EXPECT_EQ(ds.prefetch, 1);
  EXPECT_FALSE(ds.boundary_overlap);
  EXPECT_TRUE(ds.overlap);
  in.plan = ShardPlan::preset("zero2", t);
  const SimulationInputs ds2 = with_engine_profile("deepspeed", in);
  EXPECT_EQ(ds2.plan.gather_bucket_bytes, 5e8 * 2);
  EXPECT_FALSE(ds2.overlap);  // overlap_comm defaults to false below ZeRO-3
  EXPECT_THROW_WITH(with_engine_profile("megatron", in), "unknown engine profile 'megatron' (known: strata, deepspeed)");
  // A 1.3B block (about 1.6e8 elements) gathers in four prefetch buckets: the flat calls the
  // simulator prices are those buckets.
  in.plan = ShardPlan::preset("zero3", t);
  const SimulationResult strata = simulate(in, t, c.device);
  const SimulationResult deepspeed = simulate(with_engine_profile("deepspeed", in), t, c.device);
  EXPECT_GT(deepspeed.ops, strata.ops);
  EXPECT_EQ(deepspeed.model_flops, strata.model_flops);
}

TEST(Planner, EveryPlanItEmitsIsValidDistinctAndParsesBack) {
  const Topology t = ClusterModel::preset("frontier").topology(2);
  const std::vector<ShardPlan> plans = enumerate_plans(t);
  EXPECT_GT(plans.size(), 50u);
  std::set<std::string> specs;
  for (const ShardPlan& p : plans) {
    EXPECT_NO_THROW(p.validate(t)) << p.spec(t);
    const std::string text = p.spec(t);
    EXPECT_TRUE(specs.insert(text).second) << text << " twice";
    const ShardPlan back = ShardPlan::parse(text, t);
    EXPECT_EQ(back.weights, p.weights) << text;
    EXPECT_EQ(back.secondary, p.secondary) << text;
    EXPECT_EQ(back.grads, p.grads) << text;
    EXPECT_EQ(back.optimizer, p.optimizer) << text;
    EXPECT_EQ(back.quant_weights, p.quant_weights) << text;
    EXPECT_EQ(back.quant_grads, p.quant_grads) << text;
  }
}

TEST(Planner, EveryPresetAppearsWhenItFitsAndNothingOverTheBudgetIsRanked) {
  for (const char* cluster : {"frontier", "dgx-a100"}) {
    const ClusterModel c = ClusterModel::preset(cluster);
    const Topology t = c.topology(2);
    PlannerInputs in;
    in.base.model = GptConfig::preset("gpt2-124m");
    in.base.seq_len = 256;
    in.prefetch_depths = {1, 2};
    in.memory_per_device = 1e15;  // everything fits
    const PlannerResult all = rank_plans(in, t, c.device);
    EXPECT_TRUE(all.dropped.empty());
    for (const std::string& preset : ShardPlan::preset_names()) {
      const bool found = std::any_of(all.ranked.begin(), all.ranked.end(),
                                     [&](const PlanCandidate& p) { return p.plan.name == preset; });
      EXPECT_TRUE(found) << preset << " on " << cluster;
    }
    for (std::size_t i = 1; i < all.ranked.size(); ++i) {
      EXPECT_LE(all.ranked[i - 1].result.step_seconds, all.ranked[i].result.step_seconds);
    }
    // A budget between the smallest and the largest plan: exactly the plans under it are ranked.
    std::vector<double> sizes;
    for (const PlanCandidate& p : all.ranked) sizes.push_back(static_cast<double>(p.result.memory.total()));
    std::sort(sizes.begin(), sizes.end());
    in.memory_per_device = sizes[sizes.size() / 2];
    const PlannerResult some = rank_plans(in, t, c.device);
    EXPECT_EQ(some.ranked.size() + some.dropped.size(), all.ranked.size());
    for (const PlanCandidate& p : some.ranked) EXPECT_LE(static_cast<double>(p.result.memory.total()), in.memory_per_device);
    for (const PlanCandidate& p : some.dropped) EXPECT_GT(static_cast<double>(p.result.memory.total()), in.memory_per_device);
    for (const PlanCandidate& p : all.ranked) {
      if (static_cast<double>(p.result.memory.total()) > in.memory_per_device) continue;
      const bool kept = std::any_of(some.ranked.begin(), some.ranked.end(), [&](const PlanCandidate& q) {
        return q.plan.spec(t) == p.plan.spec(t) && q.prefetch == p.prefetch;
      });
      EXPECT_TRUE(kept) << p.plan.spec(t);
    }
  }
}

}  // namespace
}  // namespace strata
