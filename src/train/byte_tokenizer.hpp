// Byte-level tokenizer: every byte of UTF-8 text is one token in [0, 256).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class ByteTokenizer {
 public:
  static constexpr int kVocabSize = 256;

  // Throws strata::Error naming `source` and the byte offset of the first invalid UTF-8 sequence.
  static std::vector<std::int32_t> encode(std::string_view text, const std::string& source);
  // Tokens outside [0, 256) become '?'.
  static std::string decode(std::span<const std::int32_t> tokens);
};

// Offset of the first byte that is not part of a valid UTF-8 sequence, or npos when all is valid.
std::size_t first_invalid_utf8(std::string_view text);

}  // namespace strata
