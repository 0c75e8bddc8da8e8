// Level-by-level decomposition of multi-level collectives.
#include "comm/hierarchical.hpp"

#include <cstring>
#include <exception>
#include <vector>

#include "core/error.hpp"

namespace strata {

namespace {

unsigned char* at(void* base, std::size_t elements, DType type) {
  return static_cast<unsigned char*>(base) + elements * dtype_size(type);
}

void check_divisible(const Topology& t, std::size_t n, int first, int last, const char* what) {
  const auto span = static_cast<std::size_t>(t.span(first, last));
  STRATA_REQUIRE(n % span == 0, "{} of {} elements over {} ranks: the buffer must be padded to a multiple", what, n,
                 span);
}

// Runs the all-gather steps for levels [first, last_step] (outermost first), given that the
// levels above last_step are already gathered: `offset`/`piece` describe the gathered block.
void gather_steps(Communicator& comm, void* data, DType type, int first, int last_step, std::size_t offset,
                  std::size_t piece) {
  const Topology& t = comm.topology();
  for (int l = last_step; l >= first; --l) {
    const int f = t.level(l).fanout;
    if (f == 1) continue;
    const std::size_t block = offset - static_cast<std::size_t>(t.coordinate(comm.rank(), l)) * piece;
    comm.all_gather(at(data, block, type), piece, type, l);
    offset = block;
    piece *= static_cast<std::size_t>(f);
  }
}

class ChainedGather final : public CommRequest {
 public:
  ChainedGather(Communicator& comm, std::unique_ptr<CommRequest> first_step, void* data, DType type, int first,
                int last_step, std::size_t offset, std::size_t piece)
      : comm_(comm), first_step_(std::move(first_step)), data_(data), type_(type), first_(first),
        last_step_(last_step), offset_(offset), piece_(piece) {}
  void wait() override {
    if (done_) return;
    done_ = true;
    if (first_step_) first_step_->wait();
    gather_steps(comm_, data_, type_, first_, last_step_, offset_, piece_);
  }
  // Completing the gather means more collectives; while an exception unwinds (the job is about to
  // abort) the peers may be elsewhere, so it is left undone rather than risk a hang.
  ~ChainedGather() override {
    if (std::uncaught_exceptions() == 0) wait();
  }

 private:
  Communicator& comm_;
  std::unique_ptr<CommRequest> first_step_;
  void* data_;
  DType type_;
  int first_, last_step_;
  std::size_t offset_, piece_;
  bool done_ = false;
};

}  // namespace

std::size_t shard_offset(const Topology& topology, int rank, std::size_t n, int first, int last) {
  const auto span = static_cast<std::size_t>(topology.span(first, last));
  return static_cast<std::size_t>(topology.shard_index(rank, first, last)) * (n / span);
}

void hierarchical_reduce_scatter(Communicator& comm, void* data, std::size_t n, DType type, int first, int last,
                                 void* shard) {
  const Topology& t = comm.topology();
  check_divisible(t, n, first, last, "reduce-scatter");
  std::size_t offset = 0, size = n;
  std::vector<unsigned char> scratch;
  for (int l = first; l <= last; ++l) {
    const int f = t.level(l).fanout;
    if (f == 1) continue;
    const std::size_t piece = size / static_cast<std::size_t>(f);
    scratch.resize(piece * dtype_size(type));
    comm.reduce_scatter(at(data, offset, type), scratch.data(), piece, type, l);
    offset += static_cast<std::size_t>(t.coordinate(comm.rank(), l)) * piece;
    size = piece;
    std::memcpy(at(data, offset, type), scratch.data(), scratch.size());
  }
  std::memmove(shard, at(data, offset, type), size * dtype_size(type));
}

void hierarchical_all_gather(Communicator& comm, void* data, std::size_t n, DType type, int first, int last) {
  const Topology& t = comm.topology();
  check_divisible(t, n, first, last, "all-gather");
  const std::size_t piece = n / static_cast<std::size_t>(t.span(first, last));
  gather_steps(comm, data, type, first, last, shard_offset(t, comm.rank(), n, first, last), piece);
}

std::unique_ptr<CommRequest> start_hierarchical_all_gather(Communicator& comm, void* data, std::size_t n, DType type,
                                                           int first, int last) {
  const Topology& t = comm.topology();
  check_divisible(t, n, first, last, "all-gather");
  std::size_t piece = n / static_cast<std::size_t>(t.span(first, last));
  std::size_t offset = shard_offset(t, comm.rank(), n, first, last);
  int outer = last;
  while (outer >= first && t.level(outer).fanout == 1) --outer;
  std::unique_ptr<CommRequest> first_step;
  if (outer >= first) {
    const std::size_t block = offset - static_cast<std::size_t>(t.coordinate(comm.rank(), outer)) * piece;
    first_step = comm.start_all_gather(at(data, block, type), piece, type, outer);
    offset = block;
    piece *= static_cast<std::size_t>(t.level(outer).fanout);
  }
  return std::make_unique<ChainedGather>(comm, std::move(first_step), data, type, first, outer - 1, offset, piece);
}

void hierarchical_all_reduce(Communicator& comm, void* data, std::size_t n, DType type, int first, int last) {
  const Topology& t = comm.topology();
  check_divisible(t, n, first, last, "all-reduce");
  const std::size_t piece = n / static_cast<std::size_t>(t.span(first, last));
  const std::size_t offset = shard_offset(t, comm.rank(), n, first, last);
  std::vector<unsigned char> shard(piece * dtype_size(type));
  hierarchical_reduce_scatter(comm, data, n, type, first, last, shard.data());
  std::memcpy(at(data, offset, type), shard.data(), shard.size());
  hierarchical_all_gather(comm, data, n, type, first, last);
}

}  // namespace strata
