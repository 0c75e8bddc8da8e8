// Execution orders of a schedule segment: the list order, or a seeded random topological order.
#include "schedule/op_executor.hpp"

#include "core/error.hpp"
#include "core/rng.hpp"

namespace strata {

std::vector<int> segment_order(const StepSchedule& s, int segment, std::uint64_t shuffle_seed) {
  STRATA_CHECK(segment >= 0 && segment < static_cast<int>(s.segments.size()), "segment {} of {}", segment,
               s.segments.size());
  const ScheduleSegment& g = s.segments[static_cast<std::size_t>(segment)];
  std::vector<int> order;
  order.reserve(static_cast<std::size_t>(g.end - g.begin));
  if (shuffle_seed == 0) {
    for (int i = g.begin; i < g.end; ++i) order.push_back(i);
    return order;
  }
  // Kahn's algorithm, picking uniformly among the ready ops.
  const auto n = static_cast<std::size_t>(g.end - g.begin);
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<int>> users(n);
  for (int i = g.begin; i < g.end; ++i) {
    for (int d : s.ops[static_cast<std::size_t>(i)].deps) {
      if (d < g.begin) continue;
      STRATA_CHECK(d < g.end, "op {} of segment '{}' depends on op {} of a later segment", i, g.name, d);
      ++waiting[static_cast<std::size_t>(i - g.begin)];
      users[static_cast<std::size_t>(d - g.begin)].push_back(i);
    }
  }
  std::vector<int> ready;
  for (int i = g.begin; i < g.end; ++i) {
    if (waiting[static_cast<std::size_t>(i - g.begin)] == 0) ready.push_back(i);
  }
  Rng rng = Rng::derive(shuffle_seed, static_cast<std::uint64_t>(segment));
  while (!ready.empty()) {
    const std::size_t pick = rng.below(ready.size());
    const int i = ready[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (int u : users[static_cast<std::size_t>(i - g.begin)]) {
      if (--waiting[static_cast<std::size_t>(u - g.begin)] == 0) ready.push_back(u);
    }
  }
  STRATA_CHECK(order.size() == n, "segment '{}' has a dependency cycle", g.name);
  return order;
}

void run_segment(const StepSchedule& s, int segment, OpExecutor& executor, OpContext& context, std::uint64_t shuffle_seed) {
  for (int i : segment_order(s, segment, shuffle_seed)) executor.execute(s.ops[static_cast<std::size_t>(i)], context);
}

void run_all(const StepSchedule& s, OpExecutor& executor) {
  for (const ScheduleOp& op : s.ops) executor.execute(op);
}

}  // namespace strata
