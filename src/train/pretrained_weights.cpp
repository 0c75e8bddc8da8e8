// Reading GPT-2 weights from safetensors files of either common layout into Strata's units.
#include "train/pretrained_weights.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "core/error.hpp"

namespace strata {

namespace {

namespace fs = std::filesystem;

constexpr const char* kHuggingFace = "Hugging Face layout (Conv1D weights, transposed on load)";
constexpr const char* kNanoGpt = "nanoGPT layout (Linear weights)";

// The name without the "transformer." a GPT2LMHeadModel (and nanoGPT) puts in front.
std::string canonical(const std::string& name) {
  constexpr std::string_view kPrefix = "transformer.";
  return name.rfind(kPrefix, 0) == 0 ? name.substr(kPrefix.size()) : name;
}

// Strata's "h3.attn.c_attn.weight" -> "h.3.attn.c_attn.weight"; "wte" -> "wte.weight".
std::string file_name_of(const std::string& strata_name) {
  if (strata_name == "wte" || strata_name == "wpe") return strata_name + ".weight";
  if (strata_name.size() > 1 && strata_name[0] == 'h' && std::isdigit(static_cast<unsigned char>(strata_name[1]))) {
    return "h." + strata_name.substr(1);
  }
  return strata_name;
}

bool is_conv1d_weight(const std::string& name) {
  for (const char* suffix : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const std::size_t n = std::strlen(suffix);
    if (name.size() >= n && name.compare(name.size() - n, n, suffix) == 0) return true;
  }
  return false;
}

// A buffer of Hugging Face's attention (the causal mask), not a parameter.
bool is_mask_buffer(const std::string& name) {
  return name.size() > 2 && name.rfind("h.", 0) == 0 &&
         (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"));
}

// The file's tensors by their name without the prefix; a name present both ways is refused.
std::map<std::string, const SafetensorsTensor*> by_canonical_name(const SafetensorsFile& file) {
  std::map<std::string, const SafetensorsTensor*> out;
  for (const auto& [name, t] : file.tensors()) {
    const auto [it, fresh] = out.emplace(canonical(name), &t);
    STRATA_REQUIRE(fresh, "'{}' holds both '{}' and '{}': which one is the model's is not clear", file.path(),
                   it->second->name, name);
  }
  return out;
}

int metadata_int(const SafetensorsFile& file, const std::string& key) {
  const auto it = file.metadata().find(key);
  if (it == file.metadata().end()) return 0;
  int value = 0;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), value);
  STRATA_REQUIRE(ec == std::errc() && end == it->second.data() + it->second.size() && value > 0,
                 "'{}': metadata {} is '{}', not a positive number", file.path(), key, it->second);
  return value;
}

// n_head of a Hugging Face config.json beside the file (0 when there is none or it does not say).
int heads_from_config_json(const std::string& path, std::string& where) {
  const fs::path config = fs::path(path).parent_path() / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(config, ec)) return 0;
  std::ifstream in(config);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("n_head") || !j["n_head"].is_number_integer()) return 0;
  where = fmt::format("{} (n_head)", config.string());
  return j["n_head"].get<int>();
}

int gpt2_heads(int n_embd) {
  switch (n_embd) {
    case 768: return 12;
    case 1024: return 16;
    case 1280: return 20;
    case 1600: return 25;
    default: return 0;
  }
}

const SafetensorsTensor& need(const std::map<std::string, const SafetensorsTensor*>& tensors,
                              const SafetensorsFile& file, const std::string& name, std::size_t dims) {
  const auto it = tensors.find(name);
  STRATA_REQUIRE(it != tensors.end(), "'{}' has no tensor '{}' (or 'transformer.{}'): not a GPT-2 model", file.path(),
                 name, name);
  STRATA_REQUIRE(it->second->shape.size() == dims, "'{}': tensor '{}' has shape {}, not {} dimensions", file.path(),
                 it->second->name, it->second->shape_text(), dims);
  return *it->second;
}

}  // namespace

