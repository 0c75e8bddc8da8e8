// inspect and export on the command line.
#include "cli/checkpoint_commands.hpp"

#include <fmt/format.h>

#include <memory>

#include "cli/simulation_options.hpp"
#include "core/error.hpp"
#include "train/checkpoint_export.hpp"

namespace strata {

namespace {

struct CheckpointCommandState {
  std::string path;
  std::string out;
  bool no_verify = false;
  bool force = false;
};

}  // namespace

void add_checkpoint_commands(CLI::App& app) {
  auto st = std::make_shared<CheckpointCommandState>();
  CLI::App* inspect = app.add_subcommand(
      "inspect", "Print a checkpoint's manifest, files, sizes, checksum status and state digests (one process).");
  inspect->add_option("checkpoint", st->path, "a step directory, or a checkpoint directory (its newest complete one)")
      ->required();
  inspect->add_flag("--no-verify", st->no_verify, "do not read and check every chunk");
  inspect->callback([st]() {
    run_single_process([&] {
      const CheckpointReader reader = CheckpointReader::open_any(resolve_checkpoint_path(st->path));
      const std::string report = inspect_checkpoint(reader, !st->no_verify);
      fmt::print("{}", report);
      STRATA_REQUIRE(report.find(": BAD: ") == std::string::npos, "checkpoint '{}' has damaged files (above)",
                     reader.dir());
    });
  });

  auto ex = std::make_shared<CheckpointCommandState>();
  CLI::App* exp = app.add_subcommand(
      "export", "Write a checkpoint's full model as safetensors with GPT-2 (nanoGPT) tensor names (one process).");
  exp->add_option("checkpoint", ex->path, "a step directory, or a checkpoint directory (its newest complete one)")
      ->required();
  exp->add_option("--out", ex->out, "the safetensors file to write")->required();
  exp->add_flag("--force", ex->force,
                "replace the --out file even when it is not an earlier strata export, or lies in a checkpoint");
  exp->callback([ex]() {
    run_single_process([&] {
      const CheckpointReader reader = CheckpointReader::open_any(resolve_checkpoint_path(ex->path));
      export_safetensors(reader, ex->out, ex->force);
      fmt::print("exported {} (after step {}) to {}\n", reader.dir(), reader.run().completed_steps, ex->out);
    });
  });
}

}  // namespace strata
