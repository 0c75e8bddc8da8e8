// The unit state machine against an independent statement of its rules: from every reachable
// state, every transition either does what the rule says or is refused with a sentence naming the
// unit (never a crash, never a silent change); and apply_op over a real schedule leaves every unit
// where a step ends.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "model/gpt_config.hpp"
#include "model/parameter_layout.hpp"
#include "plan/shard_plan.hpp"
#include "schedule/step_schedule.hpp"
#include "schedule/unit_lifecycle.hpp"
#include "topo/topology.hpp"

namespace strata {
namespace {

using W = WeightResidency;
using S = SecondaryResidency;
using P = PrimaryResidency;
using G = GradResidency;
using State = std::tuple<W, S, P, G>;

State state_of(const UnitLifecycle& u) { return {u.weights(), u.secondary(), u.primary(), u.grad()}; }

struct Transition {
  std::string name;
  std::function<void(UnitLifecycle&)> run;
  // The rule, written from the lifecycle's meaning rather than from its code: the next state, or
  // nothing where the transition is illegal.
  std::function<bool(State&)> rule;
};

std::vector<Transition> transitions() {
  std::vector<Transition> t;
  for (int bucket : {0, 1}) {
    t.push_back({"begin_gather(" + std::to_string(bucket) + ")", [bucket](UnitLifecycle& u) { u.begin_gather(bucket); },
                 [bucket](State& s) {
                   // A gather starts from the sharded weights; its later buckets join it.
                   if (std::get<W>(s) != (bucket == 0 ? W::kSharded : W::kGathering)) return false;
                   std::get<W>(s) = W::kGathering;
                   return true;
                 }});
  }
  for (bool last : {false, true}) {
    t.push_back({std::string("finish_gather(") + (last ? "last" : "not last") + ")",
                 [last](UnitLifecycle& u) { u.finish_gather(last); }, [last](State& s) {
                   if (std::get<W>(s) != W::kGathering) return false;
                   if (last) std::get<W>(s) = W::kGathered;
                   return true;
                 }});
  }
  t.push_back({"release", [](UnitLifecycle& u) { u.release(); }, [](State& s) {
                 if (std::get<W>(s) == W::kGathering) return false;  // the gather still writes it
                 std::get<W>(s) = W::kSharded;
                 return true;
               }});
  t.push_back({"keep_secondary", [](UnitLifecycle& u) { u.keep_secondary(); }, [](State& s) {
                 if (std::get<W>(s) != W::kGathered || std::get<S>(s) != S::kNone) return false;
                 std::get<S>(s) = S::kHeld;
                 return true;
               }});
  t.push_back({"drop_secondary", [](UnitLifecycle& u) { u.drop_secondary(); }, [](State& s) {
                 if (std::get<S>(s) == S::kNone) return false;
                 std::get<S>(s) = S::kNone;
                 return true;
               }});
  t.push_back({"invalidate_secondary", [](UnitLifecycle& u) { u.invalidate_secondary(); }, [](State& s) {
                 if (std::get<S>(s) == S::kHeld) std::get<S>(s) = S::kStale;
                 return true;
               }});
  t.push_back({"open_grad", [](UnitLifecycle& u) { u.open_grad(); }, [](State& s) {
                 if (std::get<G>(s) != G::kNone) return false;
                 std::get<G>(s) = G::kOpen;
                 return true;
               }});
  for (int bucket : {0, 1}) {
    t.push_back({"start_reduce(" + std::to_string(bucket) + ")", [bucket](UnitLifecycle& u) { u.start_reduce(bucket); },
                 [bucket](State& s) {
                   const G g = std::get<G>(s);
                   if (!(g == G::kOpen || (bucket > 0 && g == G::kReducing))) return false;
                   std::get<G>(s) = G::kReducing;
                   return true;
                 }});
  }
  for (bool last : {false, true}) {
    t.push_back({std::string("finish_reduce(") + (last ? "last" : "not last") + ")",
                 [last](UnitLifecycle& u) { u.finish_reduce(last); }, [last](State& s) {
                   if (std::get<G>(s) != G::kReducing) return false;
                   if (last) std::get<G>(s) = G::kOpen;
                   return true;
                 }});
  }
  t.push_back({"free_grad", [](UnitLifecycle& u) { u.free_grad(); }, [](State& s) {
                 if (std::get<G>(s) != G::kOpen) return false;
                 std::get<G>(s) = G::kNone;
                 return true;
               }});
  for (int bucket : {0, 1}) {
    t.push_back({"begin_update(" + std::to_string(bucket) + ")", [bucket](UnitLifecycle& u) { u.begin_update(bucket); },
                 [bucket](State& s) {
                   if (bucket == 0 && std::get<P>(s) != P::kCurrent) return false;  // one update at a time
                   std::get<P>(s) = P::kUpdating;
                   return true;
                 }});
  }
  for (bool last : {false, true}) {
    t.push_back({std::string("finish_update(") + (last ? "last" : "not last") + ")",
                 [last](UnitLifecycle& u) { u.finish_update(last); }, [last](State& s) {
                   if (last) std::get<P>(s) = P::kCurrent;
                   return true;
                 }});
  }
  t.push_back({"settle_update", [](UnitLifecycle& u) { u.settle_update(); }, [](State& s) {
                 std::get<P>(s) = P::kCurrent;
                 return true;
               }});
  return t;
}

std::string describe(const State& s) {
  return std::string(residency_name(std::get<W>(s))) + "/" + residency_name(std::get<S>(s)) + "/" +
         residency_name(std::get<P>(s)) + "/" + residency_name(std::get<G>(s));
}

TEST(UnitLifecycle, EveryTransitionFromEveryReachableStateFollowsTheRuleOrIsRefusedWithASentence) {
  const std::vector<Transition> all = transitions();
  // Breadth-first over the legal transitions from a fresh unit.
  std::vector<UnitLifecycle> frontier{UnitLifecycle("block.7")};
  std::set<State> seen{state_of(frontier[0])};
  int refused = 0, followed = 0;
  while (!frontier.empty()) {
    std::vector<UnitLifecycle> next;
    for (const UnitLifecycle& from : frontier) {
      for (const Transition& t : all) {
        State expected = state_of(from);
        const bool legal = t.rule(expected);
        UnitLifecycle u = from;
        if (!legal) {
          try {
            t.run(u);
            ADD_FAILURE() << t.name << " from " << describe(state_of(from)) << " was accepted";
          } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("'block.7'"), std::string::npos) << t.name << ": " << what;
            EXPECT_GT(what.size(), 30U) << t.name << ": " << what;
          }
          EXPECT_EQ(state_of(u), state_of(from)) << "a refused " << t.name << " changed the state";
          ++refused;
          continue;
        }
        ASSERT_NO_THROW(t.run(u)) << t.name << " from " << describe(state_of(from));
        EXPECT_EQ(state_of(u), expected) << t.name << " from " << describe(state_of(from));
        ++followed;
        if (seen.insert(state_of(u)).second) next.push_back(u);
      }
    }
    frontier = std::move(next);
  }
  // Every combination of the four residencies is reachable, so every transition was tried in each.
  EXPECT_EQ(seen.size(), 3U * 3U * 2U * 3U);
  EXPECT_EQ(refused + followed, static_cast<int>(seen.size() * all.size()));
  EXPECT_GT(refused, 100);
}

