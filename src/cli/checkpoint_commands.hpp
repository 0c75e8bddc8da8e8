// `strata inspect` and `strata export`: a checkpoint read on one process, any world size or plan.
#pragma once

#include <CLI/CLI.hpp>

namespace strata {

void add_checkpoint_commands(CLI::App& app);

}  // namespace strata
