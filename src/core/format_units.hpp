// Sizes and times as a person reads them ("1.23 GB", "4.5 ms"): one formatter for every report,
// refusal and table, so the same quantity reads the same everywhere.
#pragma once

#include <string>

namespace strata {

std::string format_bytes(double bytes);      // B, kB, MB, GB, TB, PB (powers of 1000), 3 digits
std::string format_seconds(double seconds);  // ns, us, ms or s, 3 digits

// "64GB", "64GiB", "512MiB", "1.5e9", "0"; refuses anything else with a sentence naming `what`.
double parse_byte_size(const std::string& text, const std::string& what);

}  // namespace strata
