// UTF-8 validation (RFC 3629: no overlongs, no surrogates, at most U+10FFFF) and byte tokens.
#include "train/byte_tokenizer.hpp"

#include "core/error.hpp"

namespace strata {

std::size_t first_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return i;
    if (i + static_cast<std::size_t>(len) > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (int k = 2; k < len; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    }
    i += static_cast<std::size_t>(len);
  }
  return std::string_view::npos;
}

std::vector<std::int32_t> ByteTokenizer::encode(std::string_view text, const std::string& source) {
  const std::size_t bad = first_invalid_utf8(text);
  STRATA_REQUIRE(bad == std::string_view::npos, "{}: not valid UTF-8 text (invalid byte 0x{:02X} at offset {})",
                 source, static_cast<unsigned>(static_cast<unsigned char>(text[bad])), bad);
  std::vector<std::int32_t> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::decode(std::span<const std::int32_t> tokens) {
  std::string out;
  out.reserve(tokens.size());
  for (auto t : tokens) out.push_back(t >= 0 && t < kVocabSize ? static_cast<char>(t) : '?');
  return out;
}

}  // namespace strata
