// The step schedule as a program: the validator accepts every schedule the builder makes (every
// preset and explicit plans, 1-3 levels, prefetch on and off, 1 and 3 micro-batches, one and two
// steps, training and evaluation) and rejects hand-broken lists with a sentence; the counting
// executor's bytes equal the closed-form oracle; seeded execution orders respect every dependency.
#include <gtest/gtest.h>

#include "train/engine_setup.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/parameter_layout.hpp"
#include "schedule/counting_executor.hpp"
#include "schedule/op_executor.hpp"
#include "schedule/validate.hpp"
#include "support/error_text.hpp"
#include "support/plan_formulas.hpp"

namespace strata {
namespace {

using testing::error_of;

struct Case {
  const char* topology;
  int world;
};
const Case kTopologies[] = {{"flat", 8}, {"gpu:4,node:2", 8}, {"gcd:2,gpu:2,node:2", 8}, {"gcd:2,gpu:3,node:1", 6},
                            {"frontier", 16}};

std::vector<std::string> plans_for(const Topology& t) {
  std::vector<std::string> plans = ShardPlan::preset_names();
  plans.push_back("weights=" + t.level(0).name + ",grads=world,optim=world");
  if (t.level_count() >= 2) {
    plans.push_back("weights=world,secondary=" + t.level(0).name + ",grads=world,optim=world");
    plans.push_back("weights=world,grads=" + t.level(0).name + ",optim=" + t.level(0).name);
  }
  // Quantized collectives (zeropp already is): every gradient reduction kind (the all-reduce of
  // ddp and the boundary reduce-scatter of hier3 included), backward gathers on and off, a block
  // small enough that units hold many blocks and partial ones.
  plans.push_back("hier3,quant_weights=int8,quant_grads=int4");
  plans.push_back("zero3,quant_weights=int8,quant_grads=int8,quant_block=64");
  plans.push_back("ddp,quant_grads=int4,quant_block=100");
  plans.push_back("zeropp,quant_backward=on");
  plans.push_back("zero3,quant_weights=int4,quant_backward=off");
  // Flat collectives, plain and with qwZ gathers.
  plans.push_back("hier3,collectives=flat");
  plans.push_back("zeropp,collectives=flat");
  // Buckets of every collective kind, plain and quantized, and with flat collectives.
  plans.push_back("zero3,bucket_bytes=4096");
  plans.push_back("zero1,bucket_bytes=4096");
  plans.push_back("zeropp,bucket_bytes=4096");  // bucketed gathers from the hpZ copy
  plans.push_back("hier3,quant_weights=int8,quant_grads=int4,bucket_bytes=8192");
  plans.push_back("ddp,collectives=flat,bucket_bytes=4096");
  plans.push_back("zero3,collectives=flat,gather_bucket_bytes=4096,reduce_bucket_bytes=16384");
  return plans;
}

StepSchedule build(const ModelLayout& layout, const Topology& t, const std::string& plan, int accum, int prefetch,
                   int steps = 1, DType dtype = DType::kF32, ScheduleMode mode = ScheduleMode::kTrain,
                   std::uint64_t max_live_bytes = 0, bool boundary_overlap = true,
                   ActivationCheckpointing checkpointing = {}) {
  ScheduleInputs in;
  in.layout = &layout;
  in.topology = &t;
  in.plan = ShardPlan::parse(plan, t);
  in.mode = mode;
  in.grad_accum = accum;
  in.steps = steps;
  in.tokens_per_micro = 64;
  in.seq_len = 32;
  in.weight_dtype = in.grad_dtype = dtype;
  in.prefetch = prefetch;
  in.max_live_bytes = max_live_bytes;
  in.boundary_overlap = boundary_overlap;
  in.activation_checkpointing = checkpointing;
  return build_step_schedule(in);
}

std::string all_problems(const ScheduleCheck& c) {
  std::string out;
  for (const auto& p : c.problems) out += "\n  " + p;
  return out;
}

bool mentions(const ScheduleCheck& c, const std::string& phrase) {
  return std::any_of(c.problems.begin(), c.problems.end(), [&](const std::string& p) { return p.find(phrase) != std::string::npos; });
}

// Removes op `index`, dropping the dependencies on it and renumbering the rest.
void remove_op(StepSchedule& s, int index) {
  s.ops.erase(s.ops.begin() + index);
  for (ScheduleOp& op : s.ops) {
    std::vector<int> deps;
    for (int d : op.deps) {
      if (d != index) deps.push_back(d > index ? d - 1 : d);
    }
    op.deps = deps;
  }
  for (ScheduleSegment& g : s.segments) {
    if (g.begin > index) --g.begin;
    if (g.end > index) --g.end;
  }
}

void drop_dep(ScheduleOp& op, int dep) { op.deps.erase(std::remove(op.deps.begin(), op.deps.end(), dep), op.deps.end()); }

int find_op(const StepSchedule& s, OpKind kind, int unit, int step, int micro, int from = 0) {
  for (int i = from; i < static_cast<int>(s.ops.size()); ++i) {
    const ScheduleOp& op = s.ops[static_cast<std::size_t>(i)];
    if (op.kind == kind && (unit < 0 || op.unit == unit) && op.step == step && op.micro == micro) return i;
  }
  return -1;
}

const ModelLayout& tiny() {
  static const ModelLayout layout(GptConfig::preset("tiny"));
  return layout;
}

TEST(ScheduleValidator, AcceptsEveryScheduleTheBuilderMakes) {
  int checked = 0;
  for (const Case& c : kTopologies) {
    const Topology t = resolve_topology(c.topology, c.world);
    for (const auto& plan : plans_for(t)) {
      for (bool prefetch : {true, false}) {
        for (int accum : {1, 3}) {
          for (int steps : {1, 2}) {
            for (DType dtype : {DType::kF32, DType::kBF16}) {
              for (bool overlap : {true, false}) {
                const StepSchedule s = build(tiny(), t, plan, accum, prefetch, steps, dtype, ScheduleMode::kTrain, 0, overlap);
                const ScheduleCheck check = validate_schedule(s);
                EXPECT_TRUE(check.ok()) << c.topology << " " << plan << " prefetch " << prefetch << " accum " << accum
                                        << " steps " << steps << " boundary overlap " << overlap << all_problems(check);
                ++checked;
              }
            }
          }
        }
        const StepSchedule eval = build(tiny(), t, plan, 1, prefetch, 1, DType::kF32, ScheduleMode::kEvaluate);
        EXPECT_TRUE(validate_schedule(eval).ok()) << c.topology << " " << plan << " evaluation" << all_problems(validate_schedule(eval));
      }
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(ScheduleValidator, AcceptsRecomputeSchedulesWithOneGatherPerBackward) {
  for (const Case& c : kTopologies) {
    const Topology t = resolve_topology(c.topology, c.world);
    for (const auto& plan : plans_for(t)) {
      for (const int every : {1, 2}) {
        for (const int accum : {1, 3}) {
          const ActivationCheckpointing ck{every};
          const StepSchedule s = build(tiny(), t, plan, accum, true, 2, DType::kF32, ScheduleMode::kTrain, 0, true, ck);
          const ScheduleCheck check = validate_schedule(s);
          EXPECT_TRUE(check.ok()) << c.topology << " " << plan << " every:" << every << all_problems(check);
          const StepSchedule plain = build(tiny(), t, plan, accum, true, 2);
          int recomputes = 0;
          for (std::size_t i = 0; i < s.ops.size(); ++i) {
            const ScheduleOp& op = s.ops[i];
            if (op.kind != OpKind::kRecompute) continue;
            ++recomputes;
            EXPECT_TRUE(ck.recomputes(op.layer));
            // Straight after its backward gather's wait, straight before its backward.
            const ScheduleOp& next = s.ops[i + 1];
            EXPECT_EQ(next.kind, OpKind::kBackward);
            EXPECT_EQ(next.layer, op.layer);
          }
          EXPECT_EQ(recomputes, 2 * accum * ck.recomputed_blocks(tiny().config().n_layer));
          // The recompute adds no collective: the same gathers and bytes as without it.
          const Topology& top = t;
          EXPECT_EQ(count_schedule(s, top).bytes, count_schedule(plain, top).bytes) << plan;
        }
      }
    }
  }
}

TEST(ScheduleValidator, RefusesARecomputePlacedAfterItsBackward) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  StepSchedule s = build(tiny(), t, "zero3", 1, true, 1, DType::kF32, ScheduleMode::kTrain, 0, true,
                         ActivationCheckpointing{1});
  ASSERT_TRUE(validate_schedule(s).ok()) << all_problems(validate_schedule(s));
  const int block = static_cast<int>(tiny().block_unit(0));
  const int rec = find_op(s, OpKind::kRecompute, block, 0, 0);
  const int bwd = find_op(s, OpKind::kBackward, block, 0, 0);
  ASSERT_GE(rec, 0);
  ASSERT_EQ(bwd, rec + 1);
  // Swap them with consistent dependencies: the backward now depends on what the recompute did
  // (the gather's wait), and the recompute on the backward.
  ScheduleOp& r = s.ops[static_cast<std::size_t>(rec)];
  ScheduleOp& b = s.ops[static_cast<std::size_t>(bwd)];
  std::vector<int> backward_deps = r.deps;
  for (int d : b.deps) {
    if (d != rec) backward_deps.push_back(d);
  }
  b.deps = backward_deps;
  r.deps.push_back(rec);  // the backward, at rec once swapped
  std::swap(r, b);
  for (std::size_t i = static_cast<std::size_t>(bwd) + 1; i < s.ops.size(); ++i) {
    for (int& d : s.ops[i].deps) d = d == rec ? bwd : d == bwd ? rec : d;
  }
  const ScheduleCheck check = validate_schedule(s);
  EXPECT_FALSE(check.ok());
  EXPECT_TRUE(mentions(check, "reads the saved activations of " + tiny().unit(static_cast<std::size_t>(block)).name))
      << all_problems(check);
  EXPECT_TRUE(mentions(check, "released it")) << all_problems(check);
}

TEST(ScheduleValidator, EveryMicroBatchIsInTheListWithItsCollectives) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const StepSchedule s = build(tiny(), t, "zeropp", 3, true);
  const int blocks = tiny().config().n_layer;
  for (int m = 0; m < 3; ++m) {
    int gathers = 0, secondary = 0, reductions = 0, losses = 0;
    for (const ScheduleOp& op : s.ops) {
      if (op.micro != m) continue;
      if (op.kind == OpKind::kGatherStart) {
        ++gathers;
        secondary += op.source == WeightSource::kSecondary;
        // Forward gathers span every level; backward ones only up to the secondary level.
        EXPECT_EQ(op.comm.last_level, op.source == WeightSource::kSecondary ? 1 : 2);
        EXPECT_EQ(op.comm.elements, s.padded_numel[static_cast<std::size_t>(op.unit)]);
      }
      reductions += op.kind == OpKind::kReduceScatterStart;
      losses += op.kind == OpKind::kLossReduce;
    }
    EXPECT_EQ(gathers, 2 + blocks + 1 + blocks) << "embedding twice, each block twice, the final norm once";
    EXPECT_EQ(secondary, blocks);
    EXPECT_EQ(reductions, static_cast<int>(tiny().unit_count()));
    EXPECT_EQ(losses, 1);
  }
  int norms = 0;
  for (const ScheduleOp& op : s.ops) norms += op.kind == OpKind::kGradNorm;
  EXPECT_EQ(norms, 1);
}

TEST(ScheduleValidator, RejectsAMissingDependency) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  StepSchedule s = build(tiny(), t, "zero3", 1, true);
  const int block = static_cast<int>(tiny().block_unit(0));
  const int wait = find_op(s, OpKind::kGatherWait, block, 0, 0);
  const int forward = find_op(s, OpKind::kForward, block, 0, 0);
  ASSERT_GE(wait, 0);
  ASSERT_GE(forward, 0);
  drop_dep(s.ops[static_cast<std::size_t>(forward)], wait);
  const ScheduleCheck check = validate_schedule(s);
  EXPECT_TRUE(mentions(check, "reads the gathered weights of " + tiny().unit(static_cast<std::size_t>(block)).name +
                                  " without depending on"))
      << all_problems(check);
}

TEST(ScheduleValidator, RejectsAWaitBeforeItsStart) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  StepSchedule s = build(tiny(), t, "zero3", 1, false);
  const int start = find_op(s, OpKind::kGatherStart, 0, 0, 0);
  const int wait = find_op(s, OpKind::kGatherWait, 0, 0, 0);
  ASSERT_EQ(wait, start + 1);
  std::swap(s.ops[static_cast<std::size_t>(start)], s.ops[static_cast<std::size_t>(wait)]);
  for (ScheduleOp& op : s.ops) {
    for (int& d : op.deps) d = d == start ? wait : d == wait ? start : d;
  }
  const ScheduleCheck check = validate_schedule(s);
  EXPECT_TRUE(mentions(check, "gather_wait of " + tiny().unit(0).name)) << all_problems(check);
  EXPECT_TRUE(mentions(check, "which comes later in the list")) << all_problems(check);
}

TEST(ScheduleValidator, RejectsTheUseOfAStaleSecondaryCopy) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  StepSchedule s = build(tiny(), t, "zeropp", 1, true, 2);
  ASSERT_TRUE(validate_schedule(s).ok());
  // Step 1 forgets to keep block 0's copy: its backward gather would read step 0's, made before
  // the update.
  const int block = static_cast<int>(tiny().block_unit(0));
  const int keep = find_op(s, OpKind::kKeepSecondary, block, 1, 0);
  ASSERT_GE(keep, 0);
  remove_op(s, keep);
  const ScheduleCheck check = validate_schedule(s);
  EXPECT_TRUE(mentions(check, "uses a stale secondary copy")) << all_problems(check);
}

