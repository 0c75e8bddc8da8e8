// How idle worker threads wait between parallel regions: spinning (fast hand-offs, but it takes
// the cores from anything else that runs there) or sleeping. The OpenMP runtime reads its policy
// once, when it loads, so the choice is made before: see cli/thread_wait_startup.
#pragma once

#include <string>
#include <string_view>

namespace strata {

enum class ThreadWait { kAuto, kSpin, kPassive };

// "auto", "spin" or "passive"; anything else is refused with a sentence naming the flag.
ThreadWait parse_thread_wait(std::string_view text);

// What the machine looks like to a starting rank.
struct HostLoad {
  int threads_per_rank = 1;   // this rank's worker threads
  int ranks_on_host = 1;      // this job's ranks on this host
  int host_threads = 1;       // the host's hardware threads
  double busy_elsewhere = 0.0;  // tasks of other work running on the host as this rank starts
};

// kAuto sleeps where the cores are shared: this job's threads alone outnumber the host's, or the
// work already running leaves fewer cores free than the job's threads. A team of one thread never
// waits on a barrier, so it keeps the default. Spinning costs a shared machine far more than it
// saves (measured: a 2-thread step 1.2x-10x slower beside other work), sleeping costs an idle
// one about 15% on the step's hundreds of short regions, hence the rule.
bool wait_passively(ThreadWait requested, const HostLoad& host);

// The policy the OpenMP runtime loaded with, as a phrase for the run's header ("idle worker
// threads sleep (OMP_WAIT_POLICY=passive)" and the like).
std::string loaded_wait_policy();

// This job's ranks on this host as the launcher announces them (Open MPI, MPICH's Hydra, Slurm),
// 1 where none does.
int launcher_ranks_on_host();

// Tasks running on the host now that are not this job's ranks: the median of a few readings of
// /proc/loadavg's running count (the 1-minute average would still count a job that just ended),
// less ranks_on_host; 0 where it cannot be read.
double tasks_running_elsewhere(int ranks_on_host);

}  // namespace strata
