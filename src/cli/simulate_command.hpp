// `strata simulate`: the step schedule of each plan replayed on a cluster model at each node count.
#pragma once

#include <CLI/CLI.hpp>

namespace strata {

void add_simulate_command(CLI::App& app);

}  // namespace strata
