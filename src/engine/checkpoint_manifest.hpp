// The typed form of a checkpoint's manifest and per-rank indices, and the one parser that reads
// them: every field checked for presence, type, integrality and range, and the whole checked
// against the model (tensors equal to its layout, every state of every unit covered exactly once),
// so a checkpoint that loads is exactly the model it names. Refusals name the file and the field.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/parameter_layout.hpp"

namespace strata {

constexpr int kCheckpointVersion = 1;
inline constexpr const char* kCheckpointStates[] = {"master", "adam_m", "adam_v"};
constexpr int kCheckpointStateCount = 3;
constexpr std::uint64_t kShardHeaderBytes = 24;  // magic, version (u32), rank (u32), payload bytes (u64)

// The index of a state name in kCheckpointStates, or -1.
int checkpoint_state_index(const std::string& state);

// A range of one state of one unit, in unit coordinates ([begin, end) within the unit's numel).
struct CheckpointPiece {
  std::string state;  // "master", "adam_m", "adam_v"
  int unit = 0;
  std::size_t begin = 0, end = 0;
  const float* data = nullptr;  // end - begin values
};

// What travels beside the tensors.
struct CheckpointRun {
  int completed_steps = 0;
  int world = 1;
  std::string engine;    // "single-process" or "sharded"
  std::string plan;      // the plan's --plan value ("" for one process)
  std::string topology;  // the topology as text ("" for one process)
  std::string weight_dtype = "f32";
  int batch_size = 0, seq_len = 0, grad_accum = 1;
};

struct ManifestChunk {
  int state = 0;  // index into kCheckpointStates
  int unit = 0;
  std::uint64_t begin = 0, end = 0;  // elements of the unit
  std::uint64_t offset = 0;          // bytes into the shard file
  std::string xxh3;                  // 16 hex digits
};

// One shard file: its index as the writing rank leaves it, and its entry in the manifest.
struct ManifestFile {
  int rank = 0;
  std::string name;         // "rank-RRRRR.bin"; "" in the index of a rank that wrote no values
  std::uint64_t bytes = 0;  // the file's size
  std::vector<ManifestChunk> chunks;
};

struct Manifest {
  GptConfig model;
  CheckpointRun run;  // run.completed_steps is the manifest's completed_steps
  std::vector<ManifestFile> files;
};

struct CompletionMarker {
  int completed_steps = 0;
  std::string manifest_xxh3;
};

std::string checkpoint_digest(const void* data, std::size_t bytes);  // XXH3-64 as 16 hex digits

// JSON of the writer's side.
nlohmann::json manifest_file_json(const ManifestFile& f);
nlohmann::json manifest_json(const ModelLayout& layout, const CheckpointRun& run, const std::vector<ManifestFile>& files);
nlohmann::json completion_marker_json(const CompletionMarker& marker);

// The parsers. `path` names the file in every refusal (strata::Error).
ManifestFile parse_manifest_file(const nlohmann::json& j, const std::string& path, const std::string& where);
// Also checks the manifest against the model it names: tensors, chunk ranges, coverage, ranks.
Manifest parse_manifest(const nlohmann::json& j, const std::string& path);
CompletionMarker parse_completion_marker(const nlohmann::json& j, const std::string& path);

// Every state of every unit covered by the files' chunks exactly once, [0, numel) without gap or
// overlap; otherwise a sentence naming the state, the unit and the chunk that breaks it.
void require_exact_coverage(const ModelLayout& layout, const std::vector<ManifestFile>& files, const std::string& path);

}  // namespace strata
