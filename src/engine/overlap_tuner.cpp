// The trial of --overlap auto: warm-up, alternating steps, the agreed medians compared.
#include "engine/overlap_tuner.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/median.hpp"

namespace strata {

bool OverlapTuner::record(double step_seconds) {
  STRATA_CHECK(!decided_, "a step recorded after the overlap trial was decided");
  const int trial = steps_ - kWarmupSteps;  // the trial step that just ran (negative: warm-up)
  ++steps_;
  if (trial >= 0) (threaded_ ? threaded_s_ : inline_s_).push_back(step_seconds);
  const int next = trial + 1;
  // ABBA: threaded, inline, inline, threaded, ...: a drift in the machine's speed falls on both.
  threaded_ = next < 0 || next % 4 == 0 || next % 4 == 3;
  return next >= kTrialSteps;
}

std::array<double, 2> OverlapTuner::medians() const { return {median(threaded_s_), median(inline_s_)}; }

void OverlapTuner::decide(double threaded_seconds, double inline_seconds) {
  agreed_threaded_ = threaded_seconds;
  agreed_inline_ = inline_seconds;
  threaded_ = !(inline_seconds < (1.0 - kInlineMargin) * threaded_seconds);
  decided_ = true;
}

std::string OverlapTuner::verdict() const {
  if (!decided_) return {};
  return fmt::format(
      "{} (measured {:.3g} ms/step with the communication thread, {:.3g} inline; medians of {} steps each, mean over "
      "ranks)",
      threaded_ ? "communication thread" : "inline", 1e3 * agreed_threaded_, 1e3 * agreed_inline_, threaded_s_.size());
}

void OverlapTuner::end_step(double step_seconds, CommThread& thread, Communicator& comm) {
  if (!deciding()) return;
  if (record(step_seconds)) {
    // Every rank keeps the same mode: the decision is on the mean of the ranks' medians, agreed on
    // the communication stream behind the boundary's collectives still in flight.
    std::array<double, 2> agreed = medians();
    thread.run("agree on the overlap trial",
               [&] { comm.all_reduce_control(agreed.data(), 2, 0, comm.topology().level_count() - 1); });
    decide(agreed[0] / comm.world_size(), agreed[1] / comm.world_size());
  }
  thread.set_threaded(threaded());
}

}  // namespace strata
