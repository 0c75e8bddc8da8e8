// Lists the presets: shape, parameters, and training FLOPs per token at full context.
#include "cli/models_command.hpp"

#include <fmt/format.h>

#include "model/gpt_config.hpp"

namespace strata {

void add_models_command(CLI::App& app) {
  CLI::App* models = app.add_subcommand("models", "List the model presets with their sizes.");
  models->callback([]() {
    fmt::print("{:<12} {:>3} {:>5} {:>5} {:>6} {:>7} {:>14} {:>16}\n", "model", "L", "C", "heads", "vocab", "context",
               "parameters", "GFLOP/token@ctx");
    for (const auto& name : GptConfig::preset_names()) {
      const GptConfig c = GptConfig::preset(name);
      fmt::print("{:<12} {:>3} {:>5} {:>5} {:>6} {:>7} {:>14} {:>16.3f}\n", name, c.n_layer, c.n_embd, c.n_head,
                 c.vocab_size, c.context_length, c.parameter_count(), c.flops_per_token(c.context_length) / 1e9);
    }
  });
}

}  // namespace strata
