// Loading PyTorch reference cases.
#include "support/reference_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace strata::testing {

ReferenceCase load_reference_case(const std::string& name) {
  ReferenceCase c;
  c.archive = TensorArchive::load(std::string(STRATA_REFERENCE_DIR) + "/" + name + ".stt");
  auto num = [&](const char* key) { return c.archive.scalar(std::string("config.") + key); };
  c.config.name = name;
  c.config.n_layer = static_cast<int>(num("n_layer"));
  c.config.n_embd = static_cast<int>(num("n_embd"));
  c.config.n_head = static_cast<int>(num("n_head"));
  c.config.vocab_size = static_cast<int>(num("vocab_size"));
  c.config.context_length = static_cast<int>(num("context_length"));
  c.config.vocab_pad_multiple = static_cast<int>(num("vocab_pad_multiple"));
  c.batch = static_cast<int>(num("batch"));
  c.seq_len = static_cast<int>(num("seq_len"));
  c.grad_accum = static_cast<int>(num("grad_accum"));
  c.steps = static_cast<int>(num("steps"));
  c.recipe.schedule = LrSchedule{num("lr"), static_cast<int>(num("warmup_steps")), c.steps, num("min_lr_ratio")};
  c.recipe.hyper = AdamWHyper{static_cast<float>(num("beta1")), static_cast<float>(num("beta2")),
                              static_cast<float>(num("eps")), static_cast<float>(num("weight_decay"))};
  c.recipe.grad_clip = num("grad_clip");
  c.recipe.grad_accum = c.grad_accum;
  return c;
}

void load_units(const TensorArchive& archive, const std::string& prefix, const ModelLayout& layout,
                UnitBuffers& units) {
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const TensorSpec& t : layout.unit(u).tensors) {
      const std::vector<float> values = archive.floats(prefix + t.name);
      if (values.size() > t.range.size()) throw std::runtime_error("reference tensor larger than " + t.name);
      float* dst = units.unit(u) + t.range.begin;
      std::fill(dst, dst + t.range.size(), 0.0f);
      std::memcpy(dst, values.data(), values.size() * sizeof(float));
    }
  }
}

double max_relative_error(std::span<const float> actual, std::span<const float> expected) {
  if (actual.size() != expected.size()) return INFINITY;
  double max_diff = 0.0, max_ref = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(actual[i]) - expected[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(expected[i])));
  }
  return max_ref > 0.0 ? max_diff / max_ref : max_diff;
}

std::span<const float> tensor_values(const ModelLayout& layout, const UnitBuffers& units, const std::string& name) {
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const TensorSpec& t : layout.unit(u).tensors) {
      if (t.name != name) continue;
      std::size_t n = t.range.size();
      if (name == "wte") n = static_cast<std::size_t>(layout.config().vocab_size) * layout.config().n_embd;
      return {units.unit(u) + t.range.begin, n};
    }
  }
  throw std::runtime_error("no tensor " + name);
}

}  // namespace strata::testing
