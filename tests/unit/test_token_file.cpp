// Data files: each format loads, and each kind of bad file stops with a sentence naming the file
// and the problem.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "support/error_text.hpp"
#include "train/batch_loader.hpp"
#include "train/byte_tokenizer.hpp"
#include "train/token_file.hpp"

namespace strata {
namespace {

class TokenFiles : public ::testing::Test {
 protected:
  std::string path(const std::string& name) {
    const auto dir = std::filesystem::path(::testing::TempDir()) / "strata_token_files";
    std::filesystem::create_directories(dir);
    return (dir / name).string();
  }
  template <class Word>
  std::string write_llmc(const std::string& name, std::int32_t magic, std::int32_t version, std::int32_t declared,
                         const std::vector<Word>& tokens, std::size_t header_ints = 256) {
    std::vector<std::int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = declared;
    const std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header_ints * 4));
    out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * sizeof(Word)));
    return p;
  }
  std::string write_bytes(const std::string& name, const std::string& bytes) {
    const std::string p = path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

using testing::error_of;

TEST_F(TokenFiles, LlmcUint16LoadsExactly) {
  const std::vector<std::uint16_t> tokens = {1, 2, 50256, 7};
  const auto p = write_llmc("gpt2.bin", kLlmcMagicGpt2, 1, 4, tokens);
  const TokenData data = load_token_file(p, DataFormat::kAuto, 50257);
  EXPECT_EQ(data.tokens, (std::vector<std::int32_t>{1, 2, 50256, 7}));
  EXPECT_NE(data.description.find("llm.c"), std::string::npos);
}

TEST_F(TokenFiles, LlmcUint32LoadsExactly) {
  const std::vector<std::uint32_t> tokens = {5, 128000, 3};
  const auto p = write_llmc("llama3.bin", kLlmcMagicLlama3, 1, 3, tokens);
  EXPECT_EQ(load_token_file(p, DataFormat::kLlmc, 128256).tokens, (std::vector<std::int32_t>{5, 128000, 3}));
}

TEST_F(TokenFiles, WrongMagicIsRefused) {
  const auto p = write_llmc("magic.bin", 12345, 1, 2, std::vector<std::uint16_t>{1, 2});
  const std::string e = error_of([&] { load_token_file(p, DataFormat::kLlmc, 100); });
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("wrong magic number 12345"), std::string::npos) << e;
}

TEST_F(TokenFiles, UnsupportedVersionIsRefused) {
  const auto p = write_llmc("version.bin", kLlmcMagicGpt2, 7, 2, std::vector<std::uint16_t>{1, 2});
  const std::string e = error_of([&] { load_token_file(p, DataFormat::kAuto, 100); });
  EXPECT_NE(e.find("version 7 is not supported"), std::string::npos) << e;
}

TEST_F(TokenFiles, TruncatedHeaderIsRefused) {
  const auto p = write_llmc("short_header.bin", kLlmcMagicGpt2, 1, 2, std::vector<std::uint16_t>{}, 100);
  const std::string e = error_of([&] { load_token_file(p, DataFormat::kLlmc, 100); });
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_NE(e.find("header"), std::string::npos) << e;
}

TEST_F(TokenFiles, TruncatedTokensAreRefused) {
  const auto p = write_llmc("short_body.bin", kLlmcMagicGpt2, 1, 10, std::vector<std::uint16_t>{1, 2, 3});
  const std::string e = error_of([&] { load_token_file(p, DataFormat::kAuto, 100); });
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("truncated: the header declares 10 tokens (20 bytes) but only 6 bytes follow"), std::string::npos)
      << e;
}

TEST_F(TokenFiles, TrailingBytesAreRefused) {
  const auto p = write_llmc("long_body.bin", kLlmcMagicGpt2, 1, 2, std::vector<std::uint16_t>{1, 2, 3});
  EXPECT_NE(error_of([&] { load_token_file(p, DataFormat::kAuto, 100); }).find("2 unexpected bytes"), std::string::npos);
}

