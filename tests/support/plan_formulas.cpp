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

namespace {

// Bytes of a block-quantized run of s elements: int codes at `bits` each, rounded up to a byte,
// plus one 4-byte scale per started block of B.
std::uint64_t blob_bytes(std::uint64_t s, std::uint64_t bits, std::uint64_t block) {
  return (s * bits + 7) / 8 + 4 * ((s + block - 1) / block);
}

// A quantized all-gather of n elements over [first, last], at level l: every rank's piece of
// n / span(first..last) travels as one blob; at level l a rank sends the blobs it holds by then
// (those of span(l+1..last) ranks) to each of its f_l - 1 peers.
std::uint64_t quant_gather_bytes(const Topology& t, int first, int last, int l, std::uint64_t n, std::uint64_t bits,
                                 std::uint64_t block) {
  if (l < first || l > last) return 0;
  const auto f = static_cast<std::uint64_t>(t.level(l).fanout);
  const auto span = static_cast<std::uint64_t>(t.span(first, last));
  const auto inner = static_cast<std::uint64_t>(t.span(first, l));
  return (f - 1) * blob_bytes(n / span, bits, block) * (span / inner);
}

// A quantized reduce-scatter (one all-to-all per level) of n elements over [first, last], at
// level l: the chunk bound for each of the f_l - 1 peers is n / span(first..l) elements, one blob.
std::uint64_t quant_reduce_bytes(const Topology& t, int first, int last, int l, std::uint64_t n, std::uint64_t bits,
                                 std::uint64_t block) {
  if (l < first || l > last) return 0;
  const auto f = static_cast<std::uint64_t>(t.level(l).fanout);
  return (f - 1) * blob_bytes(n / static_cast<std::uint64_t>(t.span(first, l)), bits, block);
}

// A flat collective over [first, last] (one call, a piece to or from each peer), at level l: the
// peers whose outermost coordinate differing from this rank's is l, (f_l - 1) x span(first..l-1),
// times the piece.
std::uint64_t flat_bytes(const Topology& t, int first, int last, int l, std::uint64_t piece_bytes) {
  if (l < first || l > last) return 0;
  return static_cast<std::uint64_t>(t.level(l).fanout - 1) * static_cast<std::uint64_t>(t.span(first, l - 1)) *
         piece_bytes;
}

}  // namespace

TrafficFormula traffic_formula(const ModelLayout& layout, const ShardPlan& plan, const Topology& t,
                               DType weight_dtype, DType grad_dtype) {
  const auto padded = padded_unit_sizes(layout, t);
  const int levels = t.level_count(), top = levels - 1;
  const std::uint64_t ew = dtype_size(weight_dtype), eg = dtype_size(grad_dtype);
  const auto sg = static_cast<std::uint64_t>(t.span(plan.grads));
  const auto so = static_cast<std::uint64_t>(t.span(plan.optimizer));
  const auto sw = static_cast<std::uint64_t>(t.span(plan.weights));
  const std::uint64_t wblock = plan.quant_weights_block, gblock = plan.quant_grads_block;
  const auto wbits = static_cast<std::uint64_t>(plan.quant_weights);
  const auto gbits = static_cast<std::uint64_t>(plan.quant_grads);
  // Backward gathers are quantized unless the plan says off, or (auto) they read an hpZ copy.
  const bool backward_quant = wbits > 0 && (plan.quant_backward == QuantBackward::kOn ||
                                            (plan.quant_backward == QuantBackward::kAuto && !plan.has_secondary()));
  const int backward_last = plan.has_secondary() ? plan.secondary : plan.weights;

  // Every per-unit figure is summed unit by unit: quantized sizes are not linear in n (scales per
  // started block).
  // Flat collectives: every gather (qwZ blobs too) and the unquantized reductions; qgZ stays
  // two-hop by definition.
  const bool flat = plan.collectives == CollectiveAlgorithm::kFlat;
  auto piece = [&](int first, int last, std::uint64_t n) { return n / static_cast<std::uint64_t>(t.span(first, last)); };
  auto gather = [&](int last, int l, std::uint64_t n, bool quant) {
    if (flat) return flat_bytes(t, 0, last, l, quant ? blob_bytes(piece(0, last, n), wbits, wblock) : piece(0, last, n) * ew);
    return quant ? quant_gather_bytes(t, 0, last, l, n, wbits, wblock) : level_bytes(t, 0, last, l, n, ew);
  };
  auto reduce = [&](int first, int last, int l, std::uint64_t n) {
    if (gbits > 0) return quant_reduce_bytes(t, first, last, l, n, gbits, gblock);
    return flat ? flat_bytes(t, first, last, l, piece(first, last, n) * eg) : level_bytes(t, first, last, l, n, eg);
  };
  auto all_reduce = [&](int first, int last, int l, std::uint64_t n) {
    if (gbits > 0) {
      return quant_reduce_bytes(t, first, last, l, n, gbits, gblock) + quant_gather_bytes(t, first, last, l, n, gbits, gblock);
    }
    return flat ? 2 * flat_bytes(t, first, last, l, piece(first, last, n) * eg) : 2 * level_bytes(t, first, last, l, n, eg);
  };
  auto update = [&](int l, std::uint64_t n) {
    if (flat) return flat_bytes(t, plan.weights + 1, plan.optimizer, l, piece(plan.weights + 1, plan.optimizer, n) * ew);
    return level_bytes(t, plan.weights + 1, plan.optimizer, l, n, ew);
  };

  TrafficFormula f{std::vector<std::uint64_t>(static_cast<std::size_t>(levels), 0),
                   std::vector<std::uint64_t>(static_cast<std::size_t>(levels), 0)};
  for (int l = 0; l < levels; ++l) {
    std::uint64_t micro = 0, boundary = 0;
    for (std::size_t u = 0; u < padded.size(); ++u) {
      const std::uint64_t n = padded[u];
      const bool is_block = layout.unit(u).kind == UnitKind::kBlock;
      if (plan.weights != kReplicated) {
        // Forward: the embedding twice (lookup and tied head), every other unit once.
        const std::uint64_t forward_gathers = u == ModelLayout::kEmbeddingUnit ? 2 : 1;
        micro += forward_gathers * gather(plan.weights, l, n, wbits > 0);
        if (is_block) micro += gather(backward_last, l, n, backward_quant);
      }
      if (plan.grads != kReplicated) micro += reduce(0, plan.grads, l, n);
      boundary += reduce(plan.grads + 1, plan.optimizer, l, n / sg);
      boundary += all_reduce(plan.optimizer + 1, top, l, n / so);
      boundary += update(l, n / sw);
    }
    f.micro_batch[static_cast<std::size_t>(l)] = micro;
    f.boundary[static_cast<std::size_t>(l)] = boundary;
  }
  return f;
}

}  // namespace strata
