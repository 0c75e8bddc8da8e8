// `strata calibrate`: measure this machine under mpirun and write a cluster file for the simulator.
#pragma once

#include <CLI/CLI.hpp>

namespace strata {

void add_calibrate_command(CLI::App& app);

}  // namespace strata
