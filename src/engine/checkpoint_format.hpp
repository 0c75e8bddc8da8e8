// The checkpoint on disk: a step directory of one shard file per writing rank (its fp32 master,
// Adam m and v slices, each a checksummed chunk), a JSON manifest by rank 0 naming every tensor
// and every chunk of every file, and a completion marker holding the manifest's checksum, written
// last. Any world size or plan reads any checkpoint: a reader asks for the ranges it needs and
// gets them from whichever chunks hold them, each verified on the way.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint_manifest.hpp"
#include "engine/state_source.hpp"
#include "model/parameter_layout.hpp"

namespace strata {

std::string step_directory_name(int completed_steps);  // "step-00000010"
std::string rank_file_name(int rank);                  // "rank-00003.bin"
// The step a directory's name says ("step-00000010" -> 10), or -1 for any other name.
int step_of_directory_name(const std::string& dir);
// Whether a file name is one this format writes (manifest, marker, a rank's shard or index, or
// one of those under its temporary name): the only files a cleanup may delete.
bool is_checkpoint_file_name(std::string_view name);

// Whether the file `path` lies in a checkpoint's step directory (one named step-NNNNNNNN, or
// holding a completion marker or rank 0's shard): no other output may be written there.
bool is_inside_checkpoint(const std::string& path);

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

class CheckpointReader : public StateSource {
 public:
  // Refuses, naming the file and the field, a directory that is not a complete checkpoint of this
  // format and version: a manifest that does not match its marker's checksum, step counts that
  // disagree (directory name, manifest, marker), a tensor table that is not the model's, chunks
  // that overlap, leave a gap or run past their unit, file names that are not the rank's own
  // shard in this directory, shard headers or sizes that differ from the manifest.
  static CheckpointReader open(const std::string& dir, const ModelLayout& layout);
  // Any model shape (for inspect and export): the shape comes from the manifest.
  static CheckpointReader open_any(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const CheckpointRun& run() const { return manifest_.run; }
  const GptConfig& model() const { return manifest_.model; }
  const std::vector<ManifestFile>& files() const { return manifest_.files; }

  // Values of `state` of unit `unit` on [begin, end) into out (end - begin floats; zeros past the
  // unit's numel), read from every chunk that holds part of the range; each chunk read is checked
  // against its checksum and for non-finite values.
  void read(const std::string& state, int unit, std::size_t begin, std::size_t end, float* out) const override;
  int completed_steps() const override { return manifest_.run.completed_steps; }
  // Every chunk of every file read and checked; one line per file ("ok" or what is wrong).
  std::vector<std::string> verify_all() const;
  // Whether every chunk reads back; the first problem otherwise.
  std::string damage() const;

 private:
  struct ChunkRef {
    std::uint64_t begin, end;
    std::size_t file, chunk;
  };
  std::string dir_;
  Manifest manifest_;
  std::vector<std::size_t> numel_;                        // per unit, of the manifest's model
  std::vector<std::vector<ChunkRef>> chunks_by_state_unit_;  // [state * units + unit], sorted by begin
};

}  // namespace strata