TEST(ScheduleValidator, RejectsABoundaryThatSkipsAGradientReduction) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  StepSchedule s = build(tiny(), t, "zero3", 3, true);
  const int block = static_cast<int>(tiny().block_unit(1));
  int last_wait = -1;
  for (int i = 0; i < static_cast<int>(s.ops.size()); ++i) {
    if (s.ops[static_cast<std::size_t>(i)].kind == OpKind::kReduceScatterWait && s.ops[static_cast<std::size_t>(i)].unit == block) last_wait = i;
  }
  const int norm = find_op(s, OpKind::kGradNorm, -1, 0, -1);
  ASSERT_GE(last_wait, 0);
  drop_dep(s.ops[static_cast<std::size_t>(norm)], last_wait);
  const ScheduleCheck check = validate_schedule(s);
  EXPECT_TRUE(mentions(check, "grad_norm")) << all_problems(check);
  EXPECT_TRUE(mentions(check, "reads the gradient shard of " + tiny().unit(static_cast<std::size_t>(block)).name))
      << all_problems(check);
}

// The next step's first gather of a unit must wait for the updated weights: at the boundary
// (overlap off), or through the wait the next step holds just before it (overlap on). Deleting
// that cross-step dependency, or the wait's own on its start, is caught.
TEST(ScheduleValidator, RejectsAGatherOfTheNextStepBeforeTheUpdate) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const int unit = static_cast<int>(tiny().final_norm_unit());
  const std::string name = tiny().unit(static_cast<std::size_t>(unit)).name;
  for (bool overlap : {false, true}) {
    StepSchedule s = build(tiny(), t, "hier3", 1, true, 2, DType::kF32, ScheduleMode::kTrain, 0, overlap);
    const int wait = overlap ? find_op(s, OpKind::kGatherUpdatedWait, unit, 1, 0)
                             : find_op(s, OpKind::kGatherUpdatedWait, unit, 0, -1);
    const int gather = find_op(s, OpKind::kGatherStart, unit, 1, 0);
    ASSERT_GE(wait, 0);
    ASSERT_GE(gather, 0);
    StepSchedule dropped = s;
    drop_dep(dropped.ops[static_cast<std::size_t>(gather)], wait);
    const ScheduleCheck check = validate_schedule(dropped);
    EXPECT_TRUE(mentions(check, "reads the primary weight shard of " + name)) << overlap << all_problems(check);
    if (!overlap) continue;
    // The wait in step 1 pairs with step 0's start; without that dependency it waits for nothing.
    const int start = find_op(s, OpKind::kGatherUpdatedStart, unit, 0, -1);
    ASSERT_GE(start, 0);
    drop_dep(s.ops[static_cast<std::size_t>(wait)], start);
    const ScheduleCheck unpaired = validate_schedule(s);
    EXPECT_TRUE(mentions(unpaired, "must depend on exactly one gather_updated_start")) << all_problems(unpaired);
  }
}

