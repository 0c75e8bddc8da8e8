// The manifest's typed form, its JSON, and the strict parser.
#include "engine/checkpoint_manifest.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "core/error.hpp"

namespace strata {

namespace {

// A JSON value with the file it came from and its path inside it ("files[1].chunks[3].begin"),
// so every refusal names both.
class Field {
 public:
  Field(const nlohmann::json& j, const std::string& file, std::string where)
      : j_(j), file_(file), where_(std::move(where)) {}

  Field at(const char* key) const {
    const std::string name = where_.empty() ? key : where_ + "." + key;
    if (!j_.is_object()) fail("{}: {} must be a JSON object", file_, where_.empty() ? "the top level" : "'" + where_ + "'");
    const auto it = j_.find(key);
    if (it == j_.end()) fail("{}: '{}' is missing", file_, name);
    return Field(*it, file_, name);
  }
  Field at(std::size_t i) const { return Field(j_.at(i), file_, fmt::format("{}[{}]", where_, i)); }
  std::size_t array_size() const {
    if (!j_.is_array()) refuse("must be an array");
    return j_.size();
  }
  std::int64_t integer(std::int64_t lo, std::int64_t hi) const {
    std::int64_t v = 0;
    if (j_.is_number_unsigned()) {
      const auto u = j_.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(hi)) refuse("is {}, outside {} .. {}", u, lo, hi);
      v = static_cast<std::int64_t>(u);
    } else if (j_.is_number_integer()) {
      v = j_.get<std::int64_t>();
    } else {
      refuse("must be an integer (got {})", j_.dump());
    }
    if (v < lo || v > hi) refuse("is {}, outside {} .. {}", v, lo, hi);
    return v;
  }
  int small_integer(std::int64_t lo = 0, std::int64_t hi = 1 << 30) const { return static_cast<int>(integer(lo, hi)); }
  std::uint64_t count() const { return static_cast<std::uint64_t>(integer(0, std::numeric_limits<std::int64_t>::max())); }
  std::string string() const {
    if (!j_.is_string()) refuse("must be a string (got {})", j_.dump());
    return j_.get<std::string>();
  }
  const nlohmann::json& json() const { return j_; }
  const std::string& where() const { return where_; }

  template <class... Args>
  [[noreturn]] void refuse(fmt::format_string<Args...> format, Args&&... args) const {
    fail("{}: '{}' {}", file_, where_, fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  const nlohmann::json& j_;
  const std::string& file_;
  std::string where_;
};

nlohmann::json model_json(const GptConfig& c) {
  return {{"name", c.name},           {"n_layer", c.n_layer},       {"n_embd", c.n_embd},
          {"n_head", c.n_head},       {"vocab_size", c.vocab_size}, {"context_length", c.context_length},
          {"vocab_pad_multiple", c.vocab_pad_multiple}};
}

GptConfig parse_model(const Field& f, const std::string& path) {
  GptConfig c;
  c.name = f.at("name").string();
  c.n_layer = f.at("n_layer").small_integer(1, 1 << 20);
  c.n_embd = f.at("n_embd").small_integer(1, 1 << 20);
  c.n_head = f.at("n_head").small_integer(1, 1 << 20);
  c.vocab_size = f.at("vocab_size").small_integer(2, 1 << 30);
  c.context_length = f.at("context_length").small_integer(1, 1 << 24);
  c.vocab_pad_multiple = f.at("vocab_pad_multiple").small_integer(1, 1 << 20);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: 'model' {}", path, e.what());
  }
  return c;
}

nlohmann::json tensors_json(const ModelLayout& layout) {
  nlohmann::json tensors = nlohmann::json::array();
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const TensorSpec& t : layout.unit(u).tensors) {
      tensors.push_back({{"name", t.name}, {"unit", u}, {"unit_name", layout.unit(u).name}, {"begin", t.range.begin},
                         {"end", t.range.end}, {"shape", t.shape}, {"dtype", "f32"}});
    }
  }
  return tensors;
}

// The manifest's tensor table must be the model's own: a table written for another layout would
// put every tensor's values at another tensor's place.
void require_model_tensors(const Field& tensors, const ModelLayout& layout) {
  const nlohmann::json expected = tensors_json(layout);
  if (tensors.array_size() != expected.size()) {
    tensors.refuse("has {} entries; model '{}' has {} tensors", tensors.array_size(), layout.config().name,
                   expected.size());
  }
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const Field t = tensors.at(i);
    for (const auto& [key, value] : expected[i].items()) {
      const Field got = t.at(key.c_str());
      if (got.json() != value) got.refuse("is {}; in model '{}' it is {}", got.json().dump(), layout.config().name, value.dump());
    }
    if (t.json().size() != expected[i].size()) t.refuse("has keys the format does not define");
  }
}

