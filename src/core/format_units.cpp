// Human-readable sizes and times.
#include "core/format_units.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "core/error.hpp"

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

double parse_byte_size(const std::string& text, const std::string& what) {
  struct Unit { const char* suffix; double scale; };
  constexpr Unit kUnits[] = {{"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0},
                             {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1.0}, {"", 1.0}};
  for (const Unit& u : kUnits) {
    const std::string suffix = u.suffix;
    if (text.size() < suffix.size() || text.compare(text.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string number = text.substr(0, text.size() - suffix.size());
    double value = 0.0;
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || ec != std::errc() || ptr != number.data() + number.size()) break;
    STRATA_REQUIRE(std::isfinite(value) && value >= 0.0, "{} must be a finite size of at least 0 (got '{}')", what, text);
    return value * u.scale;
  }
  fail("{} must be a size such as 64GB, 64GiB or 1.5e9 (got '{}')", what, text);
}

}  // namespace strata
