// Reads /proc/self/status.
#include "core/process_memory.hpp"

#include <fstream>
#include <string>

namespace strata {

namespace {

std::uint64_t status_kilobytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1)) * 1024;
  }
  return 0;
}

}  // namespace

std::uint64_t process_peak_resident_bytes() { return status_kilobytes("VmHWM"); }
std::uint64_t process_resident_bytes() { return status_kilobytes("VmRSS"); }

}  // namespace strata
