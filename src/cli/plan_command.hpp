// `strata plan`: every valid plan simulated on a cluster, those that fit ranked by step time.
#pragma once

#include <CLI/CLI.hpp>

namespace strata {

void add_plan_command(CLI::App& app);

}  // namespace strata
