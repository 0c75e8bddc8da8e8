// `strata sample`: text generation from a checkpoint.
#pragma once

#include <CLI/CLI.hpp>

namespace strata {

void add_sample_command(CLI::App& app);

}  // namespace strata
