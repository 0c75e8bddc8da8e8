// A table of damaged manifests and shard headers, on a checkpoint written by four ranks (each unit
// split in four chunks, one per rank): overlapping, gapped and past-the-end chunks, a file name
// leading out of the step directory, step counts that disagree, shard headers that differ from the
// manifest, fractional, negative and huge integers, missing keys, a tensor table that is not the
// model's. Each damage keeps every checksum valid (the marker is re-signed), so only the content
// checks can refuse it: each must be refused naming the file and the field, and --resume auto
// must fall back past it to the checkpoint before.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/checkpoint_format.hpp"
#include "support/checkpoint_fixtures.hpp"
#include "train/checkpoint.hpp"

namespace strata {
namespace {

namespace fs = std::filesystem;
using namespace testing_support;

// Rewrites the checkpoint `from` as one of four writers at `to`: each unit's states split in four
// contiguous ranges, rank r writing the r-th, as a four-rank zero3 run leaves them.
void write_four_writers(const fs::path& from, const fs::path& to) {
  const CheckpointReader reader = CheckpointReader::open_any(from.string());
  const ModelLayout layout(reader.model());
  fs::create_directories(to);
  std::vector<std::vector<float>> store;
  store.reserve(4 * layout.unit_count() * 3);
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<CheckpointPiece> pieces;
    for (std::size_t u = 0; u < layout.unit_count(); ++u) {
      const std::size_t n = layout.unit(u).numel, begin = n * rank / 4, end = n * (rank + 1) / 4;
      for (const char* state : kCheckpointStates) {
        store.emplace_back(end - begin);
        reader.read(state, static_cast<int>(u), begin, end, store.back().data());
        pieces.push_back({state, static_cast<int>(u), begin, end, store.back().data()});
      }
    }
    write_rank_shard(to.string(), rank, pieces);
  }
  CheckpointRun run = reader.run();
  run.world = 4;
  run.engine = "sharded";
  run.plan = "zero3";
  run.topology = "world:4";
  write_manifest(to.string(), layout, run, 4);
}

void patch_u32(const fs::path& file, std::streamoff at, std::uint64_t value, std::size_t bytes) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(at);
  f.write(reinterpret_cast<const char*>(&value), static_cast<std::streamsize>(bytes));
}

struct ManifestDamage {
  const char* name;
  // Edits the manifest and marker (re-signed afterwards), or the step's files directly.
  std::function<void(nlohmann::json& manifest, nlohmann::json& marker, const fs::path& step)> apply;
  const char* file;      // the file the refusal must name
  const char* sentence;  // what it must say (the field)
};

void shift(nlohmann::json& chunk, std::int64_t by) {
  chunk["begin"] = chunk["begin"].get<std::int64_t>() + by;
  chunk["end"] = chunk["end"].get<std::int64_t>() + by;
}

