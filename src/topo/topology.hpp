// The machine as an ordered list of named levels, innermost (fastest) first, each with a fan-out,
// a per-rank bandwidth and a latency. Ranks are placed contiguously (level 0 varies fastest, as
// block placement by mpirun or Slurm does), so a rank's coordinates give every group it is in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

struct Level {
  std::string name;
  int fanout = 1;
  double bandwidth = 0.0;  // bytes/s per rank, one direction; 0: unknown
  double latency = 0.0;    // seconds; 0: unknown
};

// A set of ranks described by its members (ascending); `levels` are the single levels the
// group spans (a group over levels [a, b] is the product of the single-level groups a..b).
struct RankGroup {
  std::vector<int> ranks;
  int first_level = 0;
  int last_level = -1;  // last_level < first_level: the group of one rank
  int size() const { return static_cast<int>(ranks.size()); }
};

class Topology {
 public:
  // spec: "gcd:2,gpu:4,node:*" with optional "@200GB/s" bandwidth and "~2us" latency per level;
  // the outermost fan-out may be "*" (the rest of the world); "flat" is world:*. (Hardware
  // presets are cluster models: the caller turns their names into specs.)
  static Topology parse(std::string_view spec, int world_size);

  int world_size() const { return world_size_; }
  int level_count() const { return static_cast<int>(levels_.size()); }
  const Level& level(int l) const { return levels_.at(static_cast<std::size_t>(l)); }
  const std::vector<Level>& levels() const { return levels_; }
  // Index of the level with this name; "world" names the outermost. -1 when unknown.
  int find_level(std::string_view name) const;
  // The level whose group is one node: the one just inside the outermost (0 with one level).
  int node_level() const { return level_count() >= 2 ? level_count() - 2 : 0; }

  // Ranks in a level-l group: the product of fan-outs 0..l (1 for l < 0).
  int span(int l) const;
  // Product of fan-outs of levels first..last (1 when last < first).
  int span(int first, int last) const;
  std::vector<int> coordinates(int rank) const;
  int coordinate(int rank, int level) const;

  // Ranks equal to `rank` in every coordinate above l.
  RankGroup group(int rank, int l) const;
  // Ranks equal to `rank` in every coordinate up to l (its peers in other level-l groups).
  RankGroup cross_group(int rank, int l) const;
  // Ranks that differ from `rank` only in coordinates first..last.
  RankGroup levels_group(int rank, int first, int last) const;

  // Which of the span(first, last) equal pieces of a buffer partitioned over levels first..last
  // this rank holds: a mixed-radix number whose most significant digit is the coordinate at
  // `first`. Reduce-scatter innermost level first then splits the buffer into contiguous
  // pieces at every step, and a shard over levels 0..l always contains the shard over 0..l+1.
  int shard_index(int rank, int first, int last) const;

  std::string to_string() const;  // e.g. "gcd:2@200GB/s,gpu:4@50GB/s,node:2@12.5GB/s"

 private:
  std::vector<Level> levels_;
  int world_size_ = 1;
};

// Element offset of this rank's shard inside a buffer of n elements partitioned over first..last.
std::size_t shard_offset(const Topology& topology, int rank, std::size_t n, int first, int last);

}  // namespace strata
