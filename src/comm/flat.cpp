// Flat collectives, and the ring's summation order reproduced after a flat all-to-all.
#include "comm/flat.hpp"

#include <cstring>
#include <exception>
#include <vector>

#include "comm/elementwise_sum.hpp"
#include "comm/hierarchical.hpp"
#include "core/error.hpp"

namespace strata {

namespace {

unsigned char* at(void* base, std::size_t elements, DType type) {
  return static_cast<unsigned char*>(base) + elements * dtype_size(type);
}

// Sums `pieces` (span pieces of `count`, piece j from the rank of shard index j) into this rank's
// result in the order the level-by-level reduce-scatter sums them: innermost level first, and at
// each level a ring's order, from the coordinate after this rank's round to its own, left to
// right (see ring_reduce_scatter). The shard index's most significant digit is the coordinate at
// `first`, so the digit of level l weighs span(l + 1, last).
void ordered_sum(const Topology& t, int rank, int first, int last, unsigned char* pieces, std::size_t count, DType type,
                 void* out) {
  const std::size_t bytes = count * dtype_size(type);
  std::vector<unsigned char> acc(bytes);
  std::size_t remaining = static_cast<std::size_t>(t.span(first, last));
  for (int l = first; l <= last; ++l) {
    const auto f = static_cast<std::size_t>(t.level(l).fanout);
    const auto weight = static_cast<std::size_t>(t.span(l + 1, last));
    if (f == 1) continue;
    const auto mine = static_cast<std::size_t>(t.coordinate(rank, l));
    remaining /= f;
    STRATA_CHECK(remaining == weight, "the shard index's digits do not follow the levels");
    for (std::size_t j = 0; j < weight; ++j) {
      const auto piece = [&](std::size_t c) { return pieces + (c * weight + j) * bytes; };
      std::memcpy(acc.data(), piece((mine + 1) % f), bytes);
      for (std::size_t k = 2; k <= f; ++k) add_elements(acc.data(), piece((mine + k) % f), acc.data(), count, type);
      std::memcpy(pieces + j * bytes, acc.data(), bytes);  // piece j is read above before this write
    }
  }
  std::memcpy(out, pieces, bytes);
}

class FlatReduceScatter final : public CommRequest {
 public:
  FlatReduceScatter(Communicator& comm, void* data, std::size_t n, DType type, int first, int last, void* shard)
      : comm_(comm), type_(type), first_(first), last_(last), shard_(shard),
        count_(n / static_cast<std::size_t>(comm.topology().span(first, last))),
        received_(n * dtype_size(type)) {
    step_ = comm_.start_all_to_all_flat(data, received_.data(), count_, type_, first_, last_);
  }
  void wait() override {
    if (!step_) return;
    step_->wait();
    step_.reset();
    ordered_sum(comm_.topology(), comm_.rank(), first_, last_, received_.data(), count_, type_, shard_);
  }
  ~FlatReduceScatter() override {
    if (std::uncaught_exceptions() == 0) wait();
  }

 private:
  Communicator& comm_;
  DType type_;
  int first_, last_;
  void* shard_;
  std::size_t count_;
  std::vector<unsigned char> received_;
  std::unique_ptr<CommRequest> step_;
};

void check_divisible(const Topology& t, std::size_t n, int first, int last, const char* what) {
  const auto span = static_cast<std::size_t>(t.span(first, last));
  STRATA_REQUIRE(n % span == 0, "{} of {} elements over {} ranks: the buffer must be padded to a multiple", what, n,
                 span);
}

}  // namespace

std::unique_ptr<CommRequest> start_flat_all_gather(Communicator& comm, void* data, std::size_t n, DType type, int first,
                                                   int last) {
  check_divisible(comm.topology(), n, first, last, "flat all-gather");
  return comm.start_all_gather_flat(data, n / static_cast<std::size_t>(comm.topology().span(first, last)), type, first,
                                    last);
}

std::unique_ptr<CommRequest> start_flat_reduce_scatter(Communicator& comm, void* data, std::size_t n, DType type,
                                                       int first, int last, void* shard) {
  check_divisible(comm.topology(), n, first, last, "flat reduce-scatter");
  STRATA_CHECK(type != DType::kU8, "a sum of raw bytes (quantized blobs are summed after decoding)");
  return std::make_unique<FlatReduceScatter>(comm, data, n, type, first, last, shard);
}

void flat_all_reduce(Communicator& comm, void* data, std::size_t n, DType type, int first, int last) {
  const Topology& t = comm.topology();
  const std::size_t piece = n / static_cast<std::size_t>(t.span(first, last));
  std::vector<unsigned char> shard(piece * dtype_size(type));
  start_flat_reduce_scatter(comm, data, n, type, first, last, shard.data())->wait();
  std::memcpy(at(data, shard_offset(t, comm.rank(), n, first, last), type), shard.data(), shard.size());
  start_flat_all_gather(comm, data, n, type, first, last)->wait();
}

}  // namespace strata
