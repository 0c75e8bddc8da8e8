// The wait-policy rule and the facts it reads (the launcher's environment, /proc/loadavg).
#include "core/thread_wait.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace strata {

ThreadWait parse_thread_wait(std::string_view text) {
  if (text == "auto") return ThreadWait::kAuto;
  if (text == "spin") return ThreadWait::kSpin;
  if (text == "passive") return ThreadWait::kPassive;
  throw Error(fmt::format("--thread-wait takes auto, spin or passive, not '{}'", text));
}

bool wait_passively(ThreadWait requested, const HostLoad& host) {
  if (requested != ThreadWait::kAuto) return requested == ThreadWait::kPassive;
  if (host.threads_per_rank <= 1) return false;
  const double job = static_cast<double>(host.threads_per_rank) * host.ranks_on_host;
  // Half a task of slack for a reading taken while a daemon woke.
  return job > host.host_threads || host.busy_elsewhere + job > host.host_threads + 0.5;
}

std::string loaded_wait_policy() {
  if (const char* spin = std::getenv("GOMP_SPINCOUNT")) {
    return fmt::format("idle worker threads spin {} times, then sleep (GOMP_SPINCOUNT={})", spin, spin);
  }
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (policy == nullptr) return "idle worker threads spin a while, then sleep (OpenMP's default)";
  std::string text = policy;
  for (char& ch : text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (text == "passive") return "idle worker threads sleep (OMP_WAIT_POLICY=passive)";
  return fmt::format("idle worker threads spin (OMP_WAIT_POLICY={})", policy);
}

int launcher_ranks_on_host() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    if (const char* value = std::getenv(name)) {
      const int n = std::atoi(value);  // Slurm's "2(x3)" reads as its leading 2
      if (n > 0) return n;
    }
  }
  return 1;
}

double tasks_running_elsewhere(int ranks_on_host) {
  std::vector<int> running;
  for (int i = 0; i < 5; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::ifstream in("/proc/loadavg");
    double one, five, fifteen;
    int now = 0;
    char slash = 0;
    if (!(in >> one >> five >> fifteen >> now >> slash) || slash != '/') return 0.0;
    running.push_back(now);
  }
  std::sort(running.begin(), running.end());
  return std::max(0, running[running.size() / 2] - std::max(1, ranks_on_host));
}

}  // namespace strata
