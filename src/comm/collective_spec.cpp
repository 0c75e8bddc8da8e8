// Byte and call counts of a collective spec.
#include "comm/collective_spec.hpp"

#include <fmt/format.h>

namespace strata {

std::vector<std::uint64_t> collective_bytes_by_level(const Topology& t, const CollectiveSpec& c) {
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(t.level_count()), 0);
  if (c.empty() || c.is_control()) return bytes;
  const std::uint64_t passes = c.kind == CollectiveKind::kAllReduce ? 2 : 1;
  std::size_t block = c.elements;  // the block still being split (reduce) or assembled (gather)
  for (int l = c.first_level; l <= c.last_level; ++l) {
    const auto f = static_cast<std::size_t>(t.level(l).fanout);
    const std::size_t piece = block / f;
    bytes[static_cast<std::size_t>(l)] += passes * (f - 1) * piece * dtype_size(c.dtype);
    block = piece;
  }
  return bytes;
}

std::vector<std::uint64_t> collective_calls_by_level(const Topology& t, const CollectiveSpec& c) {
  std::vector<std::uint64_t> calls(static_cast<std::size_t>(t.level_count()), 0);
  if (c.empty() || c.is_control()) return calls;
  const std::uint64_t passes = c.kind == CollectiveKind::kAllReduce ? 2 : 1;
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
  }
  return "?";
}

std::string describe_collective(const Topology& t, const CollectiveSpec& c) {
  if (c.empty()) return "no collective";
  const std::string levels = c.first_level == c.last_level
                                 ? t.level(c.first_level).name
                                 : fmt::format("{}..{}", t.level(c.first_level).name, t.level(c.last_level).name);
  return fmt::format("{} over {} of {} {}", collective_kind_name(c.kind), levels, c.elements, dtype_name(c.dtype));
}

}  // namespace strata
