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

// Reduce-scatter innermost level first: the first step runs non-blocking, the rest (each needs
// the previous one's result) when the caller waits.
class ChainedReduceScatter final : public CommRequest {
 public:
  ChainedReduceScatter(Communicator& comm, void* data, std::size_t n, DType type, int first, int last, void* shard)
      : comm_(comm), data_(data), type_(type), level_(first), last_(last), size_(n), shard_(shard) {
    const Topology& t = comm_.topology();
    while (level_ <= last_ && t.level(level_).fanout == 1) ++level_;
    if (level_ <= last_) {
      const std::size_t piece = size_ / static_cast<std::size_t>(t.level(level_).fanout);
      scratch_.resize(piece * dtype_size(type_));
      step_ = comm_.start_reduce_scatter(at(data_, offset_, type_), scratch_.data(), piece, type_, level_);
    }
  }
  void wait() override {
    if (done_) return;
    done_ = true;
    const Topology& t = comm_.topology();
    for (; level_ <= last_; ++level_) {
      const int f = t.level(level_).fanout;
      if (f == 1) continue;
      const std::size_t piece = size_ / static_cast<std::size_t>(f);
      if (step_) {
        step_->wait();
        step_.reset();
      } else {
        scratch_.resize(piece * dtype_size(type_));
        comm_.reduce_scatter(at(data_, offset_, type_), scratch_.data(), piece, type_, level_);
      }
      offset_ += static_cast<std::size_t>(t.coordinate(comm_.rank(), level_)) * piece;
      size_ = piece;
      std::memcpy(at(data_, offset_, type_), scratch_.data(), piece * dtype_size(type_));
    }
    std::memmove(shard_, at(data_, offset_, type_), size_ * dtype_size(type_));
  }
  // As for the chained gather: finishing means more collectives, never started while unwinding.
  ~ChainedReduceScatter() override {
    if (std::uncaught_exceptions() == 0) wait();
  }

 private:
  Communicator& comm_;
  void* data_;
  DType type_;
  int level_, last_;
  std::size_t size_, offset_ = 0;
  void* shard_;
  std::vector<unsigned char> scratch_;
  std::unique_ptr<CommRequest> step_;
  bool done_ = false;
};

}  // namespace

void hierarchical_reduce_scatter(Communicator& comm, void* data, std::size_t n, DType type, int first, int last,
                                 void* shard) {
  start_hierarchical_reduce_scatter(comm, data, n, type, first, last, shard)->wait();
}

std::unique_ptr<CommRequest> start_hierarchical_reduce_scatter(Communicator& comm, void* data, std::size_t n,
                                                               DType type, int first, int last, void* shard) {
  check_divisible(comm.topology(), n, first, last, "reduce-scatter");
  return std::make_unique<ChainedReduceScatter>(comm, data, n, type, first, last, shard);
}

void hierarchical_all_gather(Communicator& comm, void* data, std::size_t n, DType type, int first, int last) {
  start_hierarchical_all_gather(comm, data, n, type, first, last)->wait();
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
