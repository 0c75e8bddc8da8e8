// Settles the OpenMP wait policy before anything runs: the runtime read its environment when it
// loaded, so a policy other than the one it read needs the program started again.
#pragma once

namespace strata {

// Reads --thread-wait and --threads from the command line (and the launcher's rank count); where
// worker threads should sleep between regions and OMP_WAIT_POLICY / GOMP_SPINCOUNT say nothing,
// sets OMP_WAIT_POLICY=passive and executes this program again with the same arguments (same
// process, before MPI starts). An explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT is the user's and is
// kept. Under valgrind, whose tracing a new program would leave, the policy stays as loaded.
void settle_thread_wait(int argc, char** argv);

}  // namespace strata
