// Damaged checkpoints (one process): truncation, a flipped byte in a shard, a flipped byte in the
// manifest, a missing shard file, a missing completion marker, a NaN written into a moment, and
// scalars out of range are each refused with a sentence naming the file; --resume auto then falls
// back to the previous complete checkpoint. Saving never replaces a file that is not a checkpoint
// directory. The exported safetensors file holds every tensor under its GPT-2 name and gives
// PyTorch the same logits as Strata.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "core/exit_codes.hpp"
#include "core/tensor_archive.hpp"
#include "engine/local_engine.hpp"
#include "train/checkpoint.hpp"
#include "train/checkpoint_export.hpp"
#include "train/engine_setup.hpp"
#include "train/trainer.hpp"
#include "support/checkpoint_fixtures.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using namespace testing_support;

struct Damage {
  const char* name;
  std::function<void(const fs::path& step)> apply;
  const char* sentence;  // what the refusal must say
};

TEST(CheckpointFiles, DamageIsRefusedNamingTheFileAndAutoFallsBack) {
  const std::vector<Damage> damages = {
      {"truncated shard",
       [](const fs::path& d) { fs::resize_file(d / "rank-00000.bin", fs::file_size(d / "rank-00000.bin") - 100); },
       "rank-00000.bin is"},
      {"flipped byte in a shard", [](const fs::path& d) { flip_byte(d / "rank-00000.bin", 5000); },
       "fails its checksum (the file is corrupt)"},
      {"flipped byte in the manifest", [](const fs::path& d) { flip_byte(d / "manifest.json", 200); },
       "manifest.json does not match the checksum in"},
      {"missing shard", [](const fs::path& d) { fs::remove(d / "rank-00000.bin"); }, "rank-00000.bin is missing"},
      {"missing completion marker", [](const fs::path& d) { fs::remove(d / "COMPLETE"); },
       "COMPLETE is missing: the save did not complete"},
  };
  for (const Damage& damage : damages) {
    const fs::path root = two_checkpoints(std::string("damage-") + std::to_string(&damage - damages.data()));
    const fs::path step4 = root / "step-00000004";
    damage.apply(step4);
    // Named explicitly: refused, naming the file.
    TrainConfig c = tiny(6);
    c.resume = step4.string();
    const std::string why = error_of([&] { run(c); });
    EXPECT_NE(why.find(damage.sentence), std::string::npos) << damage.name << ": " << why;
    EXPECT_NE(why.find("step-00000004"), std::string::npos) << damage.name << ": " << why;
    // --resume auto: falls back to step 2.
    EXPECT_EQ(first_step_resuming_auto(root, 6), 3) << damage.name << ": auto did not fall back to step 2";
  }
}

TEST(CheckpointFiles, ANonFiniteMomentIsRefusedOnLoadEvenWithValidChecksums) {
  const fs::path root = two_checkpoints("nan-load");
  const fs::path step = root / "step-00000004";
  nlohmann::json manifest = nlohmann::json::parse(read_all(step / "manifest.json"));
  for (auto& chunk : manifest["files"][0]["chunks"]) {
    if (chunk["state"] != "adam_v" || chunk["unit"] != 1) continue;
    std::string shard = read_all(step / "rank-00000.bin");
    const float nan = std::nanf("");
    const auto offset = chunk["offset"].get<std::size_t>() + 7 * sizeof(float);
    std::memcpy(shard.data() + offset, &nan, sizeof nan);
    std::ofstream(step / "rank-00000.bin", std::ios::binary | std::ios::trunc) << shard;
    const std::size_t bytes = (chunk["end"].get<std::size_t>() - chunk["begin"].get<std::size_t>()) * sizeof(float);
    const std::string piece = shard.substr(chunk["offset"].get<std::size_t>(), bytes);
    chunk["xxh3"] = checkpoint_digest(piece.data(), piece.size());
  }
  resign(step, manifest);
  LocalEngine engine(GptConfig::preset("tiny"), 4, 32, 1);
  const std::string why =
      error_of([&] { engine.load_state(CheckpointReader::open(step.string(), engine.layout())); });
  EXPECT_NE(why.find("adam_v of unit 1 (elements"), std::string::npos) << why;
  EXPECT_NE(why.find("holds a non-finite value (nan) at element 7"), std::string::npos) << why;
}

