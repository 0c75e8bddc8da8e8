// --overlap auto: whether this rank's collectives run on the communication thread or inline is
// measured, not assumed. A thread pays two hand-offs per collective and gains only where a core
// (or a wire) is free while compute runs; which wins depends on the machine, the rank count and
// the model. After a warm-up the tuner alternates the two for a few steps; the ranks then agree
// on the mean of their medians, so every rank keeps the same mode.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "comm/comm_thread.hpp"
#include "comm/communicator.hpp"

namespace strata {

class OverlapTuner {
 public:
  static constexpr int kWarmupSteps = 2;  // first touches and thread start-up, not counted
  static constexpr int kTrialSteps = 16;  // half of them each way, in the order ABBA ABBA ...
  // Inline is kept only when its median step is this much faster: a tie keeps the thread, which
  // also hides waits the trial steps may not have had (a slow peer, a busy link).
  static constexpr double kInlineMargin = 0.02;

  // The mode of the next step.
  bool threaded() const { return threaded_; }
  bool deciding() const { return !decided_; }

  // At the end of each step of the trial, with that step's wall seconds. True when the trial is
  // over: the caller agrees medians() with the other ranks and calls decide().
  bool record(double step_seconds);
  // This rank's median step with the communication thread, and inline.
  std::array<double, 2> medians() const;
  // Ends the trial on the medians the ranks agreed on: the faster mode, a tie to the thread.
  void decide(double threaded_seconds, double inline_seconds);

  // The whole trial at the end of each step, on the communication stream: records the step, agrees
  // the medians with every rank when the trial ends (one control all-reduce, once), and sets the
  // thread's mode for the next step. Nothing once decided.
  void end_step(double step_seconds, CommThread& thread, Communicator& comm);

  // What was decided and on what figures; empty while deciding.
  std::string verdict() const;

 private:
  int steps_ = 0;
  bool threaded_ = true;
  bool decided_ = false;
  std::vector<double> threaded_s_, inline_s_;
  double agreed_threaded_ = 0.0, agreed_inline_ = 0.0;
};

}  // namespace strata
