// The sharding engine under mpirun against the single-process reference: every preset and
// explicit plans reproduce its losses and final weights, in the list order of the schedule, in
// seeded random orders that respect only its dependencies, and without prefetch; the traffic
// meter equals the counting executor's replay of the schedule and the plan's closed forms
// exactly; padding is exact; a stale secondary copy is refused; bf16 stays near fp32; the
// level-decomposed collectives equal a plain sum. Quantized plans (qwZ, qgZ) track the reference,
// are deterministic in any valid order, cut the metered bytes by the format's factor, and converge
// like fp32.
#include <gtest/gtest.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/hierarchical.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "train/batch_loader.hpp"
#include "train/builtin_corpus.hpp"
#include "train/byte_tokenizer.hpp"
#include "engine/local_engine.hpp"
#include "train/train_step.hpp"
#include "engine/sharded_engine.hpp"
#include "engine/unit_collectives.hpp"
#include "plan/unit_padding.hpp"
#include "schedule/counting_executor.hpp"
#include "schedule/op_effects.hpp"
#include "schedule/validate.hpp"
#include "sim/simulator.hpp"
#include "train/checkpoint.hpp"
#include "train/pretrained_weights.hpp"
#include "support/matmul_scope.hpp"
#include "support/plan_formulas.hpp"

namespace strata {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// The run every comparison uses: tiny model, 1 sequence of 32 tokens per rank per micro-batch,
// 2 micro-batches per step, warmup then cosine, clipping on.
struct RunSettings {
  int steps = 10;
  int batch_per_rank = 1;
  int seq_len = 32;
  int grad_accum = 2;
  std::uint64_t seed = 11;
  int prefetch = 1;
  std::uint64_t shuffle_seed = 0;  // 0: the schedule's list order
  bool overlap = true;
  bool tune_overlap = false;
  int inject_delay_us = 0;
  std::uint64_t max_live_bytes = 0;
  bool boundary_overlap = true;
  StepRecipe recipe() const {
    return StepRecipe{LrSchedule{2e-3, 2, steps, 0.1}, AdamWHyper{}, 1.0, grad_accum};
  }
};

const std::vector<std::int32_t>& corpus() {
  static const std::vector<std::int32_t> tokens = ByteTokenizer::encode(builtin_corpus(1 << 16), "built-in");
  return tokens;
}

struct RunResult {
  std::vector<double> losses;
  std::vector<double> norms;
  std::vector<std::vector<float>> weights;  // per unit, unpadded; filled on rank 0
};

// The single-process reference on the whole global batch; rank 0 only.
RunResult run_reference(const RunSettings& s, int world, const StateSource* init = nullptr) {
  const GptConfig config = GptConfig::preset("tiny");
  LocalEngine engine(config, s.batch_per_rank * world, s.seq_len, s.seed);
  if (init != nullptr) engine.load_state(*init);
  BatchLoader loader(corpus(), "corpus", s.batch_per_rank * world, s.seq_len);
  std::vector<std::int32_t> in(static_cast<std::size_t>(s.batch_per_rank * world * s.seq_len)), tgt(in.size());
  RunResult r;
  for (int step = 0; step < s.steps; ++step) {
    const StepOutcome o = train_step(
        engine, s.recipe(), step,
        [&](int micro, std::span<std::int32_t> a, std::span<std::int32_t> b) {
          loader.fill(static_cast<std::uint64_t>(step * s.grad_accum + micro), 0, s.batch_per_rank * world, a, b);
        },
        in, tgt);
    r.losses.push_back(o.loss);
    r.norms.push_back(o.grad_norm);
  }
  for (std::size_t u = 0; u < engine.layout().unit_count(); ++u) {
    const float* p = engine.params().unit(u);
    r.weights.emplace_back(p, p + engine.layout().unit(u).numel);
  }
  return r;
}

RunResult run_sharded(ShardedEngine& engine, const RunSettings& s) {
  const int world = engine.data_parallel_size(), rank = engine.data_parallel_rank();
  BatchLoader loader(corpus(), "corpus", s.batch_per_rank * world, s.seq_len);
  std::vector<std::int32_t> in(static_cast<std::size_t>(s.batch_per_rank * s.seq_len)), tgt(in.size());
  RunResult r;
  for (int step = 0; step < s.steps; ++step) {
    const StepOutcome o = train_step(
        engine, s.recipe(), step,
        [&](int micro, std::span<std::int32_t> a, std::span<std::int32_t> b) {
          loader.fill(static_cast<std::uint64_t>(step * s.grad_accum + micro), rank * s.batch_per_rank,
                      s.batch_per_rank, a, b);
        },
        in, tgt);
    r.losses.push_back(o.loss);
    r.norms.push_back(o.grad_norm);
  }
  for (std::size_t u = 0; u < engine.layout().unit_count(); ++u) r.weights.push_back(engine.gather_master(static_cast<int>(u)));
  return r;
}

ShardedEngineOptions options_for(const std::string& plan, const Topology& t, DType dtype, const RunSettings& s) {
  ShardedEngineOptions o;
  o.plan = ShardPlan::parse(plan, t);
  o.weight_dtype = o.grad_dtype = dtype;
  o.grad_accum = s.grad_accum;
  o.prefetch = s.prefetch;
  o.shuffle_seed = s.shuffle_seed;
  o.overlap = s.overlap;
  o.tune_overlap = s.tune_overlap;
  o.inject_delay_us = s.inject_delay_us;
  o.max_live_bytes = s.max_live_bytes;
  o.boundary_overlap = s.boundary_overlap;
  o.validate = true;
  return o;
}

// The memory model replays the schedule in list order: a collective's staging is taken at its
// start and given back at its wait. Inline that is what the engine does, so the pool peaks there;
// a communication thread takes a start's staging only when it reaches that task, after the
// collectives queued before it, so it can hold less, never more.
void expect_staging_as_modelled(const MeasuredMemory& m, const ScheduleCounts& counts, bool threaded,
                                const std::string& where) {
  if (threaded) {
    EXPECT_LE(m.scratch_peak, counts.staging_pool_peak_bytes) << where;
  } else {
    EXPECT_EQ(m.scratch_peak, counts.staging_pool_peak_bytes) << where;
  }
  EXPECT_GE(counts.staging_peak_bytes, counts.staging_pool_peak_bytes) << where;
}

// One sharded run of `plan` with the settings: the engine is made, trained and dropped.
RunResult run_plan(const std::string& plan, const Topology& t, DType dtype, const RunSettings& s) {
  MpiCommunicator comm(t);
  ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                       options_for(plan, t, dtype, s));
  return run_sharded(engine, s);
}

// Compares a sharded run with the reference on rank 0. Losses: relative 1e-5 (measured ~5e-8).
// Weights after the AdamW steps: a looser bound is right, because Adam normalises each update to
// about lr whatever the gradient's size: where a gradient element nearly cancels, summing it in
// another order across ranks (1e-7 relative) can flip or resize its update by up to lr. So
// max |a - b| per tensor must stay within 1e-5 of the tensor's max |b| plus 5e-3 of the summed
// learning rate (measured: under 7e-4 of it). Gradient norms, taken before Adam, must agree to
// 1e-5 relative like the losses. The key third of each c_attn.bias is held only to the
// summed learning rate: its exact gradient is zero (softmax ignores a per-row shift), so both
// runs move it by amplified rounding noise alone.
struct MatchBounds {
  double loss = 1e-5, norm = 1e-5, weight_of_lr_sum = 5e-3;
};

void expect_matches(const RunResult& sharded, const RunResult& ref, const RunSettings& s, const std::string& what,
                    const MatchBounds& bounds = {}) {
  if (world_rank() != 0) return;
  ASSERT_EQ(sharded.losses.size(), ref.losses.size());
  double worst_loss = 0.0;
  for (std::size_t i = 0; i < ref.losses.size(); ++i) {
    const double rel = std::abs(sharded.losses[i] - ref.losses[i]) / ref.losses[i];
    worst_loss = std::max(worst_loss, rel);
    EXPECT_LE(rel, bounds.loss) << what << ": loss of step " << i;
    EXPECT_LE(std::abs(sharded.norms[i] - ref.norms[i]) / ref.norms[i], bounds.norm)
        << what << ": grad norm of step " << i;
  }
  double lr_sum = 0.0;
  for (int i = 0; i < s.steps; ++i) lr_sum += s.recipe().schedule.at(i);
  const GptConfig config = GptConfig::preset("tiny");
  const ModelLayout layout(config);
  const std::size_t c = static_cast<std::size_t>(config.n_embd);
  double worst_weight = 0.0;
  std::string worst_name;
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    ASSERT_EQ(sharded.weights[u].size(), ref.weights[u].size());
    for (const auto& t : layout.unit(u).tensors) {
      const bool key_bias = t.name.ends_with("attn.c_attn.bias");
      double diff = 0.0, scale = 0.0, key_diff = 0.0;
      for (std::size_t i = t.range.begin; i < t.range.end; ++i) {
        const double d = std::abs(static_cast<double>(sharded.weights[u][i]) - ref.weights[u][i]);
        const bool in_key = key_bias && i - t.range.begin >= c && i - t.range.begin < 2 * c;
        (in_key ? key_diff : diff) = std::max(in_key ? key_diff : diff, d);
        scale = std::max(scale, std::abs(static_cast<double>(ref.weights[u][i])));
      }
      if (diff / lr_sum > worst_weight) worst_weight = diff / lr_sum, worst_name = t.name;
      EXPECT_LE(diff, 1e-5 * scale + bounds.weight_of_lr_sum * lr_sum) << what << ": final weights of " << t.name;
      EXPECT_LE(key_diff, lr_sum) << what << ": final key bias of " << t.name;
    }
  }
  std::printf("  %-48s worst loss rel %.1e, worst weight diff %.1e of the lr sum (%s)\n", what.c_str(), worst_loss, worst_weight,
              worst_name.c_str());
}

