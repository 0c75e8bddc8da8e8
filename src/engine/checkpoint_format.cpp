// The checkpoint directory format: shard files, indices, manifest, marker; the checked reader.
#include "engine/checkpoint_format.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace strata {

namespace {

constexpr char kShardMagic[8] = {'S', 'T', 'R', 'T', 'S', 'H', 'R', 'D'};
constexpr const char* kManifest = "manifest.json";
constexpr const char* kMarker = "COMPLETE";
constexpr std::size_t kHeaderBytes = 24;  // magic, version (u32), rank (u32), payload bytes (u64)

std::string index_name(int rank) { return fmt::format("rank-{:05d}.json", rank); }
std::string join(const std::string& dir, const std::string& name) { return (std::filesystem::path(dir) / name).string(); }
std::string hex(std::uint64_t h) { return fmt::format("{:016x}", h); }

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

// A non-negative integer field of a JSON object, refused when missing, fractional, negative or
// out of range (a checkpoint's numbers are checked like flags).
std::int64_t integer_field(const nlohmann::json& j, const char* key, const std::string& where, std::int64_t max) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_number_integer()) {
    fail("{}: '{}' is missing or not an integer", where, key);
  }
  const std::int64_t v = j.at(key).get<std::int64_t>();
  STRATA_REQUIRE(v >= 0 && v <= max, "{}: '{}' is {}, outside 0 .. {}", where, key, v, max);
  return v;
}

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_string()) fail("{}: '{}' is missing or not a string", where, key);
  return j.at(key).get<std::string>();
}

void check_finite(const float* data, std::size_t n, const std::string& what) {
  for (std::size_t i = 0; i < n; ++i) {
    STRATA_REQUIRE(std::isfinite(data[i]), "{} holds a non-finite value ({}) at element {}", what, data[i], i);
  }
}

nlohmann::json model_json(const GptConfig& c) {
  return {{"name", c.name},           {"n_layer", c.n_layer},   {"n_embd", c.n_embd},
          {"n_head", c.n_head},       {"vocab_size", c.vocab_size}, {"context_length", c.context_length},
          {"vocab_pad_multiple", c.vocab_pad_multiple}};
}

GptConfig model_from_json(const nlohmann::json& j, const std::string& where) {
  GptConfig c;
  c.name = string_field(j, "name", where);
  constexpr std::int64_t kMax = 1 << 30;
  c.n_layer = static_cast<int>(integer_field(j, "n_layer", where, kMax));
  c.n_embd = static_cast<int>(integer_field(j, "n_embd", where, kMax));
  c.n_head = static_cast<int>(integer_field(j, "n_head", where, kMax));
  c.vocab_size = static_cast<int>(integer_field(j, "vocab_size", where, kMax));
  c.context_length = static_cast<int>(integer_field(j, "context_length", where, kMax));
  c.vocab_pad_multiple = static_cast<int>(integer_field(j, "vocab_pad_multiple", where, kMax));
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
  return c;
}

bool same_shape(const GptConfig& a, const GptConfig& b) {
  return a.n_layer == b.n_layer && a.n_embd == b.n_embd && a.n_head == b.n_head && a.vocab_size == b.vocab_size &&
         a.context_length == b.context_length && a.vocab_pad_multiple == b.vocab_pad_multiple;
}

}  // namespace

std::string step_directory_name(int completed_steps) { return fmt::format("step-{:08d}", completed_steps); }
std::string rank_file_name(int rank) { return fmt::format("rank-{:05d}.bin", rank); }

