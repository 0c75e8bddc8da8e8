// Which transformer blocks recompute their forward in backward instead of keeping their
// activations (--activation-checkpointing none|blocks|every:K): one value the model, the schedule
// and the simulator all read, so what is priced is what runs.
#pragma once

#include <string>
#include <string_view>

namespace strata {

struct ActivationCheckpointing {
  // 0: none; 1: every block; K > 1: blocks 0, K, 2K, ... (a block in every K recomputes).
  int every = 0;

  bool enabled() const { return every > 0; }
  bool recomputes(int layer) const { return every > 0 && layer % every == 0; }
  int recomputed_blocks(int n_layer) const { return every > 0 ? (n_layer + every - 1) / every : 0; }
  bool operator==(const ActivationCheckpointing&) const = default;
};

// "none", "blocks" or "every:K" (K >= 1; every:1 is blocks); anything else is refused with a
// sentence naming the forms.
ActivationCheckpointing parse_activation_checkpointing(std::string_view text);
std::string activation_checkpointing_name(const ActivationCheckpointing& c);

}  // namespace strata