TEST(CheckpointFiles, ANonFiniteLossStopsTheRunAndLeavesTheCheckpointsAsTheyWere) {
  const fs::path root = two_checkpoints("nan-run");
  const std::string before = read_all(root / "step-00000004" / "rank-00000.bin");
  TrainConfig c = tiny(20);
  c.save = root.string();
  c.resume = "auto";
  c.lr = 1e30;  // diverges within a few steps
  c.warmup_steps = 0;
  c.grad_clip = 0.0;
  int code = 0;
  try {
    run(c);
  } catch (const AgreedExit& e) {
    code = e.code;
  }
  EXPECT_EQ(code, kExitFailure) << "the run did not stop on the non-finite loss";
  EXPECT_EQ(read_all(root / "step-00000004" / "rank-00000.bin"), before);
  for (const std::string& d : step_directories(root.string())) {
    EXPECT_EQ(incomplete_reason(d), "") << d << ": a partial checkpoint was left";
    for (const auto& e : fs::directory_iterator(d)) {
      if (e.path().extension() != ".bin") continue;
      const std::string bytes = read_all(e.path());
      for (std::size_t i = 24; i + 4 <= bytes.size(); i += 4) {
        float v = 0;
        std::memcpy(&v, bytes.data() + i, 4);
        ASSERT_TRUE(std::isfinite(v)) << e.path() << " holds a non-finite value";
      }
    }
  }
}

TEST(CheckpointFiles, ScalarsOutOfRangeAreRefused) {
  for (const auto& [value, sentence] :
       {std::pair{nlohmann::json(-5), "'completed_steps' is -5, outside"},
        std::pair{nlohmann::json(3.5), "'completed_steps' must be an integer (got 3.5)"},
        std::pair{nlohmann::json("NaN"), "'completed_steps' must be an integer (got \"NaN\")"}}) {
    const fs::path root = two_checkpoints("scalar");
    const fs::path step = root / "step-00000004";
    nlohmann::json manifest = nlohmann::json::parse(read_all(step / "manifest.json"));
    manifest["completed_steps"] = value;
    resign(step, manifest);
    const std::string why = error_of([&] { CheckpointReader::open_any(step.string()); });
    EXPECT_NE(why.find(sentence), std::string::npos) << why;
  }
}

TEST(CheckpointFiles, SavingNeverReplacesAFileThatIsNotACheckpointDirectory) {
  const fs::path dir = scratch("not-a-dir");
  fs::create_directories(dir);
  const fs::path data = dir / "data.txt";
  std::ofstream(data) << "precious training text\n";
  TrainConfig c = tiny(2);
  c.save = data.string();
  EXPECT_NE(error_of([&] { run(c); }).find("is not a directory: checkpoints are directories"), std::string::npos);
  std::ifstream in(data);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "precious training text");
  c.save = "/dev/null";
  EXPECT_NE(error_of([&] { run(c); }).find("'/dev/null' is not a directory"), std::string::npos);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

// The case: a good step 2 and a newest step 4 with one flipped bit (its marker intact).
// --resume auto --keep-last 1 falls back to step 2; the saves after it must never leave the root
// without a checkpoint that loads, never delete the damaged one, and never write over it.
TEST(CheckpointFiles, KeepLastAfterAFallbackKeepsALoadableCheckpoint) {
  const fs::path root = two_checkpoints("keep-last-fallback");
  flip_byte(root / "step-00000004" / "rank-00000.bin", 5000);
  const std::string damaged = read_all(root / "step-00000004" / "rank-00000.bin");
  TrainConfig c = tiny(6);
  c.save = root.string();
  c.resume = "auto";
  c.keep_last = 1;
  c.checkpoint_every = 1;
  const TrainSummary s = run(c);
  ASSERT_FALSE(s.steps.empty());
  EXPECT_EQ(s.steps.front().step, 3) << "auto did not fall back to step 2";
  // The newest (step 6) and the resumed-from (step 2) stay; steps 3 and 5 went, one at a time,
  // once a newer one was complete.
  std::vector<std::string> left;
  for (const std::string& d : step_directories(root.string())) left.push_back(fs::path(d).filename().string());
  EXPECT_EQ(left, (std::vector<std::string>{"step-00000006", "step-00000002"}));
  // The damaged step 4 was in the way of the new step 4: moved aside, byte for byte.
  ASSERT_TRUE(fs::exists(root / "step-00000004.superseded" / "rank-00000.bin"));
  EXPECT_EQ(read_all(root / "step-00000004.superseded" / "rank-00000.bin"), damaged);
  // And the next requeue resumes from the newest.
  TrainConfig next = tiny(8);
  next.save = root.string();
  next.resume = "auto";
  next.keep_last = 1;
  const TrainSummary t = run(next);
  ASSERT_FALSE(t.steps.empty());
  EXPECT_EQ(t.steps.front().step, 7);
}

