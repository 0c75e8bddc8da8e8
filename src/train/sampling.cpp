// Token draws and the generation loop.
#include "train/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "core/error.hpp"
#include "model/generator.hpp"
#include "model/gpt.hpp"

namespace strata {

std::int32_t draw_token(std::span<const float> logits, double temperature, int top_k, Rng& rng) {
  STRATA_REQUIRE(!logits.empty(), "no logits to draw from");
  if (temperature <= 0.0 || top_k == 1) {
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t keep = top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(top_k), order.size()) : order.size();
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  order.resize(keep);
  const double top = logits[static_cast<std::size_t>(order.front())];
  std::vector<double> weight(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    weight[i] = std::exp((logits[static_cast<std::size_t>(order[i])] - top) / temperature);
    total += weight[i];
  }
  double u = rng.uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    u -= weight[i];
    if (u < 0.0) return order[i];
  }
  return order.back();
}

std::vector<std::int32_t> generate(const GptConfig& config, const UnitBuffers& params,
                                   std::span<const std::int32_t> prompt, const SampleSettings& settings, Rng& rng,
                                   const std::function<void(std::int32_t)>& on_token) {
  STRATA_REQUIRE(!prompt.empty(), "the prompt needs at least one token");
  const std::size_t window = static_cast<std::size_t>(config.context_length);
  STRATA_REQUIRE(prompt.size() <= window, "the prompt is {} tokens; the model's context holds {}", prompt.size(),
                 window);
  // A context that outgrows the model's keeps its newer half (both paths alike, so they agree).
  const auto crop = [&](std::vector<std::int32_t>& context) {
    if (context.size() > window) context.erase(context.begin(), context.end() - static_cast<std::ptrdiff_t>(window / 2));
  };
  std::vector<std::int32_t> context(prompt.begin(), prompt.end());
  std::vector<std::int32_t> out;
  std::optional<Generator> generator;
  std::optional<Gpt> full;
  std::span<const float> logits;
  const auto prime = [&] {  // the cache holds exactly `context`; the logits are its last position's
    generator->reset();
    for (const std::int32_t t : context) logits = generator->append(t);
  };
  if (settings.cache) {
    generator.emplace(config, params);
    prime();
  }
  for (int i = 0; i < settings.tokens; ++i) {
    if (!settings.cache) {
      // The training forward over the whole context; its last row holds the next token's logits.
      const int length = static_cast<int>(context.size());
      full.emplace(config, 1, length);
      const std::vector<std::int32_t> targets(context.size(), 0);
      full->forward(params, context, targets);
      logits = {full->logits() + static_cast<std::size_t>(length - 1) * config.padded_vocab_size(),
                static_cast<std::size_t>(config.vocab_size)};
    }
    const std::int32_t next = draw_token(logits, settings.temperature, settings.top_k, rng);
    out.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 == settings.tokens) break;
    context.push_back(next);
    const bool cropped = context.size() > window;
    crop(context);
    if (settings.cache) {
      if (cropped) {
        prime();
      } else {
        logits = generator->append(next);
      }
    }
  }
  return out;
}

}  // namespace strata