// How far apart two runs end, in the statistics the bf16 bounds are stated in: the largest
// relative difference of a step's loss and of a step's gradient norm, and the largest per-tensor
// root mean square of the final weights' difference in units of the summed learning rate (the key
// third of c_attn.bias left out, as above).
struct RunDistance {
  double loss = 0.0, norm = 0.0, weights = 0.0;
  std::string worst_tensor;
};

RunDistance distance(const RunResult& a, const RunResult& b, const RunSettings& s) {
  RunDistance d;
  for (std::size_t i = 0; i < b.losses.size(); ++i) {
    d.loss = std::max(d.loss, std::abs(a.losses[i] - b.losses[i]) / b.losses[i]);
    d.norm = std::max(d.norm, std::abs(a.norms[i] - b.norms[i]) / b.norms[i]);
  }
  double lr_sum = 0.0;
  for (int i = 0; i < s.steps; ++i) lr_sum += s.recipe().schedule.at(i);
  const GptConfig config = GptConfig::preset("tiny");
  const ModelLayout layout(config);
  const std::size_t c = static_cast<std::size_t>(config.n_embd);
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const auto& t : layout.unit(u).tensors) {
      const bool key_bias = t.name.ends_with("attn.c_attn.bias");
      double sum = 0.0;
      std::size_t n = 0;
      for (std::size_t i = t.range.begin; i < t.range.end; ++i) {
        if (key_bias && i - t.range.begin >= c && i - t.range.begin < 2 * c) continue;
        const double e = static_cast<double>(a.weights[u][i]) - b.weights[u][i];
        sum += e * e;
        ++n;
      }
      const double rms = std::sqrt(sum / static_cast<double>(n)) / lr_sum;
      if (rms > d.weights) d.weights = rms, d.worst_tensor = t.name;
    }
  }
  return d;
}

// Every preset, in its unquantized form where it quantizes (zeropp): exact parity is for the
// partitioning; the quantized collectives have their own bounds and tests.
std::vector<std::string> exact_presets(const Topology& t) {
  std::vector<std::string> plans;
  for (const auto& name : ShardPlan::preset_names()) {
    plans.push_back(ShardPlan::preset(name, t).quantized() ? name + ",quant=none" : name);
  }
  return plans;
}

void every_plan_matches_reference(const std::string& topology, const std::vector<std::string>& extra_plans,
                                  const RunSettings& s = RunSettings{}, const std::string& label = "") {
  const Topology t = Topology::parse(topology, world_size());
  const RunResult ref = world_rank() == 0 ? run_reference(s, world_size()) : RunResult{};
  std::vector<std::string> plans = exact_presets(t);
  plans.insert(plans.end(), extra_plans.begin(), extra_plans.end());
  for (const auto& plan : plans) {
    const RunResult got = run_plan(plan, t, DType::kF32, s);
    expect_matches(got, ref, s, topology + " " + plan + label);
  }
}

TEST(World8, EveryPlanMatchesTheSingleProcessRun) {
  ASSERT_EQ(world_size(), 8) << "run under mpirun -np 8";
  // Explicit plans beyond the presets: weights finer than gradients; hpZ under a node-level
  // primary; and an optimizer coarser than the weights (each rank updates a slice holding its
  // weight shard, so no gather follows the update).
  every_plan_matches_reference("gcd:2,gpu:2,node:2", {"weights=gcd,grads=world,optim=world",
                                                      "weights=gpu,secondary=gcd,grads=gpu,optim=world",
                                                      "weights=world,grads=gpu,optim=gpu"});
}

// A seeded shuffle of every segment that respects only the schedule's dependencies (the same
// order on every rank, so collectives still line up): if a dependency were missing, some order
// would compute with a buffer not yet gathered, reduced or freed, and the run would fail or drift.
TEST(World8, EveryPlanMatchesInRandomOrdersThatRespectTheDependencies) {
  ASSERT_EQ(world_size(), 8);
  for (std::uint64_t seed : {3u, 17u}) {
    RunSettings s;
    s.steps = 4;
    s.grad_accum = 3;
    s.shuffle_seed = seed;
    every_plan_matches_reference("gcd:2,gpu:2,node:2", {"weights=gpu,secondary=gcd,grads=gpu,optim=world"}, s,
                                 " shuffled " + std::to_string(seed));
  }
}

TEST(World8, EveryPlanMatchesWithoutPrefetch) {
  ASSERT_EQ(world_size(), 8);
  RunSettings s;
  s.steps = 4;
  s.prefetch = 0;
  every_plan_matches_reference("gcd:2,gpu:2,node:2", {}, s, " prefetch 0");
}

// ---- overlap ---------------------------------------------------------------------------------

// The communication thread changes when collectives run, never what they compute: every preset
// (zeropp quantized), with prefetch 1 and 3, gives the same bits with overlap on and off.
TEST(World8, OverlapOnAndOffGiveTheSameBitsForEveryPreset) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  std::vector<std::string> plans = ShardPlan::preset_names();
  plans.push_back("hier3,quant_weights=int8,quant_grads=int4");
  for (const auto& plan : plans) {
    for (int prefetch : {1, 3}) {
      std::vector<RunResult> runs;
      for (bool overlap : {false, true}) {
        RunSettings s;
        s.steps = 3;
        s.prefetch = prefetch;
        s.overlap = overlap;
        MpiCommunicator comm(t);
        ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                             options_for(plan, t, DType::kBF16, s));
        runs.push_back(run_sharded(engine, s));
        const OverlapStats o = engine.overlap_stats();
        EXPECT_GT(o.collectives, 0u) << plan;
        // Off, compute waits for every collective (the inline run itself is the wait).
        if (!overlap) {
          EXPECT_GE(o.exposed_s, o.communication_s) << plan;
        }
      }
      const std::string what = plan + " prefetch " + std::to_string(prefetch);
      EXPECT_EQ(runs[0].losses, runs[1].losses) << what;
      EXPECT_EQ(runs[0].norms, runs[1].norms) << what;
      EXPECT_EQ(runs[0].weights, runs[1].weights) << what;
    }
  }
}

// --overlap auto switches between the communication thread and inline during its trial steps,
// with collectives of the boundary still in flight at each switch: the bits are those of a run
// with overlap off, and after the trial the engine says what it decided.
TEST(World8, OverlapAutoSwitchesModesWithoutChangingTheBits) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  for (const std::string plan : {"zero1", "zero3", "hier3,quant_weights=int8,quant_grads=int4"}) {
    std::vector<RunResult> runs;
    for (bool tune : {false, true}) {
      RunSettings s;
      s.steps = OverlapTuner::kWarmupSteps + OverlapTuner::kTrialSteps + 2;
      s.overlap = tune;
      s.tune_overlap = tune;
      MpiCommunicator comm(t);
      ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                           options_for(plan, t, DType::kF32, s));
      runs.push_back(run_sharded(engine, s));
      if (tune) {
        EXPECT_EQ(engine.overlap_mode().rfind("auto: ", 0), 0u) << plan << ": " << engine.overlap_mode();
      } else {
        EXPECT_EQ(engine.overlap_mode(), "off");
      }
    }
    EXPECT_EQ(runs[0].losses, runs[1].losses) << plan;
    EXPECT_EQ(runs[0].norms, runs[1].norms) << plan;
    EXPECT_EQ(runs[0].weights, runs[1].weights) << plan;
  }
}

// Overlapping the step boundary (each unit's replica reduction started in the last backward,
// its updated weights gathered under the next forward) changes when collectives run, never what
// they compute: every preset and two quantized plans give the same bits (fp32) with it off, on in
// list order, and on in a seeded shuffled order of every segment.
TEST(World8, BoundaryOverlapOnAndOffGiveTheSameBitsInEveryOrder) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  std::vector<std::string> plans = ShardPlan::preset_names();
  plans.push_back("hier3,quant_weights=int8,quant_grads=int4");
  plans.push_back("weights=gcd,grads=gcd,optim=gpu");  // a replica reduce-scatter and all-reduce both
  for (const auto& plan : plans) {
    std::vector<RunResult> runs;
    for (const auto& [boundary, shuffle] : {std::pair{false, 0}, std::pair{true, 0}, std::pair{true, 7}}) {
      RunSettings s;
      s.steps = 3;
      s.boundary_overlap = boundary;
      s.shuffle_seed = static_cast<std::uint64_t>(shuffle);
      runs.push_back(run_plan(plan, t, DType::kF32, s));
    }
    for (std::size_t i = 1; i < runs.size(); ++i) {
      EXPECT_EQ(runs[0].losses, runs[i].losses) << plan << " run " << i;
      EXPECT_EQ(runs[0].norms, runs[i].norms) << plan << " run " << i;
      EXPECT_EQ(runs[0].weights, runs[i].weights) << plan << " run " << i;
    }
  }
}

