// Agreements over the communicator.
#include "comm/agreement.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "core/exit_codes.hpp"

namespace strata {

Failures agree_on_failures(Communicator& comm, bool failed) {
  const int world = comm.world_size();
  const int top = comm.topology().level_count() - 1;
  // The maximum of world - rank over the failing ranks names the lowest of them.
  double first = failed ? static_cast<double>(world - comm.rank()) : 0.0;
  comm.all_reduce_control(&first, 1, 0, top, ControlOp::kMax);
  if (first == 0.0) return {};
  double count = failed ? 1.0 : 0.0;
  comm.all_reduce_control(&count, 1, 0, top, ControlOp::kSum);
  return {world - static_cast<int>(first), static_cast<int>(count)};
}

bool any_rank(Communicator& comm, bool flag) {
  double value = flag ? 1.0 : 0.0;
  comm.all_reduce_control(&value, 1, 0, comm.topology().level_count() - 1, ControlOp::kMax);
  return value != 0.0;
}

void exit_if_any_failed(Communicator& comm, const std::string& problem, int code) {
  const Failures f = agree_on_failures(comm, !problem.empty());
  if (f.count == 0) return;
  if (comm.rank() == f.first) {
    const int world = comm.world_size();
    const std::string who = world == 1         ? ""
                            : f.count == 1     ? fmt::format(" on rank {}", f.first)
                            : f.count == world ? " (every rank)"
                                               : fmt::format(" on rank {} ({} of {} ranks failed)", f.first, f.count, world);
    fmt::print(stderr, "strata: error{}: {}\n", who, problem);
  }
  throw AgreedExit{code, problem};
}

}  // namespace strata
