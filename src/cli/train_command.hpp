// `strata train`: flags and config file to a TrainConfig, then the training loop.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

namespace strata {

// Adds the `train` subcommand to app; the returned callback runs it after parsing.
void add_train_command(CLI::App& app);

}  // namespace strata
