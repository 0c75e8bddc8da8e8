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

// Whether `path` is `other` or lies inside it.
bool same_or_inside(const fs::path& path, const fs::path& other) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(path, ec), b = fs::weakly_canonical(other, ec);
  if (a == b) return true;
  const auto [end, _] = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
  return end == b.end() && fs::is_directory(b, ec);
}

}  // namespace

void require_input_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const fs::file_status s = fs::status(path, ec);
  STRATA_REQUIRE(fs::exists(s), "{} '{}': no such file", what, path);
  STRATA_REQUIRE(fs::is_regular_file(s), "{} '{}' is {}; it must be a regular file", what, path, kind_of(s));
  STRATA_REQUIRE(::access(path.c_str(), R_OK) == 0, "{} '{}': not readable", what, path);
}

void require_output_file(const std::string& path, const std::string& what, const std::vector<std::string>& inputs) {
  std::error_code ec;
  const fs::path p(path);
  const fs::file_status s = fs::status(p, ec);
  if (fs::exists(s)) {
    STRATA_REQUIRE(fs::is_regular_file(s), "{} '{}' is {}; an output is a regular file, and this one is not replaced",
                   what, path, kind_of(s));
  }
  for (const std::string& input : inputs) {
    if (input.empty() || input == "auto") continue;
    STRATA_REQUIRE(!same_or_inside(p, input), "{} '{}' would write over '{}', an input of this run", what, path, input);
  }
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  STRATA_REQUIRE(fs::is_directory(dir, ec), "{} '{}': the directory '{}' does not exist", what, path, dir.string());
  STRATA_REQUIRE(::access(dir.c_str(), W_OK) == 0, "{} '{}': cannot write in the directory '{}'", what, path,
                 dir.string());
}

}  // namespace strata
