// The collective checkpoint protocol on top of the directory format.
#include "train/checkpoint.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "comm/mpi/mpi_runtime.hpp"
#include "core/error.hpp"
#include "core/exit_codes.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

struct Job {
  int rank = 0, world = 1;
  bool mpi = false;  // without MPI (a library caller, the unit tests) failures are plain exceptions
  static Job current() {
    if (!MpiRuntime::initialized()) return {};
    return {MpiRuntime::world_rank(), MpiRuntime::world_size(), true};
  }
  bool any(bool failed) const { return mpi ? MpiRuntime::any_rank(failed) : failed; }
};

// Every rank learns whether any failed; the first failing rank prints its sentence and every rank
// ends with `code`. Without MPI the sentence is thrown.
void agree_or_throw(const Job& job, const std::string& problem, int code) {
  if (!job.mpi) {
    if (!problem.empty()) fail("{}", problem);
    return;
  }
  const MpiRuntime::Failures f = MpiRuntime::failures(!problem.empty());
  if (f.count == 0) return;
  if (job.rank == f.first) {
    fmt::print(stderr, "strata: error{}: {}\n", job.world > 1 ? fmt::format(" on rank {}", job.rank) : "", problem);
  }
  throw AgreedExit{code};
}

bool is_step_name(const std::string& name) {
  static const std::regex pattern("step-[0-9]{8}");
  return std::regex_match(name, pattern);
}

// Removes a step directory of ours: only the names this format writes; anything else stays (and
// so does the directory).
void remove_step_directory(const fs::path& dir) {
  static const std::regex ours("(manifest\\.json|COMPLETE|rank-[0-9]{5}\\.(bin|json))(\\.partial)?");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file(ec) && std::regex_match(entry.path().filename().string(), ours)) fs::remove(entry.path(), ec);
  }
  fs::remove(dir, ec);  // fails, harmlessly, when something else is left in it
}

}  // namespace

void check_checkpoint_root(const std::string& root) {
  std::error_code ec;
  const fs::path path(root);
  if (fs::exists(path, ec)) {
    STRATA_REQUIRE(fs::is_directory(path, ec),
                   "--save '{}' is not a directory: checkpoints are directories of step-N folders, and an existing "
                   "file is never replaced",
                   root);
    return;
  }
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  STRATA_REQUIRE(fs::is_directory(parent, ec), "--save '{}': the directory '{}' does not exist", root, parent.string());
  const fs::path probe = parent / fmt::format(".strata-write-probe-{}", ::getpid());
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  STRATA_REQUIRE(f != nullptr, "--save '{}': cannot write in the directory '{}'", root, parent.string());
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

std::string save_training_checkpoint(TrainingEngine& engine, const ModelLayout& layout, const std::string& root,
                                     int completed_steps, int keep_last) {
  const Job job = Job::current();
  const fs::path dir = fs::path(root) / step_directory_name(completed_steps);
  // Rank 0 decides for everyone whether this step is already saved (a save at --stop-after that
  // is also a --checkpoint-every step), then prepares the directory.
  std::string problem;
  bool done = false;
  if (job.rank == 0) {
    try {
      done = incomplete_reason(dir.string()).empty();
      if (!done) {
        if (fs::exists(dir)) remove_step_directory(dir);  // an earlier save of this step that did not complete
        fs::create_directories(dir);
      }
    } catch (const std::exception& e) {
      problem = fmt::format("cannot create the checkpoint directory '{}': {}", dir.string(), e.what());
    }
  }
  agree_or_throw(job, problem, kExitFailure);
  done = job.any(job.rank == 0 && done);
  if (done) return dir.string();

  try {
    write_rank_shard(dir.string(), job.rank, engine.checkpoint_pieces());
  } catch (const Error& e) {
    problem = e.what();
  }
  bool any_failed = job.any(!problem.empty());
  if (!any_failed && job.rank == 0) {
    try {
      CheckpointRun run = engine.checkpoint_run();
      run.completed_steps = completed_steps;
      write_manifest(dir.string(), layout, run, job.world);
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  if (!any_failed) any_failed = job.any(!problem.empty());
  if (any_failed) {
    if (job.rank == 0) remove_step_directory(dir);  // the previous checkpoints stay as they were
    agree_or_throw(job, problem.empty() ? std::string() : problem + "; the checkpoint was not written", kExitFailure);
    // Ranks without a problem of their own still end: agree_or_throw threw on every rank.
  }
  if (job.rank == 0 && keep_last > 0) {
    int kept = 0;
    for (const std::string& d : step_directories(root)) {
      if (!incomplete_reason(d).empty()) continue;
      if (++kept > keep_last) remove_step_directory(d);
    }
  }
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
    c.described = fmt::format("the newest complete checkpoint under '{}'", save_root);
    return c;
  }
  STRATA_REQUIRE(fs::exists(resume, ec), "{} '{}': no such checkpoint directory", flag, resume);
  STRATA_REQUIRE(fs::is_directory(resume, ec),
                 "{} '{}' is not a directory (a checkpoint is a step directory holding manifest.json)", flag, resume);
  if (is_step_name(fs::path(resume).filename().string()) || fs::exists(fs::path(resume) / "manifest.json", ec)) {
    c.candidates = {resume};
    c.described = fmt::format("'{}'", resume);
    return c;
  }
  c.candidates = step_directories(resume);
  STRATA_REQUIRE(!c.candidates.empty(), "{} '{}' holds no step-N checkpoint directory", flag, resume);
  c.fall_back = true;
  c.described = fmt::format("the newest complete checkpoint under '{}'", resume);
  return c;
}

int load_training_checkpoint(TrainingEngine& engine, const ModelLayout& layout, const ResumeChoice& choice,
                             int max_steps, std::ostream& out) {
  const Job job = Job::current();
  std::string last_problem;
  for (std::size_t i = 0; i < choice.candidates.size(); ++i) {
    const std::string& dir = choice.candidates[i];
    std::string problem;
    int steps = 0;
    try {
      const CheckpointReader reader = CheckpointReader::open(dir, layout);
      steps = reader.run().completed_steps;
      STRATA_REQUIRE(steps <= max_steps, "checkpoint '{}' has completed {} steps, more than --steps {}", dir, steps,
                     max_steps);
      engine.load_checkpoint(reader);
    } catch (const Error& e) {
      problem = e.what();
    }
    const bool failed = job.any(!problem.empty());
    if (!failed) return steps;
    const bool more = choice.fall_back && i + 1 < choice.candidates.size();
    if (!more) {
      agree_or_throw(job, problem, kExitUsage);
      fail("rank {} refused checkpoint '{}'", job.rank, dir);  // a rank without a problem of its own
    }
    if (!problem.empty()) {
      fmt::print(stderr, "strata: warning{}: checkpoint refused: {}; trying the one before it\n",
                 job.world > 1 ? fmt::format(" on rank {}", job.rank) : "", problem);
    }
    fmt::print(out, "resume: {} was refused; trying {}\n", dir, choice.candidates[i + 1]);
  }
  return 0;
}

}  // namespace strata
