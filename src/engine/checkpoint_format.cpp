// The checkpoint directory format: shard files, indices, manifest, marker; the checked reader.
#include "engine/checkpoint_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace strata {

namespace fs = std::filesystem;

namespace {

constexpr char kShardMagic[8] = {'S', 'T', 'R', 'T', 'S', 'H', 'R', 'D'};
constexpr const char* kManifest = "manifest.json";
constexpr const char* kMarker = "COMPLETE";

std::string index_name(int rank) { return fmt::format("rank-{:05d}.json", rank); }
std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_REQUIRE(in.good(), "{}: cannot open for reading", path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json parse_json(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({})", path, e.what());
  }
}

void check_finite(const float* data, std::size_t n, const std::string& what) {
  for (std::size_t i = 0; i < n; ++i) {
    STRATA_REQUIRE(std::isfinite(data[i]), "{} holds a non-finite value ({}) at element {}", what, data[i], i);
  }
}

// The directory's own name, also when given with a trailing slash.
std::string directory_name(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

// The shard file's header must be the one its manifest entry describes.
void require_shard_header(const std::string& path, const ManifestFile& f) {
  std::ifstream in(path, std::ios::binary);
  STRATA_REQUIRE(in.good(), "{}: cannot open for reading", path);
  char magic[sizeof kShardMagic] = {};
  std::uint32_t version = 0, rank = 0;
  std::uint64_t payload = 0;
  in.read(magic, sizeof magic);
  in.read(reinterpret_cast<char*>(&version), sizeof version);
  in.read(reinterpret_cast<char*>(&rank), sizeof rank);
  in.read(reinterpret_cast<char*>(&payload), sizeof payload);
  STRATA_REQUIRE(in.good() && std::memcmp(magic, kShardMagic, sizeof magic) == 0,
                 "{}: not a Strata checkpoint shard (bad magic number)", path);
  STRATA_REQUIRE(version == kCheckpointVersion, "{}: shard format version {} (this build reads {})", path, version,
                 kCheckpointVersion);
  STRATA_REQUIRE(rank == static_cast<std::uint32_t>(f.rank), "{}: the header says rank {}, the manifest rank {}", path,
                 rank, f.rank);
  STRATA_REQUIRE(payload == f.bytes - kShardHeaderBytes,
                 "{}: the header says {} payload bytes, the manifest's chunks {}", path, payload,
                 f.bytes - kShardHeaderBytes);
}

// One chunk read and checked: its checksum, finite values.
std::vector<float> read_chunk(const std::string& dir, const ManifestFile& file, const ManifestChunk& chunk) {
  const std::string path = join(dir, file.name);
  std::ifstream in(path, std::ios::binary);
  STRATA_REQUIRE(in.good(), "{}: cannot open for reading", path);
  std::vector<float> values(chunk.end - chunk.begin);
  in.seekg(static_cast<std::streamoff>(chunk.offset));
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  STRATA_REQUIRE(in.good(), "{}: the chunk at byte {} is cut short (the file is truncated)", path, chunk.offset);
  const std::string what = fmt::format("{}: {} of unit {} (elements {} .. {})", path, kCheckpointStates[chunk.state],
                                       chunk.unit, chunk.begin, chunk.end);
  STRATA_REQUIRE(checkpoint_digest(values.data(), values.size() * sizeof(float)) == chunk.xxh3,
                 "{} fails its checksum (the file is corrupt)", what);
  check_finite(values.data(), values.size(), what);
  return values;
}

}  // namespace

std::string step_directory_name(int completed_steps) { return fmt::format("step-{:08d}", completed_steps); }
std::string rank_file_name(int rank) { return fmt::format("rank-{:05d}.bin", rank); }

namespace {

// "<prefix>" then exactly `digits` decimal digits then "<suffix>"; the number, or -1.
int numbered_name(std::string_view name, std::string_view prefix, int digits, std::string_view suffix) {
  if (name.size() != prefix.size() + static_cast<std::size_t>(digits) + suffix.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix) {
    return -1;
  }
  int value = 0;
  for (char c : name.substr(prefix.size(), static_cast<std::size_t>(digits))) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

int step_of_directory_name(const std::string& dir) { return numbered_name(directory_name(dir), "step-", 8, ""); }

bool is_checkpoint_file_name(std::string_view name) {
  constexpr std::string_view kPartial = ".partial";
  if (name.size() > kPartial.size() && name.substr(name.size() - kPartial.size()) == kPartial) {
    name.remove_suffix(kPartial.size());
  }
  return name == kManifest || name == kMarker || numbered_name(name, "rank-", 5, ".bin") >= 0 ||
         numbered_name(name, "rank-", 5, ".json") >= 0;
}

bool is_inside_checkpoint(const std::string& path) {
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(fs::path(path), ec);
  const fs::path dir = file.parent_path();
  return step_of_directory_name(dir.string()) >= 0 || fs::exists(dir / kMarker, ec) ||
         fs::exists(dir / rank_file_name(0), ec);
}

void write_rank_shard(const std::string& dir, int rank, const std::vector<CheckpointPiece>& pieces) {
  ManifestFile index;
  index.rank = rank;
  std::uint64_t payload = 0;
  for (const CheckpointPiece& p : pieces) {
    check_finite(p.data, p.end - p.begin, fmt::format("refusing to checkpoint: {} of unit {}", p.state, p.unit));
    payload += (p.end - p.begin) * sizeof(float);
  }
  if (!pieces.empty()) {
    index.name = rank_file_name(rank);
    AtomicFile file(join(dir, index.name));
    const std::uint32_t version = kCheckpointVersion, r = static_cast<std::uint32_t>(rank);
    file.write(kShardMagic, sizeof kShardMagic);
    file.write(&version, sizeof version);
    file.write(&r, sizeof r);
    file.write(&payload, sizeof payload);
    for (const CheckpointPiece& p : pieces) {
      const std::size_t bytes = (p.end - p.begin) * sizeof(float);
      const int state = checkpoint_state_index(p.state);
      STRATA_CHECK(state >= 0, "a checkpoint piece of unknown state '{}'", p.state);
      index.chunks.push_back({state, p.unit, p.begin, p.end, file.written(), checkpoint_digest(p.data, bytes)});
      file.write(p.data, bytes);
    }
    index.bytes = file.written();
    file.commit();
  }
  write_file_atomically(join(dir, index_name(rank)), manifest_file_json(index).dump());
}

void write_manifest(const std::string& dir, const ModelLayout& layout, const CheckpointRun& run, int writers) {
  std::vector<ManifestFile> files;
  for (int r = 0; r < writers; ++r) {
    const std::string path = join(dir, index_name(r));
    ManifestFile f = parse_manifest_file(parse_json(read_text(path), path), path, "");
    STRATA_CHECK(f.rank == r, "{} is the index of rank {}", path, f.rank);
    if (!f.name.empty()) files.push_back(std::move(f));
  }
  // The manifest is checked as a reader will check it, before it is written.
  require_exact_coverage(layout, files, join(dir, kManifest));
  const std::string text = manifest_json(layout, run, files).dump(1);
  write_file_atomically(join(dir, kManifest), text);
  const CompletionMarker marker{run.completed_steps, checkpoint_digest(text.data(), text.size())};
  write_file_atomically(join(dir, kMarker), completion_marker_json(marker).dump());
  for (int r = 0; r < writers; ++r) fs::remove(join(dir, index_name(r)));
  fsync_directory(dir);
}

std::string incomplete_reason(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fmt::format("'{}' is not a checkpoint directory", dir);
  const std::string marker_path = join(dir, kMarker), manifest_path = join(dir, kManifest);
  if (!fs::is_regular_file(marker_path, ec)) return fmt::format("{} is missing: the save did not complete", marker_path);
  if (!fs::is_regular_file(manifest_path, ec)) return fmt::format("{} is missing", manifest_path);
  try {
    const CompletionMarker marker = parse_completion_marker(parse_json(read_text(marker_path), marker_path), marker_path);
    const std::string text = read_text(manifest_path);
    if (marker.manifest_xxh3 != checkpoint_digest(text.data(), text.size())) {
      return fmt::format("{} does not match the checksum in {} (the manifest is corrupt)", manifest_path, marker_path);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

CheckpointReader CheckpointReader::open_any(const std::string& dir) {
  const std::string reason = incomplete_reason(dir);
  STRATA_REQUIRE(reason.empty(), "checkpoint '{}' cannot be loaded: {}", dir, reason);
  CheckpointReader r;
  r.dir_ = dir;
  const std::string path = join(dir, kManifest), marker_path = join(dir, kMarker);
  r.manifest_ = parse_manifest(parse_json(read_text(path), path), path);
  // The three step counts must agree: a manifest moved to another step directory, or a marker of
  // another save, would resume at one step with another step's weights.
  const int steps = r.manifest_.run.completed_steps;
  const CompletionMarker marker = parse_completion_marker(parse_json(read_text(marker_path), marker_path), marker_path);
  STRATA_REQUIRE(marker.completed_steps == steps, "{}: 'completed_steps' is {}, but {} says {}", marker_path,
                 marker.completed_steps, path, steps);
  const int named = step_of_directory_name(dir);
  STRATA_REQUIRE(named < 0 || named == steps, "{}: 'completed_steps' is {}, but the directory is named for step {}",
                 path, steps, named);
  for (const ManifestFile& f : r.manifest_.files) {
    const std::string file = join(dir, f.name);
    std::error_code ec;
    STRATA_REQUIRE(fs::is_regular_file(file, ec), "checkpoint '{}': {} is missing", dir, file);
    const auto size = fs::file_size(file, ec);
    STRATA_REQUIRE(size == f.bytes, "checkpoint '{}': {} is {} bytes, the manifest says {} (truncated or damaged)", dir,
                   file, size, f.bytes);
    require_shard_header(file, f);
  }
  const ModelLayout layout(r.manifest_.model);
  for (const UnitLayout& u : layout.units()) r.numel_.push_back(u.numel);
  const std::size_t units = r.numel_.size();
  r.chunks_by_state_unit_.assign(kCheckpointStateCount * units, {});
  for (std::size_t fi = 0; fi < r.manifest_.files.size(); ++fi) {
    const auto& chunks = r.manifest_.files[fi].chunks;
    for (std::size_t ci = 0; ci < chunks.size(); ++ci) {
      const ManifestChunk& c = chunks[ci];
      r.chunks_by_state_unit_[static_cast<std::size_t>(c.state) * units + static_cast<std::size_t>(c.unit)].push_back(
          {c.begin, c.end, fi, ci});
    }
  }
  for (auto& list : r.chunks_by_state_unit_) {
    std::sort(list.begin(), list.end(), [](const ChunkRef& a, const ChunkRef& b) { return a.begin < b.begin; });
  }
  return r;
}

CheckpointReader CheckpointReader::open(const std::string& dir, const ModelLayout& layout) {
  CheckpointReader r = open_any(dir);
  const GptConfig& a = r.model();
  const GptConfig& b = layout.config();
  const auto shape = [](const GptConfig& c) {
    return fmt::format("L{} C{} heads {} vocab {} context {} vocab_pad {}", c.n_layer, c.n_embd, c.n_head, c.vocab_size,
                       c.context_length, c.vocab_pad_multiple);
  };
  STRATA_REQUIRE(shape(a) == shape(b), "checkpoint '{}' was written for model '{}' ({}), not this run's '{}' ({})", dir,
                 a.name, shape(a), b.name, shape(b));
  return r;
}

void CheckpointReader::read(const std::string& state, int unit, std::size_t begin, std::size_t end, float* out) const {
  std::fill(out, out + (end - begin), 0.0f);
  const int s = checkpoint_state_index(state);
  STRATA_CHECK(s >= 0 && unit >= 0 && static_cast<std::size_t>(unit) < numel_.size(), "{} of unit {} of a {}-unit checkpoint",
               state, unit, numel_.size());
  const std::size_t numel = numel_[static_cast<std::size_t>(unit)];
  end = std::min(end, numel);
  if (begin >= end) return;
  // The chunks tile [0, numel) in order (checked at open): walk those that meet [begin, end).
  const auto& list = chunks_by_state_unit_[static_cast<std::size_t>(s) * numel_.size() + static_cast<std::size_t>(unit)];
  auto it = std::upper_bound(list.begin(), list.end(), begin,
                             [](std::size_t at, const ChunkRef& c) { return at < c.begin; });
  STRATA_CHECK(it != list.begin(), "no chunk holds element {} of {} of unit {}", begin, state, unit);
  for (--it; it != list.end() && it->begin < end; ++it) {
    const ManifestFile& file = manifest_.files[it->file];
    const std::vector<float> values = read_chunk(dir_, file, file.chunks[it->chunk]);
    const std::size_t lo = std::max<std::size_t>(it->begin, begin), hi = std::min<std::size_t>(it->end, end);
    std::memcpy(out + (lo - begin), values.data() + (lo - it->begin), (hi - lo) * sizeof(float));
  }
}

std::vector<std::string> CheckpointReader::verify_all() const {
  std::vector<std::string> lines;
  for (const ManifestFile& file : manifest_.files) {
    try {
      for (const ManifestChunk& chunk : file.chunks) read_chunk(dir_, file, chunk);
      lines.push_back(fmt::format("{}: {} chunks, {} bytes, checksums ok", file.name, file.chunks.size(), file.bytes));
    } catch (const Error& e) {
      lines.push_back(fmt::format("{}: BAD: {}", file.name, e.what()));
    }
  }
  return lines;
}

std::string CheckpointReader::damage() const {
  for (const ManifestFile& file : manifest_.files) {
    try {
      for (const ManifestChunk& chunk : file.chunks) read_chunk(dir_, file, chunk);
    } catch (const Error& e) {
      return e.what();
    }
  }
  return "";
}

}  // namespace strata