PretrainedShape pretrained_shape(const SafetensorsFile& file, int n_head_given) {
  const auto tensors = by_canonical_name(file);
  const SafetensorsTensor& wte = need(tensors, file, "wte.weight", 2);
  const SafetensorsTensor& wpe = need(tensors, file, "wpe.weight", 2);
  for (const SafetensorsTensor* t : {&wte, &wpe}) {
    STRATA_REQUIRE(t->shape[0] <= (1 << 24) && t->shape[1] <= (1 << 24),
                   "'{}': tensor '{}' has shape {}, larger than any GPT-2 Strata builds (16M rows or columns at most)",
                   file.path(), t->name, t->shape_text());
  }
  PretrainedShape s;
  GptConfig& m = s.model;
  m.n_embd = static_cast<int>(wte.shape[1]);
  STRATA_REQUIRE(wpe.shape[1] == wte.shape[1], "'{}': tensor '{}' has shape {}, but the token table's width is {}",
                 file.path(), wpe.name, wpe.shape_text(), m.n_embd);
  m.context_length = static_cast<int>(wpe.shape[0]);
  m.vocab_size = static_cast<int>(wte.shape[0]);
  if (const int said = metadata_int(file, "vocab_size"); said > 0) {
    STRATA_REQUIRE(said <= m.vocab_size, "'{}': metadata vocab_size {} is more than the token table's {} rows",
                   file.path(), said, m.vocab_size);
    m.vocab_size = said;  // the rows past it are the writer's padding
  }
  std::set<int> blocks;
  for (const auto& [name, t] : tensors) {
    if (name.rfind("h.", 0) != 0) continue;
    int layer = -1;
    const auto [end, ec] = std::from_chars(name.data() + 2, name.data() + name.size(), layer);
    STRATA_REQUIRE(ec == std::errc() && *end == '.' && layer >= 0 && layer < 100000,
                   "'{}': tensor '{}' is not named as a GPT-2 block's", file.path(), t->name);
    blocks.insert(layer);
  }
  STRATA_REQUIRE(!blocks.empty(), "'{}' has no transformer block (no tensor 'h.0....'): not a GPT-2 model",
                 file.path());
  m.n_layer = *blocks.rbegin() + 1;
  for (int l = 0; l < m.n_layer; ++l) {
    STRATA_REQUIRE(blocks.count(l) != 0, "'{}' has blocks up to h.{} but no h.{}", file.path(), m.n_layer - 1, l);
  }
  const SafetensorsTensor& qkv = need(tensors, file, "h.0.attn.c_attn.weight", 2);
  const std::int64_t c = m.n_embd;
  if (qkv.shape[0] == c && qkv.shape[1] == 3 * c) {
    s.layout = kHuggingFace;
  } else if (qkv.shape[0] == 3 * c && qkv.shape[1] == c) {
    s.layout = kNanoGpt;
  } else {
    fail("'{}': tensor '{}' has shape {}; a GPT-2 of width {} has ({}, {}) (Hugging Face) or ({}, {}) (nanoGPT)",
         file.path(), qkv.name, qkv.shape_text(), c, c, 3 * c, 3 * c, c);
  }
  if ((m.n_head = metadata_int(file, "n_head")) > 0) {
    s.heads_from = "the file's metadata";
  } else if ((m.n_head = heads_from_config_json(file.path(), s.heads_from)) > 0) {
  } else if ((m.n_head = n_head_given) > 0) {
    s.heads_from = "--n-head";
  } else if ((m.n_head = gpt2_heads(m.n_embd)) > 0) {
    s.heads_from = fmt::format("GPT-2's size for width {}", m.n_embd);
  } else {
    fail("'{}' does not say how many attention heads its model has (no n_head in its metadata or in a config.json "
         "beside it), and width {} is none of GPT-2's: give --n-head (strata train) or write {{\"n_head\": N}} to a "
         "config.json beside it",
         file.path(), m.n_embd);
  }
  m.name = "custom";
  for (const std::string& name : GptConfig::preset_names()) {
    if (GptConfig::preset(name).same_shape(m)) {
      m.name = name;
      break;
    }
  }
  try {
    m.validate();
  } catch (const Error& e) {
    fail("'{}' holds a model Strata cannot build: {}", file.path(), e.what());
  }
  return s;
}

