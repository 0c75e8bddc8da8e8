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

bool all_equal(Communicator& comm, std::uint64_t value) {
  // Halves of 32 bits are exact in the fp64 control sums; the maximum of each and of its negation
  // are equal only when every rank's is.
  const double hi = static_cast<double>(value >> 32), lo = static_cast<double>(value & 0xFFFFFFFFu);
  double v[4] = {hi, lo, -hi, -lo};
  comm.all_reduce_control(v, 4, 0, comm.topology().level_count() - 1, ControlOp::kMax);
  return v[0] == -v[2] && v[1] == -v[3];
}

std::string text_of_rank0(Communicator& comm, const std::string& text) {
  // Outermost level first: rank 0 has coordinate 0 at every level, so each level's broadcast from
  // coordinate 0 reaches the ranks whose outer coordinates the ones before covered.
  std::uint64_t size = text.size();
  const int levels = comm.topology().level_count();
  for (int l = levels - 1; l >= 0; --l) comm.broadcast(&size, sizeof size, DType::kU8, 0, l);
  std::string out = comm.rank() == 0 ? text : std::string(size, '\0');
  for (int l = levels - 1; l >= 0; --l) comm.broadcast(out.data(), out.size(), DType::kU8, 0, l);
  return out;
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
