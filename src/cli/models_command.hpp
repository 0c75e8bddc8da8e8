// `strata models`: the model presets with their sizes.
#pragma once

#include <CLI/CLI.hpp>

namespace strata {

void add_models_command(CLI::App& app);

}  // namespace strata
