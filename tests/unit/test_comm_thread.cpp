// The communication thread's contract, against the order tasks were posted: they run one at a
// time, in that order, whether the thread runs them, the waiting poster runs them (stealing), or
// the thread is switched inline and back with tasks still queued; errors surface at the wait. And
// --overlap auto's trial: its ABBA sequence of modes and its verdict on given step times.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "comm/comm_thread.hpp"
#include "core/error.hpp"
#include "engine/overlap_tuner.hpp"

namespace strata {
namespace {

// Records the order tasks ran in and fails if two ever ran at once.
struct OrderLog {
  std::vector<int> order;
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::function<void()> task(int id, int sleep_us = 0) {
    return [this, id, sleep_us] {
      if (inside.fetch_add(1) != 0) overlapped = true;
      if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
      order.push_back(id);
      inside.fetch_sub(1);
    };
  }
};

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

TEST(CommThread, TasksRunOneAtATimeInPostedOrderWhoeverRunsThem) {
  for (int seed = 1; seed <= 3; ++seed) {
    CommThread thread({true, false, 20 * seed, static_cast<std::uint64_t>(seed)});
    OrderLog log;
    std::vector<std::unique_ptr<CommRequest>> pending;
    int id = 0;
    for (int round = 0; round < 40; ++round) {
      // A mix: started and waited later, waited at once (run), and waited in reverse.
      pending.push_back(thread.post("a", log.task(id++, round % 3 == 0 ? 50 : 0)));
      pending.push_back(thread.post("b", log.task(id++)));
      if (round % 4 == 1) thread.run("c", log.task(id++));
      if (round % 5 == 2) {
        for (auto it = pending.rbegin(); it != pending.rend(); ++it) (*it)->wait();
        pending.clear();
      }
    }
    for (auto& r : pending) r->wait();
    EXPECT_FALSE(log.overlapped) << "two tasks ran at once";
    EXPECT_EQ(log.order, iota(id)) << "seed " << seed;
    EXPECT_EQ(thread.tasks_run(), static_cast<std::uint64_t>(id));
  }
}

TEST(CommThread, SwitchedInlineAndBackTheQueuedTasksStillRunFirst) {
  CommThread thread({true, false, 0, 0});
  OrderLog log;
  std::vector<std::unique_ptr<CommRequest>> pending;
  // Queued behind a slow task, then the switch: the inline task must wait for all of them.
  pending.push_back(thread.post("slow", log.task(0, 2000)));
  pending.push_back(thread.post("queued", log.task(1)));
  thread.set_threaded(false);
  EXPECT_FALSE(thread.threaded());
  pending.push_back(thread.post("inline", log.task(2)));
  EXPECT_EQ(log.order, (std::vector<int>{0, 1, 2})) << "an inline post runs after everything queued, at once";
  thread.set_threaded(true);
  EXPECT_TRUE(thread.threaded());
  pending.push_back(thread.post("threaded again", log.task(3)));
  thread.run("run", log.task(4));
  for (auto& r : pending) r->wait();
  EXPECT_EQ(log.order, iota(5));
  EXPECT_FALSE(log.overlapped);

  CommThread made_inline({false, false, 0, 0});
  EXPECT_THROW(made_inline.set_threaded(true), Error);
}

TEST(CommThread, AnErrorSurfacesAtItsWaitAndTheQueueGoesOn) {
  CommThread thread({true, false, 0, 0});
  OrderLog log;
  auto failing = thread.post("fails", [] { throw std::runtime_error("link down"); });
  auto after = thread.post("after", log.task(7));
  try {
    failing->wait();
    ADD_FAILURE() << "the task's error was lost";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "link down");
  }
  after->wait();
  EXPECT_EQ(log.order, std::vector<int>{7});
  EXPECT_THROW(thread.run("fails at once", [] { throw std::runtime_error("x"); }), std::runtime_error);
}

TEST(CommThread, ExposedTimeIsWhatThePosterWaited) {
  CommThread thread({true, false, 0, 0});
  // Waited for at once: all of a 5 ms task is exposed.
  thread.run("waited", [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
  EXPECT_GE(thread.exposed_seconds(), 0.005);
  EXPECT_GE(thread.busy_seconds(), 0.005);
  // Started, then 20 ms of "compute", then waited: almost nothing more is exposed.
  const double exposed = thread.exposed_seconds();
  auto r = thread.post("hidden", [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  r->wait();
  EXPECT_LT(thread.exposed_seconds() - exposed, 0.004);
  EXPECT_GE(thread.busy_seconds(), 0.010);
}

// Feeds the tuner step times of a machine where one mode is `ratio` times the other.
bool decide(double inline_over_threaded, std::vector<bool>* modes = nullptr) {
  OverlapTuner tuner;
  for (int step = 0; tuner.deciding(); ++step) {
    if (modes) modes->push_back(tuner.threaded());
    const double seconds = tuner.threaded() ? 0.010 : 0.010 * inline_over_threaded;
    EXPECT_TRUE(tuner.verdict().empty());
    if (tuner.record(step < OverlapTuner::kWarmupSteps ? 1.0 : seconds)) {  // warm-up outliers ignored
      const std::array<double, 2> m = tuner.medians();
      EXPECT_DOUBLE_EQ(m[0], 0.010);
      EXPECT_DOUBLE_EQ(m[1], 0.010 * inline_over_threaded);
      tuner.decide(m[0], m[1]);  // one rank: its own medians are the agreed ones
    }
  }
  EXPECT_FALSE(tuner.verdict().empty());
  return tuner.threaded();
}

TEST(OverlapTuner, AlternatesABBAThenKeepsTheFasterWithATieToTheThread) {
  std::vector<bool> modes;
  EXPECT_FALSE(decide(0.9, &modes));  // inline 10% faster: inline
  std::vector<bool> expected = {true, true};  // warm-up
  for (int abba = 0; abba < OverlapTuner::kTrialSteps / 4; ++abba) expected.insert(expected.end(), {true, false, false, true});
  EXPECT_EQ(modes, expected);
  EXPECT_TRUE(decide(1.1));   // the thread 10% faster: the thread
  EXPECT_TRUE(decide(0.99));  // inline 1% faster: within the margin, the thread
  EXPECT_TRUE(decide(1.0));
  // The ranks' agreed medians decide, not this rank's own.
  OverlapTuner tuner;
  while (!tuner.record(0.010)) {
  }
  tuner.decide(0.010, 0.005);
  EXPECT_FALSE(tuner.threaded());
  EXPECT_NE(tuner.verdict().find("inline (measured 10 ms/step with the communication thread, 5 inline"), std::string::npos)
      << tuner.verdict();
  EXPECT_THROW(tuner.record(0.010), Error);
}

}  // namespace
}  // namespace strata
