// The quantized collectives under mpirun: the qwZ gather equals the local quantize-dequantize of
// the whole tensor bit for bit; the qgZ reduce-scatter stays within the error bound derived in
// comm/quantized.hpp (recomputed here in exact arithmetic from every rank's input); both meter
// exactly the bytes their collective spec prices, scales included. On gcd:2,gpu:2,node:2 (8 ranks)
// and on the odd-sized gcd:2,gpu:3,node:2 (12 ranks), with pieces that end in partial blocks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "comm/collective_spec.hpp"
#include "comm/hierarchical.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "comm/quantized.hpp"
#include "core/bf16.hpp"
#include "core/rng.hpp"
#include "quant/block_quant.hpp"

namespace strata {
namespace {

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Rank r's input: Gaussian values whose size varies by block region (so scales differ), with an
// exact zero run, reproducible on every rank.
std::vector<float> input_of(int rank, std::size_t n, double scale = 1.0) {
  Rng rng(1000 + static_cast<std::uint64_t>(rank));
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double region = 1.0 + static_cast<double>((i / 97) % 5);
    v[i] = static_cast<float>(scale * region * rng.normal());
  }
  std::fill(v.begin() + static_cast<std::ptrdiff_t>(n / 3), v.begin() + static_cast<std::ptrdiff_t>(n / 3 + 40), 0.0f);
  return v;
}

std::vector<std::uint64_t> meter_bytes(Communicator& comm) {
  std::vector<std::uint64_t> out;
  for (int l = 0; l < comm.topology().level_count(); ++l) out.push_back(comm.meter().at(l).bytes_sent);
  return out;
}

// qwZ: every rank's piece quantized, gathered, decoded. The result must equal, bit for bit, what
// the scalar reference gives when it quantizes and decodes the whole tensor piece by piece.
void gather_equals_local_round_trip(const std::string& topology) {
  const Topology t = Topology::parse(topology, world_size());
  const int top = t.level_count() - 1;
  for (int first = 0; first <= top; ++first) {
    for (int last = first; last <= top; ++last) {
      for (QuantFormat f : {QuantFormat{QuantBits::kInt8, 2048}, QuantFormat{QuantBits::kInt4, 64}}) {
        for (DType type : {DType::kF32, DType::kBF16}) {
          MpiCommunicator comm(t);
          const auto span = static_cast<std::size_t>(t.span(first, last));
          const std::size_t piece = 1001;  // odd, and not a multiple of either block size
          const std::size_t n = span * piece;
          const std::vector<float> whole = input_of(7, n);
          std::vector<bf16> whole_bf16(n);
          fp32_to_bf16(whole_bf16.data(), whole.data(), n);
          const std::size_t at = shard_offset(t, comm.rank(), n, first, last);
          const void* mine = type == DType::kBF16 ? static_cast<const void*>(whole_bf16.data() + at)
                                                  : static_cast<const void*>(whole.data() + at);
          std::vector<unsigned char> blobs(quantized_gather_bytes(f, piece, span));
          std::vector<float> got(n, -7.0f);
          start_quantized_all_gather(comm, f, mine, type, piece, first, last, blobs.data(), got.data())->wait();

          std::vector<float> expect(n);
          std::vector<unsigned char> blob(quantized_bytes(f, piece));
          std::vector<float> quantized(whole);  // the data as quantized (bf16: widened)
          if (type == DType::kBF16) bf16_to_fp32(quantized.data(), whole_bf16.data(), n);
          if (span == 1) {  // no peers: nothing moves, nothing is rounded
            EXPECT_EQ(std::memcmp(got.data(), quantized.data(), n * sizeof(float)), 0);
            continue;
          }
          for (std::size_t k = 0; k < span; ++k) {
            if (type == DType::kBF16) {
              quantize_blocks(f, whole_bf16.data() + k * piece, piece, blob.data(), QuantIsa::kScalar);
            } else {
              quantize_blocks(f, whole.data() + k * piece, piece, blob.data(), QuantIsa::kScalar);
            }
            dequantize_blocks(f, blob.data(), piece, expect.data() + k * piece, QuantIsa::kScalar);
          }
          const std::string what = topology + " levels " + std::to_string(first) + ".." + std::to_string(last) + " " +
                                   describe_quant(f) + " from " + std::string(dtype_name(type));
          ASSERT_EQ(std::memcmp(got.data(), expect.data(), n * sizeof(float)), 0) << what;
          // Quantization happened: the decode differs from the data that was quantized.
          EXPECT_NE(std::memcmp(got.data(), quantized.data(), n * sizeof(float)), 0) << what;
          const CollectiveSpec spec{CollectiveKind::kAllGather, first, last, n, type, f};
          EXPECT_EQ(meter_bytes(comm), collective_bytes_by_level(t, spec)) << what;
        }
      }
    }
  }
}

// The bound of comm/quantized.hpp, simulated for every rank in exact (double) arithmetic: the
// partial sums each rank holds after each hop and the largest error it may carry there.
struct BoundSimulation {
  std::vector<std::vector<double>> exact;  // per rank, n: the exact partial sums it holds
  std::vector<std::vector<double>> bound;  // per rank, n: the error it may carry there
  std::vector<std::size_t> offset, size;   // per rank: the block it holds after the last hop
};

BoundSimulation simulate_bound(const Topology& t, QuantFormat f, const std::vector<std::vector<float>>& inputs,
                               int first, int last) {
  const int world = t.world_size();
  const std::size_t n = inputs[0].size();
  const double q = quant_max_code(f.bits);
  // Per element decoded within scale/2, scale = amax/Q; the division, the product and the scale
  // itself each round in fp32, so a relative 2^-20 and an absolute slack: the smallest denormal,
  // plus Q of half of it for a subnormal scale (test_block_quant pins that case).
  const double rel = 1.0 + 0x1.0p-20, tiny = 0x1.0p-149 + q * 0x1.0p-150;
  BoundSimulation s;
  for (int r = 0; r < world; ++r) {
    s.exact.emplace_back(inputs[static_cast<std::size_t>(r)].begin(), inputs[static_cast<std::size_t>(r)].end());
    s.bound.emplace_back(n, 0.0);
  }
  s.offset.assign(static_cast<std::size_t>(world), 0);
  s.size.assign(static_cast<std::size_t>(world), n);
  for (int l = first; l <= last; ++l) {
    const auto fan = static_cast<std::size_t>(t.level(l).fanout);
    if (fan == 1) continue;
    auto exact = s.exact;
    auto bound = s.bound;
    for (int r = 0; r < world; ++r) {
      const auto rr = static_cast<std::size_t>(r);
      const std::size_t chunk = s.size[rr] / fan, me = static_cast<std::size_t>(t.coordinate(r, l));
      const std::size_t begin = s.offset[rr] + me * chunk;
      const RankGroup g = t.levels_group(r, l, l);
      for (std::size_t i = begin; i < begin + chunk; ++i) {
        exact[rr][i] = 0.0;
        bound[rr][i] = 0.0;
        double magnitude = 0.0;
        for (int peer : g.ranks) {
          const auto p = static_cast<std::size_t>(peer);
          exact[rr][i] += s.exact[p][i];
          bound[rr][i] += s.bound[p][i];
          magnitude += std::abs(s.exact[p][i]) + s.bound[p][i];
        }
        bound[rr][i] += magnitude * 0x1.0p-22;  // the fp32 additions of the hop
      }
      // Each peer's chunk for us, block by block (this rank's own chunk is added exactly).
      for (int peer : g.ranks) {
        if (peer == r) continue;
        const auto p = static_cast<std::size_t>(peer);
        for (std::size_t b0 = begin; b0 < begin + chunk; b0 += f.block) {
          const std::size_t b1 = std::min<std::size_t>(b0 + f.block, begin + chunk);
          double amax = 0.0, carried = 0.0;
          for (std::size_t j = b0; j < b1; ++j) {
            amax = std::max(amax, std::abs(s.exact[p][j]));
            carried = std::max(carried, s.bound[p][j]);
          }
          for (std::size_t j = b0; j < b1; ++j) bound[rr][j] += (amax + carried) / (2.0 * q) * rel + tiny;
        }
      }
      s.offset[rr] = begin;
      s.size[rr] = chunk;
    }
    s.exact = std::move(exact);
    s.bound = std::move(bound);
  }
  return s;
}

// qgZ: the result is each rank's piece of the exact sum within the simulated bound; the bound is
// small enough to mean something (a lost or misplaced chunk would break it), and int4 does err.
void reduce_scatter_within_bound(const std::string& topology) {
  const Topology t = Topology::parse(topology, world_size());
  const int top = t.level_count() - 1;
  const int world = t.world_size();
  std::vector<std::pair<int, int>> ranges;
  for (int first = 0; first <= top; ++first) {
    for (int last = first; last <= top; ++last) ranges.emplace_back(first, last);
  }
  for (auto [first, last] : ranges) {
    for (QuantFormat f : {QuantFormat{QuantBits::kInt8, 2048}, QuantFormat{QuantBits::kInt4, 2048},
                          QuantFormat{QuantBits::kInt4, 64}}) {
      MpiCommunicator comm(t);
      const auto span = static_cast<std::size_t>(t.span(first, last));
      const std::size_t n = span * 1537;  // pieces ending in partial blocks at every hop
      std::vector<std::vector<float>> inputs;
      for (int r = 0; r < world; ++r) inputs.push_back(input_of(r, n, 1.0 / world));
      const BoundSimulation sim = simulate_bound(t, f, inputs, first, last);
      const auto me = static_cast<std::size_t>(comm.rank());
      std::vector<float> data = inputs[me], shard(n / span);
      start_quantized_reduce_scatter(comm, f, data.data(), n, first, last, shard.data())->wait();

      const std::string what = topology + " levels " + std::to_string(first) + ".." + std::to_string(last) + " " +
                               describe_quant(f);
      ASSERT_EQ(sim.size[me], shard.size()) << what;
      ASSERT_EQ(sim.offset[me], shard_offset(t, comm.rank(), n, first, last)) << what;
      double worst = 0.0, largest_bound = 0.0, largest = 0.0, total_error = 0.0;
      for (std::size_t i = 0; i < shard.size(); ++i) {
        const std::size_t at = sim.offset[me] + i;
        const double err = std::abs(shard[i] - sim.exact[me][at]);
        ASSERT_LE(err, sim.bound[me][at]) << what << " element " << at << " (exact " << sim.exact[me][at] << ")";
        worst = std::max(worst, err / sim.bound[me][at]);
        largest_bound = std::max(largest_bound, sim.bound[me][at]);
        largest = std::max(largest, std::abs(sim.exact[me][at]));
        total_error += err;
      }
      if (span == 1) {  // no peers: the piece is this rank's input, exactly
        EXPECT_EQ(total_error, 0.0) << what;
        continue;
      }
      // A chunk lost or added twice moves elements by about their own size.
      EXPECT_LT(largest_bound, (f.bits == QuantBits::kInt8 ? 0.02 : 0.4) * largest) << what;
      EXPECT_GT(total_error, 0.0) << what << ": nothing was quantized";
      const CollectiveSpec spec{CollectiveKind::kReduceScatter, first, last, n, DType::kF32, f};
      EXPECT_EQ(meter_bytes(comm), collective_bytes_by_level(t, spec)) << what;
      if (comm.rank() == 0) {
        std::printf("  %-44s worst error %.2f of its bound; largest bound %.1e of the largest sum\n", what.c_str(),
                    worst, largest_bound / largest);
      }
    }
  }
}

// The all-reduce (qgZ then qwZ) leaves every rank with the same values, within the bound of the
// reduction plus one more quantization.
void all_reduce_agrees_everywhere(const std::string& topology) {
  const Topology t = Topology::parse(topology, world_size());
  const int top = t.level_count() - 1;
  const QuantFormat f{QuantBits::kInt8, 256};
  for (int first = 0; first <= top; ++first) {
    for (int last = first; last <= top; ++last) {
      MpiCommunicator comm(t);
      const auto span = static_cast<std::size_t>(t.span(first, last));
      const std::size_t n = span * 301;
      std::vector<float> data = input_of(comm.rank(), n);
      quantized_all_reduce(comm, f, data.data(), n, first, last);
      const std::string what = topology + " levels " + std::to_string(first) + ".." + std::to_string(last);
      // Every rank of the group holds the same bits: compare with the group's first rank, by
      // gathering every rank's result on every rank.
      std::vector<float> all(n * static_cast<std::size_t>(t.world_size()));
      MPI_Allgather(data.data(), static_cast<int>(n), MPI_FLOAT, all.data(), static_cast<int>(n), MPI_FLOAT, MPI_COMM_WORLD);
      const RankGroup g = t.levels_group(comm.rank(), first, last);
      const float* lead = all.data() + static_cast<std::size_t>(g.ranks.front()) * n;
      EXPECT_EQ(std::memcmp(lead, data.data(), n * sizeof(float)), 0) << what;
      std::vector<double> sum(n, 0.0);
      for (int r : g.ranks) {
        const std::vector<float> x = input_of(r, n);
        for (std::size_t i = 0; i < n; ++i) sum[i] += x[i];
      }
      double largest = 0.0, worst = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        largest = std::max(largest, std::abs(sum[i]));
        worst = std::max(worst, std::abs(data[i] - sum[i]));
      }
      EXPECT_LT(worst, 0.05 * largest) << what;
      if (span == 1) {
        EXPECT_EQ(worst, 0.0) << what << ": no peers, nothing may be rounded";
      }
      const CollectiveSpec spec{CollectiveKind::kAllReduce, first, last, n, DType::kF32, f};
      EXPECT_EQ(meter_bytes(comm), collective_bytes_by_level(t, spec)) << what;
    }
  }
}