TEST(ScheduleValidator, RejectsMemoryFreedButNeverAllocatedAndALeak) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  StepSchedule s = build(tiny(), t, "zero3", 1, true);
  const int start = find_op(s, OpKind::kGatherStart, 0, 0, 0);
  s.ops[static_cast<std::size_t>(start)].alloc.clear();
  const int unit_grad_wait = find_op(s, OpKind::kReduceScatterWait, static_cast<int>(tiny().final_norm_unit()), 0, 0);
  s.ops[static_cast<std::size_t>(unit_grad_wait)].free.clear();
  const ScheduleCheck check = validate_schedule(s);
  EXPECT_TRUE(mentions(check, "frees the gathered weights buffer of unit 0, which is not allocated")) << all_problems(check);
  EXPECT_TRUE(mentions(check, "unit gradient buffer of unit " + std::to_string(tiny().final_norm_unit()))) << all_problems(check);
}

TEST(ScheduleValidator, RejectsACycle) {
  const Topology t = Topology::parse("gcd:2,node:2", 4);
  StepSchedule s = build(tiny(), t, "zero2", 1, true);
  s.ops[0].deps.push_back(static_cast<int>(s.ops.size()) - 1);
  const ScheduleCheck check = validate_schedule(s);
  EXPECT_TRUE(mentions(check, "the dependencies form a cycle")) << all_problems(check);
}

