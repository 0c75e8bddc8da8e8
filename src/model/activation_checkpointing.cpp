// Parsing and naming of the recomputation setting.
#include "model/activation_checkpointing.hpp"

#include <charconv>

#include "core/error.hpp"

namespace strata {

ActivationCheckpointing parse_activation_checkpointing(std::string_view text) {
  if (text == "none") return {};
  if (text == "blocks") return {1};
  constexpr std::string_view kEvery = "every:";
  if (text.starts_with(kEvery)) {
    const std::string_view digits = text.substr(kEvery.size());
    int k = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (ec == std::errc() && end == digits.data() + digits.size() && k >= 1) return {k};
  }
  fail("--activation-checkpointing takes none, blocks or every:K (K a whole number of at least 1: a block in "
       "every K recomputes), not '{}'",
       text);
}

std::string activation_checkpointing_name(const ActivationCheckpointing& c) {
  if (c.every == 0) return "none";
  if (c.every == 1) return "blocks";
  return "every:" + std::to_string(c.every);
}

}  // namespace strata
