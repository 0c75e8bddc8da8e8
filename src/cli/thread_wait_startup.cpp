// --thread-wait at start-up: decide (core/thread_wait's rule) and, for a sleeping policy, re-execute.
#include "cli/thread_wait_startup.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "core/thread_wait.hpp"
#include "core/threads.hpp"
#include "train/engine_setup.hpp"

namespace strata {

namespace {

// The value of --name (as "--name V" or "--name=V"), empty where absent.
std::string flag_value(int argc, char** argv, std::string_view name) {
  std::string value;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == name && i + 1 < argc) value = argv[i + 1];
    if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=') {
      value = std::string(arg.substr(name.size() + 1));
    }
  }
  return value;
}

// Valgrind preloads its vgpreload libraries into the program it runs (its header would be a build
// dependency for this one question).
bool under_valgrind() {
  const char* preload = std::getenv("LD_PRELOAD");
  return preload != nullptr && std::strstr(preload, "vgpreload") != nullptr;
}

// Marks the environment of the program started again, so it does not decide a second time.
constexpr const char* kSettled = "STRATA_THREAD_WAIT_SETTLED";

}  // namespace

void settle_thread_wait(int argc, char** argv) {
  if (std::getenv(kSettled) != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr ||
      std::getenv("GOMP_SPINCOUNT") != nullptr) {
    return;
  }
  ThreadWait requested = ThreadWait::kAuto;
  try {
    const std::string text = flag_value(argc, argv, "--thread-wait");
    if (!text.empty()) requested = parse_thread_wait(text);
  } catch (const std::exception&) {
    return;  // the command line's parser refuses it with the usage message
  }
  HostLoad host;
  host.ranks_on_host = launcher_ranks_on_host();
  const std::string threads = flag_value(argc, argv, "--threads");
  const int flag = threads.empty() ? 0 : std::atoi(threads.c_str());
  host.threads_per_rank = worker_threads(flag, host.ranks_on_host);
  if (host.threads_per_rank == 0) host.threads_per_rank = thread_count();  // OMP_NUM_THREADS's reading
  host.host_threads = host_hardware_threads();
  host.busy_elsewhere = tasks_running_elsewhere(host.ranks_on_host);
  if (!wait_passively(requested, host)) return;
  if (under_valgrind()) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  setenv(kSettled, "passive", 1);
  execv("/proc/self/exe", argv);
  // Where it cannot start again the run goes on with the policy the runtime loaded.
  fmt::print(stderr, "strata: could not restart with OMP_WAIT_POLICY=passive ({}); worker threads spin\n",
             std::strerror(errno));
}

}  // namespace strata