PretrainedWeights::PretrainedWeights(const std::string& path, const GptConfig& model)
    : file_(SafetensorsFile::open(path)), shape_(pretrained_shape(file_, model.n_head)), layout_(model) {
  const GptConfig& f = shape_.model;
  STRATA_REQUIRE(f.same_shape(model), "'{}' holds a model of {}; this run's is {}", path, f.shape_text(),
                 model.shape_text());
  const bool hugging_face = shape_.layout == kHuggingFace;
  const auto tensors = by_canonical_name(file_);
  std::set<std::string> used;
  sources_.resize(layout_.unit_count());
  for (std::size_t u = 0; u < layout_.unit_count(); ++u) {
    for (const TensorSpec& spec : layout_.unit(u).tensors) {
      const std::string name = file_name_of(spec.name);
      Source source;
      source.transposed = hugging_face && is_conv1d_weight(name);
      const SafetensorsTensor& t = need(tensors, file_, name, spec.shape.size());
      std::vector<std::int64_t> expected = spec.shape;
      if (source.transposed) std::swap(expected[0], expected[1]);
      source.real = spec.range.size();
      if (spec.name == "wte") {  // the file's rows: at least the vocabulary, perhaps the writer's padding
        expected[0] = t.shape[0];
        source.real = static_cast<std::size_t>(model.vocab_size) * static_cast<std::size_t>(model.n_embd);
        if (const auto head = tensors.find("lm_head.weight"); head != tensors.end()) {
          STRATA_REQUIRE(head->second->shape == t.shape, "'{}': tensor '{}' has shape {}, the token table {}: Strata "
                         "ties the output layer to the token table", path, head->second->name,
                         head->second->shape_text(), t.shape_text());
          source.tied = head->second;
          used.insert("lm_head.weight");
        }
      }
      STRATA_REQUIRE(t.shape == expected, "'{}': tensor '{}' has shape {}; this model's {} layout needs ({})", path,
                     t.name, t.shape_text(), hugging_face ? "Hugging Face" : "nanoGPT", fmt::join(expected, ", "));
      source.tensor = &t;
      used.insert(name);
      sources_[u].push_back(source);
    }
  }
  for (const auto& [name, t] : tensors) {
    STRATA_REQUIRE(used.count(name) != 0 || is_mask_buffer(name),
                   "'{}': tensor '{}' has no place in a GPT-2 model of {} blocks (refused rather than left out)", path,
                   t->name, model.n_layer);
  }
}

void PretrainedWeights::read_tensor(const Source& source, const TensorSpec& spec, std::size_t first,
                                    std::size_t count, float* out) const {
  // Past the file's elements (the padded vocabulary rows): zeros.
  const std::size_t real_end = std::min(first + count, source.real);
  if (real_end < first + count) {
    const std::size_t from = std::max(first, real_end);
    std::fill(out + (from - first), out + count, 0.0f);
  }
  if (first >= real_end) return;
  const std::size_t n = real_end - first;
  if (!source.transposed) {
    file_.read(*source.tensor, first, n, out);
  } else {
    // Ours is (R, K) row-major, the file's (K, R): the rows [r0, r1] we need are a column block
    // there, read as one run per stored row.
    const auto rows_total = static_cast<std::size_t>(spec.shape[0]), k_total = static_cast<std::size_t>(spec.shape[1]);
    const std::size_t r0 = first / k_total, r1 = (first + n - 1) / k_total, rows = r1 - r0 + 1;
    std::vector<float> block(k_total * rows);
    for (std::size_t k = 0; k < k_total; ++k) file_.read(*source.tensor, k * rows_total + r0, rows, &block[k * rows]);
    for (std::size_t e = first; e < real_end; ++e) out[e - first] = block[(e % k_total) * rows + e / k_total - r0];
  }
  if (source.tied != nullptr) {
    std::vector<float> head(n);
    file_.read(*source.tied, first, n, head.data());
    for (std::size_t i = 0; i < n; ++i) {
      STRATA_REQUIRE(head[i] == out[i], "'{}': tensor '{}' differs from the token table at element {} ({} vs {}): "
                     "Strata ties the output layer to the token table, so this model cannot be loaded as it is",
                     file_.path(), source.tied->name, first + i, head[i], out[i]);
    }
  }
}

void PretrainedWeights::read(const std::string& state, int unit, std::size_t begin, std::size_t end,
                             float* out) const {
  STRATA_CHECK(unit >= 0 && static_cast<std::size_t>(unit) < layout_.unit_count() && begin <= end,
               "read of unit {} [{}, {})", unit, begin, end);
  std::fill(out, out + (end - begin), 0.0f);
  if (state != "master") return;  // a fresh optimizer: the moments start at zero
  const UnitLayout& u = layout_.unit(static_cast<std::size_t>(unit));
  for (std::size_t i = 0; i < u.tensors.size(); ++i) {
    const TensorSpec& spec = u.tensors[i];
    const std::size_t lo = std::max(begin, spec.range.begin), hi = std::min(end, spec.range.end);
    if (lo >= hi) continue;
    read_tensor(sources_[static_cast<std::size_t>(unit)][i], spec, lo - spec.range.begin, hi - lo, out + (lo - begin));
  }
}

UnitBuffers read_whole_weights(const StateSource& source, const GptConfig& model) {
  const ModelLayout layout(model);
  UnitBuffers weights(layout);
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    source.read("master", static_cast<int>(u), 0, layout.unit(u).numel, weights.unit(u));
  }
  return weights;
}

}  // namespace strata
