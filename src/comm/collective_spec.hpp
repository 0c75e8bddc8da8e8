// One collective as data: what it does, over which levels, how many elements of which type. The
// schedule's ops carry it, the engine issues exactly it, and the counting executor and the
// simulator price it; the level-by-level byte count lives here so all of them agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "quant/quant_format.hpp"
#include "topo/topology.hpp"

namespace strata {

enum class CollectiveKind {
  kNone,
  kAllGather,      // every rank ends with the whole buffer of `elements`
  kReduceScatter,  // `elements` in, each rank ends with its summed elements / span piece
  kAllReduce,      // a reduce-scatter then an all-gather over the same levels
  kControlSum,     // `elements` scalars (fp64) summed over the levels: loss, gradient norm
  kControlMax,     // `elements` scalars (fp64), their maximum over the levels: an agreement
};

// A collective over the levels [first_level, last_level] (none when last < first).
struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::kNone;
  int first_level = 0;
  int last_level = -1;
  std::size_t elements = 0;
  DType dtype = DType::kF32;  // the data's type (what is quantized, or what moves when unquantized)
  // Enabled: the collective moves quantized blobs instead (comm/quantized.hpp). An all-gather
  // sends each rank's piece as one blob; a reduce-scatter runs one all-to-all per level, each
  // peer's chunk a blob; an all-reduce is the two.
  QuantFormat quant{QuantBits::kNone, 0};
  // Flat: one call over every rank of the levels (the MPI library's algorithm) rather than one
  // step per level. The meter then counts each peer's bytes at the level of that peer (the
  // outermost level where the two ranks' coordinates differ), and the call at the outermost level.
  bool flat = false;
  // A bucket of a bigger collective: the part [bucket_offset, bucket_offset + elements / span) of
  // every rank's piece of bucket_piece elements (an all-gather or reduce-scatter), or of the whole
  // buffer of bucket_piece elements (an all-reduce: elements at bucket_offset). 0: no bucket.
  std::size_t bucket_offset = 0;
  std::size_t bucket_piece = 0;
  bool bucketed() const { return bucket_piece != 0; }

  bool empty() const { return kind == CollectiveKind::kNone || last_level < first_level; }
  bool is_control() const { return kind == CollectiveKind::kControlSum || kind == CollectiveKind::kControlMax; }
  bool operator==(const CollectiveSpec&) const = default;
};

// Per level, the bytes one rank sends (= receives) when the collective runs as single-level
// steps (reduce-scatter innermost first, all-gather outermost first): at level l the piece that
// crosses is the block still being reduced or gathered there divided by the fan-out, sent to
// each of the fan-out - 1 peers; quantized, that piece travels as one blob of
// quantized_bytes(piece elements), scales included. Flat: one piece to or from each peer, counted
// at the peer's level (flat_peers). Control sums are counted apart (all zeros here).
std::vector<std::uint64_t> collective_bytes_by_level(const Topology& topology, const CollectiveSpec& c);

// The peers of one rank in a group over levels first..last, by the level at which they differ from
// it (the outermost differing coordinate): (f_l - 1) x span(first, l - 1) at level l.
std::vector<std::uint64_t> flat_peers(const Topology& topology, int first, int last);

// Single-level calls the collective makes at each level (levels of fan-out 1 make none); a flat
// one makes one call, at its outermost level with more than one rank.
std::vector<std::uint64_t> collective_calls_by_level(const Topology& topology, const CollectiveSpec& c);

// "all-gather over gcd..node of 1234 bf16", "... of 1234 f32 as int4/2048"
std::string describe_collective(const Topology& topology, const CollectiveSpec& c);

std::string collective_kind_name(CollectiveKind kind);

}  // namespace strata
