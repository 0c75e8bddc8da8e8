// --init-from: safetensors files made by PyTorch (tests/reference/pretrained_files.py) in Hugging
// Face's layouts and nanoGPT's give PyTorch's logits once loaded; files that are not a GPT-2 model
// of the run's shape, or not safetensors at all, are refused with a sentence naming what is wrong.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/tensor_archive.hpp"
#include "engine/local_engine.hpp"
#include "support/error_text.hpp"
#include "support/reference_case.hpp"
#include "train/pretrained_weights.hpp"
#include "train/train_config.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::max_relative_error;

const std::string kDir = std::string(STRATA_REFERENCE_DIR) + "/pretrained";

// The shape the file says, as `strata train --init-from` resolves it: the settings checked, the
// shape taken from the file, the resolved settings checked again.
GptConfig resolved_shape(const std::string& path, const std::string& model = "", int n_head = 0, int seq_len = 0) {
  TrainConfig c;
  c.init_from = path;
  c.model = model;
  c.shape.n_head = n_head;
  c.seq_len = seq_len;
  c.validate();
  c.resolve_defaults();
  c.validate();
  return c.model_config();
}

std::vector<float> logits_from(const std::string& path, const std::vector<std::int32_t>& tokens) {
  const GptConfig model = resolved_shape(path);
  const int batch = 2, seq = static_cast<int>(tokens.size()) / batch;
  LocalEngine engine(model, batch, seq, 1);
  engine.load_state(PretrainedWeights(path, model));
  engine.evaluate(tokens, tokens);
  std::vector<float> logits;
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    const float* row = engine.gpt().logits() + r * static_cast<std::size_t>(model.padded_vocab_size());
    logits.insert(logits.end(), row, row + model.vocab_size);
  }
  return logits;
}

TEST(PretrainedWeights, EveryLayoutGivesPyTorchsLogits) {
  const TensorArchive ref = TensorArchive::load(kDir + "/logits.archive");
  const std::vector<std::int32_t> tokens = ref.ints("tokens");
  struct Case {
    const char* file;
    const char* logits;
  };
  for (const Case& c : {Case{"hf/model.safetensors", "logits"}, Case{"nanogpt.safetensors", "logits"},
                        Case{"hf-lm/model.safetensors", "logits_bf16"}}) {
    const std::string path = kDir + "/" + c.file;
    const GptConfig shape = resolved_shape(path);
    EXPECT_EQ(shape.n_layer, 2) << c.file;
    EXPECT_EQ(shape.n_embd, 48) << c.file;
    EXPECT_EQ(shape.n_head, 6) << c.file << ": from the metadata or config.json, width 48 is no GPT-2's";
    EXPECT_EQ(shape.vocab_size, 203) << c.file;
    EXPECT_EQ(shape.context_length, 32) << c.file;
    EXPECT_LE(max_relative_error(logits_from(path, tokens), ref.floats(c.logits)), 1e-4) << c.file;
  }
  // The padded vocabulary rows (203 -> 256) stay zero.
  const GptConfig model = resolved_shape(kDir + "/hf/model.safetensors");
  const UnitBuffers w = read_whole_weights(PretrainedWeights(kDir + "/hf/model.safetensors", model), model);
  const float* wte = w.unit(ModelLayout::kEmbeddingUnit);
  for (std::size_t i = 203 * 48; i < 256 * 48; ++i) ASSERT_EQ(wte[i], 0.0f) << i;
}