// Flat collectives (one call over every rank of the levels, the library's algorithm; the
// reduce-scatter an all-to-all then the ring's own summation order) give the same bits as the
// level-by-level ones, fp32 and bf16, for every preset and the quantized plans (whose qgZ stays
// two-hop).
TEST(World8, FlatAndHierarchicalCollectivesGiveTheSameBits) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  std::vector<std::string> plans = ShardPlan::preset_names();
  plans.push_back("hier3,quant_weights=int8,quant_grads=int4");
  plans.push_back("weights=gcd,grads=gcd,optim=gpu");
  for (const auto& plan : plans) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      RunSettings s;
      s.steps = 3;
      const RunResult level_by_level = run_plan(plan, t, dtype, s);
      const RunResult flat = run_plan(plan + ",collectives=flat", t, dtype, s);
      const std::string what = plan + " " + std::string(dtype_name(dtype));
      EXPECT_EQ(level_by_level.losses, flat.losses) << what;
      EXPECT_EQ(level_by_level.norms, flat.norms) << what;
      EXPECT_EQ(level_by_level.weights, flat.weights) << what;
    }
  }
}

// Buckets (each unit's collectives split into calls of at most bucket_bytes, each its own start
// and wait) give the same bits as one call per unit, fp32, for every preset, flat or not, and
// with int8 weight gathers (a bucket is a multiple of the quantization block, and qwZ blocks
// restart at every piece).
TEST(World8, BucketedAndWholeUnitCollectivesGiveTheSameBits) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  std::vector<std::string> plans = ShardPlan::preset_names();
  plans.push_back("zero3,quant_weights=int8");
  plans.push_back("weights=gcd,grads=gcd,optim=gpu");
  plans.push_back("hier3,collectives=flat");
  for (const auto& plan : plans) {
    RunSettings s;
    s.steps = 3;
    const std::string unquantized = ShardPlan::parse(plan, t).quant_grads != QuantBits::kNone ? ",quant_grads=none" : "";
    const RunResult whole = run_plan(plan + unquantized, t, DType::kF32, s);
    // Gathers and reductions in buckets of one size, and of two (as DeepSpeed's defaults are).
    for (const char* sizes : {",bucket_bytes=4096", ",gather_bucket_bytes=4096,reduce_bucket_bytes=12288"}) {
      const RunResult buckets = run_plan(plan + unquantized + sizes, t, DType::kF32, s);
      EXPECT_EQ(whole.losses, buckets.losses) << plan << sizes;
      EXPECT_EQ(whole.norms, buckets.norms) << plan << sizes;
      EXPECT_EQ(whole.weights, buckets.weights) << plan << sizes;
    }
  }
}

// A random sleep of up to 2 ms before every collective, different on every rank, over 20 steps
// of 8 ranks: the run neither hangs nor changes a bit.
TEST(World8, RandomDelaysBeforeEachCollectiveNeitherHangNorChangeTheResult) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  for (const char* plan : {"zero3", "hier3,quant_weights=int8,quant_grads=int4"}) {
    std::vector<RunResult> runs;
    for (int delay : {0, 2000}) {
      RunSettings s;
      s.steps = 20;
      s.grad_accum = 1;
      s.inject_delay_us = delay;
      runs.push_back(run_plan(plan, t, DType::kF32, s));
    }
    EXPECT_EQ(runs[0].losses, runs[1].losses) << plan;
    EXPECT_EQ(runs[0].weights, runs[1].weights) << plan;
  }
}

// --max-live-bytes: with deep prefetch and a bound of a little more than the largest stage, the
// gathered bytes the engine actually held never exceed it, in list order and shuffled, and the
// run still matches the single-process reference.
TEST(World8, TheLiveMemoryBoundHoldsAndTheRunStillMatches) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const ModelLayout layout(GptConfig::preset("tiny"));
  const auto padded = padded_unit_sizes(layout, t);
  const std::uint64_t block = padded[layout.block_unit(0)] * sizeof(float);
  RunSettings s;
  s.steps = 4;
  const RunResult ref = world_rank() == 0 ? run_reference(s, 8) : RunResult{};
  for (std::uint64_t seed : {0u, 7u}) {
    s.prefetch = 4;
    s.shuffle_seed = seed;
    s.max_live_bytes = block + block / 2;
    MpiCommunicator comm(t);
    ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                         options_for("zero3", t, DType::kF32, s));
    const RunResult got = run_sharded(engine, s);
    const std::uint64_t peak = engine.measured_memory().scheduled_peak_by_kind[static_cast<std::size_t>(BufferKind::kGathered)];
    EXPECT_LE(peak, s.max_live_bytes) << "order " << seed;
    EXPECT_GE(peak, block) << "order " << seed;
    expect_matches(got, ref, s, "zero3 prefetch 4 bounded to " + std::to_string(s.max_live_bytes) + " bytes");
  }
  s.max_live_bytes = block - 1;
  MpiCommunicator comm(t);
  try {
    ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                         options_for("zero3", t, DType::kF32, s));
    ADD_FAILURE() << "a bound below one unit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is below the " + std::to_string(block) + " bytes that block0 needs"),
              std::string::npos)
        << e.what();
  }
}

// The timeline is a Chrome trace: metadata naming this rank's two threads, a complete event per
// op executed on the compute thread and per collective on the communication thread, and the
// collectives' time is what the stats report.
TEST(World8, TheTimelineRecordsEveryOpAndEveryCollective) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  RunSettings s;
  s.steps = 2;
  MpiCommunicator comm(t);
  ShardedEngineOptions o = options_for("zeropp", t, DType::kF32, s);
  o.record_timeline = true;
  ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm, o);
  run_sharded(engine, s);
  const nlohmann::json trace = nlohmann::json::parse(engine.timeline_json());
  std::size_t compute = 0, collectives = 0;
  double comm_us = 0.0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    EXPECT_EQ(e.at("pid"), comm.rank());
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    if (e.at("tid") == 0) ++compute;
    if (e.at("tid") == 1) ++collectives, comm_us += e.at("dur").get<double>();
  }
  // Every op of every segment run (2 micro-batches, boundary and update, 2 steps), plus the
  // collectives the final gather of master weights made outside the schedule are not ops.
  EXPECT_EQ(compute, 2 * engine.schedule().ops.size());
  const OverlapStats stats = engine.overlap_stats();
  EXPECT_EQ(collectives, stats.collectives);
  EXPECT_NEAR(comm_us * 1e-6, stats.communication_s, 1e-6 * static_cast<double>(collectives) + 1e-9);
}

// Trains `steps` steps of `tiny` with each plan, in fp32 and bf16, with 1 and 3 micro-batches, and
// hands each engine, its communicator, the settings, the dtype and a label to `check`.
template <class Check>
void for_each_plan_run(const Topology& t, const std::vector<std::string>& plans, int steps, Check check) {
  for (int accum : {1, 3}) {
    RunSettings s;
    s.steps = steps;
    s.grad_accum = accum;
    for (const auto& plan : plans) {
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        MpiCommunicator comm(t);
        ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                             options_for(plan, t, dtype, s));
        run_sharded(engine, s);
        check(engine, comm, s, dtype, plan + " " + std::string(dtype_name(dtype)) + " accum " + std::to_string(accum));
      }
    }
  }
}

// The MPI meter counts the calls the engine made; the counting executor replays the schedule;
// plan_formulas derives the bytes from the plan alone. All three agree to the byte, per level and
// phase, for every preset, fp32 and bf16, 1 and 3 micro-batches. State sizes agree with the
// schedule and the closed form, and the buffers the engine held peaked where the schedule says.
TEST(World8, MeterEqualsTheScheduleCountAndTheFormulasExactly) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  // Presets as they are (zeropp quantizes its forward gathers and gradients), and quantized
  // collectives of every kind: hier3's boundary reduce-scatter, ddp's all-reduce, backward gathers.
  std::vector<std::string> plans = ShardPlan::preset_names();
  plans.push_back("weights=gpu,secondary=gcd,grads=gpu,optim=world");
  plans.push_back("weights=world,grads=gpu,optim=gpu");
  plans.push_back("hier3,quant_weights=int8,quant_grads=int4");
  plans.push_back("ddp,quant_grads=int8,quant_block=100");
  plans.push_back("zero3,quant_weights=int4,quant_grads=int8,quant_block=64");
  plans.push_back("zeropp,quant_backward=on");  // a quantized gather from the hpZ copy
  plans.push_back("mics,quant_grads=int4");     // a quantized all-reduce over the levels above the node
  // Flat collectives: bytes counted at each peer's level, one call at the outermost level.
  for (const char* flat : {"zero3", "zeropp", "hier3", "ddp", "zero1", "weights=gcd,grads=gcd,optim=gpu"}) {
    plans.push_back(std::string(flat) + ",collectives=flat");
  }
  // Buckets: the same bytes as one call per unit, in more calls.
  for (const char* bucketed : {"zero3", "zeropp", "hier3", "ddp", "zero1", "weights=gcd,grads=gcd,optim=gpu",
                               "hier3,collectives=flat"}) {
    plans.push_back(std::string(bucketed) + ",bucket_bytes=8192");
  }
  for_each_plan_run(t, plans, 2, [&](ShardedEngine& engine, MpiCommunicator& comm, const RunSettings& s, DType dtype,
                                     const std::string& where) {
    const int accum = s.grad_accum;
    const ScheduleCounts& counts = engine.schedule_counts();
    const TrafficFormula f = traffic_formula(engine.layout(), engine.plan(), t, dtype, dtype);
    const auto steps = static_cast<std::uint64_t>(s.steps);
    for (int l = 0; l < t.level_count(); ++l) {
      const auto ll = static_cast<std::size_t>(l);
      const auto micro = comm.meter().at(l, TrafficPhase::kMicroBatch);
      const auto boundary = comm.meter().at(l, TrafficPhase::kStepBoundary);
      const std::string at = where + " level " + t.level(l).name;
      EXPECT_EQ(micro.bytes_sent, counts.bytes_in(TrafficPhase::kMicroBatch)[ll] * steps) << at;
      EXPECT_EQ(micro.bytes_received, counts.bytes_in(TrafficPhase::kMicroBatch)[ll] * steps) << at;
      EXPECT_EQ(boundary.bytes_sent, counts.bytes_in(TrafficPhase::kStepBoundary)[ll] * steps) << at;
      EXPECT_EQ(boundary.bytes_received, counts.bytes_in(TrafficPhase::kStepBoundary)[ll] * steps) << at;
      EXPECT_EQ(micro.calls + boundary.calls,
                (counts.calls[0][ll] + counts.calls[1][ll]) * steps) << at << " (calls)";
      EXPECT_EQ(counts.bytes_in(TrafficPhase::kMicroBatch)[ll], f.micro_batch[ll] * static_cast<std::uint64_t>(accum)) << at;
      EXPECT_EQ(counts.bytes_in(TrafficPhase::kStepBoundary)[ll], f.boundary[ll]) << at;
    }
    EXPECT_EQ(comm.meter().control().calls, counts.control_calls * steps) << where;
    const MeasuredMemory m = engine.measured_memory();
    for (const StateMemory& state : memory_formula(engine.layout(), engine.plan(), t, dtype)) {
      if (state.state == "secondary") {
        // Held from forward to backward: all blocks' copies are live at the end of forward.
        EXPECT_EQ(counts.peak_by_kind[static_cast<std::size_t>(BufferKind::kSecondary)], state.bytes) << where;
        continue;
      }
      const std::uint64_t measured = state.state == "weights" ? m.weights : state.state == "grads" ? m.grads : m.optimizer;
      EXPECT_EQ(measured, state.bytes) << where << " " << state.state;
      for (const ResidentState& r : engine.schedule().resident) {
        if (r.state == state.state) {
          EXPECT_EQ(r.bytes, state.bytes) << where << " " << state.state;
        }
      }
    }
    EXPECT_EQ(m.scheduled_peak, counts.peak_live_bytes) << where;
    EXPECT_EQ(m.scheduled_peak_by_kind, counts.peak_by_kind) << where;
    // The collectives' pooled staging, as the memory model predicts it (comm/collective_staging).
    expect_staging_as_modelled(m, counts, s.overlap, where);
    if (!engine.plan().has_secondary()) {
      EXPECT_EQ(counts.peak_by_kind[static_cast<std::size_t>(BufferKind::kSecondary)], 0u) << where;
    }
  });
}