TEST(World8, QwzGatherEqualsTheLocalQuantizeDequantizeExactly) {
  ASSERT_EQ(world_size(), 8);
  gather_equals_local_round_trip("gcd:2,gpu:2,node:2");
}

TEST(World8, QgzReduceScatterStaysWithinTheDerivedBound) {
  ASSERT_EQ(world_size(), 8);
  reduce_scatter_within_bound("gcd:2,gpu:2,node:2");
}

TEST(World8, QuantizedAllReduceAgreesOnEveryRank) {
  ASSERT_EQ(world_size(), 8);
  all_reduce_agrees_everywhere("gcd:2,gpu:2,node:2");
}

// A level of fan-out 1 (node:* on 6 ranks) in every range: its hop is skipped, its bytes are 0.
TEST(World6, QuantizedCollectivesSkipALevelOfFanOutOne) {
  ASSERT_EQ(world_size(), 6);
  gather_equals_local_round_trip("gcd:2,gpu:3,node:*");
  reduce_scatter_within_bound("gcd:2,gpu:3,node:*");
  all_reduce_agrees_everywhere("gcd:2,gpu:3,node:*");
}

TEST(World12, QwzGatherEqualsTheLocalQuantizeDequantizeExactly) {
  ASSERT_EQ(world_size(), 12);
  gather_equals_local_round_trip("gcd:2,gpu:3,node:2");
}

TEST(World12, QgzReduceScatterStaysWithinTheDerivedBound) {
  ASSERT_EQ(world_size(), 12);
  reduce_scatter_within_bound("gcd:2,gpu:3,node:2");
}

TEST(World12, QuantizedAllReduceAgreesOnEveryRank) {
  ASSERT_EQ(world_size(), 12);
  all_reduce_agrees_everywhere("gcd:2,gpu:3,node:2");
}

}  // namespace
}  // namespace strata