// The counting executor's bytes (a replay of the list) equal the closed form derived from the plan
// alone, for every preset on five topologies, fp32 and bf16, 1 and 3 micro-batches.
TEST(CountingExecutor, BytesEqualTheClosedFormForEveryPreset) {
  for (const Case& c : kTopologies) {
    const Topology t = resolve_topology(c.topology, c.world);
    for (const auto& name : plans_for(t)) {
      for (int accum : {1, 3}) {
        for (DType dt : {DType::kF32, DType::kBF16}) {
          const StepSchedule s = build(tiny(), t, name, accum, true, 1, dt);
          const ScheduleCounts counts = count_schedule(s, t);
          const TrafficFormula f = traffic_formula(tiny(), ShardPlan::parse(name, t), t, dt, dt);
          auto micro = f.micro_batch;
          for (auto& x : micro) x *= static_cast<std::uint64_t>(accum);
          EXPECT_EQ(counts.bytes_in(TrafficPhase::kMicroBatch), micro) << c.topology << " " << name;
          EXPECT_EQ(counts.bytes_in(TrafficPhase::kStepBoundary), f.boundary) << c.topology << " " << name;
          // Loss per micro-batch, the norm when the optimizer is partitioned, and the stop agreement.
          const bool partitioned = ShardPlan::parse(name, t).optimizer != kReplicated;
          EXPECT_EQ(counts.control_calls, static_cast<std::uint64_t>(accum) + (partitioned ? 1 : 0) + 1)
              << c.topology << " " << name;
          for (const StateMemory& m : memory_formula(tiny(), ShardPlan::parse(name, t), t, dt)) {
            for (const ResidentState& r : s.resident) {
              if (r.state == m.state) {
                EXPECT_EQ(r.bytes, m.bytes) << c.topology << " " << name << " " << m.state;
              }
            }
            if (m.state == "secondary") {
              EXPECT_EQ(counts.peak_by_kind[static_cast<std::size_t>(BufferKind::kSecondary)], m.bytes) << c.topology << " " << name;
            }
          }
        }
      }
    }
  }
}