// The simulator replays the very schedule the engine executed: on a cluster model of the same
// shape (gcd:2,gpu:2,node:2 with made-up link figures), its bytes per level and phase equal what
// the MPI meter counted, for every preset and the quantized variants, fp32 and bf16, with 1 and 3
// micro-batches; the resident states and the schedule's buffer peak equal what the engine held;
// and simulating from the inputs gives exactly the replay of the engine's own list.
TEST(World8, SimulatorBytesPerLevelEqualTheMeterForEveryPreset) {
  ASSERT_EQ(world_size(), 8);
  const ClusterModel cluster = ClusterModel::from_toml(R"(name = "virtual"
levels = ["gcd", "gpu", "node"]
[device]
peak_flops = 1e10
memory_bandwidth = 1e10
[level.gcd]
fanout = 2
link_bandwidth = 4e9
latency = 1e-6
[level.gpu]
fanout = 2
link_bandwidth = 2e9
latency = 2e-6
[level.node]
fanout = "*"
link_bandwidth = 1e9
ranks_per_link = 2
latency = 5e-6
)", "the test's cluster");
  const Topology t = cluster.topology(2);
  ASSERT_EQ(t.world_size(), 8);
  std::vector<std::string> plans = ShardPlan::preset_names();
  plans.push_back("hier3,quant_weights=int8,quant_grads=int4");
  plans.push_back("zero3,quant_weights=int4,quant_grads=int8,quant_block=64");
  plans.push_back("mics,quant_grads=int4");
  for_each_plan_run(t, plans, 1, [&](ShardedEngine& engine, MpiCommunicator& comm, const RunSettings& s, DType dtype,
                                     const std::string& where) {
    SimulationInputs in;
    in.model = GptConfig::preset("tiny");
    in.plan = engine.plan();
    in.micro_batch = s.batch_per_rank;
    in.seq_len = s.seq_len;
    in.grad_accum = s.grad_accum;
    in.weight_dtype = in.grad_dtype = dtype;
    in.prefetch = s.prefetch;
    const SimulationResult sim = simulate(in, t, cluster.device);
    for (int l = 0; l < t.level_count(); ++l) {
      for (TrafficPhase phase : {TrafficPhase::kMicroBatch, TrafficPhase::kStepBoundary}) {
        EXPECT_EQ(sim.counts.bytes_in(phase)[static_cast<std::size_t>(l)], comm.meter().at(l, phase).bytes_sent)
            << where << " level " << t.level(l).name;
      }
    }
    EXPECT_GT(sim.step_seconds, 0.0) << where;
    const MeasuredMemory m = engine.measured_memory();
    EXPECT_EQ(sim.memory.weights, m.weights) << where;
    EXPECT_EQ(sim.memory.grads, m.grads) << where;
    EXPECT_EQ(sim.memory.optimizer, m.optimizer) << where;
    EXPECT_EQ(sim.memory.scheduled, m.scheduled_peak) << where;
    const CostModel cost(t, cluster.device);
    const SimulationResult replayed = replay_schedule(engine.schedule(), in, cost);
    EXPECT_EQ(replayed.step_seconds, sim.step_seconds) << where;
    EXPECT_EQ(replayed.ops, sim.ops) << where;
  });
}

// The simulator's inputs for what a tiny-model engine runs, and a device for pricing it.
SimulationInputs simulation_of(const ShardedEngine& engine, const RunSettings& s) {
  SimulationInputs in;
  static_cast<StepOptions&>(in) = engine.options();
  in.model = GptConfig::preset("tiny");
  in.micro_batch = s.batch_per_rank;
  in.seq_len = s.seq_len;
  return in;
}
DeviceModel simple_device() {
  DeviceModel device;
  device.peak_flops = 1e10;
  device.memory_bandwidth = 1e10;
  return device;
}

// One table of op meanings (schedule/op_effects): for every preset and three quantized plans, the
// engine took the table's sync path for every op and acquired and released exactly the buffers
// the op lists, each of a kind the table lets that op allocate or free; the counting executor
// and the simulator, reading the same list, reach the engine's own peaks; the validator accepts it.
TEST(World8, EveryExecutorReadsTheOneTableOfOpEffects) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2@4GB/s~1us,gpu:2@2GB/s~2us,node:2@1GB/s~5us", 8);
  std::vector<std::string> plans = ShardPlan::preset_names();
  plans.push_back("hier3,quant_weights=int8,quant_grads=int4");
  plans.push_back("zero3,quant_weights=int4,quant_grads=int8,quant_block=64");
  plans.push_back("mics,quant_grads=int4");
  RunSettings s;
  s.steps = 2;
  for (const std::string& plan : plans) {
    MpiCommunicator comm(t);
    ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                         options_for(plan, t, DType::kBF16, s));
    engine.record_executed_ops(true);
    run_sharded(engine, s);
    const StepSchedule& sched = engine.schedule();
    EXPECT_TRUE(validate_schedule(sched).ok()) << plan;
    const std::vector<ExecutedOp>& done = engine.executed_ops();
    ASSERT_EQ(done.size(), sched.ops.size() * static_cast<std::size_t>(s.steps)) << plan;
    for (std::size_t i = 0; i < done.size(); ++i) {
      const ScheduleOp& op = sched.ops[i % sched.ops.size()];
      const OpKindInfo& info = op_kind_info(op.kind);
      const std::string where = plan + ": " + describe_op(sched, static_cast<int>(i % sched.ops.size()));
      ASSERT_EQ(done[i].kind, op.kind) << where;
      EXPECT_EQ(done[i].sync, info.sync) << where;
      EXPECT_EQ(done[i].acquired, op.alloc) << where;
      EXPECT_EQ(done[i].released, op.free) << where;
      for (const BufferEffect& b : done[i].acquired) EXPECT_TRUE(info.allocates[static_cast<std::size_t>(b.kind)]) << where;
      for (const BufferEffect& b : done[i].released) EXPECT_TRUE(info.frees[static_cast<std::size_t>(b.kind)]) << where;
    }
    const MeasuredMemory m = engine.measured_memory();
    const ScheduleCounts counts = count_schedule(sched, t);
    EXPECT_EQ(counts.peak_by_kind, m.scheduled_peak_by_kind) << plan;
    EXPECT_EQ(counts.peak_live_bytes, m.scheduled_peak) << plan;
    expect_staging_as_modelled(m, counts, s.overlap, plan);
    const SimulationResult sim = replay_schedule(sched, simulation_of(engine, s), CostModel(t, simple_device()));
    EXPECT_EQ(sim.memory.scheduled, m.scheduled_peak) << plan;
  }
}

// Inline, the collectives' pooled staging peaks exactly where the memory model says, for plans
// whose reductions are bucketed (many buckets of a unit in flight at once), quantized, or both.
TEST(World8, InlineStagingPeaksAsTheMemoryModelSays) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  RunSettings s;
  s.steps = 1;
  s.overlap = false;
  s.boundary_overlap = false;
  const std::vector<std::pair<std::string, DType>> cases = {{"zero3,bucket_bytes=8192", DType::kF32},
                                                            {"zeropp,bucket_bytes=8192", DType::kBF16},
                                                            {"hier3,quant_weights=int8,quant_grads=int4", DType::kF32},
                                                            {"mics,quant_grads=int4", DType::kBF16}};
  for (const auto& [plan, dtype] : cases) {
    MpiCommunicator comm(t);
    ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                         options_for(plan, t, dtype, s));
    run_sharded(engine, s);
    expect_staging_as_modelled(engine.measured_memory(), count_schedule(engine.schedule(), t), false,
                               plan + " " + std::string(dtype_name(dtype)));
  }
}

