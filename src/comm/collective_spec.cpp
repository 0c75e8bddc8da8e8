// Byte and call counts of a collective spec.
#include "comm/collective_spec.hpp"

#include <fmt/format.h>

namespace strata {

namespace {

// Bytes of one piece of `elements` on the wire.
std::uint64_t piece_bytes(const CollectiveSpec& c, std::size_t elements) {
  return c.quant.enabled() ? quantized_bytes(c.quant, elements) : elements * dtype_size(c.dtype);
}

}  // namespace

std::vector<std::uint64_t> flat_peers(const Topology& t, int first, int last) {
  std::vector<std::uint64_t> peers(static_cast<std::size_t>(t.level_count()), 0);
  for (int l = first; l <= last; ++l) {
    peers[static_cast<std::size_t>(l)] =
        static_cast<std::uint64_t>(t.level(l).fanout - 1) * static_cast<std::uint64_t>(t.span(first, l - 1));
  }
  return peers;
}

std::vector<std::uint64_t> collective_bytes_by_level(const Topology& t, const CollectiveSpec& c) {
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(t.level_count()), 0);
  if (c.empty() || c.is_control()) return bytes;
  const std::size_t span = static_cast<std::size_t>(t.span(c.first_level, c.last_level));
  if (c.flat) {
    // One piece to each peer; an all-reduce is a reduce-scatter then an all-gather.
    const std::uint64_t passes = c.kind == CollectiveKind::kAllReduce ? 2 : 1;
    const std::uint64_t piece = piece_bytes(c, c.elements / span);
    const std::vector<std::uint64_t> peers = flat_peers(t, c.first_level, c.last_level);
    for (std::size_t l = 0; l < bytes.size(); ++l) bytes[l] = passes * piece * peers[l];
    return bytes;
  }
  // Reduce-scatter (the first half of an all-reduce): innermost first, the block being reduced
  // splits into fan-out chunks and each peer's chunk crosses.
  if (c.kind == CollectiveKind::kReduceScatter || c.kind == CollectiveKind::kAllReduce) {
    std::size_t block = c.elements;
    for (int l = c.first_level; l <= c.last_level; ++l) {
      const auto f = static_cast<std::size_t>(t.level(l).fanout);
      block /= f;
      if (f > 1) bytes[static_cast<std::size_t>(l)] += (f - 1) * piece_bytes(c, block);
    }
  }
  // All-gather (the second half of an all-reduce): outermost first, each rank's piece travels as
  // it is (quantized: its one blob), so the bytes gathered at level l are the pieces of the ranks
  // below it times the fan-out - 1 peers.
  if (c.kind == CollectiveKind::kAllGather || c.kind == CollectiveKind::kAllReduce) {
    const std::uint64_t piece = piece_bytes(c, c.elements / span);
    std::uint64_t gathered = piece;  // what one rank holds when the step at level l starts
    for (int l = c.last_level; l >= c.first_level; --l) {
      const auto f = static_cast<std::uint64_t>(t.level(l).fanout);
      bytes[static_cast<std::size_t>(l)] += (f - 1) * gathered;
      gathered *= f;
    }
  }
  return bytes;
}

std::vector<std::uint64_t> collective_calls_by_level(const Topology& t, const CollectiveSpec& c) {
  std::vector<std::uint64_t> calls(static_cast<std::size_t>(t.level_count()), 0);
  if (c.empty() || c.is_control()) return calls;
  const std::uint64_t passes = c.kind == CollectiveKind::kAllReduce ? 2 : 1;
  if (c.flat) {
    for (int l = c.last_level; l >= c.first_level; --l) {
      if (t.level(l).fanout > 1) {
        calls[static_cast<std::size_t>(l)] += passes;
        break;
      }
    }
    return calls;
  }
  for (int l = c.first_level; l <= c.last_level; ++l) {
    if (t.level(l).fanout > 1) calls[static_cast<std::size_t>(l)] += passes;
  }
  return calls;
}

std::string collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kNone: return "none";
    case CollectiveKind::kAllGather: return "all-gather";
    case CollectiveKind::kReduceScatter: return "reduce-scatter";
    case CollectiveKind::kAllReduce: return "all-reduce";
    case CollectiveKind::kControlSum: return "control sum";
    case CollectiveKind::kControlMax: return "control max";
  }
  return "?";
}

std::string describe_collective(const Topology& t, const CollectiveSpec& c) {
  if (c.empty()) return "no collective";
  const std::string levels = c.first_level == c.last_level
                                 ? t.level(c.first_level).name
                                 : fmt::format("{}..{}", t.level(c.first_level).name, t.level(c.last_level).name);
  const std::string quant = c.quant.enabled() ? " as " + describe_quant(c.quant) : "";
  return fmt::format("{}{} over {} of {} {}{}", c.flat ? "flat " : "", collective_kind_name(c.kind), levels, c.elements,
                     dtype_name(c.dtype), quant);
}

}  // namespace strata
