// Loading training tokens: llm.c token files (int32 header[256], magic 20240520 with uint16 tokens
// or 20240801 with uint32 tokens, version 1), nanoGPT's raw uint16 .bin, or UTF-8 text through
// the byte tokenizer. Bad files stop with a sentence naming the file and the problem.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

enum class DataFormat { kAuto, kLlmc, kNanoGpt, kText };

DataFormat parse_data_format(std::string_view name);

struct TokenData {
  std::vector<std::int32_t> tokens;
  std::string source;       // the path, or "built-in corpus"
  std::string description;  // e.g. "llm.c v1, uint16 tokens"
};

// Reads the whole file; every token must be below vocab_size. kAuto picks text for *.txt, llm.c
// when the file starts with an llm.c magic number, and nanoGPT raw uint16 otherwise.
TokenData load_token_file(const std::string& path, DataFormat format, int vocab_size);

// Checks that every token is in [0, vocab_size).
void check_token_range(const TokenData& data, int vocab_size);

constexpr std::int32_t kLlmcMagicGpt2 = 20240520;
constexpr std::int32_t kLlmcMagicLlama3 = 20240801;
constexpr std::int32_t kLlmcVersion = 1;
constexpr std::size_t kLlmcHeaderInts = 256;

}  // namespace strata