// The per-step stop agreement is a scheduled control op: a request on one rank stops every rank
// after that step (and not before), the meter counts it as control traffic exactly as the
// schedule says, and the simulator prices it: its replay with the op is slower than without by
// the op's own cost.
TEST(World8, TheStopAgreementIsScheduledMeteredAndSimulated) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2@4GB/s~1us,gpu:2@2GB/s~2us,node:2@1GB/s~5us", 8);
  RunSettings s;
  MpiCommunicator comm(t);
  ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                       options_for("hier3", t, DType::kF32, s));
  BatchLoader loader(corpus(), "corpus", s.batch_per_rank * 8, s.seq_len);
  std::vector<std::int32_t> in(static_cast<std::size_t>(s.batch_per_rank * s.seq_len)), tgt(in.size());
  std::vector<bool> stopped;
  for (int step = 0; step < 3; ++step) {
    const StepOutcome o = train_step(
        engine, s.recipe(), step,
        [&](int micro, std::span<std::int32_t> a, std::span<std::int32_t> b) {
          loader.fill(static_cast<std::uint64_t>(step * s.grad_accum + micro), world_rank() * s.batch_per_rank,
                      s.batch_per_rank, a, b);
        },
        in, tgt, [&] { return step == 1 && world_rank() == 3; });
    stopped.push_back(o.stop);
  }
  EXPECT_EQ(stopped, (std::vector<bool>{false, true, false})) << "rank " << world_rank();

  const StepSchedule& sched = engine.schedule();
  const auto agree = std::find_if(sched.ops.begin(), sched.ops.end(), [](const ScheduleOp& op) { return op.kind == OpKind::kAgreeStop; });
  ASSERT_NE(agree, sched.ops.end());
  EXPECT_EQ(std::count_if(sched.ops.begin(), sched.ops.end(), [](const ScheduleOp& op) { return op.kind == OpKind::kAgreeStop; }), 1);
  EXPECT_TRUE(agree->comm.is_control());
  EXPECT_EQ(agree->comm.last_level, t.level_count() - 1) << "over every rank";
  const ScheduleCounts counts = count_schedule(sched, t);
  // Two loss reductions, the norm (hier3's optimizer is partitioned) and the agreement.
  EXPECT_EQ(counts.control_calls, 4u);
  EXPECT_EQ(comm.meter().control().calls, counts.control_calls * 3);
  EXPECT_EQ(comm.meter().control().bytes_sent, counts.control_bytes * 3);

  const SimulationInputs sim_in = simulation_of(engine, s);
  const CostModel cost(t, simple_device());
  StepSchedule without = sched;
  without.ops.erase(without.ops.begin() + (agree - sched.ops.begin()));
  const double with_op = replay_schedule(sched, sim_in, cost).step_seconds;
  const double without_op = replay_schedule(without, sim_in, cost).step_seconds;
  EXPECT_GT(cost.collective_seconds(agree->comm), 0.0);
  EXPECT_NEAR(with_op - without_op, cost.collective_seconds(agree->comm), 1e-12);
  EXPECT_EQ(replay_schedule(sched, sim_in, cost).counts.control_calls, counts.control_calls);
}

// The engine refuses to gather from a secondary copy made before the weights changed, even when
// handed ops in an order the validator would reject: the guard holds at run time too.
TEST(World8, SecondaryCopyIsNeverUsedAfterTheStepThatMadeItStale) {
  ASSERT_EQ(world_size(), 8);
  RunSettings s;
  s.grad_accum = 1;
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  MpiCommunicator comm(t);
  ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                       options_for("zeropp", t, DType::kF32, s));
  const int block = static_cast<int>(engine.layout().block_unit(0));
  EXPECT_THROW(engine.secondary_copy(block), Error) << "no copy before the first forward";
  // A whole step: backward gathers from the copies, then drops them.
  std::vector<std::int32_t> in(32, 1), tgt(32, 2);
  engine.zero_grad();
  engine.forward_backward(in, tgt, 1.0f);
  EXPECT_THROW(engine.secondary_copy(block), Error) << "dropped once backward gathered from it";
  engine.optimizer_step(UpdateOperands{AdamWHyper{}, 1e-3, 1, 1.0f});

  // By hand: the next step's forward up to the first backward gather from a secondary copy...
  const StepSchedule& sched = engine.schedule();
  int first_secondary_gather = -1;
  for (int i = 0; i < static_cast<int>(sched.ops.size()); ++i) {
    const ScheduleOp& op = sched.ops[static_cast<std::size_t>(i)];
    if (op.kind == OpKind::kGatherStart && op.source == WeightSource::kSecondary) {
      first_secondary_gather = i;
      break;
    }
  }
  ASSERT_GT(first_secondary_gather, 0);
  engine.zero_grad();
  SegmentOperands x;
  x.tokens = in;
  x.targets = tgt;
  SegmentResults results;
  for (int i = 0; i < first_secondary_gather; ++i) engine.execute(sched.ops[static_cast<std::size_t>(i)], x, results);
  const ScheduleOp& gather = sched.ops[static_cast<std::size_t>(first_secondary_gather)];
  EXPECT_NO_THROW(engine.secondary_copy(gather.unit)) << "kept in this forward: fresh";
  EXPECT_EQ(engine.secondary_residency(gather.unit), SecondaryResidency::kHeld);
  // ...then the weights change (an epoch bump), and the gather from the now stale copy is refused.
  ScheduleOp bump;
  bump.kind = OpKind::kInvalidateSecondaries;
  bump.phase = TrafficPhase::kOther;
  engine.execute(bump);
  EXPECT_EQ(engine.secondary_residency(gather.unit), SecondaryResidency::kStale);
  try {
    engine.execute(gather, x, results);
    ADD_FAILURE() << "a gather from a stale secondary copy ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is stale: made before the weights last changed"), std::string::npos)
        << e.what();
  }
}

TEST(World8, Bf16LossCurveStaysWithinTwoPercentOfFp32) {
  ASSERT_EQ(world_size(), 8);
  RunSettings s;
  s.steps = 50;
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  std::vector<RunResult> runs;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    MpiCommunicator comm(t);
    ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                         options_for("hier3", t, dtype, s));
    runs.push_back(run_sharded(engine, s));
  }
  double worst = 0.0;
  for (int i = 0; i < s.steps; ++i) {
    const double rel = std::abs(runs[1].losses[i] - runs[0].losses[i]) / runs[0].losses[i];
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 0.02) << "step " << i;
  }
  EXPECT_LT(runs[0].losses.back(), runs[0].losses.front() - 1.0) << "the curve must actually fall";
  if (world_rank() == 0) {
    std::printf("  bf16 vs fp32 over %d steps: worst relative difference %.2e (final %.4f vs %.4f)\n", s.steps, worst,
                runs[1].losses.back(), runs[0].losses.back());
  }
}

TEST(World8, SingleLevelCollectivesOfTheSeam) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  MpiCommunicator comm(t);
  const int me = comm.rank();
  for (int level = 0; level < 3; ++level) {
    const RankGroup g = t.levels_group(me, level, level);
    const int f = g.size(), c = t.coordinate(me, level);
    // all-to-all: piece j goes to the rank at coordinate j.
    std::vector<float> send(static_cast<std::size_t>(2 * f)), recv(send.size());
    for (int j = 0; j < f; ++j) send[2 * j] = send[2 * j + 1] = static_cast<float>(100 * me + j);
    comm.all_to_all(send.data(), recv.data(), 2, DType::kF32, level);
    for (int j = 0; j < f; ++j) {
      EXPECT_EQ(recv[2 * j], static_cast<float>(100 * g.ranks[j] + c)) << "all-to-all at level " << level;
    }
    // broadcast from coordinate 1.
    std::vector<double> value = {c == 1 ? 3.5 + level : -1.0};
    comm.broadcast(value.data(), 1, DType::kF64, 1, level);
    EXPECT_EQ(value[0], 3.5 + level);
    // non-blocking reduce-scatter, and bf16 (small integers are exact in bf16).
    for (DType type : {DType::kF32, DType::kBF16}) {
      std::vector<float> full(static_cast<std::size_t>(f) * 3);
      for (std::size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>((i + static_cast<std::size_t>(me)) % 5);
      std::vector<unsigned char> in(full.size() * dtype_size(type)), out(3 * dtype_size(type));
      if (type == DType::kBF16) {
        fp32_to_bf16(reinterpret_cast<bf16*>(in.data()), full.data(), full.size());
      } else {
        std::memcpy(in.data(), full.data(), in.size());
      }
      comm.start_reduce_scatter(in.data(), out.data(), 3, type, level)->wait();
      std::vector<float> got(3);
      if (type == DType::kBF16) {
        bf16_to_fp32(got.data(), reinterpret_cast<const bf16*>(out.data()), 3);
      } else {
        std::memcpy(got.data(), out.data(), out.size());
      }
      for (std::size_t i = 0; i < 3; ++i) {
        float expect = 0.0f;
        for (int r : g.ranks) expect += static_cast<float>((static_cast<std::size_t>(c) * 3 + i + static_cast<std::size_t>(r)) % 5);
        EXPECT_EQ(got[i], expect) << dtype_name(type) << " reduce-scatter at level " << level;
      }
    }
  }
  // Metered volumes: all-to-all sends (f-1) pieces, a broadcast root sends the buffer once.
  const LevelTraffic gcd = comm.meter().at(0);
  EXPECT_EQ(gcd.calls, 4u);
  EXPECT_EQ(gcd.bytes_sent, 1u * 2 * 4 + (me % 2 == 1 ? 8u : 0u) + 1u * 3 * 4 + 1u * 3 * 2);
}

