// Checkpoints of a training run, agreed on by every rank: save into ROOT/step-N (every rank its
// shard, then rank 0 the manifest and the completion marker, once every rank reported success),
// keep the newest K complete ones, and resume from a step directory or from the newest complete
// one under a root, falling back to the one before when a rank finds a chunk damaged.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "engine/training_engine.hpp"

namespace strata {

// Local checks of a checkpoint root before any step runs: an existing path must be a directory
// (a file is never replaced), a new one needs a writable parent directory. The sentence names it.
void check_checkpoint_root(const std::string& root);

// The complete-or-not step directories under root (names step-NNNNNNNN only), newest first.
std::vector<std::string> step_directories(const std::string& root);

// Collective. Writes the engine's state after `completed_steps` steps; a step already saved
// complete is left as it is. On a failure of any rank the incomplete directory is removed, the
// failing rank's sentence is printed, and every rank throws. Then keeps the newest keep_last
// complete checkpoints (0: all), deleting only directories of this format. Returns the directory.
std::string save_training_checkpoint(TrainingEngine& engine, const ModelLayout& layout, const std::string& root,
                                     int completed_steps, int keep_last);

struct ResumeChoice {
  std::vector<std::string> candidates;  // step directories, in the order to try
  bool fall_back = false;               // try the next when one is refused (auto and roots)
  std::string described;                // for the log: what was asked
};
// --resume: "auto" (the newest complete checkpoint under the --save root; none yet: start fresh),
// a step directory, or a root (its newest complete checkpoint, falling back). Local.
ResumeChoice choose_resume(const std::string& resume, const std::string& save_root,
                           const std::string& flag = "--resume");

// Collective. Loads the first candidate every rank reads without error and returns its completed
// steps (0 when there is none to try). Each refusal is printed; with no candidate left, every
// rank throws with the reason.
int load_training_checkpoint(TrainingEngine& engine, const ModelLayout& layout, const ResumeChoice& choice,
                             int max_steps, std::ostream& out);

}  // namespace strata