void write_rank_shard(const std::string& dir, int rank, const std::vector<CheckpointPiece>& pieces) {
  nlohmann::json chunks = nlohmann::json::array();
  std::uint64_t payload = 0;
  for (const CheckpointPiece& p : pieces) {
    check_finite(p.data, p.end - p.begin, fmt::format("refusing to checkpoint: {} of unit {}", p.state, p.unit));
    payload += (p.end - p.begin) * sizeof(float);
  }
  const std::string path = join(dir, rank_file_name(rank));
  std::uint64_t file_bytes = 0;
  if (!pieces.empty()) {
    AtomicFile file(path);
    const std::uint32_t version = kCheckpointVersion, r = static_cast<std::uint32_t>(rank);
    file.write(kShardMagic, sizeof kShardMagic);
    file.write(&version, sizeof version);
    file.write(&r, sizeof r);
    file.write(&payload, sizeof payload);
    for (const CheckpointPiece& p : pieces) {
      const std::size_t bytes = (p.end - p.begin) * sizeof(float);
      chunks.push_back({{"state", p.state}, {"unit", p.unit}, {"begin", p.begin}, {"end", p.end},
                        {"offset", file.written()}, {"xxh3", hex(XXH3_64bits(p.data, bytes))}});
      file.write(p.data, bytes);
    }
    file_bytes = file.written();
    file.commit();
  }
  const nlohmann::json index = {{"rank", rank}, {"file", pieces.empty() ? "" : rank_file_name(rank)},
                                {"bytes", file_bytes}, {"chunks", chunks}};
  write_file_atomically(join(dir, index_name(rank)), index.dump());
}

void write_manifest(const std::string& dir, const ModelLayout& layout, const CheckpointRun& run, int writers) {
  nlohmann::json files = nlohmann::json::array();
  // Every unit's every state must be covered exactly once, [0, numel) without gap or overlap.
  std::map<std::pair<std::string, int>, std::vector<std::pair<std::size_t, std::size_t>>> coverage;
  for (int r = 0; r < writers; ++r) {
    const std::string path = join(dir, index_name(r));
    const nlohmann::json index = parse_json(read_text(path), path);
    if (index.at("file").get<std::string>().empty()) continue;
    for (const auto& c : index.at("chunks")) {
      coverage[{c.at("state").get<std::string>(), c.at("unit").get<int>()}].push_back(
          {c.at("begin").get<std::size_t>(), c.at("end").get<std::size_t>()});
    }
    files.push_back(index);
  }
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const char* state : kCheckpointStates) {
      auto ranges = coverage[{state, static_cast<int>(u)}];
      std::sort(ranges.begin(), ranges.end());
      std::size_t at = 0;
      for (const auto& [b, e] : ranges) {
        STRATA_CHECK(b == at && e > b, "the checkpoint's shards of {} of unit {} overlap or leave a gap at {}", state,
                     layout.unit(u).name, at);
        at = e;
      }
      STRATA_CHECK(at == layout.unit(u).numel, "the checkpoint's shards of {} of unit {} end at {} of {}", state,
                   layout.unit(u).name, at, layout.unit(u).numel);
    }
  }
  nlohmann::json tensors = nlohmann::json::array();
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const TensorSpec& t : layout.unit(u).tensors) {
      tensors.push_back({{"name", t.name}, {"unit", u}, {"unit_name", layout.unit(u).name}, {"begin", t.range.begin},
                         {"end", t.range.end}, {"shape", t.shape}, {"dtype", "f32"}});
    }
  }
  const nlohmann::json manifest = {
      {"format", "strata-checkpoint"},
      {"version", kCheckpointVersion},
      {"completed_steps", run.completed_steps},
      {"model", model_json(layout.config())},
      {"run",
       {{"world", run.world}, {"engine", run.engine}, {"plan", run.plan}, {"topology", run.topology},
        {"weight_dtype", run.weight_dtype}, {"batch_size", run.batch_size}, {"seq_len", run.seq_len},
        {"grad_accum", run.grad_accum}}},
      // The loader and the learning-rate schedule are functions of the step: resuming after
      // completed_steps restores both; the per-rank rows follow from the world size.
      {"training",
       {{"lr_schedule_step", run.completed_steps},
        {"next_global_batch", static_cast<std::int64_t>(run.completed_steps) * run.grad_accum},
        {"rows_per_rank", run.batch_size}}},
      {"states", {"master", "adam_m", "adam_v"}},
      {"tensors", tensors},
      {"files", files}};
  const std::string text = manifest.dump(1);
  write_file_atomically(join(dir, kManifest), text);
  const nlohmann::json marker = {{"format", "strata-checkpoint-complete"}, {"version", kCheckpointVersion},
                                 {"completed_steps", run.completed_steps},
                                 {"manifest_xxh3", hex(XXH3_64bits(text.data(), text.size()))}};
  write_file_atomically(join(dir, kMarker), marker.dump());
  for (int r = 0; r < writers; ++r) std::filesystem::remove(join(dir, index_name(r)));
  fsync_directory(dir);
}

