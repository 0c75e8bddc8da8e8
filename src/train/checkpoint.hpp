// Checkpoints of a training run, agreed on by every rank: save into ROOT/step-N (every rank its
// shard, then rank 0 the manifest and the completion marker, once every rank reported success),
// keep the newest K checkpoints that verify, and resume from a step directory or from the newest
// complete one under a root, falling back to the one before when a rank finds a chunk damaged.
// Nothing Strata did not write is deleted, nor a checkpoint that does not verify, nor the one the
// run resumed from, nor the newest one that verifies.
#pragma once

#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "engine/training_engine.hpp"

namespace strata {

// Local checks of a checkpoint root before any step runs: an existing path must be a directory
// (a file is never replaced) that this process can write in; a new one needs a writable parent
// directory. The sentence names it.
void check_checkpoint_root(const std::string& root);

// The complete-or-not step directories under root (names step-NNNNNNNN only), newest first.
std::vector<std::string> step_directories(const std::string& root);

// What a run knows of its checkpoints from one save to the next.
struct CheckpointHistory {
  std::string resumed_from;           // the step directory the run loaded ("" when it started fresh)
  std::set<int> saved_steps;          // steps this run saved
  std::set<std::string> verified;     // directories written, loaded or read back whole by this run
  std::set<std::string> damaged;      // complete directories that did not read back (warned about once)
};

// Collective over `comm` (its control calls carry the agreements). Writes the engine's state after `completed_steps` steps; a step this run already
// saved, or the directory it resumed from, is left as it is. A complete directory of that step
// left by an earlier run (one that went further before this run resumed from an older step) is
// renamed aside to step-N.superseded[-K], never replaced. On a failure of any rank the incomplete
// directory is removed, the failing rank's sentence is printed, and every rank throws. Then keeps
// the newest keep_last checkpoints that verify (0: all): directories of this format only, never
// a damaged one, the resumed-from one or the newest. Returns the directory.
std::string save_training_checkpoint(TrainingEngine& engine, Communicator& comm, const ModelLayout& layout,
                                     const std::string& root, int completed_steps, int keep_last,
                                     CheckpointHistory& history);

struct ResumeChoice {
  std::vector<std::string> candidates;  // step directories, in the order to try
  bool fall_back = false;               // try the next when one is refused (auto and roots)
  bool fresh_when_none = false;         // auto: nothing complete to resume from starts at step 0
  std::string described;                // for messages: the directory asked for, quoted
};
// --resume: "auto" (the newest complete checkpoint under the --save root; none yet: start fresh),
// a step directory, or a root (its newest complete one, falling back). Local.
ResumeChoice choose_resume(const std::string& resume, const std::string& save_root,
                           const std::string& flag = "--resume");

struct ResumePoint {
  int completed_steps = 0;
  std::string dir;  // "" when the run starts fresh
};

// Collective. Loads the first candidate every rank reads without error. With fall_back, step
// directories without a completion marker are skipped with a warning, and each refusal is
// printed before the next is tried. With fresh_when_none and no complete candidate, the run
// starts at step 0 with a warning; otherwise, with no candidate left, every rank throws with the
// reason (the usage exit code).
ResumePoint load_training_checkpoint(TrainingEngine& engine, Communicator& comm, const ModelLayout& layout,
                                     const ResumeChoice& choice, int max_steps, std::ostream& out);

}  // namespace strata