// Prefetch holds two gathered units at once where the plain order holds one: the list alone says
// so, through the memory the ops allocate.
TEST(CountingExecutor, PrefetchRaisesThePeakOfGatheredWeights) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const auto gathered = [&](bool prefetch) {
    return count_schedule(build(tiny(), t, "zero3", 1, prefetch), t).peak_by_kind[static_cast<std::size_t>(BufferKind::kGathered)];
  };
  const std::vector<std::size_t> padded = padded_unit_sizes(tiny(), t);
  const std::uint64_t block = padded[tiny().block_unit(0)] * 4, emb = padded[0] * 4, fin = padded[tiny().final_norm_unit()] * 4;
  // Without prefetch one stage's units at a time (the head holds the final norm and the
  // embedding); with it, the next stage's copies arrive while the current one is held: the last
  // block's beside the head's two, or two blocks in backward.
  EXPECT_EQ(gathered(false), std::max(block, emb + fin));
  EXPECT_EQ(gathered(true), std::max({emb + block, 2 * block, block + emb + fin}));
  EXPECT_GT(gathered(true), gathered(false));
}

// The peak of gathered bytes when the segments run in `order_seed`'s order (0: the list order),
// from the alloc and free effects alone.
std::uint64_t gathered_peak(const StepSchedule& s, std::uint64_t order_seed) {
  std::uint64_t live = 0, peak = 0;
  for (int g = 0; g < static_cast<int>(s.segments.size()); ++g) {
    for (int i : segment_order(s, g, order_seed)) {
      const ScheduleOp& op = s.ops[static_cast<std::size_t>(i)];
      for (const BufferEffect& b : op.alloc) live += b.kind == BufferKind::kGathered ? b.bytes : 0;
      peak = std::max(peak, live);
      for (const BufferEffect& b : op.free) live -= b.kind == BufferKind::kGathered ? b.bytes : 0;
    }
  }
  return peak;
}

