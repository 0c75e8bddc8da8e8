// Exit codes of the strata command, and the exception that carries an exit every rank agreed on.
#pragma once

#include <string>

namespace strata {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // a run failed (bad data, I/O, a rank's error)
constexpr int kExitUsage = 2;    // bad flags or settings, refused before training

// Thrown once every rank knows the job must end (the reason is already printed); main finalizes
// MPI normally instead of aborting. Not a std::exception, so no handler of errors mistakes it for
// one rank's failure. `reason` is this rank's own sentence (empty on a rank that did not fail).
struct AgreedExit {
  int code;
  std::string reason = {};
};

}  // namespace strata
