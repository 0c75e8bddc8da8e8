// llm.c's GPT-2 tokenizer file (gpt2_tokenizer.bin): the text of every token id, to print what a
// model with GPT-2's vocabulary generates. Format: 256 little-endian uint32 (magic 20240328,
// version 1 or 2, vocabulary size, and in version 2 the end-of-text id), then per token one
// length byte and that many bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

class TokenNames {
 public:
  static constexpr std::uint32_t kMagic = 20240328;

  // Refuses, with a sentence naming the file, a file that is not this format and version or
  // whose token table is cut short or runs on past it.
  static TokenNames load(const std::string& path);

  int vocab_size() const { return static_cast<int>(names_.size()); }
  int end_of_text() const { return end_of_text_; }  // -1 in a version-1 file
  // The token's bytes; ids outside the table are refused.
  const std::string& name(std::int32_t token) const;

 private:
  std::vector<std::string> names_;
  int end_of_text_ = -1;
};

}  // namespace strata