// Deeper prefetch holds more stages at once; a live-memory bound caps it in the list order and
// in every order the dependencies allow (starts and releases run in list order), and a bound
// below the largest stage is refused with a sentence.
TEST(CountingExecutor, PrefetchDepthRaisesThePeakAndTheBoundCapsItInEveryOrder) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const std::vector<std::size_t> padded = padded_unit_sizes(tiny(), t);
  const std::uint64_t block = padded[tiny().block_unit(0)] * 4, emb = padded[0] * 4, fin = padded[tiny().final_norm_unit()] * 4;
  const std::uint64_t head = emb + fin;
  std::vector<std::uint64_t> peaks;
  for (int depth : {0, 1, 2, 3}) peaks.push_back(gathered_peak(build(tiny(), t, "zero3", 1, depth), 0));
  EXPECT_LT(peaks[0], peaks[1]);
  EXPECT_LT(peaks[1], peaks[2]);
  // tiny has 2 blocks. Depth 2 holds the embedding and both blocks, then, once the embedding is
  // released, both blocks and the head; depth 3 cannot start the head earlier (the embedding is
  // one of its units and is still gathered), so it holds no more.
  EXPECT_EQ(peaks[2], 2 * block + head);
  EXPECT_EQ(peaks[3], peaks[2]);
  const std::uint64_t largest = std::max(block, head);
  for (std::uint64_t bound : {largest, largest + block / 2, 2 * block + fin}) {
    for (const char* plan : {"zero3", "zeropp", "hier3,quant_weights=int8,quant_grads=int4"}) {
      const StepSchedule s = build(tiny(), t, plan, 2, 3, 2, DType::kBF16, ScheduleMode::kTrain, bound * 2);
      const ScheduleCheck check = validate_schedule(s);
      EXPECT_TRUE(check.ok()) << plan << " bound " << bound << ": " << all_problems(check);
      for (std::uint64_t seed : {0u, 4u, 9u}) {
        EXPECT_LE(gathered_peak(s, seed), bound * 2) << plan << " bound " << bound << " order " << seed;
      }
    }
  }
  // bf16 gathers stage a bf16 copy beside the fp32 one: a unit needs 6 bytes per element; in tiny
  // a block is the largest stage.
  const std::uint64_t bf16_block = padded[tiny().block_unit(0)] * 6;
  ASSERT_GT(block, head);
  const std::string refused = error_of([&] {
    build(tiny(), t, "zero3", 1, 1, 1, DType::kBF16, ScheduleMode::kTrain, bf16_block - 1);
  });
  EXPECT_NE(refused.find("max-live-bytes " + std::to_string(bf16_block - 1) + " is below the " +
                         std::to_string(bf16_block) + " bytes that block0 needs gathered at once"),
            std::string::npos)
      << refused;
  EXPECT_NO_THROW(build(tiny(), t, "zero3", 1, 1, 1, DType::kBF16, ScheduleMode::kTrain, bf16_block));
}

TEST(ExecutionOrder, SeededOrdersArePermutationsThatRespectEveryDependency) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const StepSchedule s = build(tiny(), t, "zeropp", 2, true);
  bool differs = false;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    for (int g = 0; g < static_cast<int>(s.segments.size()); ++g) {
      const std::vector<int> order = segment_order(s, g, seed);
      const ScheduleSegment& seg = s.segments[static_cast<std::size_t>(g)];
      ASSERT_EQ(order.size(), static_cast<std::size_t>(seg.end - seg.begin));
      std::vector<int> position(s.ops.size(), -1);
      for (std::size_t k = 0; k < order.size(); ++k) position[static_cast<std::size_t>(order[k])] = static_cast<int>(k);
      for (int i = seg.begin; i < seg.end; ++i) {
        ASSERT_GE(position[static_cast<std::size_t>(i)], 0) << "op " << i << " missing from the order";
        for (int d : s.ops[static_cast<std::size_t>(i)].deps) {
          if (d >= seg.begin) {
            EXPECT_LT(position[static_cast<std::size_t>(d)], position[static_cast<std::size_t>(i)]);
          }
        }
      }
      differs |= order != segment_order(s, g, 0);
      EXPECT_EQ(order, segment_order(s, g, seed)) << "the same seed gives the same order";
    }
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace strata
