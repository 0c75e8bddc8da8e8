// Human-readable sizes and times.
#include "core/format_units.hpp"

#include <fmt/format.h>

namespace strata {

std::string format_bytes(double bytes) {
  constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 5) bytes /= 1000.0, ++u;
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.3g} {}", bytes, kUnits[u]);
}

std::string format_seconds(double s) {
  if (s >= 1.0) return fmt::format("{:.3g} s", s);
  if (s >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  if (s >= 1e-6) return fmt::format("{:.3g} us", s * 1e6);
  return fmt::format("{:.3g} ns", s * 1e9);
}

}  // namespace strata
