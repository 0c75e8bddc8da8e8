// MPI start-up and shutdown for the process, and the two ways a job ends on failure: agreed
// (every rank reached the same check, so all finalize cleanly and exit non-zero) or abort (one
// rank failed mid-run, so MPI_Abort ends the whole job promptly rather than leaving peers hung).
#pragma once

#include <string>
#include <vector>

namespace strata {

class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // The library gave MPI_THREAD_SERIALIZED or more: another thread may make the MPI calls.
  static bool allows_comm_thread();
  static int world_rank();
  static int world_size();
  // Ranks sharing this host's memory (MPI_COMM_TYPE_SHARED); collective.
  static int ranks_on_this_host();
  // Collective the first time (every rank's host, MPI_Get_processor_name, gathered once; the
  // constructor does it, and so does a communicator made where MPI was started another way).
  static void gather_hosts();
  // The hosts of `ranks` other than this rank's, as "host a" or "hosts a, b" (empty when all
  // share this host), for messages naming a lost peer. After gather_hosts().
  static std::string other_hosts(const std::vector<int>& ranks);
  // Prints "strata: error[ on rank r]: message" to stderr and ends every rank with `code`.
  [[noreturn]] static void abort(const std::string& message, int code);

 private:
  // Ends the process with a sentence when Slurm started several tasks that MPI sees as worlds of
  // one. Not called for a process another launcher started inside a Slurm step (mpirun's daemons
  // run as srun tasks): its world is what that launcher asked for.
  static void refuse_tasks_mpi_does_not_join();
  static std::vector<std::string> hosts_;  // by world rank
};

}  // namespace strata
