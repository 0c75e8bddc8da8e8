// The ZeRO++ quantized collectives over a group spanning several levels, built on the single-level
// seam so every byte (scales included) is metered at the level it crossed:
//   qwZ: an all-gather of block-quantized pieces (one blob per rank), decoded into fp32;
//   qgZ: a reduce-scatter as one quantized all-to-all per level, innermost first, with the sums
//        done in fp32 between hops.
// Blocks restart at every piece (quant/quant_format.hpp), so any size works without padding to
// the block size: a piece that is not a multiple of it ends in a partial block. Over a group of
// one rank (every level of fan-out 1) nothing moves and nothing is quantized.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/communicator.hpp"
#include "quant/quant_format.hpp"

namespace strata {

// qwZ. Starts gathering span * piece_elements elements partitioned over levels first..last, where
// span = topology span(first, last). This rank's piece (`piece`, of `type` fp32 or bf16) is
// quantized into its slot of `blobs` (span * quantized_bytes(f, piece_elements) bytes, slot k for
// the rank of shard index k), the blobs are gathered outermost level first (that step
// non-blocking), and wait() decodes every slot, this rank's own included, into `out` (span *
// piece_elements fp32). Every rank ends with the same values: the local quantize-dequantize of
// the whole tensor with blocks restarting at each piece. `blobs` and `out` must live until then.
// flat: the blobs travel in one flat all-gather (comm/flat) rather than level by level.
std::unique_ptr<CommRequest> start_quantized_all_gather(Communicator& comm, QuantFormat f, const void* piece,
                                                        DType type, std::size_t piece_elements, int first, int last,
                                                        void* blobs, float* out, bool flat = false);

// Bytes of the `blobs` buffer a quantized gather of span pieces of piece_elements needs.
std::size_t quantized_gather_bytes(QuantFormat f, std::size_t piece_elements, std::size_t span);

// qgZ. data: n fp32 elements (n divisible by span(first, last)), this rank's contribution; used as
// scratch. Level by level, innermost first, the block still being reduced splits into fan-out
// chunks, chunk j bound for the peer at coordinate j. Strata's shard layout (Topology::shard_index)
// makes those chunks contiguous, so the reorder ZeRO++ performs before its all-to-all is the
// identity here. Each chunk bound for a peer is quantized, the blobs are exchanged with one
// all-to-all at that level, and the chunk this rank keeps becomes its own exact fp32 values plus
// every peer's decoded chunk, added in fp32 in coordinate order. On wait() `shard` (n / span
// elements) holds this rank's piece, summed over the group. The innermost hop starts non-blocking;
// wait() finishes it and runs the others (each needs the previous one's sums, requantized).
//
// No averaging happens here: the result is the sum. The engine applies the 1/world factor before
// any collective, in the loss scale of the backward pass (ShardedEngine::forward_backward), so
// each rank's gradient already carries it and every reduction, quantized or not, is a plain sum.
//
// Error bound (the tests check it). At a hop over f ranks, each sender's chunk p is quantized
// block by block; element i of a block with scale s = amax/Q decodes within s/2 of p_i (plus fp32
// rounding, and Q * 2^-150 more when s is subnormal, i.e. for blocks below about 1e-36), so the
// hop adds at most sum over the f - 1 senders of amax_b(p_sender) / (2Q), where
// amax_b is the block's largest magnitude, itself at most the exact partial sum's block maximum
// plus the error that sender already carries there. Errors then pass through later hops as plain
// sums: the final error of element i is at most the sum, over every hop and every sender whose
// chunk reached i, of (exact block amax + that sender's accumulated bound)/(2Q). With one level
// of f ranks all holding values of magnitude <= A: |error| <= (f - 1) A / (2Q).
std::unique_ptr<CommRequest> start_quantized_reduce_scatter(Communicator& comm, QuantFormat f, float* data,
                                                            std::size_t n, int first, int last, float* shard);

// qgZ then qwZ over the same levels: every rank ends with the same decoded sum in `data` (n fp32).
void quantized_all_reduce(Communicator& comm, QuantFormat f, float* data, std::size_t n, int first, int last);

}  // namespace strata