bool is_hex_digest(const std::string& s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

int checkpoint_state_index(const std::string& state) {
  for (int i = 0; i < kCheckpointStateCount; ++i) {
    if (state == kCheckpointStates[i]) return i;
  }
  return -1;
}

std::string checkpoint_digest(const void* data, std::size_t bytes) {
  return fmt::format("{:016x}", XXH3_64bits(data, bytes));
}

nlohmann::json manifest_file_json(const ManifestFile& f) {
  nlohmann::json chunks = nlohmann::json::array();
  for (const ManifestChunk& c : f.chunks) {
    chunks.push_back({{"state", kCheckpointStates[c.state]}, {"unit", c.unit}, {"begin", c.begin}, {"end", c.end},
                      {"offset", c.offset}, {"xxh3", c.xxh3}});
  }
  return {{"rank", f.rank}, {"file", f.name}, {"bytes", f.bytes}, {"chunks", chunks}};
}

nlohmann::json manifest_json(const ModelLayout& layout, const CheckpointRun& run, const std::vector<ManifestFile>& files) {
  nlohmann::json file_list = nlohmann::json::array();
  for (const ManifestFile& f : files) file_list.push_back(manifest_file_json(f));
  return {{"format", "strata-checkpoint"},
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
          {"tensors", tensors_json(layout)},
          {"files", file_list}};
}

nlohmann::json completion_marker_json(const CompletionMarker& marker) {
  return {{"format", "strata-checkpoint-complete"},
          {"version", kCheckpointVersion},
          {"completed_steps", marker.completed_steps},
          {"manifest_xxh3", marker.manifest_xxh3}};
}

ManifestFile parse_manifest_file(const nlohmann::json& j, const std::string& path, const std::string& where) {
  const Field f(j, path, where);
  ManifestFile file;
  file.rank = f.at("rank").small_integer(0, 1 << 24);
  file.name = f.at("file").string();
  file.bytes = f.at("bytes").count();
  const Field chunks = f.at("chunks");
  // Chunks follow the header back to back, in the order written: anything else is not our file.
  std::uint64_t at = kShardHeaderBytes;
  for (std::size_t i = 0; i < chunks.array_size(); ++i) {
    const Field c = chunks.at(i);
    ManifestChunk chunk;
    const std::string state = c.at("state").string();
    chunk.state = checkpoint_state_index(state);
    if (chunk.state < 0) c.at("state").refuse("is '{}', not master, adam_m or adam_v", state);
    chunk.unit = c.at("unit").small_integer();
    chunk.begin = c.at("begin").count();
    chunk.end = c.at("end").count();
    if (chunk.end <= chunk.begin) c.at("end").refuse("is {}, not past begin {}", chunk.end, chunk.begin);
    chunk.offset = c.at("offset").count();
    if (chunk.offset != at) {
      c.at("offset").refuse("is {}; the chunk must start at byte {}, where the one before it ends", chunk.offset, at);
    }
    if ((chunk.end - chunk.begin) > (std::numeric_limits<std::uint64_t>::max() - at) / sizeof(float)) {
      c.at("end").refuse("is {}, too far past begin {}", chunk.end, chunk.begin);
    }
    at += (chunk.end - chunk.begin) * sizeof(float);
    chunk.xxh3 = c.at("xxh3").string();
    if (!is_hex_digest(chunk.xxh3)) c.at("xxh3").refuse("is '{}', not 16 hexadecimal digits", chunk.xxh3);
    file.chunks.push_back(std::move(chunk));
  }
  if (file.name.empty()) {
    if (!file.chunks.empty() || file.bytes != 0) f.at("file").refuse("is empty, yet the rank lists chunks or bytes");
    return file;
  }
  if (file.name != fmt::format("rank-{:05d}.bin", file.rank)) {
    f.at("file").refuse("is '{}'; rank {} writes 'rank-{:05d}.bin' in the step directory itself", file.name, file.rank,
                        file.rank);
  }
  if (file.bytes != at) f.at("bytes").refuse("is {}; the header and the chunks listed make {}", file.bytes, at);
  return file;
}

void require_exact_coverage(const ModelLayout& layout, const std::vector<ManifestFile>& files, const std::string& path) {
  struct Piece {
    std::uint64_t begin, end;
    std::string where;
  };
  std::map<std::pair<int, int>, std::vector<Piece>> pieces;
  for (std::size_t fi = 0; fi < files.size(); ++fi) {
    for (std::size_t ci = 0; ci < files[fi].chunks.size(); ++ci) {
      const ManifestChunk& c = files[fi].chunks[ci];
      const std::string where = fmt::format("files[{}].chunks[{}]", fi, ci);
      STRATA_REQUIRE(static_cast<std::size_t>(c.unit) < layout.unit_count(), "{}: '{}.unit' is {}; the model has {} units",
                     path, where, c.unit, layout.unit_count());
      const std::size_t numel = layout.unit(static_cast<std::size_t>(c.unit)).numel;
      STRATA_REQUIRE(c.end <= numel, "{}: '{}.end' is {}, past the end of unit {} ({} elements)", path, where, c.end,
                     layout.unit(static_cast<std::size_t>(c.unit)).name, numel);
      pieces[{c.state, c.unit}].push_back({c.begin, c.end, where});
    }
  }
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    const std::string& unit = layout.unit(u).name;
    for (int s = 0; s < kCheckpointStateCount; ++s) {
      std::vector<Piece>& list = pieces[{s, static_cast<int>(u)}];
      std::sort(list.begin(), list.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
      std::uint64_t at = 0;
      for (const Piece& p : list) {
        STRATA_REQUIRE(p.begin >= at, "{}: '{}.begin' is {}, inside the chunk before it, which ends at {} ({} of unit {} "
                       "overlaps)", path, p.where, p.begin, at, kCheckpointStates[s], unit);
        STRATA_REQUIRE(p.begin == at, "{}: '{}.begin' is {}; elements {} .. {} of {} of unit {} are in no chunk (a gap)",
                       path, p.where, p.begin, at, p.begin, kCheckpointStates[s], unit);
        at = p.end;
      }
      STRATA_REQUIRE(at == layout.unit(u).numel, "{}: {} of unit {} is covered up to element {} of {}", path,
                     kCheckpointStates[s], unit, at, layout.unit(u).numel);
    }
  }
}

Manifest parse_manifest(const nlohmann::json& j, const std::string& path) {
  const Field m(j, path, "");
  if (m.at("format").string() != "strata-checkpoint") m.at("format").refuse("is not \"strata-checkpoint\"");
  const std::int64_t version = m.at("version").integer(0, 1 << 20);
  STRATA_REQUIRE(version == kCheckpointVersion, "{}: format version {} (this build reads version {})", path, version,
                 kCheckpointVersion);
  Manifest out;
  out.run.completed_steps = m.at("completed_steps").small_integer();
  out.model = parse_model(m.at("model"), path);
  const Field run = m.at("run");
  out.run.world = run.at("world").small_integer(1, 1 << 24);
  out.run.engine = run.at("engine").string();
  if (out.run.engine != "single-process" && out.run.engine != "sharded") {
    run.at("engine").refuse("is '{}', not single-process or sharded", out.run.engine);
  }
  out.run.plan = run.at("plan").string();
  out.run.topology = run.at("topology").string();
  out.run.weight_dtype = run.at("weight_dtype").string();
  if (out.run.weight_dtype != "f32" && out.run.weight_dtype != "bf16") {
    run.at("weight_dtype").refuse("is '{}', not f32 or bf16", out.run.weight_dtype);
  }
  out.run.batch_size = run.at("batch_size").small_integer(1);
  out.run.seq_len = run.at("seq_len").small_integer(1);
  out.run.grad_accum = run.at("grad_accum").small_integer(1);
  const Field training = m.at("training");
  const auto expect = [&](const char* key, std::int64_t value, const char* why) {
    const std::int64_t got = training.at(key).integer(0, std::numeric_limits<std::int64_t>::max());
    if (got != value) training.at(key).refuse("is {}, but {} makes it {}", got, why, value);
  };
  expect("lr_schedule_step", out.run.completed_steps, "completed_steps");
  expect("next_global_batch", static_cast<std::int64_t>(out.run.completed_steps) * out.run.grad_accum,
         "completed_steps x run.grad_accum");
  expect("rows_per_rank", out.run.batch_size, "run.batch_size");
  const Field states = m.at("states");
  if (states.json() != nlohmann::json({"master", "adam_m", "adam_v"})) {
    states.refuse("is {}, not [\"master\", \"adam_m\", \"adam_v\"]", states.json().dump());
  }
  const ModelLayout layout(out.model);
  require_model_tensors(m.at("tensors"), layout);
  const Field files = m.at("files");
  std::set<int> ranks;
  for (std::size_t i = 0; i < files.array_size(); ++i) {
    ManifestFile f = parse_manifest_file(files.at(i).json(), path, files.at(i).where());
    if (f.name.empty()) files.at(i).at("file").refuse("is empty: a listed file must hold chunks");
    if (f.rank >= out.run.world) files.at(i).at("rank").refuse("is {}, but run.world is {}", f.rank, out.run.world);
    if (!ranks.insert(f.rank).second) files.at(i).at("rank").refuse("is {}, listed twice", f.rank);
    out.files.push_back(std::move(f));
  }
  require_exact_coverage(layout, out.files, path);
  return out;
}

CompletionMarker parse_completion_marker(const nlohmann::json& j, const std::string& path) {
  const Field m(j, path, "");
  if (m.at("format").string() != "strata-checkpoint-complete") {
    m.at("format").refuse("is not \"strata-checkpoint-complete\" (not a Strata completion marker)");
  }
  const std::int64_t version = m.at("version").integer(0, 1 << 20);
  STRATA_REQUIRE(version == kCheckpointVersion, "{}: format version {} (this build reads version {})", path, version,
                 kCheckpointVersion);
  CompletionMarker marker;
  marker.completed_steps = m.at("completed_steps").small_integer();
  marker.manifest_xxh3 = m.at("manifest_xxh3").string();
  if (!is_hex_digest(marker.manifest_xxh3)) m.at("manifest_xxh3").refuse("is not 16 hexadecimal digits");
  return marker;
}

}  // namespace strata
