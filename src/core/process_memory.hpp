// This process's resident memory as the kernel counts it: what a predicted peak is checked against.
#pragma once

#include <cstdint>

namespace strata {

// The peak resident set so far (VmHWM) and the resident set now (VmRSS); 0 where /proc cannot say.
std::uint64_t process_peak_resident_bytes();
std::uint64_t process_resident_bytes();

}  // namespace strata