// files[r].chunks[3] is rank r's chunk of the master of unit 1 (block0): units in order, three
// states each.
const std::vector<ManifestDamage>& damages() {
  static const std::vector<ManifestDamage> list = {
      {"overlapping chunks (same length, same bytes, same checksum)",
       [](auto& m, auto&, auto&) { shift(m["files"][1]["chunks"][3], -100); }, "manifest.json",
       "'files[1].chunks[3].begin' is 12396, inside the chunk before it, which ends at 12496 (master of unit block0 overlaps)"},
      {"a gap between chunks", [](auto& m, auto&, auto&) { shift(m["files"][1]["chunks"][3], 100); }, "manifest.json",
       "'files[1].chunks[3].begin' is 12596; elements 12496 .. 12596 of master of unit block0 are in no chunk"},
      {"a chunk past the end of its unit", [](auto& m, auto&, auto&) { shift(m["files"][3]["chunks"][3], 100); },
       "manifest.json", "'files[3].chunks[3].end' is 50084, past the end of unit block0 (49984 elements)"},
      {"a file name leading out of the step directory",
       [](auto& m, auto&, auto&) { m["files"][0]["file"] = "../../elsewhere/step-00000004/rank-00000.bin"; },
       "manifest.json", "'files[0].file' is '../../elsewhere/step-00000004/rank-00000.bin'; rank 0 writes 'rank-00000.bin'"},
      {"another rank's file name", [](auto& m, auto&, auto&) { m["files"][2]["file"] = "rank-00001.bin"; },
       "manifest.json", "'files[2].file' is 'rank-00001.bin'; rank 2 writes 'rank-00002.bin'"},
      {"the manifest's step disagrees with the marker's",
       [](auto& m, auto&, auto&) {
         m["completed_steps"] = 3;
         m["training"]["lr_schedule_step"] = 3;
         m["training"]["next_global_batch"] = 3;
       },
       "COMPLETE", "'completed_steps' is 4, but"},
      {"manifest and marker disagree with the directory's name",
       [](auto& m, auto& marker, auto&) {
         m["completed_steps"] = 3;
         m["training"]["lr_schedule_step"] = 3;
         m["training"]["next_global_batch"] = 3;
         marker["completed_steps"] = 3;
       },
       "manifest.json", "'completed_steps' is 3, but the directory is named for step 4"},
      {"the training position disagrees with the step", [](auto& m, auto&, auto&) { m["training"]["lr_schedule_step"] = 2; },
       "manifest.json", "'training.lr_schedule_step' is 2, but completed_steps makes it 4"},
      {"a shard header naming another rank",
       [](auto&, auto&, const fs::path& step) { patch_u32(step / "rank-00001.bin", 12, 7, 4); }, "rank-00001.bin",
       "the header says rank 7, the manifest rank 1"},
      {"a shard header with another payload size",
       [](auto&, auto&, const fs::path& step) { patch_u32(step / "rank-00002.bin", 16, 12, 8); }, "rank-00002.bin",
       "the header says 12 payload bytes"},
      {"a fractional offset", [](auto& m, auto&, auto&) { m["files"][1]["chunks"][0]["offset"] = 24.7; }, "manifest.json",
       "'files[1].chunks[0].offset' must be an integer (got 24.7)"},
      {"a negative offset", [](auto& m, auto&, auto&) { m["files"][1]["chunks"][0]["offset"] = -8; }, "manifest.json",
       "'files[1].chunks[0].offset' is -8, outside 0 .. "},
      {"an offset of 2^63", [](auto& m, auto&, auto&) { m["files"][1]["chunks"][0]["offset"] = 1ull << 63; },
       "manifest.json", "'files[1].chunks[0].offset' is 9223372036854775808, outside 0 .. "},
      {"an offset off the chunk sequence", [](auto& m, auto&, auto&) { m["files"][1]["chunks"][1]["offset"] = 28; },
       "manifest.json", "'files[1].chunks[1].offset' is 28; the chunk must start at byte"},
      {"a missing key: files", [](auto& m, auto&, auto&) { m.erase("files"); }, "manifest.json", "'files' is missing"},
      {"a missing key: a chunk's begin", [](auto& m, auto&, auto&) { m["files"][0]["chunks"][2].erase("begin"); },
       "manifest.json", "'files[0].chunks[2].begin' is missing"},
      {"a missing key: the model's heads", [](auto& m, auto&, auto&) { m["model"].erase("n_head"); }, "manifest.json",
       "'model.n_head' is missing"},
      {"a missing key in the marker", [](auto&, auto& marker, auto&) { marker.erase("completed_steps"); }, "COMPLETE",
       "'completed_steps' is missing"},
      {"a tensor range that is not the model's", [](auto& m, auto&, auto&) { m["tensors"][3]["end"] = 4097; },
       "manifest.json", "'tensors[3].end' is 4097; in model 'tiny' it is"},
      {"a tensor table shorter than the model's", [](auto& m, auto&, auto&) { m["tensors"].erase(m["tensors"].size() - 1); },
       "manifest.json", "'tensors' has 27 entries; model 'tiny' has 28 tensors"},
      {"a file size that the chunks do not make", [](auto& m, auto&, auto&) { m["files"][2]["bytes"] = 100; },
       "manifest.json", "'files[2].bytes' is 100; the header and the chunks listed make"},
      {"a rank outside the world", [](auto& m, auto&, auto&) { m["run"]["world"] = 2; }, "manifest.json",
       "'files[2].rank' is 2, but run.world is 2"},
      {"an unknown state", [](auto& m, auto&, auto&) { m["files"][0]["chunks"][0]["state"] = "adam_w"; }, "manifest.json",
       "'files[0].chunks[0].state' is 'adam_w', not master, adam_m or adam_v"},
      {"a unit the model does not have", [](auto& m, auto&, auto&) { m["files"][0]["chunks"][0]["unit"] = 99; },
       "manifest.json", "'files[0].chunks[0].unit' is 99; the model has 4 units"},
      {"a checksum that is not a digest", [](auto& m, auto&, auto&) { m["files"][0]["chunks"][0]["xxh3"] = "zz"; },
       "manifest.json", "'files[0].chunks[0].xxh3' is 'zz', not 16 hexadecimal digits"},
      {"a states list that is not the format's", [](auto& m, auto&, auto&) { m["states"] = {"master"}; }, "manifest.json",
       "'states' is [\"master\"]"},
  };
  return list;
}

TEST(CheckpointManifest, EveryDamageIsRefusedNamingTheFileAndFieldAndAutoFallsBack) {
  // One pristine root: a good step 2, and step 4 rewritten as a four-writer checkpoint.
  const fs::path pristine = two_checkpoints("manifest-pristine");
  const fs::path four = pristine / "four-writers";
  write_four_writers(pristine / "step-00000004", four);
  fs::remove_all(pristine / "step-00000004");
  fs::rename(four, pristine / "step-00000004");
  {  // Undamaged, it loads on one process and equals what one writer wrote.
    TrainConfig c = tiny(5);
    c.resume = (pristine / "step-00000004").string();
    const TrainSummary s = run(c);
    ASSERT_EQ(s.steps.size(), 1u);
  }
  for (const ManifestDamage& d : damages()) {
    SCOPED_TRACE(d.name);
    const fs::path root = scratch("manifest-damage");
    fs::copy(pristine, root, fs::copy_options::recursive);
    const fs::path step = root / "step-00000004";
    nlohmann::json manifest = read_json(step / "manifest.json"), marker = read_json(step / "COMPLETE");
    const nlohmann::json manifest_before = manifest, marker_before = marker;
    d.apply(manifest, marker, step);
    if (marker != marker_before) std::ofstream(step / "COMPLETE", std::ios::trunc) << marker.dump();
    if (manifest != manifest_before || marker != marker_before) resign(step, manifest);
    // Named explicitly: refused, naming the file and the field.
    const std::string why = error_of([&] { CheckpointReader::open(step.string(), ModelLayout(GptConfig::preset("tiny"))); });
    EXPECT_NE(why.find((step / d.file).string()), std::string::npos) << why;
    EXPECT_NE(why.find(d.sentence), std::string::npos) << why;
    // inspect refuses it too.
    EXPECT_NE(error_of([&] { CheckpointReader::open_any(step.string()); }), "(no error)");
    // --resume auto: falls back to step 2.
    EXPECT_EQ(first_step_resuming_auto(root, 5), 3) << "auto did not fall back to step 2";
  }
}

}  // namespace
}  // namespace strata
