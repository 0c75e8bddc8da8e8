// `strata train`: parse, merge the config file under the flags, print the resolved settings, run.
#include "cli/train_command.hpp"

#include <fmt/format.h>

#include <iostream>
#include <string>

#include "cli/train_options.hpp"
#include "train/trainer.hpp"

namespace strata {

namespace {

struct TrainCommandState {
  TrainConfig config;
  std::string config_file;
  std::vector<OptionSpec> specs;
};

}  // namespace

void add_train_command(CLI::App& app) {
  auto state = std::make_shared<TrainCommandState>();
  state->specs = train_option_specs(state->config);
  CLI::App* train = app.add_subcommand(
      "train",
      "Train a GPT-2 model. With no flags: the tiny model on the built-in corpus for 1000 steps (seconds on 2 cores).\n"
      "Every flag is also a key of the optional TOML file given with --config (flags win).");
  train->add_option("--config", state->config_file, "TOML file of settings; keys are the flag names below")
      ->check(CLI::ExistingFile);
  register_options(*train, state->specs);
  train->callback([state, train]() {
    if (!state->config_file.empty()) apply_config_file(state->config_file, state->specs, *train);
    state->config.validate();
    state->config.resolve_defaults();
    fmt::print("resolved configuration (TOML, reusable with --config):\n{}\n", options_as_toml(state->specs));
    Trainer trainer(state->config);
    trainer.run(std::cout);
  });
}

}  // namespace strata