TEST(World8, LevelDecomposedCollectivesEqualAPlainSum) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  MpiCommunicator comm(t);
  const std::size_t n = 8 * 6;
  // Small integers sum exactly in fp32 and bf16, so every rank can predict every result.
  auto data_of = [&](int rank) {
    std::vector<float> v(n);
    Rng rng(static_cast<std::uint64_t>(rank) + 100);
    for (auto& x : v) x = static_cast<float>(rng.below(9));
    return v;
  };
  for (int first = 0; first < 3; ++first) {
    for (int last = first; last < 3; ++last) {
      const RankGroup g = t.levels_group(comm.rank(), first, last);
      std::vector<float> sum(n, 0.0f);
      for (int r : g.ranks) {
        const auto d = data_of(r);
        for (std::size_t i = 0; i < n; ++i) sum[i] += d[i];
      }
      const std::size_t piece = n / static_cast<std::size_t>(g.size());
      const std::size_t offset = shard_offset(t, comm.rank(), n, first, last);
      std::vector<float> data = data_of(comm.rank()), shard(piece);
      hierarchical_reduce_scatter(comm, data.data(), n, DType::kF32, first, last, shard.data());
      for (std::size_t i = 0; i < piece; ++i) ASSERT_EQ(shard[i], sum[offset + i]) << first << ".." << last;
      // All-gather puts every rank's shard (here: its part of the sum) in its place.
      std::vector<float> gathered(n, -1.0f);
      std::copy(shard.begin(), shard.end(), gathered.begin() + static_cast<std::ptrdiff_t>(offset));
      hierarchical_all_gather(comm, gathered.data(), n, DType::kF32, first, last);
      EXPECT_EQ(gathered, sum) << "all-gather " << first << ".." << last;
      std::vector<float> reduced = data_of(comm.rank());
      hierarchical_all_reduce(comm, reduced.data(), n, DType::kF32, first, last);
      EXPECT_EQ(reduced, sum) << "all-reduce " << first << ".." << last;
      std::vector<float> prefetched(n, -1.0f);
      std::copy(shard.begin(), shard.end(), prefetched.begin() + static_cast<std::ptrdiff_t>(offset));
      start_hierarchical_all_gather(comm, prefetched.data(), n, DType::kF32, first, last)->wait();
      EXPECT_EQ(prefetched, sum) << "non-blocking all-gather " << first << ".." << last;
    }
  }
}

// A checkpoint holds the full model whatever the plan: written by one plan, it loads into the
// single-process reference and into another plan, bit for bit.
TEST(World8, CheckpointsMoveBetweenPlansAndTheReference) {
  ASSERT_EQ(world_size(), 8);
  RunSettings s;
  s.steps = 3;
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const std::string root = ::testing::TempDir() + "/strata_sharded_ckpt";
  if (world_rank() == 0) std::filesystem::remove_all(root);
  MPI_Barrier(MPI_COMM_WORLD);
  MpiCommunicator comm(t);
  ShardedEngine zero3(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                      options_for("zero3", t, DType::kF32, s));
  const RunResult trained = run_sharded(zero3, s);
  CheckpointHistory history;
  const std::string dir = save_training_checkpoint(zero3, comm, zero3.layout(), root, s.steps, 0, history);
  EXPECT_EQ(incomplete_reason(dir), "");

  ShardedEngine hier3(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed + 1, comm,
                      options_for("hier3", t, DType::kF32, s));
  const CheckpointReader reader = CheckpointReader::open(dir, hier3.layout());
  EXPECT_EQ(reader.run().completed_steps, s.steps);
  EXPECT_EQ(reader.run().world, 8);
  hier3.load_state(reader);
  EXPECT_EQ(hier3.steps_run(), 0) << "the report must count only the steps this run measured";
  for (std::size_t u = 0; u < hier3.layout().unit_count(); ++u) {
    const std::vector<float> loaded = hier3.gather_master(static_cast<int>(u));
    if (world_rank() == 0) {
      EXPECT_EQ(loaded, trained.weights[u]) << "unit " << u;
    }
  }
  if (world_rank() == 0) {
    LocalEngine local(GptConfig::preset("tiny"), 8, s.seq_len, 99);
    local.load_state(reader);
    for (std::size_t u = 0; u < local.layout().unit_count(); ++u) {
      const float* p = local.params().unit(u);
      EXPECT_EQ(std::vector<float>(p, p + local.layout().unit(u).numel), trained.weights[u]) << "unit " << u;
    }
  }
}

// A file of Hugging Face's GPT2Model layout (no "transformer." prefix, Conv1D weights stored
// (in, out), the causal-mask buffers beside them, no n_head anywhere) holding `weights`.
void write_hugging_face_file(const std::string& path, const ModelLayout& layout, const UnitBuffers& weights) {
  std::vector<ExportTensor> tensors;
  const GptConfig& m = layout.config();
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const TensorSpec& t : layout.unit(u).tensors) {
      ExportTensor e;
      e.name = t.name == "wte" || t.name == "wpe" ? t.name + ".weight" : t.name;
      if (e.name[0] == 'h' && e.name[1] != '.') e.name = "h." + e.name.substr(1);
      e.shape = t.shape;
      const float* v = weights.unit(u) + t.range.begin;
      if (t.name == "wte") e.shape[0] = m.vocab_size;  // the model's rows only
      const bool conv1d = t.shape.size() == 2 && t.name != "wte" && t.name != "wpe";
      const auto rows = static_cast<std::size_t>(t.shape[0]);
      const std::size_t cols = t.shape.size() == 2 ? static_cast<std::size_t>(t.shape[1]) : 1;
      if (conv1d) {
        std::swap(e.shape[0], e.shape[1]);
        for (std::size_t c = 0; c < cols; ++c) {
          for (std::size_t r = 0; r < rows; ++r) e.values.push_back(v[r * cols + c]);
        }
      } else {
        e.values.assign(v, v + static_cast<std::size_t>(e.shape[0]) * cols);
      }
      tensors.push_back(std::move(e));
    }
    if (layout.unit(u).kind == UnitKind::kBlock) {
      ExportTensor mask;
      mask.name = fmt::format("h.{}.attn.bias", layout.unit(u).layer);
      mask.shape = {1, 1, m.context_length, m.context_length};
      for (int i = 0; i < m.context_length; ++i) {
        for (int j = 0; j < m.context_length; ++j) mask.values.push_back(j <= i ? 1.0f : 0.0f);
      }
      tensors.push_back(std::move(mask));
    }
  }
  write_safetensors(path, tensors, {{"format", "pt"}});
}

// --init-from on 8 ranks: every rank reads its own ranges of a Hugging Face file, and hier3 (and
// zero3) then hold exactly the file's weights and train as one process started from the file.
TEST(World8, PretrainedWeightsLoadIntoEveryRanksShardsAsIntoOneProcess) {
  ASSERT_EQ(world_size(), 8);
  RunSettings s;
  s.steps = 3;
  const GptConfig model = GptConfig::preset("tiny");
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const std::string path = ::testing::TempDir() + "/strata_pretrained_hf.safetensors";
  LocalEngine source(model, 1, s.seq_len, 4242);  // weights no engine below starts from
  if (world_rank() == 0) write_hugging_face_file(path, source.layout(), source.params());
  MPI_Barrier(MPI_COMM_WORLD);
  const PretrainedWeights file(path, model);
  EXPECT_EQ(file.shape().model.n_head, model.n_head);
  const RunResult ref = world_rank() == 0 ? run_reference(s, 8, &file) : RunResult{};
  MpiCommunicator comm(t);
  for (const std::string plan : {"hier3", "zero3"}) {
    ShardedEngine engine(model, s.batch_per_rank, s.seq_len, s.seed, comm, options_for(plan, t, DType::kF32, s));
    engine.load_state(file);
    for (std::size_t u = 0; u < engine.layout().unit_count(); ++u) {
      const std::vector<float> loaded = engine.gather_master(static_cast<int>(u));
      if (world_rank() == 0) {
        const float* want = source.params().unit(u);
        EXPECT_EQ(loaded, std::vector<float>(want, want + engine.layout().unit(u).numel)) << plan << " unit " << u;
      }
    }
    expect_matches(run_sharded(engine, s), ref, s, plan + " from a Hugging Face file");
  }
}

// ---- quantized plans ---------------------------------------------------------------------------

