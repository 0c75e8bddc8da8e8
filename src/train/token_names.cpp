// Reading and checking llm.c's tokenizer file.
#include "train/token_names.hpp"

#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.hpp"

namespace strata {

TokenNames TokenNames::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_REQUIRE(in.good(), "tokenizer '{}' cannot be read", path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr std::size_t kHeader = 256 * sizeof(std::uint32_t);
  STRATA_REQUIRE(bytes.size() >= kHeader, "tokenizer '{}' is {} bytes, shorter than its 1024-byte header", path,
                 bytes.size());
  std::uint32_t header[256];
  std::memcpy(header, bytes.data(), kHeader);
  STRATA_REQUIRE(header[0] == kMagic, "tokenizer '{}' is not an llm.c tokenizer file (magic {}, expected {})", path,
                 header[0], kMagic);
  STRATA_REQUIRE(header[1] == 1 || header[1] == 2, "tokenizer '{}' has version {}; versions 1 and 2 are read", path,
                 header[1]);
  STRATA_REQUIRE(header[2] >= 1 && header[2] <= (1u << 22), "tokenizer '{}' declares {} tokens", path, header[2]);
  TokenNames t;
  t.names_.reserve(header[2]);
  std::size_t at = kHeader;
  for (std::uint32_t i = 0; i < header[2]; ++i) {
    STRATA_REQUIRE(at < bytes.size(), "tokenizer '{}' ends after {} of its {} tokens", path, i, header[2]);
    const std::size_t length = static_cast<unsigned char>(bytes[at]);
    STRATA_REQUIRE(length >= 1 && at + 1 + length <= bytes.size(),
                   "tokenizer '{}': token {} has length {} at byte {}, which {}", path, i, length, at,
                   length == 0 ? "is empty" : "runs past the end of the file");
    t.names_.emplace_back(bytes, at + 1, length);
    at += 1 + length;
  }
  STRATA_REQUIRE(at == bytes.size(), "tokenizer '{}' has {} bytes after its {} tokens", path, bytes.size() - at,
                 header[2]);
  if (header[1] == 2) {
    STRATA_REQUIRE(header[3] < header[2], "tokenizer '{}': end-of-text id {} is outside its {} tokens", path,
                   header[3], header[2]);
    t.end_of_text_ = static_cast<int>(header[3]);
  }
  return t;
}

const std::string& TokenNames::name(std::int32_t token) const {
  STRATA_REQUIRE(token >= 0 && token < vocab_size(), "token {} is outside the tokenizer's {} tokens", token,
                 vocab_size());
  return names_[static_cast<std::size_t>(token)];
}

}  // namespace strata