TEST_F(TokenFiles, TokenOutsideVocabularyIsRefusedWithItsPosition) {
  const auto p = write_llmc("vocab.bin", kLlmcMagicGpt2, 1, 4, std::vector<std::uint16_t>{1, 2, 300, 4});
  const std::string e = error_of([&] { load_token_file(p, DataFormat::kAuto, 256); });
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("token 300 at position 2 is outside the model's vocabulary of 256"), std::string::npos) << e;
}

TEST_F(TokenFiles, NanoGptRawLoadsAndRejectsOddLengthAndRange) {
  const std::vector<std::uint16_t> tokens = {9, 8, 7};
  const std::string raw(reinterpret_cast<const char*>(tokens.data()), 6);
  EXPECT_EQ(load_token_file(write_bytes("train.bin", raw), DataFormat::kAuto, 10).tokens,
            (std::vector<std::int32_t>{9, 8, 7}));
  const std::string odd = error_of([&] { load_token_file(write_bytes("odd.bin", raw + "x"), DataFormat::kNanoGpt, 10); });
  EXPECT_NE(odd.find("truncated: 7 bytes is not a whole number of uint16 tokens"), std::string::npos) << odd;
  const std::string range = error_of([&] { load_token_file(write_bytes("range.bin", raw), DataFormat::kNanoGpt, 8); });
  EXPECT_NE(range.find("token 9 at position 0"), std::string::npos) << range;
}

TEST_F(TokenFiles, TextIsByteTokenizedAndInvalidUtf8IsRefused) {
  EXPECT_EQ(load_token_file(write_bytes("ok.txt", "h\xC3\xA9"), DataFormat::kAuto, 256).tokens,
            (std::vector<std::int32_t>{'h', 0xC3, 0xA9}));
  const std::string e = error_of([&] { load_token_file(write_bytes("bad.txt", "abc\xC3("), DataFormat::kAuto, 256); });
  EXPECT_NE(e.find("not valid UTF-8 text (invalid byte 0xC3 at offset 3)"), std::string::npos) << e;
  const std::string small = error_of([&] { load_token_file(write_bytes("small.txt", "abc"), DataFormat::kText, 100); });
  EXPECT_NE(small.find("vocabulary of at least 256"), std::string::npos) << small;
}

// Detection is strict: the two files that used to train on garbage are refused, naming the format
// they look like and the flag that forces one; the chosen format is said.
TEST_F(TokenFiles, DetectionRefusesWhatOnlyLooksLikeTokens) {
  const std::vector<std::uint32_t> tokens = {5, 128000, 3, 99};
  const auto damaged = write_llmc("llama3-damaged.bin", kLlmcMagicLlama3 + 1, 1, 4, tokens);
  const std::string a = error_of([&] { load_token_file(damaged, DataFormat::kAuto, 128256); });
  EXPECT_NE(a.find("looks like an llm.c token file (version 1, 4 tokens, matching the size) with a damaged magic"),
            std::string::npos) << a;
  EXPECT_NE(a.find("--data-format"), std::string::npos) << a;
  const auto text = write_bytes("notes.md", "# Notes\nUTF-8 text, caf\xC3\xA9, that is not a token file.\n");
  const std::string b = error_of([&] { load_token_file(text, DataFormat::kAuto, 50257); });
  EXPECT_NE(b.find("looks like text"), std::string::npos) << b;
  EXPECT_NE(b.find("--data-format text"), std::string::npos) << b;
  // Forced, both read: the flag is the way out.
  EXPECT_EQ(load_token_file(text, DataFormat::kText, 256).tokens.size(), 53u);
  // A name that says nothing and no magic: refused rather than guessed.
  const std::string c = error_of([&] { load_token_file(write_bytes("tokens.dat", std::string("\x01\x00\x02\x00", 4)), DataFormat::kAuto, 10); });
  EXPECT_NE(c.find("not named .txt or .bin; give --data-format"), std::string::npos) << c;
  const auto llmc = write_llmc("gpt2-ok.bin", kLlmcMagicGpt2, 1, 1, std::vector<std::uint16_t>{7});
  EXPECT_NE(load_token_file(llmc, DataFormat::kAuto, 50257).description.find("(detected; --data-format forces one)"),
            std::string::npos);
}