// Quantized plans against the single-process run: close, not to rounding. The gradient norm (of
// the reduced gradients, before clipping) staying within a few percent with int8 gradients says
// the 1/world factor is applied exactly once: a missing or doubled one is a factor 8 here.
TEST(World8, QuantizedPlansTrackTheSingleProcessRun) {
  ASSERT_EQ(world_size(), 8);
  RunSettings s;
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const RunResult ref = world_rank() == 0 ? run_reference(s, 8) : RunResult{};
  struct Case {
    const char* plan;
    double loss, norm;  // allowed relative differences
  };
  // Measured (worst loss, worst norm): zero3 int8/int8 2e-3, 6e-2 (int8 weights change the function
  // the gradient is of); zeropp 4e-3, 7e-2; hier3 int8/int4 4e-3, 8e-2; ddp int8 gradients 3e-4,
  // 1e-3 (only the reduction is quantized: the norm is the test of the 1/world factor).
  for (const Case& c : {Case{"zero3,quant_weights=int8,quant_grads=int8", 0.01, 0.15}, Case{"zeropp", 0.02, 0.2},
                        Case{"hier3,quant_weights=int8,quant_grads=int4", 0.02, 0.2},
                        Case{"ddp,quant_grads=int8", 0.005, 0.01},
                        Case{"zeropp,bucket_bytes=8192", 0.02, 0.2},
                        Case{"hier3,quant_weights=int8,quant_grads=int4,bucket_bytes=8192", 0.02, 0.2},
                        Case{"zeropp,collectives=flat", 0.02, 0.2}}) {
    const RunResult got = run_plan(c.plan, t, DType::kF32, s);
    if (world_rank() != 0) continue;
    double worst_loss = 0.0, worst_norm = 0.0;
    for (int i = 0; i < s.steps; ++i) {
      worst_loss = std::max(worst_loss, std::abs(got.losses[i] - ref.losses[i]) / ref.losses[i]);
      worst_norm = std::max(worst_norm, std::abs(got.norms[i] - ref.norms[i]) / ref.norms[i]);
    }
    EXPECT_LE(worst_loss, c.loss) << c.plan;
    EXPECT_LE(worst_norm, c.norm) << c.plan;
    EXPECT_GT(worst_loss, 0.0) << c.plan << ": quantization changed nothing";
    std::printf("  %-44s worst loss rel %.1e, worst grad-norm rel %.1e over %d steps\n", c.plan, worst_loss,
                worst_norm, s.steps);
  }
}

// Every rank holding a replica of an optimizer slice ends with the same bits: the quantized
// all-reduce decodes the same blobs everywhere. mics keeps one replica per node, zero1 with
// quantized gradients replicates nothing but reduces over all levels.
TEST(World8, QuantizedReplicasStayBitIdentical) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  for (const char* plan : {"mics,quant_grads=int4", "ddp,quant_grads=int4"}) {
    RunSettings s;
    s.steps = 3;
    const RunResult got = run_plan(plan, t, DType::kF32, s);
    for (std::size_t u = 0; u < got.weights.size(); ++u) {
      std::vector<float> first(got.weights[u]);
      MPI_Bcast(first.data(), static_cast<int>(first.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
      EXPECT_EQ(first, got.weights[u]) << plan << ": unit " << u << " differs from rank 0's";
    }
  }
}

// Quantization is deterministic: a quantized plan run in a seeded random order that respects the
// dependencies gives the very bits of the list order.
TEST(World8, QuantizedPlansGiveTheSameBitsInEveryValidOrder) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  for (const char* plan : {"zeropp", "hier3,quant_weights=int8,quant_grads=int4"}) {
    std::vector<RunResult> runs;
    for (std::uint64_t seed : {0u, 5u}) {
      RunSettings s;
      s.steps = 3;
      s.shuffle_seed = seed;
      runs.push_back(run_plan(plan, t, DType::kBF16, s));
    }
    EXPECT_EQ(runs[0].losses, runs[1].losses) << plan;
    EXPECT_EQ(runs[0].weights, runs[1].weights) << plan;
  }
}

// The bytes the meter counts for one unit's forward gather (executed by the engine from its own
// schedule) and for its gradient reduce-scatter fall by the factor the format predicts: fp32 to
// int8 is 4 s / (s + 4 ceil(s / B)) for pieces of s elements, bf16 to int8 half that, fp32 to int4
// 4 s / (s / 2 + 4 ceil(s / B)) at each hop (about 3.9x, 2x and 7.1x with the default blocks,
// 256 and 64).
TEST(World8, QuantizedCollectivesCutTheMeasuredBytesByTheExpectedFactor) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const int top = t.level_count() - 1;
  RunSettings s;
  s.grad_accum = 1;
  auto forward_gather_bytes = [&](const std::string& plan, DType dtype, int unit) {
    MpiCommunicator comm(t);
    ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm,
                         options_for(plan, t, dtype, s));
    const auto& ops = engine.schedule().ops;
    for (OpKind kind : {OpKind::kGatherStart, OpKind::kGatherWait, OpKind::kRelease}) {
      const auto op = std::find_if(ops.begin(), ops.end(), [&](const ScheduleOp& o) { return o.kind == kind && o.unit == unit; });
      EXPECT_NE(op, ops.end());
      engine.execute(*op);
    }
    return comm.meter().at(top).bytes_sent;
  };
  const ModelLayout layout(GptConfig::preset("tiny"));
  const int block = static_cast<int>(layout.block_unit(0));
  const std::size_t n = padded_unit_sizes(layout, t)[static_cast<std::size_t>(block)];
  const std::size_t piece = n / 8;  // each rank's shard; the node level moves one piece per peer
  const double blocks = std::ceil(static_cast<double>(piece) / kDefaultWeightQuantBlock);
  const double grad_blocks = std::ceil(static_cast<double>(piece) / kDefaultGradQuantBlock);
  const double p = static_cast<double>(piece);

  const double fp32 = static_cast<double>(forward_gather_bytes("zero3", DType::kF32, block));
  const double bf16 = static_cast<double>(forward_gather_bytes("zero3", DType::kBF16, block));
  const double int8 = static_cast<double>(forward_gather_bytes("zero3,quant_weights=int8", DType::kF32, block));
  const double int8_from_bf16 = static_cast<double>(forward_gather_bytes("zero3,quant_weights=int8", DType::kBF16, block));
  EXPECT_EQ(int8, int8_from_bf16) << "int8 blobs do not depend on the working dtype";
  EXPECT_DOUBLE_EQ(fp32 / int8, 4 * p / (p + 4 * blocks));
  EXPECT_DOUBLE_EQ(bf16 / int8, 2 * p / (p + 4 * blocks));
  EXPECT_GT(fp32 / int8, 3.9);

  // The gradient reduction of the same unit, fp32 against qgZ int4, at the node level.
  auto reduce_bytes = [&](QuantFormat q) {
    MpiCommunicator comm(t);
    ScratchPool pool;
    std::vector<float> grad(n, 0.25f), shard(piece, 0.0f);
    const CollectiveSpec spec{CollectiveKind::kReduceScatter, 0, top, n, DType::kF32, q};
    start_unit_reduce_scatter(comm, spec, grad.data(), pool)->finish(shard.data(), piece);
    return static_cast<double>(comm.meter().at(top).bytes_sent);
  };
  const double rs_fp32 = reduce_bytes(QuantFormat{QuantBits::kNone, 0});
  const double rs_int4 = reduce_bytes(QuantFormat{QuantBits::kInt4, kDefaultGradQuantBlock});
  EXPECT_DOUBLE_EQ(rs_fp32 / rs_int4, 4 * p / (std::ceil(p / 2) + 4 * grad_blocks));
  EXPECT_GT(rs_fp32 / rs_int4, 7.0);
  if (world_rank() == 0) {
    std::printf("  node-level bytes of one block's forward gather: fp32 %.0f, bf16 %.0f, int8 %.0f (%.3fx, %.3fx); "
                "its reduce-scatter: fp32 %.0f, int4 %.0f (%.3fx)\n",
                fp32, bf16, int8, fp32 / int8, bf16 / int8, rs_fp32, rs_int4, rs_fp32 / rs_int4);
  }
}

// ZeRO++'s claim at our scale: the tiny model on the built-in corpus, 300 steps on 8 ranks with
// the defaults of `strata train` (8 sequences of 64 tokens per rank, lr 1e-3), ends at a
// validation loss within 2% of the fp32 zero3 run with zeropp (int8 weights, int4 gradients) and
// with hier3 quantized alike. (Measured: within 1%; with 1 sequence per rank, int4 gradients
// cost about 2%, and with blocks of 2048 about 5%: docs/architecture.md.)
TEST(World8, QuantizedTrainingConvergesLikeFp32) {
  ASSERT_EQ(world_size(), 8);
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  static const std::vector<std::int32_t> tokens = ByteTokenizer::encode(builtin_corpus(1 << 20), "built-in");
  const std::size_t val_begin = tokens.size() * 9 / 10;
  const std::span<const std::int32_t> train(tokens.data(), val_begin), val(tokens.data() + val_begin, tokens.size() - val_begin);
  const int steps = 300, seq = 64, rows = 8, rank = world_rank();
  const StepRecipe recipe{LrSchedule{1e-3, 20, steps, 0.1}, AdamWHyper{}, 1.0, 1};
  auto final_val_loss = [&](const std::string& plan) {
    MpiCommunicator comm(t);
    ShardedEngineOptions o = options_for(plan, t, DType::kF32, RunSettings{});
    o.grad_accum = 1;
    o.validate = false;  // checked by the other tests; 300 steps need not recheck
    ShardedEngine engine(GptConfig::preset("tiny"), rows, seq, 5, comm, o);
    BatchLoader loader(train, "train", 8 * rows, seq), held_out(val, "val", 8 * rows, seq);
    std::vector<std::int32_t> in(static_cast<std::size_t>(rows * seq)), tgt(in.size());
    for (int step = 0; step < steps; ++step) {
      train_step(
          engine, recipe, step,
          [&](int, std::span<std::int32_t> a, std::span<std::int32_t> b) {
            loader.fill(static_cast<std::uint64_t>(step), rank * rows, rows, a, b);
          },
          in, tgt);
    }
    double loss = 0.0;
    for (std::uint64_t b = 0; b < 16; ++b) {
      held_out.fill(b, rank * rows, rows, in, tgt);
      loss += engine.evaluate(in, tgt) / 16.0;
    }
    return loss;
  };
  const double fp32 = final_val_loss("zero3");
  const double zeropp = final_val_loss("zeropp");
  const double hier3q = final_val_loss("hier3,quant_weights=int8,quant_grads=int4");
  EXPECT_LE(std::abs(zeropp - fp32) / fp32, 0.02) << "zeropp " << zeropp << " vs zero3 fp32 " << fp32;
  EXPECT_LE(std::abs(hier3q - fp32) / fp32, 0.02) << "hier3 quantized " << hier3q << " vs zero3 fp32 " << fp32;
  EXPECT_LT(fp32, 4.0) << "the run must learn (uniform over 256 bytes is 5.5)";
  if (rank == 0) {
    std::printf("  validation loss after %d steps: zero3 fp32 %.4f, zeropp %.4f (%+.2f%%), hier3 int8/int4 %.4f (%+.2f%%)\n",
                steps, fp32, zeropp, 100 * (zeropp - fp32) / fp32, hier3q, 100 * (hier3q - fp32) / fp32);
  }
}

