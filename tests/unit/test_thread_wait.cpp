// --thread-wait's rule: which hosts make worker threads sleep, and the flag's spelling.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/thread_wait.hpp"

namespace strata {
namespace {

HostLoad host(int threads, int ranks, int cores, double elsewhere) { return {threads, ranks, cores, elsewhere}; }

TEST(ThreadWait, ExplicitChoicesWin) {
  EXPECT_TRUE(wait_passively(ThreadWait::kPassive, host(2, 1, 64, 0)));
  EXPECT_FALSE(wait_passively(ThreadWait::kSpin, host(8, 8, 2, 10)));
}

TEST(ThreadWait, AutoSleepsOnlyWhereCoresAreShared) {
  EXPECT_FALSE(wait_passively(ThreadWait::kAuto, host(2, 1, 2, 0)));   // the whole idle machine
  EXPECT_FALSE(wait_passively(ThreadWait::kAuto, host(4, 2, 8, 0.4)));  // a daemon's wake-up is not load
  EXPECT_TRUE(wait_passively(ThreadWait::kAuto, host(4, 1, 8, 5)));    // 3 cores free for 4 threads
  EXPECT_FALSE(wait_passively(ThreadWait::kAuto, host(4, 1, 8, 4)));   // 4 free for 4
  EXPECT_TRUE(wait_passively(ThreadWait::kAuto, host(2, 1, 2, 4)));    // a 4-rank job already running
  EXPECT_TRUE(wait_passively(ThreadWait::kAuto, host(2, 2, 2, 0)));    // the job alone oversubscribes
  EXPECT_FALSE(wait_passively(ThreadWait::kAuto, host(1, 8, 2, 9)));   // a team of one never waits on a barrier
}

TEST(ThreadWait, ParsesTheThreeSpellingsAndRefusesOthers) {
  EXPECT_EQ(parse_thread_wait("auto"), ThreadWait::kAuto);
  EXPECT_EQ(parse_thread_wait("spin"), ThreadWait::kSpin);
  EXPECT_EQ(parse_thread_wait("passive"), ThreadWait::kPassive);
  EXPECT_THROW(parse_thread_wait("sleep"), Error);
}

TEST(ThreadWait, ReadsTheHostsRunningTasks) {
  // This test's own process is running, so the reading is at least 0 and never negative.
  EXPECT_GE(tasks_running_elsewhere(1), 0.0);
}

}  // namespace
}  // namespace strata
