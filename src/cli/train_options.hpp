// The table of `strata train` options over a TrainConfig.
#pragma once

#include <vector>

#include "cli/option_table.hpp"
#include "train/train_config.hpp"

namespace strata {

std::vector<OptionSpec> train_option_specs(TrainConfig& config);

}  // namespace strata
