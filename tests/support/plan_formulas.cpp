// The closed forms.
#include "support/plan_formulas.hpp"

#include <fmt/format.h>

namespace strata {

namespace {

// Bytes one rank sends at level l in a reduce-scatter or all-gather of n elements of e bytes over
// the levels [first, last]: (f_l - 1) * n / span(first..l) * e.
std::uint64_t level_bytes(const Topology& t, int first, int last, int l, std::uint64_t n, std::uint64_t e) {
  if (l < first || l > last) return 0;
  const auto f = static_cast<std::uint64_t>(t.level(l).fanout);
  return (f - 1) * (n / static_cast<std::uint64_t>(t.span(first, l))) * e;
}

}  // namespace

std::vector<StateMemory> memory_formula(const ModelLayout& layout, const ShardPlan& plan, const Topology& t,
                                        DType weight_dtype) {
  const auto padded = padded_unit_sizes(layout, t);
  std::uint64_t all = 0, blocks = 0;
  for (std::size_t u = 0; u < padded.size(); ++u) {
    all += padded[u];
    if (layout.unit(u).kind == UnitKind::kBlock) blocks += padded[u];
  }
  const std::uint64_t e = dtype_size(weight_dtype);
  auto state = [&](const char* name, int level, std::uint64_t n, std::uint64_t bytes_per) {
    const auto span = static_cast<std::uint64_t>(t.span(level));
    return StateMemory{name, level, static_cast<int>(span), n / span * bytes_per,
                       fmt::format("{} x {} / {}", bytes_per, n, span)};
  };
  std::vector<StateMemory> out;
  out.push_back(state("weights", plan.weights, all, e));
  if (plan.has_secondary()) out.push_back(state("secondary", plan.secondary, blocks, e));
  out.push_back(state("grads", plan.grads, all, 4));
  out.push_back(state("optimizer", plan.optimizer, all, 12));
  return out;
}

std::vector<std::uint64_t> TrafficFormula::per_step(int grad_accum) const {
  std::vector<std::uint64_t> out(micro_batch.size());
  for (std::size_t l = 0; l < out.size(); ++l) out[l] = micro_batch[l] * static_cast<std::uint64_t>(grad_accum) + boundary[l];
  return out;
}

TrafficFormula traffic_formula(const ModelLayout& layout, const ShardPlan& plan, const Topology& t,
                               DType weight_dtype, DType grad_dtype) {
  const auto padded = padded_unit_sizes(layout, t);
  const int levels = t.level_count(), top = levels - 1;
  const std::uint64_t ew = dtype_size(weight_dtype), eg = dtype_size(grad_dtype);
  std::uint64_t all = 0, blocks = 0;
  for (std::size_t u = 0; u < padded.size(); ++u) {
    all += padded[u];
    if (layout.unit(u).kind == UnitKind::kBlock) blocks += padded[u];
  }
  const std::uint64_t embedding = padded[ModelLayout::kEmbeddingUnit];
  const std::uint64_t final_norm = padded[layout.final_norm_unit()];
  const auto sg = static_cast<std::uint64_t>(t.span(plan.grads));
  const auto so = static_cast<std::uint64_t>(t.span(plan.optimizer));
  const auto sw = static_cast<std::uint64_t>(t.span(plan.weights));

  TrafficFormula f{std::vector<std::uint64_t>(static_cast<std::size_t>(levels), 0),
                   std::vector<std::uint64_t>(static_cast<std::size_t>(levels), 0)};
  for (int l = 0; l < levels; ++l) {
    std::uint64_t micro = 0;
    if (plan.weights != kReplicated) {
      micro += level_bytes(t, 0, plan.weights, l, 2 * embedding + blocks + final_norm, ew);
      const int backward_last = plan.has_secondary() ? plan.secondary : plan.weights;
      micro += level_bytes(t, 0, backward_last, l, blocks, ew);
    }
    if (plan.grads != kReplicated) micro += level_bytes(t, 0, plan.grads, l, all, eg);
    f.micro_batch[static_cast<std::size_t>(l)] = micro;

    std::uint64_t boundary = level_bytes(t, plan.grads + 1, plan.optimizer, l, all / sg, eg);
    boundary += 2 * level_bytes(t, plan.optimizer + 1, top, l, all / so, eg);
    boundary += level_bytes(t, plan.weights + 1, plan.optimizer, l, all / sw, ew);
    f.boundary[static_cast<std::size_t>(l)] = boundary;
  }
  return f;
}

}  // namespace strata
