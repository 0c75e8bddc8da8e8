// One table of options serves the command line (CLI11), the TOML config file (toml++) and the
// printed resolved configuration, so a flag, its config key and its help never drift apart.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace strata {

using OptionTarget = std::variant<bool*, int*, std::int64_t*, double*, std::string*>;

struct OptionSpec {
  std::string name;   // the flag without "--"; also the TOML key (a bool is a flag taking no value)
  std::string group;  // help section; also an optional TOML table name
  std::string help;
  OptionTarget target;
};

void register_options(CLI::App& app, const std::vector<OptionSpec>& specs);

// The new name of a renamed option ("save-every" -> "checkpoint-every"), without dashes; empty when
// `name` was never renamed. The command line and config files both say so.
std::string renamed_option(std::string_view name);

// Sets, from a TOML file, every option the command line did not give. Keys are flag names
// (dashes or underscores), at the top level or inside a table named after the option's group.
// Unknown keys and wrong types stop with a sentence naming the file and the key.
void apply_config_file(const std::string& path, const std::vector<OptionSpec>& specs, const CLI::App& app);

// The options as TOML, grouped, ready to be fed back with --config.
std::string options_as_toml(const std::vector<OptionSpec>& specs);

}  // namespace strata
