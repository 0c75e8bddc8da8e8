// This process's and this host's memory as the kernel counts it: what a predicted peak is checked
// against, and what a memory budget or a fit check is drawn from.
#pragma once

#include <cstdint>

namespace strata {

// The peak resident set so far (VmHWM) and the resident set now (VmRSS); 0 where /proc cannot say.
std::uint64_t process_peak_resident_bytes();
std::uint64_t process_resident_bytes();

// This host's memory (MemTotal), swap (SwapTotal) and the memory it could give without swapping
// (MemAvailable); 0 where /proc cannot say.
std::uint64_t host_memory_bytes();
std::uint64_t host_swap_bytes();
std::uint64_t host_available_bytes();

}  // namespace strata
