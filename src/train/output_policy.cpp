// The output policy and the recognisers of Strata's own output kinds.
#include "train/output_policy.hpp"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/path_checks.hpp"
#include "engine/checkpoint_format.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

// Whether `path` is `other` or lies inside it.
bool same_or_inside(const fs::path& path, const fs::path& other) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(path, ec), b = fs::weakly_canonical(other, ec);
  if (a == b) return true;
  const auto [end, _] = std::mismatch(b.begin(), b.end(), a.begin(), a.end());
  return end == b.end() && fs::is_directory(b, ec);
}

std::string head_of(const std::string& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string text(bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(bytes));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

bool is_metrics_file(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return false;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  return j.is_object() && j.value("type", "") == "run";
}

// chrome_trace() writes otherData (sorted before traceEvents) naming Strata.
bool is_strata_trace(const std::string& path) {
  const std::string head = head_of(path, 4096);
  return head.rfind("{", 0) == 0 && head.find("\"generator\":\"strata") != std::string::npos;
}

bool is_strata_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), sizeof length);
  std::error_code ec;
  if (!in.good() || length == 0 || length > (64u << 20) || length + 8 > fs::file_size(path, ec)) return false;
  std::string header(length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(length));
  const nlohmann::json j = nlohmann::json::parse(header, nullptr, false);
  if (!j.is_object() || !j.contains("__metadata__") || !j["__metadata__"].is_object()) return false;
  return j["__metadata__"].value("source", "").rfind("strata ", 0) == 0;
}

bool is_calibrated_cluster_file(const std::string& path) {
  return head_of(path, 4096).find("description = \"measured by strata calibrate") != std::string::npos;
}

}  // namespace

OutputKind metrics_output() { return {"a Strata metrics file", is_metrics_file}; }
OutputKind trace_output() { return {"a Strata timeline (Chrome trace)", is_strata_trace}; }
OutputKind safetensors_output() { return {"a safetensors file written by strata export", is_strata_safetensors}; }
OutputKind calibrated_cluster_output() { return {"a cluster file written by strata calibrate", is_calibrated_cluster_file}; }

void require_output(const std::string& path, const std::string& flag, const OutputKind& kind,
                    const std::vector<std::string>& inputs, bool force) {
  std::error_code ec;
  const fs::path p(path);
  const std::string odd = non_regular_kind(path);
  STRATA_REQUIRE(odd.empty(), "{} '{}' is {}; an output is a regular file, and this one is not replaced", flag, path,
                 odd);
  const bool exists = fs::exists(p, ec);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  STRATA_REQUIRE(fs::is_directory(dir, ec), "{} '{}': the directory '{}' does not exist", flag, path, dir.string());
  STRATA_REQUIRE(::access(dir.c_str(), W_OK) == 0, "{} '{}': cannot write in the directory '{}'", flag, path,
                 dir.string());
  if (force) return;
  STRATA_REQUIRE(!is_inside_checkpoint(path), "{} '{}' is inside a checkpoint directory: nothing but the checkpoint "
                 "goes there (choose another path, or --force)", flag, path);
  for (const std::string& input : inputs) {
    if (input.empty() || input == "auto" || input == "builtin") continue;
    STRATA_REQUIRE(!same_or_inside(p, input), "{} '{}' would write over '{}', an input of this run (--force to write it "
                   "anyway)", flag, path, input);
  }
  if (exists && fs::file_size(p, ec) > 0) {
    STRATA_REQUIRE(kind.recognizes(path), "{} '{}' exists and is not {}, so it is not replaced (remove it, choose "
                   "another path, or give --force)", flag, path, kind.what);
  }
}

}  // namespace strata