// Quantized plans on padded units and a level of fan-out 1 (node:* on 6 ranks: its collectives have
// no peers and are not quantized) still track the single-process run.
TEST(World6, QuantizedPlansTrackTheSingleProcessRunWithPaddedUnits) {
  ASSERT_EQ(world_size(), 6);
  RunSettings s;
  const Topology t = Topology::parse("gcd:2,gpu:3,node:*", 6);
  const RunResult ref = world_rank() == 0 ? run_reference(s, 6) : RunResult{};
  for (const char* plan : {"zeropp", "hier3,quant_weights=int8,quant_grads=int4", "mics,quant_grads=int4"}) {
    const RunResult got = run_plan(plan, t, DType::kBF16, s);
    if (world_rank() != 0) continue;
    double worst = 0.0;
    for (int i = 0; i < s.steps; ++i) worst = std::max(worst, std::abs(got.losses[i] - ref.losses[i]) / ref.losses[i]);
    EXPECT_LE(worst, 0.02) << plan;
    std::printf("  %-44s bf16, worst loss rel %.1e over %d steps\n", plan, worst, s.steps);
  }
}

TEST(World4, EveryPlanMatchesTheSingleProcessRun) {
  ASSERT_EQ(world_size(), 4) << "run under mpirun -np 4";
  every_plan_matches_reference("gcd:2,node:2", {"weights=gcd,grads=world,optim=world"});
}

// The other matmul implementations and the bf16 compute mode (every other test runs the default,
// oneDNN where the build has it): every preset still matches one process computing the same way,
// and a second run gives the same bits. fp32 keeps the bounds above, over ten steps.
//
// bf16 compute is held to bounds that follow from the arithmetic, not from one CPU. Two runs whose
// sums go in another order (the ranks' partial gradients summed by a collective; and with
// OpenBLAS's Haswell kernels the forward too, since there a row's result depends on its place in
// the kernel's tile of rows, so the same sample in a batch of another size sums differently) hold
// fp32 values about sqrt(k) 2^-24 apart, relatively, for sums of length k (the probabilistic
// rounding-error bound of Higham and Mary, 2019). Rounded to bf16 (8 significant bits, an ulp of
// 2^-8 to 2^-7 of the value), such a value lands on the other bf16 neighbour with probability
// p = sqrt(k) 2^-24 / 2^-8 <= 2^-11 for every k <= 1024 here. A flip moves one product input by
// one ulp; rounding to bf16 at all moves every input by up to half an ulp (variance ulp^2 / 12).
// With independent signs, a smooth result (the loss, the gradient norm) moves under the flips by
// sqrt(12 p) <= 0.08 of what rounding to bf16 moves it, so a run may differ from the bf16
// reference by at most a quarter of the distance between the bf16 and the fp32 reference, both
// measured in this run on this CPU's kernels. AdamW's first step moves each weight by lr times the
// sign of its gradient, so weights differ only where a perturbation flips a gradient's sign: their
// number grows in proportion to the perturbation and their rms with its square root, so the
// weights' rms difference may reach sqrt(1/4) = half the rounding's. Beyond one step no bound
// follows: each flipped sign changes the next forward, and the runs diverge at the rate of the
// training's own chaos (measured: tenfold over ten steps). So the bf16 comparison is the first
// step, from the same weights, with two micro-batches accumulated and clipping on; what outlives
// a step is held over ten steps by the fp32 parity above, and bit for bit by the bf16 working
// copy's test below. A wrong partition, stride or missing rounding moves these statistics by far
// more than a quarter of the rounding's effect; a mode that silently stayed fp32 lands at the
// whole rounding distance.
TEST(World4, EveryPlanMatchesTheSingleProcessRunWithEachMatmulAndBf16Compute) {
  ASSERT_EQ(world_size(), 4) << "run under mpirun -np 4";
  const Topology t = Topology::parse("gcd:2,node:2", 4);
  for (const auto& [impl, dtype] : {std::pair{cpu::MatmulImpl::kOpenBlas, cpu::ComputeDType::kF32},
                                    std::pair{cpu::MatmulImpl::kOneDnn, cpu::ComputeDType::kBF16},
                                    std::pair{cpu::MatmulImpl::kOpenBlas, cpu::ComputeDType::kBF16}}) {
    if (impl == cpu::MatmulImpl::kOneDnn && !cpu::onednn_bf16_available()) continue;
    const bool bf16 = dtype == cpu::ComputeDType::kBF16;
    const testing::MatmulScope matmul(impl, dtype);
    const std::string label = " (" + cpu::matmul_impl_name(impl) + ", " + cpu::compute_dtype_name(dtype) + ")";
    RunSettings s;
    if (bf16) s.steps = 1;
    const RunResult ref = world_rank() == 0 ? run_reference(s, world_size()) : RunResult{};
    RunDistance rounding;  // what rounding the products' inputs to bf16 does to the reference
    if (world_rank() == 0 && bf16) {
      const testing::MatmulScope fp32(impl, cpu::ComputeDType::kF32);
      rounding = distance(ref, run_reference(s, world_size()), s);
      std::printf("  bf16 against fp32 reference%-21s loss %.2e, norm %.2e, weights rms %.2e of the lr (%s)\n",
                  label.c_str(), rounding.loss, rounding.norm, rounding.weights, rounding.worst_tensor.c_str());
    }
    for (const auto& plan : exact_presets(t)) {
      const RunResult got = run_plan(plan, t, DType::kF32, s);
      if (!bf16) {
        expect_matches(got, ref, s, plan + label);
      } else if (world_rank() == 0) {
        const RunDistance d = distance(got, ref, s);
        EXPECT_LE(d.loss, 0.25 * rounding.loss) << plan << label << ": loss";
        EXPECT_LE(d.norm, 0.25 * rounding.norm) << plan << label << ": gradient norm";
        EXPECT_LE(d.weights, 0.5 * rounding.weights) << plan << label << ": weights of " << d.worst_tensor;
        std::printf("  %-48s loss %.1e, norm %.1e, weights rms %.1e of the rounding's (%s)\n", (plan + label).c_str(),
                    d.loss / rounding.loss, d.norm / rounding.norm, d.weights / rounding.weights, d.worst_tensor.c_str());
      }
      if (plan != "hier3") continue;
      const RunResult again = run_plan(plan, t, DType::kF32, s);
      EXPECT_EQ(got.losses, again.losses) << plan << label;
      EXPECT_EQ(got.weights, again.weights) << plan << label;
    }
  }
}

// bf16 working weights under bf16 compute: the products read the gathered bf16 copy where the
// gather leaves one (unquantized, unbucketed), which must give exactly the bits of converting the
// fp32 compute copy per product; quantized and bucketed gathers, which convert, ride along.
TEST(World4, TheGatheredBf16CopyGivesTheBitsOfConvertingPerProduct) {
  ASSERT_EQ(world_size(), 4) << "run under mpirun -np 4";
  STRATA_SKIP_WITHOUT_BF16(cpu::MatmulImpl::kOneDnn);
  const testing::MatmulScope matmul(cpu::MatmulImpl::kOneDnn, cpu::ComputeDType::kBF16);
  const Topology t = Topology::parse("gcd:2,node:2", 4);
  RunSettings s;
  s.steps = 4;
  for (const std::string plan : {"ddp", "zero3", "hier3", "zeropp", "zero3,gather_bucket_bytes=4096"}) {
    std::vector<RunResult> runs;
    for (const bool copy : {true, false}) {
      MpiCommunicator comm(t);
      ShardedEngineOptions o = options_for(plan, t, DType::kBF16, s);
      o.bf16_working_copy = copy;
      ShardedEngine engine(GptConfig::preset("tiny"), s.batch_per_rank, s.seq_len, s.seed, comm, o);
      runs.push_back(run_sharded(engine, s));
    }
    EXPECT_EQ(runs[0].losses, runs[1].losses) << plan;
    EXPECT_EQ(runs[0].norms, runs[1].norms) << plan;
    EXPECT_EQ(runs[0].weights, runs[1].weights) << plan;
  }
}

// gpu:3 catches layout assumptions (a power of two somewhere) and leaves units whose size the
// spans do not divide (the final norm has 128 elements), so padding is exercised.
TEST(World6, EveryPlanMatchesTheSingleProcessRunWithPaddedUnits) {
  ASSERT_EQ(world_size(), 6) << "run under mpirun -np 6";
  const Topology t = Topology::parse("gcd:2,gpu:3,node:*", 6);
  const ModelLayout layout(GptConfig::preset("tiny"));
  ASSERT_NE(layout.unit(layout.final_norm_unit()).numel % 6, 0u);
  every_plan_matches_reference("gcd:2,gpu:3,node:*", {"weights=gcd,grads=gpu,optim=world", "weights=world,secondary=gcd,grads=world,optim=world"});
}

}  // namespace
}  // namespace strata
