// The `strata` command line: subcommands, and one place that turns errors into a message and
// a non-zero exit.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>

#include "cli/models_command.hpp"
#include "cli/train_command.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"strata: sharded data-parallel training of GPT models, partitioned along the machine's "
               "bandwidth hierarchy.\nRun 'strata <command> --help' for a command's flags."};
  app.set_version_flag("--version", "strata 0.1.0");
  app.require_subcommand(1);
  strata::add_train_command(app);
  strata::add_models_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const strata::Error& e) {
    fmt::print(stderr, "strata: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "strata: internal error: {}\n", e.what());
    return 2;
  }
  return 0;
}
