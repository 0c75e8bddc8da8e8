// The checkpoint on disk: a step directory of one shard file per writing rank (its fp32 master,
// Adam m and v slices, each a checksummed chunk), a JSON manifest by rank 0 naming every tensor
// and every chunk of every file, and a completion marker holding the manifest's checksum, written
// last. Any world size or plan reads any checkpoint: a reader asks for the ranges it needs and
// gets them from whichever chunks hold them, each verified on the way.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/parameter_layout.hpp"

namespace strata {

constexpr int kCheckpointVersion = 1;
inline constexpr const char* kCheckpointStates[] = {"master", "adam_m", "adam_v"};

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

std::string step_directory_name(int completed_steps);  // "step-00000010"
std::string rank_file_name(int rank);                  // "rank-00003.bin"

// Writes this rank's shard file and its index into `dir` (each under a temporary name, fsync'd,
// renamed). Refuses non-finite values: a checkpoint never holds a NaN. Throws strata::Error
// naming the file on any failure, leaving no temporary file behind.
void write_rank_shard(const std::string& dir, int rank, const std::vector<CheckpointPiece>& pieces);

// Rank 0, after every rank wrote its shard: reads the indices, checks every unit's states are
// covered, writes manifest.json and then the completion marker (both atomically).
void write_manifest(const std::string& dir, const ModelLayout& layout, const CheckpointRun& run, int writers);

// Whether `dir` holds a complete checkpoint (its marker and a manifest matching it); a sentence
// saying why not otherwise.
std::string incomplete_reason(const std::string& dir);

class CheckpointReader {
 public:
  // Refuses a directory that is not a complete checkpoint of this format and version, whose
  // manifest does not match its marker's checksum, was written for another model shape, names a
  // file that is missing or of the wrong size, or holds a scalar out of range.
  static CheckpointReader open(const std::string& dir, const ModelLayout& layout);
  // Any model shape (for inspect and export): the shape comes from the manifest.
  static CheckpointReader open_any(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const CheckpointRun& run() const { return run_; }
  const nlohmann::json& manifest() const { return manifest_; }
  const GptConfig& model() const { return model_; }

  // Values of `state` of unit `unit` on [begin, end) into out (end - begin floats; zeros past the
  // unit's numel), read from every chunk that holds part of the range; each chunk read is checked
  // against its checksum and for non-finite values.
  void read(const std::string& state, int unit, std::size_t begin, std::size_t end, float* out) const;
  // Every chunk of every file read and checked; one line per file ("ok" or what is wrong).
  std::vector<std::string> verify_all() const;

 private:
  std::string dir_;
  nlohmann::json manifest_;
  CheckpointRun run_;
  GptConfig model_;
  std::vector<std::size_t> numel_;  // per unit, of the manifest's model
};

}  // namespace strata