// Retention counts only checkpoints that read back: a damaged newer one is neither counted (it
// would push out the good ones) nor deleted; older ones beyond the newest that verify may go.
TEST(CheckpointFiles, KeepLastNeverCountsNorDeletesADamagedCheckpoint) {
  const fs::path root = two_checkpoints("keep-last-damaged");
  flip_byte(root / "step-00000004" / "rank-00000.bin", 7000);
  TrainConfig c = tiny(3);
  c.save = root.string();
  c.resume = (root / "step-00000002").string();
  c.keep_last = 1;
  run(c);
  std::vector<std::string> left;
  for (const std::string& d : step_directories(root.string())) left.push_back(fs::path(d).filename().string());
  // step 4 damaged, step 3 the newest, step 2 the resumed-from: none may go.
  EXPECT_EQ(left, (std::vector<std::string>{"step-00000004", "step-00000003", "step-00000002"}));
}

TEST(CheckpointFiles, ResumeAutoOverOnlyIncompleteDirectoriesStartsAtStepZeroAndDeletesNothing) {
  const fs::path root = two_checkpoints("only-incomplete");
  fs::remove(root / "step-00000002" / "COMPLETE");
  fs::remove(root / "step-00000004" / "COMPLETE");
  const std::string shard = read_all(root / "step-00000004" / "rank-00000.bin");
  EXPECT_EQ(first_step_resuming_auto(root, 3), 1) << "a job killed during its first save must restart from step 0";
  EXPECT_EQ(read_all(root / "step-00000004" / "rank-00000.bin"), shard);
  EXPECT_TRUE(fs::exists(root / "step-00000002" / "manifest.json"));
  // A root named explicitly (not auto) with nothing complete is refused, naming what is missing.
  TrainConfig explicit_root = tiny(3);
  fs::remove_all(root / "step-00000003");
  explicit_root.resume = root.string();
  const std::string why = error_of([&] { run(explicit_root); });
  EXPECT_NE(why.find(fmt::format("--resume '{}' holds no complete checkpoint: step-00000004, step-00000002 did not "
                                 "complete (no COMPLETE marker)", root.string())),
            std::string::npos)
      << why;
}

TEST(CheckpointFiles, AnExistingSaveDirectoryIsProbedForWritingBeforeAnyStep) {
  const std::string why = error_of([&] { check_checkpoint_root("/proc/self"); });
  EXPECT_NE(why.find("--save '/proc/self': cannot write in the directory '/proc/self'"), std::string::npos) << why;
}

TEST(CheckpointFiles, TheExportedSafetensorsFileGivesPyTorchTheSameLogits) {
  const fs::path root = two_checkpoints("export");
  const fs::path out = root / "model.safetensors";
  const CheckpointReader reader = CheckpointReader::open_any(resolve_checkpoint_path(root.string()));
  EXPECT_EQ(reader.run().completed_steps, 4);
  export_safetensors(reader, out.string());
  // Strata's logits for a batch, from the same checkpoint.
  const int batch = 2, seq = 16;
  LocalEngine engine(reader.model(), batch, seq, 1);
  engine.load_state(reader);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(batch * seq));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::int32_t>((i * 37 + 11) % 256);
  engine.gpt().forward(engine.params(), tokens, tokens);
  const int vocab = reader.model().vocab_size, padded = reader.model().padded_vocab_size();
  std::vector<float> logits;
  for (int r = 0; r < batch * seq; ++r) {
    const float* row = engine.gpt().logits() + static_cast<std::size_t>(r) * padded;
    logits.insert(logits.end(), row, row + vocab);
  }
  TensorArchive archive;
  archive.put<std::int32_t>("tokens", {batch, seq}, tokens);
  archive.put<float>("logits", {batch * seq, vocab}, logits);
  const fs::path strata_logits = root / "strata-logits.archive";
  archive.save(strata_logits.string());
  const std::string command = std::string("cd '") + STRATA_SOURCE_DIR + "/tests/reference' && /usr/bin/python3 " +
                              "safetensors_check.py '" + out.string() + "' '" + strata_logits.string() + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  // The file is refused as an output when it is not a regular file.
  EXPECT_NE(error_of([&] { export_safetensors(reader, root.string()); }).find("is a directory; an output is a regular file, and this one is not replaced"),
            std::string::npos);
}

}  // namespace
}  // namespace strata
