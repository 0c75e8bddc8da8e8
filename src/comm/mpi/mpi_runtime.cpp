// MPI runtime; communicators return errors (MPI_ERRORS_RETURN) so each call is checked.
#include "comm/mpi/mpi_runtime.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <cstdio>
#include <iostream>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "comm/mpi/mpi_check.hpp"
#include "comm/mpi/mpi_watchdog.hpp"
#include "comm/mpi/mpi_handles.hpp"
#include "core/error.hpp"
#include "core/exit_codes.hpp"

namespace strata {

std::vector<std::string> MpiRuntime::hosts_;

void mpi_check(int code, std::string_view call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("{} failed: {}", call, std::string_view(text, static_cast<std::size_t>(length)));
}

namespace {

// Whether an MPI launcher started this process: read before MPI_Init, which may set such
// variables itself (Open MPI's singleton start does).
bool started_by_mpi_launcher() {
  for (const char* launcher : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(launcher) != nullptr) return true;
  }
  return false;
}

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  const bool by_launcher = started_by_mpi_launcher();
  int provided = 0;
  // SERIALIZED: with overlap on, the communication thread makes the engine's MPI calls while the
  // main thread computes; the two never call MPI at the same time (the main thread calls it only
  // between engine calls, when no task is in flight). A library that gives only FUNNELED can
  // still run with overlap off.
  const int code = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (code != MPI_SUCCESS) {
    std::fprintf(stderr, "strata: error: MPI_Init_thread failed (code %d)\n", code);
    std::exit(1);
  }
  // Errors come back as codes (checked by mpi_check), also for calls not tied to a communicator.
  if (MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
      MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN) != MPI_SUCCESS) {
    std::fprintf(stderr, "strata: error: MPI_Comm_set_errhandler failed\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // OpenMP threads never make MPI calls.
  if (provided < MPI_THREAD_FUNNELED) {
    std::fprintf(stderr, "strata: error: the MPI library offers thread level %d, Strata needs MPI_THREAD_FUNNELED\n",
                 provided);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  gather_hosts();
  if (!by_launcher) refuse_tasks_mpi_does_not_join();
}

void MpiRuntime::refuse_tasks_mpi_does_not_join() {
  // srun without a PMI plugin (--mpi=none, Slurm's default) starts every task as an MPI world of
  // one: N copies would each train alone and write the same files. Slurm's count of the step's
  // tasks is what MPI cannot give here.
  const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  const char* task = std::getenv("SLURM_PROCID");
  if (tasks == nullptr || task == nullptr || world_size() != 1) return;
  const long n = std::strtol(tasks, nullptr, 10);
  if (n <= 1) return;
  std::fprintf(stderr,
               "strata: error (Slurm task %s): srun started %ld tasks but MPI sees each as a world of one rank: "
               "launch with srun --mpi=pmix (srun --mpi=list shows what this Slurm offers; pmi2 for MPICH), or "
               "with mpirun inside the allocation\n",
               task, n);
  MPI_Finalize();
  std::exit(kExitUsage);
}

void MpiRuntime::gather_hosts() {
  if (!hosts_.empty()) return;
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  mpi_check(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
  const int size = world_size();
  std::vector<char> all(static_cast<std::size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  mpi_check(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                          MPI_COMM_WORLD),
            "MPI_Allgather (host names)");
  for (int r = 0; r < size; ++r) {
    const char* h = all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts_.emplace_back(h, strnlen(h, MPI_MAX_PROCESSOR_NAME));
  }
  const std::string& own = hosts_.at(static_cast<std::size_t>(world_rank()));
  set_watchdog_hosts(own, describe_other_hosts(hosts_, own));
}

std::string MpiRuntime::other_hosts(const std::vector<int>& ranks) {
  std::vector<std::string> names;
  for (int r : ranks) names.push_back(hosts_.at(static_cast<std::size_t>(r)));
  return describe_other_hosts(names, hosts_.at(static_cast<std::size_t>(world_rank())));
}

bool MpiRuntime::allows_comm_thread() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_SERIALIZED;
}

MpiRuntime::~MpiRuntime() {
  stop_mpi_watchdog();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && MPI_Finalize() != MPI_SUCCESS) std::fprintf(stderr, "strata: warning: MPI_Finalize failed\n");
}

int MpiRuntime::world_rank() {
  int r = 0;
  mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  return r;
}

int MpiRuntime::world_size() {
  int n = 1;
  mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &n), "MPI_Comm_size");
  return n;
}

int MpiRuntime::ranks_on_this_host() {
  MPI_Comm raw = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &raw),
            "MPI_Comm_split_type");
  const MpiComm shared(raw);
  int n = 1;
  mpi_check(MPI_Comm_size(shared.get(), &n), "MPI_Comm_size");
  return n;
}

void MpiRuntime::abort(const std::string& message, int code) {
  // What the run printed comes first, so the reason is the last line a user reads.
  std::cout.flush();
  std::fflush(stdout);
  const int size = world_size();
  if (size > 1) {
    std::fprintf(stderr, "strata: error on rank %d: %s\n", world_rank(), message.c_str());
  } else {
    std::fprintf(stderr, "strata: error: %s\n", message.c_str());
  }
  std::fflush(stderr);
  if (size > 1) abort_mpi_job(code);
  MPI_Finalize();
  std::exit(code);
}

}  // namespace strata
