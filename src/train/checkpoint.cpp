// The collective checkpoint protocol on top of the directory format.
#include "train/checkpoint.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>

#include "comm/agreement.hpp"
#include "core/error.hpp"
#include "core/exit_codes.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

bool is_step_name(const std::string& name) { return step_of_directory_name(name) >= 0; }

// Removes a step directory of ours: only the names this format writes; anything else stays (and
// so does the directory).
void remove_step_directory(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && is_checkpoint_file_name(entry.path().filename().string())) fs::remove(entry.path(), ec);
  }
  fs::remove(dir, ec);  // fails, harmlessly, when something else is left in it
}

}  // namespace

void check_checkpoint_root(const std::string& root) {
  std::error_code ec;
  const fs::path path(root);
  fs::path writable;
  if (fs::exists(path, ec)) {
    STRATA_REQUIRE(fs::is_directory(path, ec),
                   "--save '{}' is not a directory: checkpoints are directories of step-N folders, and an existing "
                   "file is never replaced",
                   root);
    writable = path;
  } else {
    writable = path.has_parent_path() ? path.parent_path() : fs::path(".");
    STRATA_REQUIRE(fs::is_directory(writable, ec), "--save '{}': the directory '{}' does not exist", root,
                   writable.string());
  }
  // Probed now, not found after the last step: a read-only directory costs nothing.
  const fs::path probe = writable / fmt::format(".strata-write-probe-{}", ::getpid());
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  STRATA_REQUIRE(f != nullptr, "--save '{}': cannot write in the directory '{}' ({})", root, writable.string(),
                 std::strerror(errno));
  std::fclose(f);
  fs::remove(probe, ec);
}

std::vector<std::string> step_directories(const std::string& root) {
  std::vector<std::string> dirs;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return dirs;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.is_directory(ec) && is_step_name(entry.path().filename().string())) dirs.push_back(entry.path().string());
  }
  std::sort(dirs.rbegin(), dirs.rend());  // zero-padded names: lexical order is step order
  return dirs;
}

namespace {

bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec;
  return !a.empty() && !b.empty() && fs::equivalent(a, b, ec);
}

// Renames a complete step directory out of the way of a new save of the same step: it is the
// user's, from a run that went further, and may be the only copy of that state.
std::string move_aside(const fs::path& dir) {
  for (int k = 1;; ++k) {
    const fs::path to = dir.string() + (k == 1 ? ".superseded" : fmt::format(".superseded-{}", k));
    std::error_code ec;
    if (fs::exists(to, ec)) continue;
    fs::rename(dir, to);
    return to.string();
  }
}

// Rank 0: deletes the complete checkpoints beyond the newest keep_last that verify. A damaged one
// is neither counted nor deleted; the resumed-from and the newest verified one always stay.
void apply_retention(const std::string& root, const std::string& newest, int keep_last, CheckpointHistory& history) {
  int kept = 0;
  for (const std::string& d : step_directories(root)) {
    if (!incomplete_reason(d).empty()) continue;  // not ours to judge: a save that did not complete
    if (history.damaged.count(d) != 0) continue;
    if (history.verified.count(d) == 0) {
      if (kept >= keep_last && !same_directory(d, history.resumed_from)) {
        remove_step_directory(d);  // older than keep_last newer checkpoints that verify
        continue;
      }
      std::string damage;
      try {
        damage = CheckpointReader::open_any(d).damage();
      } catch (const Error& e) {
        damage = e.what();
      }
      if (!damage.empty()) {
        history.damaged.insert(d);
        fmt::print(stderr, "strata: warning: checkpoint {} does not verify ({}); --keep-last does not count it and "
                           "leaves it in place\n", d, damage);
        continue;
      }
      history.verified.insert(d);
    }
    ++kept;
    if (kept > keep_last && !same_directory(d, history.resumed_from) && !same_directory(d, newest)) {
      remove_step_directory(d);
    }
  }
}

}  // namespace

