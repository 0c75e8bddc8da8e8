// The ring reduce-scatter: rounds of MPI_Isend/MPI_Irecv with a local sum between them.
#include "comm/mpi/ring_reduce_scatter.hpp"

#include <cstring>
#include <memory>

#include "comm/mpi/mpi_check.hpp"
#include "comm/mpi/mpi_watchdog.hpp"
#include "comm/elementwise_sum.hpp"
#include "comm/progress_pacer.hpp"
#include "core/error.hpp"

namespace strata {

namespace {

constexpr int kRingTag = 7301;

class RingReduceScatter final : public CommRequest {
 public:
  RingReduceScatter(MPI_Comm comm, const void* send, void* recv, int count, DType type, MPI_Datatype mpi_type,
                    const char* what, const char* waits_on)
      : comm_(comm), send_(static_cast<const unsigned char*>(send)), recv_(recv), count_(count), type_(type),
        mpi_type_(mpi_type), what_(what), waits_on_(waits_on),
        piece_bytes_(static_cast<std::size_t>(count) * dtype_size(type)) {
    mpi_check(MPI_Comm_size(comm_, &size_), what_);
    mpi_check(MPI_Comm_rank(comm_, &position_), what_);
    const auto* r = static_cast<const unsigned char*>(recv);
    STRATA_CHECK(r + piece_bytes_ <= send_ || r >= send_ + piece_bytes_ * static_cast<std::size_t>(size_),
                 "the reduce-scatter result lies inside its input");
    if (size_ == 1) {
      std::memcpy(recv_, send_, piece_bytes_);
      return;
    }
    // The last round receives into the result itself, so a ring of two needs no buffer of its own
    // and a longer one two pieces (the partial in flight and the one being sent), uninitialised:
    // a 154 MB unit's pieces zero-filled at every reduction were a transient the memory model
    // did not know.
    if (size_ > 2) {
      for (auto& p : partial_) p = std::make_unique_for_overwrite<unsigned char[]>(piece_bytes_);
    }
    post(1);
  }
  RingReduceScatter(const RingReduceScatter&) = delete;
  RingReduceScatter& operator=(const RingReduceScatter&) = delete;

  void wait() override {
    while (round_ > 0) {
      {
        const MpiWatch watch("MPI_Waitall (ring reduce-scatter)", waits_on_);
        paced_wait(
            [&] {
              int done = 0;
              mpi_check(MPI_Testall(2, requests_, &done, MPI_STATUSES_IGNORE), what_);
              return done != 0;
            },
            [&] { mpi_check(MPI_Waitall(2, requests_, MPI_STATUSES_IGNORE), what_); });
      }
      const int k = round_;
      // The received partial is of piece c - k - 1; this rank adds its own contribution.
      const unsigned char* own = piece(position_ - k - 1);
      const auto n = static_cast<std::size_t>(count_);
      if (k == size_ - 1) {
        add_elements(recv_, own, recv_, n, type_);  // the last partial arrived in the result
        round_ = 0;
      } else {
        unsigned char* received = partial_[k & 1].get();
        add_elements(received, own, received, n, type_);
        post(k + 1);
      }
    }
  }

 private:
  const unsigned char* piece(int index) const {
    const int i = ((index % size_) + size_) % size_;
    return send_ + static_cast<std::size_t>(i) * piece_bytes_;
  }

  void post(int k) {
    round_ = k;
    const void* outgoing = k == 1 ? piece(position_ - 1) : partial_[(k - 1) & 1].get();
    void* incoming = k == size_ - 1 ? recv_ : partial_[k & 1].get();
    const int right = (position_ + 1) % size_, left = (position_ + size_ - 1) % size_;
    mpi_check(MPI_Irecv(incoming, count_, mpi_type_, left, kRingTag, comm_, &requests_[0]), what_);
    mpi_check(MPI_Isend(outgoing, count_, mpi_type_, right, kRingTag, comm_, &requests_[1]), what_);
  }

  MPI_Comm comm_;
  const unsigned char* send_;
  void* recv_;
  int count_;
  DType type_;
  MPI_Datatype mpi_type_;
  const char* what_;
  const char* waits_on_;
  std::size_t piece_bytes_;
  int size_ = 1, position_ = 0;
  int round_ = 0;  // the round in flight; 0: done
  std::unique_ptr<unsigned char[]> partial_[2];  // rings of more than two only
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

}  // namespace

std::unique_ptr<CommRequest> start_ring_reduce_scatter(MPI_Comm comm, const void* send, void* recv, int count,
                                                       DType type, MPI_Datatype mpi_type, const char* what,
                                                       const char* waits_on) {
  return std::make_unique<RingReduceScatter>(comm, send, recv, count, type, mpi_type, what, waits_on);
}

}  // namespace strata
