// Token file readers with strict validation.
#include "train/token_file.hpp"

#include <cstring>
#include <fstream>

#include "core/error.hpp"
#include "train/byte_tokenizer.hpp"

namespace strata {

DataFormat parse_data_format(std::string_view name) {
  if (name == "auto") return DataFormat::kAuto;
  if (name == "llmc") return DataFormat::kLlmc;
  if (name == "nanogpt") return DataFormat::kNanoGpt;
  if (name == "text") return DataFormat::kText;
  fail("unknown data format '{}'; expected auto, llmc, nanogpt or text", name);
}

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_REQUIRE(in.good(), "{}: cannot open the data file", path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  STRATA_REQUIRE(!in.bad(), "{}: read error", path);
  return bytes;
}

bool has_suffix(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

template <class Word>
std::vector<std::int32_t> widen(const char* data, std::size_t count) {
  std::vector<std::int32_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) {
    Word w;
    std::memcpy(&w, data + i * sizeof(Word), sizeof(Word));
    tokens[i] = static_cast<std::int32_t>(w);
  }
  return tokens;
}

TokenData read_llmc(const std::string& path, const std::string& bytes) {
  const std::size_t header_bytes = kLlmcHeaderInts * sizeof(std::int32_t);
  STRATA_REQUIRE(bytes.size() >= header_bytes,
                 "{}: truncated: an llm.c token file starts with a {}-byte header but the file has {} bytes", path,
                 header_bytes, bytes.size());
  std::int32_t header[kLlmcHeaderInts];
  std::memcpy(header, bytes.data(), header_bytes);
  const std::int32_t magic = header[0];
  STRATA_REQUIRE(magic == kLlmcMagicGpt2 || magic == kLlmcMagicLlama3,
                 "{}: wrong magic number {} (an llm.c token file starts with {} for uint16 tokens or {} for uint32)",
                 path, magic, kLlmcMagicGpt2, kLlmcMagicLlama3);
  STRATA_REQUIRE(header[1] == kLlmcVersion, "{}: llm.c token file version {} is not supported (expected {})", path,
                 header[1], kLlmcVersion);
  STRATA_REQUIRE(header[2] >= 0, "{}: the header declares a negative token count ({})", path, header[2]);
  const std::size_t count = static_cast<std::size_t>(header[2]);
  const std::size_t word = magic == kLlmcMagicGpt2 ? 2 : 4;
  const std::size_t payload = bytes.size() - header_bytes;
  STRATA_REQUIRE(payload >= count * word,
                 "{}: truncated: the header declares {} tokens ({} bytes) but only {} bytes follow it", path, count,
                 count * word, payload);
  STRATA_REQUIRE(payload == count * word, "{}: {} unexpected bytes after the {} tokens the header declares", path,
                 payload - count * word, count);
  TokenData data;
  data.source = path;
  data.tokens = word == 2 ? widen<std::uint16_t>(bytes.data() + header_bytes, count)
                          : widen<std::uint32_t>(bytes.data() + header_bytes, count);
  data.description = word == 2 ? "llm.c v1, uint16 tokens" : "llm.c v1, uint32 tokens";
  return data;
}

TokenData read_nanogpt(const std::string& path, const std::string& bytes) {
  STRATA_REQUIRE(bytes.size() % 2 == 0, "{}: truncated: {} bytes is not a whole number of uint16 tokens", path,
                 bytes.size());
  TokenData data;
  data.source = path;
  data.tokens = widen<std::uint16_t>(bytes.data(), bytes.size() / 2);
  data.description = "nanoGPT raw uint16 tokens";
  return data;
}

TokenData read_text(const std::string& path, const std::string& bytes, int vocab_size) {
  STRATA_REQUIRE(vocab_size >= ByteTokenizer::kVocabSize,
                 "{}: byte-level text needs a vocabulary of at least {} tokens; the model has {}", path,
                 ByteTokenizer::kVocabSize, vocab_size);
  TokenData data;
  data.source = path;
  data.tokens = ByteTokenizer::encode(bytes, path);
  data.description = "UTF-8 text, byte tokens";
  return data;
}

}  // namespace

void check_token_range(const TokenData& data, int vocab_size) {
  for (std::size_t i = 0; i < data.tokens.size(); ++i) {
    const std::int32_t t = data.tokens[i];
    STRATA_REQUIRE(t >= 0 && t < vocab_size,
                   "{}: token {} at position {} is outside the model's vocabulary of {} (is the file for another "
                   "tokenizer or model?)",
                   data.source, t, i, vocab_size);
  }
}

// Strict detection: a .txt name is text, an exact llm.c magic is llm.c, a .bin without one is
// nanoGPT's raw uint16; anything else is refused, naming the format it most looks like, rather
// than read as tokens it is not.
static DataFormat detect_format(const std::string& path, const std::string& bytes) {
  if (has_suffix(path, ".txt")) return DataFormat::kText;
  std::int32_t header[3] = {0, 0, 0};
  if (bytes.size() >= sizeof header) std::memcpy(header, bytes.data(), sizeof header);
  if (header[0] == kLlmcMagicGpt2 || header[0] == kLlmcMagicLlama3) return DataFormat::kLlmc;
  const std::size_t header_bytes = kLlmcHeaderInts * sizeof(std::int32_t);
  if (bytes.size() >= header_bytes && header[1] == 1 && header[2] > 0) {
    const auto count = static_cast<std::size_t>(header[2]);
    if (bytes.size() == header_bytes + 2 * count || bytes.size() == header_bytes + 4 * count) {
      fail("{}: looks like an llm.c token file (version 1, {} tokens, matching the size) with a damaged magic number "
           "{} (expected {} or {}); refusing to guess: give --data-format llmc after repairing it, or --data-format "
           "nanogpt to read it as raw uint16 tokens",
           path, count, header[0], kLlmcMagicGpt2, kLlmcMagicLlama3);
    }
  }
  const std::size_t sample = std::min<std::size_t>(bytes.size(), 1 << 16);
  std::size_t texty = 0;
  bool nul = false;
  for (std::size_t i = 0; i < sample; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    nul |= c == 0;
    texty += (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\r' || c == '\t' || c >= 0x80;
  }
  if (!nul && texty == sample) {
    fail("{}: looks like text (no zero bytes, all printable), not tokens; name it .txt or give --data-format text "
         "(or --data-format nanogpt to read its bytes as uint16 tokens)",
         path);
  }
  if (has_suffix(path, ".bin")) return DataFormat::kNanoGpt;
  fail("{}: not an llm.c token file (no magic number), not named .txt or .bin; give --data-format llmc, nanogpt or "
       "text",
       path);
}

TokenData load_token_file(const std::string& path, DataFormat format, int vocab_size) {
  const std::string bytes = read_all(path);
  STRATA_REQUIRE(!bytes.empty(), "{}: the data file is empty", path);
  const bool detected = format == DataFormat::kAuto;
  if (detected) format = detect_format(path, bytes);
  TokenData data;
  switch (format) {
    case DataFormat::kLlmc: data = read_llmc(path, bytes); break;
    case DataFormat::kNanoGpt: data = read_nanogpt(path, bytes); break;
    case DataFormat::kText: data = read_text(path, bytes, vocab_size); break;
    case DataFormat::kAuto: break;
  }
  STRATA_REQUIRE(!data.tokens.empty(), "{}: the data file holds no tokens", path);
  check_token_range(data, vocab_size);
  if (detected) data.description += " (detected; --data-format forces one)";
  return data;
}

}  // namespace strata