TEST(UnitLifecycle, ReadsAreRefusedInStatesThatMayNotBeRead) {
  UnitLifecycle u("block.2");
  EXPECT_THROW(u.require_gathered("forward"), Error);
  EXPECT_THROW(u.require_secondary_readable("gather_start"), Error);
  EXPECT_THROW(u.require_grad_allocated("backward"), Error);
  EXPECT_NO_THROW(u.require_primary_current("gather_start"));
  u.begin_gather(0);
  EXPECT_THROW(u.require_gathered("forward"), Error) << "in flight";
  u.finish_gather(true);
  EXPECT_NO_THROW(u.require_gathered("forward"));
  u.keep_secondary();
  EXPECT_NO_THROW(u.require_secondary_readable("gather_start"));
  u.invalidate_secondary();
  try {
    u.require_secondary_readable("gather_start");
    ADD_FAILURE() << "a stale copy was readable";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is stale: made before the weights last changed"), std::string::npos) << e.what();
  }
  u.begin_update(0);
  EXPECT_THROW(u.require_primary_current("gather_start"), Error) << "half-updated weights";
}

// Real schedules replayed through apply_op, the list twice in a row (as the engine runs it step
// after step): every op finds its units in a state that allows it, and between runs every unit is
// back to sharded, with no secondary copy held and no unit gradient open. Buckets, quantized
// collectives, the hpZ copy and the overlapped boundary included.
TEST(UnitLifecycle, RealSchedulesReplayCleanlyStepAfterStep) {
  const Topology t = Topology::parse("gcd:2,gpu:2,node:2", 8);
  const ModelLayout layout(GptConfig::preset("tiny"));
  for (const char* plan : {"ddp", "zero1", "zero2", "zero3", "zeropp", "mics", "hier3", "zeropp,bucket_bytes=4096",
                           "hier3,quant_weights=int8,quant_grads=int4,bucket_bytes=8192"}) {
    for (bool overlap : {false, true}) {
      ScheduleInputs in;
      in.layout = &layout;
      in.topology = &t;
      in.plan = ShardPlan::parse(plan, t);
      in.grad_accum = 2;
      in.steps = 2;
      in.tokens_per_micro = 64;
      in.seq_len = 32;
      in.prefetch = 1;
      in.boundary_overlap = overlap;
      const StepSchedule s = build_step_schedule(in);
      std::vector<UnitLifecycle> units = unit_lifecycles(s);
      for (int run = 0; run < 2; ++run) {
        for (const ScheduleOp& op : s.ops) ASSERT_NO_THROW(apply_op(s, op, units)) << plan << " " << op_kind_name(op.kind);
        for (const UnitLifecycle& u : units) {
          EXPECT_EQ(u.weights(), W::kSharded) << plan << " " << u.name();
          EXPECT_EQ(u.grad(), G::kNone) << plan << " " << u.name();
          EXPECT_NE(u.secondary(), S::kHeld) << plan << " " << u.name();
        }
      }
    }
  }
}

}  // namespace
}  // namespace strata