TEST(PretrainedWeights, FilesThatAreNotTheModelAreRefusedNamingTheTensor) {
  const auto refusal = [](const std::string& file) {
    return error_of([&] {
      const std::string path = kDir + "/" + file;
      const GptConfig model = resolved_shape(path);
      const PretrainedWeights weights(path, model);
      read_whole_weights(weights, model);
    });
  };
  EXPECT_NE(refusal("untied.safetensors").find("tensor 'lm_head.weight' differs from the token table"),
            std::string::npos);
  EXPECT_NE(refusal("wrong-shape.safetensors")
                .find("tensor 'transformer.h.1.mlp.c_fc.weight' has shape (192, 47); this model's nanoGPT layout "
                      "needs (192, 48)"),
            std::string::npos);
  EXPECT_NE(refusal("extra.safetensors").find("tensor 'transformer.h.0.mlp.c_gate.weight' has no place"),
            std::string::npos);
  // Not safetensors: text, and a file cut short.
  const fs::path dir = fs::path(::testing::TempDir()) / "strata_pretrained_refusals";
  fs::create_directories(dir);
  std::ofstream(dir / "notes.txt") << "these are not weights, but a long enough text file\n";
  EXPECT_NE(error_of([&] { SafetensorsFile::open((dir / "notes.txt").string()); }).find("is not a safetensors file"),
            std::string::npos);
  const fs::path cut = dir / "cut.safetensors";
  fs::copy_file(kDir + "/nanogpt.safetensors", cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(cut) - 100);
  EXPECT_NE(error_of([&] { SafetensorsFile::open(cut.string()); }).find("outside the file's"), std::string::npos);
  // A run whose flags say another shape.
  const std::string nano = kDir + "/nanogpt.safetensors";
  EXPECT_NE(error_of([&] { resolved_shape(nano, "tiny"); })
                .find("--model tiny is L2 C64 heads 4 vocab 256 context 64, but --init-from"),
            std::string::npos);
  EXPECT_NE(error_of([&] { resolved_shape(nano, "", 4); }).find("--n-head 4 disagrees with --init-from"),
            std::string::npos);
  // Settings that fit the file's shape but not tiny's (the default without --init-from) are not
  // checked against tiny: the file's 6 heads of width 8, a sequence of its whole context; one
  // beyond it is refused against the file's context.
  EXPECT_EQ(resolved_shape(nano, "", 6, 32).n_head, 6);
  EXPECT_NE(error_of([&] { resolved_shape(nano, "", 0, 33); }).find("seq-len 33 must be between 1 and the model's "
                                                                     "context length 32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { PretrainedWeights(nano, GptConfig::preset("tiny")); }).find("holds a model of L2 C48"),
            std::string::npos);
}

// Where neither the file nor a config.json says n_head, GPT-2's own widths give it, and any other
// width asks for --n-head.
// Ranks compare fingerprints before loading: a copy gives the same one, one changed byte of the
// data or the header another.
TEST(PretrainedWeights, FingerprintsTellCopiesFromDifferentFiles) {
  const fs::path dir = fs::path(::testing::TempDir()) / "strata_pretrained_fingerprints";
  fs::create_directories(dir);
  const std::string original = kDir + "/nanogpt.safetensors";
  const std::uint64_t print = SafetensorsFile::open(original).fingerprint();
  fs::copy_file(original, dir / "copy.safetensors", fs::copy_options::overwrite_existing);
  EXPECT_EQ(SafetensorsFile::open((dir / "copy.safetensors").string()).fingerprint(), print);
  const auto changed = [&](std::uint64_t offset_from_end) {
    const fs::path path = dir / "changed.safetensors";
    fs::copy_file(original, path, fs::copy_options::overwrite_existing);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(fs::file_size(path) - offset_from_end));
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x01);
    f.seekp(static_cast<std::streamoff>(fs::file_size(path) - offset_from_end));
    f.write(&byte, 1);
    f.close();
    return SafetensorsFile::open(path.string()).fingerprint();
  };
  EXPECT_NE(changed(4), print);                                     // the last weight's lowest byte
  // One in the middle (this file is under 2 MiB, so all of its data is hashed).
  EXPECT_NE(changed(fs::file_size(original) / 2), print);
  fs::remove_all(dir);
}

TEST(PretrainedWeights, HeadsComeFromGpt2sSizesOrMustBeGiven) {
  const auto write_model = [](const std::string& path, int c) {
    GptConfig m;
    m.n_layer = 1, m.n_embd = c, m.n_head = 1, m.vocab_size = 16, m.context_length = 8;
    std::vector<ExportTensor> tensors;
    const ModelLayout layout(m);
    for (const UnitLayout& u : layout.units()) {
      for (const TensorSpec& t : u.tensors) {
        ExportTensor e;
        e.name = "transformer." + (t.name == "wte" || t.name == "wpe" ? t.name + ".weight" : t.name);
        if (t.name[0] == 'h') e.name = "transformer.h." + t.name.substr(1);
        e.shape = t.shape;
        if (t.name == "wte") e.shape[0] = m.vocab_size;
        std::size_t n = 1;
        for (const std::int64_t d : e.shape) n *= static_cast<std::size_t>(d);
        e.values.assign(n, 0.01f);
        tensors.push_back(std::move(e));
      }
    }
    write_safetensors(path, tensors, {{"format", "pt"}});
  };
  const fs::path dir = fs::path(::testing::TempDir()) / "strata_pretrained_heads";
  fs::create_directories(dir);
  write_model((dir / "w768.safetensors").string(), 768);
  const PretrainedShape s = pretrained_shape(SafetensorsFile::open((dir / "w768.safetensors").string()));
  EXPECT_EQ(s.model.n_head, 12);
  EXPECT_EQ(s.heads_from, "GPT-2's size for width 768");
  write_model((dir / "w40.safetensors").string(), 40);
  const SafetensorsFile w40 = SafetensorsFile::open((dir / "w40.safetensors").string());
  EXPECT_NE(error_of([&] { pretrained_shape(w40); }).find("give --n-head"), std::string::npos);
  EXPECT_EQ(pretrained_shape(w40, 5).model.n_head, 5);
}

}  // namespace
}  // namespace strata
