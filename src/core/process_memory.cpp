// Reads /proc/self/status and /proc/meminfo, whose lines are "Key:   <n> kB".
#include "core/process_memory.hpp"

#include <fstream>
#include <string>

namespace strata {

namespace {

std::uint64_t proc_kilobytes(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1)) * 1024;
  }
  return 0;
}

}  // namespace

std::uint64_t process_peak_resident_bytes() { return proc_kilobytes("/proc/self/status", "VmHWM"); }
std::uint64_t process_resident_bytes() { return proc_kilobytes("/proc/self/status", "VmRSS"); }

std::uint64_t host_memory_bytes() { return proc_kilobytes("/proc/meminfo", "MemTotal"); }
std::uint64_t host_swap_bytes() { return proc_kilobytes("/proc/meminfo", "SwapTotal"); }
std::uint64_t host_available_bytes() { return proc_kilobytes("/proc/meminfo", "MemAvailable"); }

}  // namespace strata
