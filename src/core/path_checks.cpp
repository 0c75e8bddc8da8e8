// Path kind checks.
#include "core/path_checks.hpp"

#include <unistd.h>

#include <filesystem>

#include "core/error.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

std::string kind_of(const fs::file_status& s) {
  switch (s.type()) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO (named pipe)";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::block: return "a block device";
    case fs::file_type::character: return "a character device";
    default: return "not a regular file";
  }
}

}  // namespace

std::string non_regular_kind(const std::string& path) {
  std::error_code ec;
  const fs::file_status s = fs::status(path, ec);
  return fs::exists(s) && !fs::is_regular_file(s) ? kind_of(s) : std::string();
}

void require_input_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status s = fs::status(path, ec);
  STRATA_REQUIRE(fs::exists(s), "{} '{}': no such file", what, path);
  STRATA_REQUIRE(fs::is_regular_file(s), "{} '{}' is {}; it must be a regular file", what, path, kind_of(s));
  STRATA_REQUIRE(::access(path.c_str(), R_OK) == 0, "{} '{}': not readable", what, path);
}

}  // namespace strata