std::string incomplete_reason(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return fmt::format("'{}' is not a checkpoint directory", dir);
  const std::string marker_path = join(dir, kMarker), manifest_path = join(dir, kManifest);
  if (!std::filesystem::is_regular_file(marker_path, ec)) {
    return fmt::format("{} is missing: the save did not complete", marker_path);
  }
  if (!std::filesystem::is_regular_file(manifest_path, ec)) return fmt::format("{} is missing", manifest_path);
  try {
    const nlohmann::json marker = parse_json(read_text(marker_path), marker_path);
    if (string_field(marker, "format", marker_path) != "strata-checkpoint-complete") {
      return fmt::format("{} is not a Strata completion marker", marker_path);
    }
    const std::string text = read_text(manifest_path);
    if (string_field(marker, "manifest_xxh3", marker_path) != hex(XXH3_64bits(text.data(), text.size()))) {
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
  const std::string path = join(dir, kManifest);
  r.manifest_ = parse_json(read_text(path), path);
  STRATA_REQUIRE(string_field(r.manifest_, "format", path) == "strata-checkpoint", "{}: not a Strata checkpoint manifest",
                 path);
  const std::int64_t version = integer_field(r.manifest_, "version", path, 1 << 20);
  STRATA_REQUIRE(version == kCheckpointVersion, "{}: format version {} (this build reads version {})", path, version,
                 kCheckpointVersion);
  r.run_.completed_steps = static_cast<int>(integer_field(r.manifest_, "completed_steps", path, 1 << 30));
  r.model_ = model_from_json(r.manifest_.at("model"), path + " (model)");
  for (const UnitLayout& u : ModelLayout(r.model_).units()) r.numel_.push_back(u.numel);
  const nlohmann::json& run = r.manifest_.at("run");
  r.run_.world = static_cast<int>(integer_field(run, "world", path + " (run)", 1 << 24));
  r.run_.engine = string_field(run, "engine", path + " (run)");
  r.run_.plan = string_field(run, "plan", path + " (run)");
  r.run_.topology = string_field(run, "topology", path + " (run)");
  r.run_.weight_dtype = string_field(run, "weight_dtype", path + " (run)");
  r.run_.batch_size = static_cast<int>(integer_field(run, "batch_size", path + " (run)", 1 << 30));
  r.run_.seq_len = static_cast<int>(integer_field(run, "seq_len", path + " (run)", 1 << 30));
  r.run_.grad_accum = static_cast<int>(integer_field(run, "grad_accum", path + " (run)", 1 << 30));
  for (const auto& f : r.manifest_.at("files")) {
    const std::string file = join(dir, string_field(f, "file", path + " (files)"));
    std::error_code ec;
    STRATA_REQUIRE(std::filesystem::is_regular_file(file, ec), "checkpoint '{}': {} is missing", dir, file);
    const auto size = std::filesystem::file_size(file, ec);
    const auto expected = static_cast<std::uintmax_t>(integer_field(f, "bytes", path + " (files)", INT64_MAX));
    STRATA_REQUIRE(size == expected, "checkpoint '{}': {} is {} bytes, the manifest says {} (truncated or damaged)", dir,
                   file, size, expected);
  }
  return r;
}

CheckpointReader CheckpointReader::open(const std::string& dir, const ModelLayout& layout) {
  CheckpointReader r = open_any(dir);
  STRATA_REQUIRE(same_shape(r.model_, layout.config()),
                 "checkpoint '{}' was written for model '{}' (L{} C{} heads {} vocab {} context {}), not this run's '{}' "
                 "(L{} C{} heads {} vocab {} context {})",
                 dir, r.model_.name, r.model_.n_layer, r.model_.n_embd, r.model_.n_head, r.model_.vocab_size,
                 r.model_.context_length, layout.config().name, layout.config().n_layer, layout.config().n_embd,
                 layout.config().n_head, layout.config().vocab_size, layout.config().context_length);
  return r;
}

namespace {

// One chunk read and checked: its magic-checked file, its checksum, finite values.
std::vector<float> read_chunk(const std::string& dir, const nlohmann::json& file, const nlohmann::json& chunk) {
  const std::string path = join(dir, file.at("file").get<std::string>());
  std::ifstream in(path, std::ios::binary);
  STRATA_REQUIRE(in.good(), "{}: cannot open for reading", path);
  char magic[sizeof kShardMagic] = {};
  std::uint32_t version = 0;
  in.read(magic, sizeof magic);
  in.read(reinterpret_cast<char*>(&version), sizeof version);
  STRATA_REQUIRE(in.good() && std::memcmp(magic, kShardMagic, sizeof magic) == 0,
                 "{}: not a Strata checkpoint shard (bad magic number)", path);
  STRATA_REQUIRE(version == kCheckpointVersion, "{}: shard format version {} (this build reads {})", path, version,
                 kCheckpointVersion);
  const auto begin = chunk.at("begin").get<std::size_t>(), end = chunk.at("end").get<std::size_t>();
  const auto offset = chunk.at("offset").get<std::size_t>();
  STRATA_REQUIRE(end > begin && offset >= kHeaderBytes, "{}: a chunk of the manifest has an impossible range", path);
  std::vector<float> values(end - begin);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  STRATA_REQUIRE(in.good(), "{}: the chunk at byte {} is cut short (the file is truncated)", path, offset);
  const std::string what = fmt::format("{}: {} of unit {} (elements {} .. {})", path, chunk.at("state").get<std::string>(),
                                       chunk.at("unit").get<int>(), begin, end);
  STRATA_REQUIRE(hex(XXH3_64bits(values.data(), values.size() * sizeof(float))) == chunk.at("xxh3").get<std::string>(),
                 "{} fails its checksum (the file is corrupt)", what);
  check_finite(values.data(), values.size(), what);
  return values;
}

}  // namespace

void CheckpointReader::read(const std::string& state, int unit, std::size_t begin, std::size_t end, float* out) const {
  std::fill(out, out + (end - begin), 0.0f);
  STRATA_CHECK(unit >= 0 && static_cast<std::size_t>(unit) < numel_.size(), "unit {} of a {}-unit checkpoint", unit,
               numel_.size());
  const std::size_t wanted = begin < numel_[static_cast<std::size_t>(unit)] ? std::min(end, numel_[static_cast<std::size_t>(unit)]) - begin : 0;
  std::size_t covered = 0;
  for (const auto& file : manifest_.at("files")) {
    for (const auto& chunk : file.at("chunks")) {
      if (chunk.at("state") != state || chunk.at("unit") != unit) continue;
      const auto b = chunk.at("begin").get<std::size_t>(), e = chunk.at("end").get<std::size_t>();
      const std::size_t lo = std::max(b, begin), hi = std::min(e, end);
      if (lo >= hi) continue;
      const std::vector<float> values = read_chunk(dir_, file, chunk);
      std::memcpy(out + (lo - begin), values.data() + (lo - b), (hi - lo) * sizeof(float));
      covered += hi - lo;
    }
  }
  STRATA_REQUIRE(covered == wanted, "checkpoint '{}': the manifest's chunks hold {} of the {} elements of {} of unit {} "
                 "asked for", dir_, covered, wanted, state, unit);
}

std::vector<std::string> CheckpointReader::verify_all() const {
  std::vector<std::string> lines;
  for (const auto& file : manifest_.at("files")) {
    const std::string name = file.at("file").get<std::string>();
    try {
      for (const auto& chunk : file.at("chunks")) read_chunk(dir_, file, chunk);
      lines.push_back(fmt::format("{}: {} chunks, {} bytes, checksums ok", name, file.at("chunks").size(),
                                  file.at("bytes").get<std::uint64_t>()));
    } catch (const Error& e) {
      lines.push_back(fmt::format("{}: BAD: {}", name, e.what()));
    }
  }
  return lines;
}

}  // namespace strata