std::string save_training_checkpoint(TrainingEngine& engine, Communicator& comm, const ModelLayout& layout,
                                     const std::string& root, int completed_steps, int keep_last,
                                     CheckpointHistory& history) {
  const int rank = comm.rank();
  const fs::path dir = fs::path(root) / step_directory_name(completed_steps);
  // Every rank holds the same history, so all decide alike.
  if (history.saved_steps.count(completed_steps) != 0 || same_directory(dir.string(), history.resumed_from)) {
    return dir.string();
  }
  std::string problem;
  if (rank == 0) {
    try {
      std::error_code ec;
      if (fs::exists(dir, ec)) {
        if (fs::exists(dir / "COMPLETE", ec)) {
          const std::string aside = move_aside(dir);
          fmt::print(stderr, "strata: warning: {} was left by an earlier run that went further; it is kept as {} "
                             "(not counted by --keep-last, never deleted)\n", dir.string(), aside);
        } else {
          remove_step_directory(dir);  // an earlier save of this step that did not complete
        }
      }
      fs::create_directories(dir);
    } catch (const std::exception& e) {
      problem = fmt::format("cannot create the checkpoint directory '{}': {}", dir.string(), e.what());
    }
  }
  exit_if_any_failed(comm, problem, kExitFailure);

  try {
    write_rank_shard(dir.string(), rank, engine.checkpoint_pieces());
  } catch (const Error& e) {
    problem = e.what();
  }
  bool any_failed = any_rank(comm, !problem.empty());
  if (!any_failed && rank == 0) {
    try {
      CheckpointRun run = engine.checkpoint_run();
      run.completed_steps = completed_steps;
      write_manifest(dir.string(), layout, run, comm.world_size());
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  if (!any_failed) any_failed = any_rank(comm, !problem.empty());
  if (any_failed) {
    if (rank == 0) remove_step_directory(dir);  // the previous checkpoints stay as they were
    exit_if_any_failed(comm, problem.empty() ? std::string() : problem + "; the checkpoint was not written", kExitFailure);
    // Ranks without a problem of their own still end: exit_if_any_failed threw on every rank.
  }
  history.saved_steps.insert(completed_steps);
  history.damaged.erase(dir.string());  // what was judged under this name was moved aside
  history.verified.insert(dir.string());
  if (rank == 0 && keep_last > 0) apply_retention(root, dir.string(), keep_last, history);
  return dir.string();
}

ResumeChoice choose_resume(const std::string& resume, const std::string& save_root, const std::string& flag) {
  ResumeChoice c;
  if (resume.empty()) return c;
  std::error_code ec;
  if (resume == "auto") {
    STRATA_REQUIRE(!save_root.empty(), "--resume auto needs --save: the checkpoint directory to resume from");
    c.candidates = step_directories(save_root);
    c.fall_back = true;
    c.fresh_when_none = true;
    c.described = fmt::format("'{}'", save_root);
    return c;
  }
  STRATA_REQUIRE(fs::exists(resume, ec), "{} '{}': no such checkpoint directory", flag, resume);
  STRATA_REQUIRE(fs::is_directory(resume, ec),
                 "{} '{}' is not a directory (a checkpoint is a step directory holding manifest.json)", flag, resume);
  if (is_step_name(fs::path(resume).lexically_normal().filename().string()) ||
      fs::exists(fs::path(resume) / "manifest.json", ec)) {
    c.candidates = {resume};
    c.described = fmt::format("'{}'", resume);
    return c;
  }
  c.candidates = step_directories(resume);
  STRATA_REQUIRE(!c.candidates.empty(), "{} '{}' holds no step-N checkpoint directory", flag, resume);
  c.fall_back = true;
  c.described = fmt::format("'{}'", resume);
  return c;
}

ResumePoint load_training_checkpoint(TrainingEngine& engine, Communicator& comm, const ModelLayout& layout,
                                     const ResumeChoice& choice, int max_steps, std::ostream& out) {
  const int rank = comm.rank();
  std::vector<std::string> skipped;
  std::string last_refused;
  for (std::size_t i = 0; i < choice.candidates.size(); ++i) {
    const std::string& dir = choice.candidates[i];
    std::error_code ec;
    // A save killed before its marker: not a checkpoint, and not damage. Skipped when falling
    // back, so a job requeued after dying in its first save restarts by itself.
    if (choice.fall_back && any_rank(comm, !fs::exists(fs::path(dir) / "COMPLETE", ec))) {
      skipped.push_back(fs::path(dir).filename().string());
      continue;
    }
    std::string problem;
    int steps = 0;
    try {
      const CheckpointReader reader = CheckpointReader::open(dir, layout);
      steps = reader.run().completed_steps;
      STRATA_REQUIRE(steps <= max_steps, "checkpoint '{}' has completed {} steps, more than --steps {}", dir, steps,
                     max_steps);
      engine.load_state(reader);
    } catch (const Error& e) {
      problem = e.what();
    }
    const bool failed = any_rank(comm, !problem.empty());
    if (!failed) {
      if (!skipped.empty() && rank == 0) {
        fmt::print(stderr, "strata: warning: skipped {} (no COMPLETE marker: their saves did not complete)\n",
                   fmt::join(skipped, ", "));
      }
      return {steps, dir};
    }
    last_refused = dir;
    const bool more = choice.fall_back && i + 1 < choice.candidates.size();
    if (!more) {
      if (choice.fall_back && !problem.empty()) problem += "; no older complete checkpoint is left to fall back to";
      exit_if_any_failed(comm, problem, kExitUsage);
      fail("rank {} refused checkpoint '{}'", rank, dir);  // a rank without a problem of its own
    }
    if (!problem.empty()) {
      fmt::print(stderr, "strata: warning{}: checkpoint refused: {}; trying the one before it\n",
                 comm.world_size() > 1 ? fmt::format(" on rank {}", rank) : "", problem);
    }
    fmt::print(out, "resume: {} was refused; trying the one before it\n", dir);
  }
  if (!last_refused.empty()) {
    // Only incomplete directories were left after a refusal: the refusal is the answer.
    exit_if_any_failed(comm, fmt::format("checkpoint '{}' was refused and no older complete checkpoint is left", last_refused),
                   kExitUsage);
  }
  if (!choice.fresh_when_none) {
    exit_if_any_failed(comm, fmt::format("{} {} holds no complete checkpoint: {} did not complete (no COMPLETE marker)",
                                         "--resume", choice.described, fmt::join(skipped, ", ")),
                       kExitUsage);
  }
  if (rank == 0 && !skipped.empty()) {
    fmt::print(stderr, "strata: warning: --resume auto found no complete checkpoint ({}: no COMPLETE marker, their "
                       "saves did not complete); starting at step 0 and deleting nothing\n", fmt::join(skipped, ", "));
  }
  return {};
}

}  // namespace strata