TEST_F(TokenFiles, EmptyAndMissingFilesAreRefused) {
  EXPECT_NE(error_of([&] { load_token_file(write_bytes("empty.bin", ""), DataFormat::kAuto, 10); }).find("empty"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load_token_file(path("missing.bin"), DataFormat::kAuto, 10); }).find("cannot open"),
            std::string::npos);
}

TEST_F(TokenFiles, TooShortForOneBatchIsRefused) {
  std::vector<std::int32_t> tokens(32);
  const std::string e = error_of([&] { BatchLoader loader(tokens, "tiny.bin", 4, 8); });
  EXPECT_NE(e.find("tiny.bin: 32 tokens are too few for one batch of 4 x 8 (needs at least 33)"), std::string::npos)
      << e;
  EXPECT_NO_THROW(BatchLoader(std::vector<std::int32_t>(33), "ok", 4, 8));
}

TEST(Utf8, ValidatorFollowsRfc3629) {
  EXPECT_EQ(first_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(first_invalid_utf8("\xE2\x82\xAC \xF0\x9F\x98\x80"), std::string_view::npos);  // euro sign, emoji
  EXPECT_EQ(first_invalid_utf8("\xC0\xAF"), 0u);           // overlong
  EXPECT_EQ(first_invalid_utf8("a\xED\xA0\x80"), 1u);      // surrogate
  EXPECT_EQ(first_invalid_utf8("ab\xF4\x90\x80\x80"), 2u); // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("\xE2\x82"), 0u);           // cut short
}

TEST(BatchLoaderTest, TargetsAreInputsShiftedByOneAndBatchesWrap) {
  std::vector<std::int32_t> tokens(100);
  for (int i = 0; i < 100; ++i) tokens[i] = i;
  BatchLoader loader(tokens, "seq", 3, 10);  // 30 tokens per batch: (100 - 1) / 30 = 3 batches
  EXPECT_EQ(loader.batches_per_epoch(), 3u);
  std::vector<std::int32_t> in(30), tgt(30);
  loader.fill(1, 0, 3, in, tgt);
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(in[i], 30 + i);
    EXPECT_EQ(tgt[i], 31 + i);
  }
  std::vector<std::int32_t> again(30), again_t(30);
  loader.fill(4, 0, 3, again, again_t);  // batch 4 wraps to batch 1
  EXPECT_EQ(again, in);
}

TEST(BatchLoaderTest, RowSlicesOfABatchMakeTheWholeBatch) {
  std::vector<std::int32_t> tokens(500);
  for (int i = 0; i < 500; ++i) tokens[i] = (i * 7) % 13;
  BatchLoader loader(tokens, "rows", 4, 16);
  std::vector<std::int32_t> whole(64), whole_t(64);
  loader.fill(2, 0, 4, whole, whole_t);
  for (int r = 0; r < 4; ++r) {
    std::vector<std::int32_t> part(16), part_t(16);
    loader.fill(2, r, 1, part, part_t);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + r * 16));
    EXPECT_TRUE(std::equal(part_t.begin(), part_t.end(), whole_t.begin() + r * 16));
  }
}

TEST(BatchLoaderTest, SplitHoldsOutTheTail) {
  const TrainValSplit s = split_train_val(1000, 0.1);
  EXPECT_EQ(s.train, (Range{0, 900}));
  EXPECT_EQ(s.val, (Range{900, 1000}));
  EXPECT_TRUE(split_train_val(1000, 0.0).val.empty());
}

}  // namespace
}  // namespace strata
